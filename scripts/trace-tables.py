#!/usr/bin/env python3
"""Markdown tables for docs/TRACES.md from the JSON that scripts/trace-report
writes: miss ratio by trace, size and policy (best per row in bold), the mean
over sizes, and the policies never worse than LRU on any trace."""
import glob
import json
import os
import sys

d = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(d, "sim-*.json"))):
    j = json.load(open(path))
    name = os.path.basename(path)[4:-5]
    for r in j["results"]:
        rows.setdefault(name, {}).setdefault(r["host_pages"], {})[r["policy"]] = r["miss_ratio"]
    rows[name]["_distinct"] = j["distinct_pages"]
policies = None
print("| trace | cache (pages) | " + " | ".join(["lru", "clock", "sieve", "s3fifo", "2q", "arc"]) + " |")
print("|---|---:|" + "---:|" * 6)
mean = {}
worse = {}
for name, sizes in rows.items():
    distinct = sizes.pop("_distinct")
    for size in sorted(sizes):
        m = sizes[size]
        pol = ["lru", "clock", "sieve", "s3fifo", "2q", "arc"]
        best = min(m[p] for p in pol)
        cells = []
        for p in pol:
            s = "%.4f" % m[p]
            cells.append("**%s**" % s if m[p] == best else s)
            mean.setdefault(p, {}).setdefault(name, []).append(m[p])
        print("| %s | %d (%.0f%%) | %s |" % (name, size, 100.0 * size / distinct, " | ".join(cells)))
print()
print("Mean miss ratio over the five sizes:")
print()
pol = ["lru", "clock", "sieve", "s3fifo", "2q", "arc"]
print("| trace | " + " | ".join(pol) + " |")
print("|---|" + "---:|" * 6)
overall = {p: [] for p in pol}
for name in rows:
    vals = {p: sum(mean[p][name]) / len(mean[p][name]) for p in pol}
    for p in pol:
        overall[p].append(vals[p])
        if vals[p] > vals["lru"] + 1e-9:
            worse.setdefault(p, []).append(name)
    print("| %s | %s |" % (name, " | ".join("%.4f" % vals[p] for p in pol)))
print("| **all traces** | %s |" % " | ".join("%.4f" % (sum(overall[p]) / len(overall[p])) for p in pol))
print()
for p in pol:
    print("- %s: worse than LRU (mean over sizes) on %s" % (p, ", ".join(worse.get(p, [])) or "no trace"))

print()
print("Two tiers (GRAM): host tier 5 % of the distinct pages, GPU tier 0, 10 % or")
print("25 %; miss ratio (hit ratio of the host tier in parentheses):")
print()
pol = pol + ["s3fifo+lru"]
print("| trace | GPU tier | " + " | ".join(pol) + " |")
print("|---|---:|" + "---:|" * len(pol))
for path in sorted(glob.glob(os.path.join(d, "sim2-*.json"))):
    j = json.load(open(path))
    name = os.path.basename(path)[5:-5]
    by = {}
    for r in j["results"]:
        by.setdefault(r["gpu_pages"], {})[r["policy"]] = r
    for g in sorted(by):
        m = by[g]
        best = min(m[p]["miss_ratio"] for p in pol)
        cells = []
        for p in pol:
            s = "%.4f (%.2f)" % (m[p]["miss_ratio"], m[p]["hit_ratio_host"])
            cells.append("**%s**" % s if m[p]["miss_ratio"] == best else s)
        print("| %s | %d | %s |" % (name, g, " | ".join(cells)))
