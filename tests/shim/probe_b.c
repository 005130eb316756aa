/* test_shim: the definition after probe_a's (see probe_a.c). */
__attribute__((visibility("default"))) int vc_probe_fn(void)
{
	return 2;
}
