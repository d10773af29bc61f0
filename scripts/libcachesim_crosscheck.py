#!/usr/bin/env python3
"""Cross-check of iommulab's hit-rate curves against libCacheSim (PyPI `libcachesim` 0.3.5).

Usage: libcachesim_crosscheck.py TRACE.oracleGeneral (QUOTA ... | --up-to N)
           [--policies fifo,lru,opt] [--method process|get] [--time]

Prints JSON: {"requests": N, "fifo": {"QUOTA": hits, ...}, "lru": {...}, "opt": {...}}.

Semantics matched to iommulab (see crates/iommulab-cli/tests/libcachesim.rs):
- the `.oracleGeneral` export (`iommulab trace convert`) holds the page sequence of the
  trace, the stream `iommulab mrc` computes its default curves on: one request per 4 KiB
  page of every mapped buffer, in order; every object is 4096 bytes, so a cache of QUOTA
  pages is `QUOTA * 4096` bytes;
- a request is a hit iff `cache.get(req)` finds the page; a miss inserts it (demand
  paging), evicting as the policy says; the first access to a page is a miss (cold), as in
  iommulab (a miss = one map hypercall);
- OPT is libCacheSim's `Belady`, which reads `next_access_vtime` from the trace.

`--method process` (default) runs libCacheSim's own request loop (`cache.process_trace`, the
C loop over `cache->get`) and recovers the hit count from its miss ratio (exact: the ratio
is misses / requests in a double); `--method get` calls `cache.get` per request from
Python (slow; the two agree, which the Rust test checks). `--up-to N` checks every quota
1..=N.
"""
import argparse
import json
import sys
import time

import libcachesim as lcs

POLICIES = {"fifo": lcs.FIFO, "lru": lcs.LRU, "opt": lcs.Belady}

# Seconds spent inside each `process_trace` call (the C request loop alone), for `--time`:
# wall clock, and this process's CPU time (on a loaded machine the wall clock also counts
# the time the process waited for a CPU).
LOOP_SECONDS = []
LOOP_CPU_SECONDS = []


def make_cache(make, quota, hashpower):
    # The hash table is sized to the trace (libCacheSim's default, 2^24 buckets, costs more
    # to set up than simulating a small trace); it does not change any eviction decision.
    return make(quota * 4096, hashpower=hashpower)


def hits_process(reader, make, quota, hashpower, n):
    reader.reset()
    cache = make_cache(make, quota, hashpower)
    t0, c0 = time.perf_counter(), time.process_time()
    miss_ratio, _ = cache.process_trace(reader)
    LOOP_SECONDS.append(time.perf_counter() - t0)
    LOOP_CPU_SECONDS.append(time.process_time() - c0)
    return n - round(miss_ratio * n)


def hits_get(reader, make, quota, hashpower, _n):
    reader.reset()
    cache = make_cache(make, quota, hashpower)
    return sum(1 for req in reader if cache.get(req))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("quotas", nargs="*", type=int)
    ap.add_argument("--up-to", type=int, help="every quota 1..=N")
    ap.add_argument("--policies", default="fifo,lru,opt")
    ap.add_argument("--method", choices=("process", "get"), default="process")
    ap.add_argument(
        "--time",
        action="store_true",
        help="print the seconds spent inside process_trace (its C loop alone) to stderr",
    )
    a = ap.parse_args()
    quotas = list(a.quotas)
    if a.up_to is not None:
        quotas += range(1, a.up_to + 1)
    if not quotas:
        ap.error("give quotas or --up-to N")
    if any(q < 1 for q in quotas):
        ap.error("quotas must be at least 1 page (libCacheSim has no empty cache)")
    reader = lcs.TraceReader(a.trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
    n = reader.get_num_of_req()
    objects = reader.get_working_set_size()[0]
    hashpower = max(12, (2 * objects).bit_length())
    run = hits_process if a.method == "process" else hits_get
    out = {"requests": n}
    for name in a.policies.split(","):
        make = POLICIES[name]
        out[name] = {str(q): run(reader, make, q, hashpower, n) for q in sorted(set(quotas))}
    json.dump(out, sys.stdout)
    print()
    if a.time:
        print(f"process_trace seconds {sum(LOOP_SECONDS):.4f}", file=sys.stderr)
        print(f"process_trace cpu seconds {sum(LOOP_CPU_SECONDS):.4f}", file=sys.stderr)


if __name__ == "__main__":
    main()
