/* The environment knobs' parser (src/base/env.h): unset and empty give the
 * default; decimal and hex are read; junk, negatives, values below the
 * range and overflow give the default; values above the range give its
 * top.
 *
 * Exit 0 pass, 1 fail.
 */
#include "base/env.h"
#include "testutil.h"

static uint64_t knob(const char *value, uint64_t dflt, uint64_t lo, uint64_t hi)
{
	if (value)
		CHECK(setenv("VC_TEST_KNOB", value, 1) == 0);
	else
		CHECK(unsetenv("VC_TEST_KNOB") == 0);
	return vc_env_u64("VC_TEST_KNOB", dflt, lo, hi);
}

int main(void)
{
	CHECK(knob(NULL, 7, 1, 100) == 7);
	CHECK(knob("", 7, 1, 100) == 7);
	CHECK(knob("42", 7, 1, 100) == 42);
	CHECK(knob("0x10", 7, 1, 100) == 16);
	CHECK(knob("0", 7, 0, 100) == 0);   /* 0 where the range allows it */
	CHECK(knob("0", 7, 1, 100) == 7);   /* below the range: the default */
	CHECK(knob("4k", 7, 1, 100) == 7);  /* trailing junk */
	CHECK(knob("abc", 7, 1, 100) == 7);
	CHECK(knob("-3", 7, 0, 100) == 7);  /* strtoull would wrap it */
	CHECK(knob("99999999999999999999999", 7, 0, UINT64_MAX) == 7); /* overflow */
	CHECK(knob("500", 7, 1, 100) == 100); /* above: the top */
	CHECK(vc_env_u32("VC_TEST_KNOB", 3, 1, 1000) == 500); /* "500" still set */
	return 0;
}
