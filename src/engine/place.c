/* Placement: which part of the GPU tier a page goes to (docs/MULTIGPU.md).
 *
 * Pages are grouped in chunks of PLACE_CHUNK_BYTES; a chunk's part is the
 * one with the highest score w_i / -ln(u_i), u_i a hash of (chunk, part i)
 * mapped into (0, 1): weighted rendezvous hashing (Thaler and Ravishankar;
 * the weighting as in Schindelhauer and Schomaker's "weighted distributed
 * hash tables"). Each part wins a chunk with probability w_i / sum(w), and
 * a chunk's winner changes only when the winner's weight changes or
 * another part's rises past it: losing (or draining) part k moves exactly
 * the chunks k held, each to the part that scored second there, and a new
 * part takes chunks from every other part in proportion. Cost: one hash
 * and one logarithm per usable part and page placed (about 20 ns each),
 * with no table to keep: placement needs no memory and no lock of its own.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/engine.h"

/* (0, 1): the top 53 bits of a hash, plus a half step, never 0 or 1. */
static double unit_of(uint64_t chunk, uint32_t part)
{
	uint64_t h = vc_mix64(chunk * 0x9e3779b97f4a7c15ull ^ vc_mix64(part + 0x632be59bd9b4e019ull));
	return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

int eng_place(uint64_t chunk, const double *w, uint32_t n)
{
	int best = -1;
	double top = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (!(w[i] > 0))
			continue;
		double s = w[i] / -log(unit_of(chunk, i));
		if (best < 0 || s > top) {
			best = (int)i;
			top = s;
		}
	}
	return best;
}

int eng_home(const struct vc_cache *c, uint64_t pno)
{
	double w[VC_GPUS_MAX];
	for (uint32_t i = 0; i < c->ngpus; i++)
		w[i] = eng_part_usable(&c->gpus[i]) ? c->gpus[i].weight : 0;
	const uint32_t per = PLACE_CHUNK_BYTES >> c->pshift ? PLACE_CHUNK_BYTES >> c->pshift : 1;
	/* The chunk keeps the volume's bits: volumes' chunks place apart. */
	return eng_place((pno & ~VC_PNO_INDEX_MASK) | (vc_pno_index(pno) / per), w, c->ngpus);
}

/* One part: "ORD" or "ORD:WEIGHT". */
static int part_parse(const char *s, const char *end, int *ord, double *w)
{
	char buf[64];
	size_t len = (size_t)(end - s);
	if (len == 0 || len >= sizeof buf)
		return -1;
	memcpy(buf, s, len);
	buf[len] = 0;
	char *e;
	long o = strtol(buf, &e, 10);
	if (e == buf || o < 0 || o > 1023)
		return -1;
	*ord = (int)o;
	*w = 1;
	if (*e == ':') {
		char *f;
		*w = strtod(e + 1, &f);
		if (f == e + 1 || *f || !(*w > 0) || !isfinite(*w))
			return -1;
	} else if (*e) {
		return -1;
	}
	return 0;
}

int eng_gpus_parse(const char *spec, int kind, int ordinal, uint32_t *n, int *ord, double *w)
{
	if (!spec) {
		*n = 1;
		ord[0] = ordinal;
		w[0] = 1;
		return 0;
	}
	if (strcmp(spec, "all") == 0) {
		int k = vc_device_count(kind);
		if (k <= 0)
			return vc_err(-VC_ENODEVICE, "gpus \"all\": no device of this kind is usable");
		if (k > VC_GPUS_MAX)
			k = VC_GPUS_MAX;
		for (int i = 0; i < k; i++) {
			ord[i] = i;
			w[i] = 1;
		}
		*n = (uint32_t)k;
		return 0;
	}
	uint32_t k = 0;
	for (const char *s = spec;;) {
		const char *e = strchr(s, ',');
		if (!e)
			e = s + strlen(s);
		if (k == VC_GPUS_MAX)
			return vc_err(-VC_ECONFIG, "gpus \"%s\": more than %d parts", spec, VC_GPUS_MAX);
		if (part_parse(s, e, &ord[k], &w[k]) < 0)
			return vc_err(-VC_ECONFIG, "gpus \"%s\": part %u is not ORDINAL or "
						   "ORDINAL:WEIGHT (a positive number)", spec, k + 1);
		k++;
		if (!*e)
			break;
		s = e + 1;
	}
	*n = k;
	return 0;
}
