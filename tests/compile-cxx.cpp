// The public header compiles as C++ with C linkage.
#include <vramcache.h>

int vc_cxx_check();
int vc_cxx_check()
{
	vc_config cfg;
	vc_config_init(&cfg);
	vc_cache *c = nullptr;
	return vc_close(c) + static_cast<int>(cfg.size);
}
