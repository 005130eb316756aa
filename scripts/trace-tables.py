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

# --- the default policy ------------------------------------------------------
# Every row of both tables (one tier: five sizes per trace; two tiers: host
# 5 %, GPU 0, 10 %, 25 %), shared and generated traces alike. The default is
# the policy with the lowest mean miss ratio over all of them; the table
# also says how often and by how much each is worse than LRU, so the cost
# of the choice is in view.
allrows = {}  # policy -> list of (row name, miss, lru miss)
for path in sorted(glob.glob(os.path.join(d, "sim-*.json"))) + sorted(
        glob.glob(os.path.join(d, "sim2-*.json"))):
    j = json.load(open(path))
    two = os.path.basename(path).startswith("sim2-")
    name = os.path.basename(path)[5 if two else 4:-5]
    by = {}
    for r in j["results"]:
        by.setdefault((r["host_pages"], r["gpu_pages"]), {})[r["policy"]] = r["miss_ratio"]
    for (h, g), m in sorted(by.items()):
        row = "%s %s %d%s" % (name, "host" if two else "cache", h, " + GPU %d" % g if two else "")
        for p, v in m.items():
            allrows.setdefault(p, []).append((row, v, m["lru"], two))
print()
print("The default policy: mean miss ratio over every row above, one tier and two,")
print("shared and generated traces; rows worse than LRU (by more than 0.001) and")
print("the worst of them:")
print()
print("| policy | mean, one tier | mean, two tiers | mean, all rows | rows worse than LRU | worst row (miss against LRU's) |")
print("|---|---:|---:|---:|---:|---|")
best = None
for p in sorted(allrows, key=lambda p: sum(r[1] for r in allrows[p]) / len(allrows[p])):
    rs = allrows[p]
    one = [r[1] for r in rs if not r[3]]
    two = [r[1] for r in rs if r[3]]
    allm = sum(r[1] for r in rs) / len(rs)
    worse = [r for r in rs if r[1] > r[2] + 0.001]
    w = max(rs, key=lambda r: r[1] - r[2])
    wtxt = "%s: %.4f against %.4f" % (w[0], w[1], w[2]) if w[1] > w[2] + 0.001 else "-"
    if best is None:
        best = p
    print("| %s | %.4f | %.4f | %s | %d of %d | %s |" % (
        p, sum(one) / len(one), sum(two) / len(two),
        ("**%.4f**" if p == best else "%.4f") % allm, len(worse), len(rs), wtxt))
print()
print("Lowest mean over all rows: **%s**." % best)

# --- `vramcache mrc` end to end ------------------------------------------------
for ps in (512, 4096):
    path = os.path.join(d, "mrc-e2e-%d.json" % ps)
    if not os.path.exists(path):
        continue
    j = json.load(open(path))
    print()
    print("`vramcache mrc` end to end, pages of %d bytes (%s; best of %d runs):" % (ps, j["device"], j["runs"]))
    print()
    print("| trace | accesses | exact (s) | SHARDS S=%d (s) | speedup | MAE | max error |" % j["smax"])
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in j["results"]:
        print("| %s | %d | %.4f | %.4f | %.1fx | %.5f | %.5f |" % (
            r["trace"].split(".")[0], r["accesses"], r["exact_seconds"], r["shards_seconds"],
            r["speedup"], r["mae"], r["max_error"]))
