/* The engine runs the simulator's policy code: a trace replayed through
 * vc_read/vc_write gives exactly the hits per tier and misses that `sim`
 * predicts, for every policy, with every read verified (write-through and
 * write-back). Runs on the device VC_TEST_DEVICE names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/policy.h"
#include "tools/replay.h"
#include "tools/sim.h"
#include "trace/trace.h"
#include "testutil.h"

enum { HOSTP = 32, GPUP = 64, PS = 4096 };

static char trace_path[1024];

/* A generic CSV trace: 3000 requests of 1-4 pages over 400 pages, skewed,
 * 30 % writes. */
static void make_trace(void)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(trace_path, sizeof trace_path, "%s/vc-replay-%d.csv", dir, (int)getpid());
	FILE *f = fopen(trace_path, "w");
	CHECK(f);
	fprintf(f, "time,op,offset,size\n");
	uint64_t seed = 21;
	for (int i = 0; i < 3000; i++) {
		uint64_t x = t_rand(&seed);
		uint64_t page = x % 3 ? (x >> 8) % 60 : (x >> 8) % 400;
		uint64_t n = 1 + (x >> 20) % 4;
		fprintf(f, "%d,%c,%llu,%llu\n", i, (x >> 30) % 10 < 3 ? 'W' : 'R',
			(unsigned long long)(page * PS), (unsigned long long)(n * PS));
	}
	CHECK(fclose(f) == 0);
}

static void sim_trace(const char *policy, struct vc_sim_stats *out)
{
	struct vc_sim *s;
	CHECK_OK(vc_sim_create(policy, HOSTP, GPUP, &s));
	vc_trace *t;
	CHECK_OK(vc_trace_open(trace_path, NULL, &t));
	uint64_t key;
	int op, r;
	while ((r = vc_trace_next_page(t, PS, true, &key, &op)) == 1)
		CHECK_OK(vc_sim_access(s, key, op));
	CHECK(r == 0);
	vc_trace_close(t);
	*out = *vc_sim_stats(s);
	vc_sim_destroy(s);
}

int main(void)
{
	make_trace();
	int n = 0;
	for (const struct vc_policy_ops *const *o = vc_policies; *o; o++, n++) {
		struct vc_replay_params p = { .trace = trace_path };
		vc_config_init(&p.cfg);
		p.cfg.page_size = PS;
		p.cfg.host_bytes = HOSTP * PS;
		p.cfg.gpu_bytes = GPUP * PS;
		p.cfg.device = t_device_kind();
		p.cfg.policy = (*o)->name;
		/* One-page segments, no cleaning, no free reserve: the GPU log
		 * is then exactly the policy's victim tier, as `sim` models it. */
		p.cfg.seg_bytes = PS;
		p.cfg.gc_policy = VC_GC_OFF;
		p.cfg.gc_watermark = 0;
		/* The simulator models GRAM's exclusive tiers: a GPU hit moves up. */
		p.cfg.gpu_hits = VC_GPU_HITS_SWAP;
		p.cfg.demote_batch = 1; /* and one victim per miss */
		p.cfg.write_mode = n % 2 ? VC_WRITE_BACK : VC_WRITE_THROUGH;
		/* No background write-back: a page the flusher holds is
		 * skipped as a victim, which `sim` does not model. */
		p.cfg.dirty_background_ratio = 1;
		char file[1100];
		snprintf(file, sizeof file, "%s.img", trace_path);
		p.file = file;
		struct vc_replay_result res;
		int r = vc_replay_run(&p, &res);
		if (r < 0)
			unlink(trace_path);
		t_skip_if_absent(r, "replay");
		CHECK_OK(r);
		struct vc_sim_stats st;
		sim_trace((*o)->name, &st);
		printf("%-7s engine %llu/%llu/%llu, sim %llu/%llu/%llu (host/GPU/miss)\n", (*o)->name,
		       (unsigned long long)res.st.hits[0], (unsigned long long)res.st.hits[1],
		       (unsigned long long)res.st.misses, (unsigned long long)st.hits[0],
		       (unsigned long long)st.hits[1], (unsigned long long)st.misses);
		CHECK(res.requests == 3000 && res.pages == st.accesses);
		CHECK(res.bad_pages == 0);
		CHECK(res.st.hits[0] == st.hits[0] && res.st.hits[1] == st.hits[1] &&
		      res.st.misses == st.misses);
		CHECK(st.hits[1] > 100 && st.misses > 100 && st.hits[0] > 100);
		CHECK(access(file, F_OK) != 0); /* the replay removed its file */
	}
	unlink(trace_path);
	printf("test_replay: ok (%d policies)\n", n);
	return 0;
}
