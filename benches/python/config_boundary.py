"""The Python boundary's cost per config (not a timed test; results in BENCHMARKS.md).

`_native.run_batch(configs, validate_only=True)` converts every config dict to the core's
schema and validates it without running it: the per-point work a sweep pays before its runs.
20,000 configs of the shape a sweep makes (a configuration, a cost preset, a workload table),
seven rounds; prints the median in µs per config.

Usage: python benches/python/config_boundary.py LABEL
"""

from __future__ import annotations

import sys
import time

from iommulab import _native

CONFIGS = [
    {
        "configuration": "strict",
        "hardware": {"cost": "vtd-2008"},
        "workload": {"ios": 1000 + i, "io_size": 4096, "seed": i},
    }
    for i in range(20_000)
]


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "this build"
    rounds = []
    for _ in range(7):
        t = time.perf_counter()
        _native.run_batch(CONFIGS, validate_only=True)
        rounds.append(time.perf_counter() - t)
    rounds.sort()
    print(label, "median µs per config", round(rounds[3] / len(CONFIGS) * 1e6, 2))


if __name__ == "__main__":
    main()
