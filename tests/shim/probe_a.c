/* test_shim: an interposer loaded after the shim. Its dlsym(RTLD_NEXT)
 * must find the next definition (probe_b's), not its own: glibc resolves
 * RTLD_NEXT from the caller's address, which the shim's dlsym keeps. */
#include <dlfcn.h>

__attribute__((visibility("default"))) int vc_probe_fn(void)
{
	return 1;
}

__attribute__((visibility("default"))) int vc_probe_next(void)
{
	int (*f)(void) = (int (*)(void))dlsym(RTLD_NEXT, "vc_probe_fn");
	return f ? f() : -1;
}
