/* Compiled with -std=c99 -pedantic-errors: the public header is plain ISO C. */
#include <vramcache.h>

int vc_iso_c_check(void);
int vc_iso_c_check(void)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	return (int)cfg.size;
}
