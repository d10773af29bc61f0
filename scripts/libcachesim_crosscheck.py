#!/usr/bin/env python3
"""Cross-check of iommulab's map cache against libCacheSim (PyPI `libcachesim` 0.3.5).

Usage: libcachesim_crosscheck.py TRACE.oracleGeneral QUOTA [QUOTA ...]

Prints JSON: {"requests": N, "fifo": {"QUOTA": hits, ...}, "lru": {...}, "opt": {...}}.

Semantics matched to iommulab (see crates/iommulab-cli/tests/libcachesim.rs):
- one request per 4 KiB page mapped (the `.oracleGeneral` export), every object 4096 bytes,
  so a cache of QUOTA pages is `QUOTA * 4096` bytes;
- a request is a hit iff `cache.get(req)` finds the page; a miss inserts it (demand
  paging), evicting as the policy says; the first access to a page is a miss (cold), as in
  iommulab (a miss = one map hypercall);
- OPT is libCacheSim's `Belady`, which reads `next_access_vtime` from the trace.
"""
import json
import sys

import libcachesim as lcs


def hits(trace, make, quota):
    reader = lcs.TraceReader(trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
    cache = make(quota * 4096)
    n = 0
    h = 0
    for req in reader:
        n += 1
        if cache.get(req):
            h += 1
    return n, h


def main():
    trace = sys.argv[1]
    quotas = [int(q) for q in sys.argv[2:]]
    out = {}
    for name, make in (("fifo", lcs.FIFO), ("lru", lcs.LRU), ("opt", lcs.Belady)):
        out[name] = {}
        for q in quotas:
            n, h = hits(trace, make, q)
            out["requests"] = n
            out[name][str(q)] = h
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
