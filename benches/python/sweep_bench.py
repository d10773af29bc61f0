"""Sweep overhead benchmarks (not timed tests; results in BENCHMARKS.md).

(a) Python vs CLI: 1,000 small runs (5 named configurations × 200 seeds, 1,000 I/Os each,
    modeled clock). The CLI side runs the same 1,000 runs with the fewest invocations its flags
    allow (`iommulab bench --config <5> --repeats 100 --ops 1000 --json`, twice, seeds 1 and
    101), so both sides pay one process start per few hundred runs, and both produce every
    run's full result (JSON on the CLI side, a DataFrame on the Python side). Python runs them
    with `iommulab.sweep(..., workers=1)` (serial: the same single core as the CLI). For
    context it also times one CLI process per run.
(b) Local scaling: a sweep of 400 runs of 20,000 I/Os each on 1 worker vs 2 workers, with
    threads (the GIL is released during runs) and with processes.

Usage: python benches/python/sweep_bench.py [--cli target/release/iommulab] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections.abc import Callable

import iommulab

CONFIGS = ["disabled", "default", "strict", "bitmap", "modern"]


def best(f: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def python_sweep() -> None:
    df = iommulab.sweep(
        {"configuration": CONFIGS, "workload.seed": list(range(1, 201))},
        workload={"ios": 1000},
        workers=1,
        progress=False,
    )
    assert len(df) == 1000


def cli_batched(cli: str) -> None:
    for seed in (1, 101):
        subprocess.run(
            [cli, "--quiet", "bench", "--config", ",".join(CONFIGS), "--repeats", "100", "--ops", "1000", "--seed", str(seed), "--json"],
            check=True,
            stdout=subprocess.DEVNULL,
        )


def cli_per_run(cli: str) -> None:
    for c in CONFIGS:
        for seed in range(1, 201):
            subprocess.run(
                [cli, "--quiet", "bench", "--config", c, "--ops", "1000", "--seed", str(seed), "--json"],
                check=True,
                stdout=subprocess.DEVNULL,
            )


def scaling(workers: int, executor: str) -> None:
    df = iommulab.sweep(
        {"configuration": CONFIGS, "workload.seed": list(range(1, 81))},
        workload={"ios": 20000},
        workers=workers,
        executor=executor,  # type: ignore[arg-type]
        progress=False,
    )
    assert len(df) == 400


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "iommulab"))
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(f"nproc {os.cpu_count()}, iommulab {iommulab.__version__}, best of {a.repeat}")
    py = best(python_sweep, a.repeat)
    cli = best(lambda: cli_batched(a.cli), a.repeat)
    per = best(lambda: cli_per_run(a.cli), 1)
    print(f"(a) 1000 runs: python sweep {py:.3f} s, cli batched {cli:.3f} s, ratio {py / cli:.2f}x; cli one process per run {per:.3f} s")
    for ex in ("thread", "process"):
        one = best(lambda: scaling(1, ex), a.repeat)
        two = best(lambda: scaling(2, ex), a.repeat)
        print(f"(b) 400 runs x 20000 I/Os, {ex}s: 1 worker {one:.3f} s, 2 workers {two:.3f} s, speed-up {one / two:.2f}x")


if __name__ == "__main__":
    main()
