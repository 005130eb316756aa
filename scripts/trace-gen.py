#!/usr/bin/env python3
"""Synthetic block traces in the ARC format ("start nblocks ignore seq",
512-byte blocks), one 4 KiB page a request, for the policy table in
docs/TRACES.md beside the shared traces:

  zipf-0.8, zipf-0.99   independent references, Zipf(s) over 100 K pages
  zipf-scan             Zipf(0.9) over 50 K pages, with one scan in four
                        requests over never-reused pages (one-hit wonders)
  zipf-loop             Zipf(0.9) over 50 K pages, with one request in three
                        from a loop over 30 K pages (LRU's worst case below
                        the loop's size)

  scripts/trace-gen.py OUTDIR [REQUESTS]     (default 1,000,000; seeded)
"""
import bisect
import itertools
import os
import random
import sys


def zipf_sampler(n, s, rng):
    cum = list(itertools.accumulate(1.0 / (i + 1) ** s for i in range(n)))
    total = cum[-1]
    # Ranks are scattered over the key space so that popular pages are not
    # neighbours (no spatial locality to help or hurt a policy).
    perm = list(range(n))
    rng.shuffle(perm)
    return lambda: perm[bisect.bisect_left(cum, rng.random() * total)]


def write(path, keys):
    with open(path, "w") as f:
        for i, k in enumerate(keys):
            f.write("%d 8 0 %d\n" % (k * 8, i))


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
    os.makedirs(out, exist_ok=True)
    for s in (0.8, 0.99):
        rng = random.Random(int(s * 100))
        z = zipf_sampler(100000, s, rng)
        write(os.path.join(out, "gen-zipf-%g.lis" % s), (z() for _ in range(n)))
    rng = random.Random(7)
    z = zipf_sampler(50000, 0.9, rng)
    fresh = itertools.count(1 << 20)
    write(os.path.join(out, "gen-zipf-scan.lis"),
          (next(fresh) if rng.random() < 0.25 else z() for _ in range(n)))
    rng = random.Random(8)
    z = zipf_sampler(50000, 0.9, rng)
    loop = itertools.cycle(range(1 << 21, (1 << 21) + 30000))
    write(os.path.join(out, "gen-zipf-loop.lis"),
          (next(loop) if rng.random() < 1 / 3 else z() for _ in range(n)))


main()
