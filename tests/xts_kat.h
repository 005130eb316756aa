/* XTS-AES-256 known answers for the tests (test_xts, test_cmp): IEEE Std
 * 1619-2007 Annex B vectors 10 to 14, the 512-byte data units with a
 * 256-bit key pair, read from tests/data/xts_ieee1619.txt (as OpenSSL
 * carries them). Each vector's plaintext is the bytes 00 01 .. ff 00 01
 * .. ff (t_xts_kat_plain). A test that includes this is built with
 * VC_TEST_DATA (tests/CMakeLists.txt). */
#ifndef VC_TEST_XTS_KAT_H
#define VC_TEST_XTS_KAT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/xts.h"
#include "testutil.h"

#define T_XTS_KAT_N 5
#define T_XTS_KAT_LEN 512

struct t_xts_kat {
	struct vc_xts_key key;
	uint64_t tweak;
	unsigned char ct[T_XTS_KAT_LEN];
};

static inline int t_hexval(int c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Hex digits to bytes; returns the byte count. */
static inline size_t t_unhex(const char *s, unsigned char *out, size_t max)
{
	size_t n = 0;
	for (; s[0] && s[1] && n < max; s += 2)
		out[n++] = (unsigned char)(t_hexval(s[0]) << 4 | t_hexval(s[1]));
	return n;
}

static inline void t_xts_kat_plain(unsigned char pt[T_XTS_KAT_LEN])
{
	for (int i = 0; i < T_XTS_KAT_LEN; i++)
		pt[i] = (unsigned char)i;
}

/* The T_XTS_KAT_N vectors into v; a missing or malformed file fails the
 * test. */
static inline void t_xts_kat_load(struct t_xts_kat v[T_XTS_KAT_N])
{
	char path[512];
	snprintf(path, sizeof path, "%s/xts_ieee1619.txt", VC_TEST_DATA);
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	static char line[4096];
	struct vc_xts_key key;
	uint64_t tweak = 0;
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\r\n")] = 0;
		const char *s = strstr(line, " = ");
		if (line[0] == '#' || !s)
			continue;
		s += 3;
		if (strncmp(line, "Key", 3) == 0) {
			CHECK(t_unhex(s, key.bytes, sizeof key.bytes) == VC_XTS_KEY_BYTES);
		} else if (strncmp(line, "Tweak", 5) == 0) {
			tweak = strtoull(s, NULL, 16);
		} else if (strncmp(line, "Ciphertext", 10) == 0) {
			CHECK(n < T_XTS_KAT_N);
			v[n].key = key;
			v[n].tweak = tweak;
			CHECK(t_unhex(s, v[n].ct, sizeof v[n].ct) == T_XTS_KAT_LEN);
			n++;
		}
	}
	fclose(f);
	CHECK(n == T_XTS_KAT_N);
}

#endif
