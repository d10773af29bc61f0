"""Sweep overhead benchmarks (not timed tests; results in BENCHMARKS.md).

(a) Python vs CLI: 1,000 small runs (5 named configurations × 200 seeds, 1,000 I/Os each,
    modeled clock). The CLI side runs the same 1,000 runs with the fewest invocations its flags
    allow (`iommulab bench --config <5> --repeats 100 --ops 1000 --json`, twice, seeds 1 and
    101), so both sides pay one process start per few hundred runs, and both produce every
    run's full result (JSON on the CLI side, a DataFrame on the Python side). Python runs them
    with `iommulab.sweep(..., workers=1)` (serial: the same single core as the CLI). Timed
    in wall seconds and in CPU seconds (this process + its children: steadier on a shared
    VM, whose wall clock includes time the host gave to other guests). For context it also
    times one CLI process per run.
(b) Local scaling: a sweep of 400 runs of 20,000 I/Os each on 1 worker vs 2 workers, with
    threads (the GIL is released during runs) and with processes.

Usage: python benches/python/sweep_bench.py [--cli target/release/iommulab] [--repeat 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable

import iommulab

CONFIGS = ["disabled", "default", "strict", "bitmap", "modern"]


def interleaved(a: Callable[[], object], b: Callable[[], object], repeat: int) -> tuple[list[float], list[float]]:
    """Times `a` and `b` alternately (a shared VM's load drifts; alternating spreads it)."""
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(repeat):
        for f, out in ((a, ta), (b, tb)):
            t = time.perf_counter()
            f()
            out.append(time.perf_counter() - t)
    return ta, tb


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (user + system). A shared VM's
    wall clock includes time the host gave to other guests; CPU time mostly does not, so
    the CPU-time ratio is the steadier measure of the work each side does."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def interleaved_cpu(a: Callable[[], object], b: Callable[[], object], repeat: int) -> tuple[list[float], list[float]]:
    """As `interleaved`, in CPU seconds."""
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(repeat):
        for f, out in ((a, ta), (b, tb)):
            t = cpu_seconds()
            f()
            out.append(cpu_seconds() - t)
    return ta, tb


def summary(name: str, x: list[float], y: list[float], what: str) -> None:
    mn, md = min(x) / min(y), statistics.median(x) / statistics.median(y)
    print(f"{name}: {min(x):.3f} s vs {min(y):.3f} s (min), {statistics.median(x):.3f} s vs {statistics.median(y):.3f} s (median); {what} {mn:.2f}x (min) {md:.2f}x (median)")


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
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    print(f"nproc {os.cpu_count()}, iommulab {iommulab.__version__}, {a.repeat} interleaved repeats")
    py, cli = interleaved(python_sweep, lambda: cli_batched(a.cli), a.repeat)
    summary("(a) 1000 runs, python sweep vs cli batched", py, cli, "ratio")
    py, cli = interleaved_cpu(python_sweep, lambda: cli_batched(a.cli), a.repeat)
    summary("(a) the same in CPU seconds (process + children)", py, cli, "ratio")
    t = time.perf_counter()
    cli_per_run(a.cli)
    print(f"    cli one process per run: {time.perf_counter() - t:.3f} s")
    for ex in ("thread", "process"):
        one, two = interleaved(lambda: scaling(1, ex), lambda: scaling(2, ex), max(3, a.repeat // 2))
        summary(f"(b) 400 runs x 20000 I/Os, {ex} executor, 1 vs 2 workers", one, two, "speed-up")

if __name__ == "__main__":
    main()
