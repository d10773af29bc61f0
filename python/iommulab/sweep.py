"""Parameter sweeps: a grid of config keys expanded into runs, on this machine (threads or
processes) or on a Ray cluster, collected into a pandas DataFrame (docs/cluster.md)."""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from typing import Any, Literal, Optional, Union

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from iommulab import _native

Config = Union[dict[str, Any], str, None]


def _values(key: str, values: Any) -> list[Any]:
    """One grid key's values as a list: any sequence (a list, tuple, range), or a
    one-dimensional NumPy array or pandas Series/Index (not `Sequence`s, but ordered values
    all the same; `tolist()` gives their Python scalars)."""
    if isinstance(values, (str, bytes, Mapping)):
        raise TypeError(f"grid[{key!r}] must be a sequence of values, not {type(values).__name__}")
    if isinstance(values, Sequence):
        return list(values)
    if hasattr(values, "tolist") and getattr(values, "ndim", None) == 1:
        return list(values.tolist())
    kind = f"a {values.ndim}-dimensional array" if hasattr(values, "ndim") else type(values).__name__
    raise TypeError(f"grid[{key!r}] must be a sequence of values (a list, range, 1-D array or Series), not {kind}")


def expand_grid(grid: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The cartesian product of `grid` (dotted config keys to sequences of values: lists,
    ranges, 1-D NumPy arrays, pandas Series), in order: the last key varies fastest."""
    columns = [_values(k, v) for k, v in grid.items()]
    return [dict(zip(grid, values)) for values in itertools.product(*columns)]


def _base_dict(base: Config) -> dict[str, Any]:
    if base is None:
        return {}
    if isinstance(base, str):
        import tomllib

        return tomllib.loads(base)
    return copy.deepcopy(dict(base))


def point_config(params: Mapping[str, Any], base: Config = None, workload: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The config of one grid point: `base`, then `workload`'s keys under `workload`, then
    each dotted key of `params` set in the nested dict."""
    cfg = _base_dict(base)
    if workload:
        cfg.setdefault("workload", {}).update(workload)
    for dotted, value in params.items():
        node = cfg
        *parents, leaf = dotted.split(".")
        for p in parents:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise _native.ConfigError(f"`{dotted}`: `{p}` is {nxt!r}, not a table")
            node = nxt
        node[leaf] = value
    return cfg


def run_point(config: dict[str, Any]) -> dict[str, Any]:
    """One grid point's result as a flat dict (module-level so processes and Ray can run it)."""
    return _native.run(config).to_dict(flat=True)


Column = Union[list[Any], tuple[str, bytes]]


def run_chunk(configs: list[dict[str, Any]]) -> dict[str, Column]:
    """Several grid points in one native call, as columns (module-level for processes)."""
    return _native.run_batch(configs)


def column(col: Column) -> Union[list[Any], np.ndarray]:
    """A column of `run_batch`: a list, or a NumPy array for `(dtype, bytes)`."""
    if isinstance(col, tuple):
        dtype, raw = col
        return np.frombuffer(raw, dtype=dtype)
    return col


def _frame(params: list[dict[str, Any]], chunks: list[dict[str, Column]]) -> pd.DataFrame:
    """Parameter columns, then result columns, concatenated over chunks in grid order."""
    names = params[0] if params else {}
    data: dict[str, Any] = {k: [p[k] for p in params] for k in names}
    # A column a chunk lacks (a guest's counters in a chunk of bare-metal runs, say) is None
    # for that chunk's rows, so every column spans every row.
    cols = [{k: column(c) for k, c in chunk.items() if k not in names} for chunk in chunks]
    sizes = [len(next(iter(c.values()))) if c else 0 for c in cols]
    keys = list(dict.fromkeys(k for c in cols for k in c))
    parts: dict[str, list[Union[list[Any], np.ndarray]]] = {
        k: [c.get(k, [None] * n) for c, n in zip(cols, sizes)] for k in keys
    }
    for k, ps in parts.items():
        if all(isinstance(p, np.ndarray) for p in ps):
            data[k] = np.concatenate(ps)
        else:
            data[k] = [x for p in ps for x in (p.tolist() if isinstance(p, np.ndarray) else p)]
    return pd.DataFrame(data)


def _chunks(configs: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [configs[i : i + size] for i in range(0, len(configs), size)]


def _local(
    configs: list[dict[str, Any]], workers: int, executor: str, bar: Callable[[int], object]
) -> list[dict[str, Column]]:
    # Chunks amortise the call overhead; a few per worker keep the workers balanced and the
    # progress bar moving.
    size = max(1, min(250, -(-len(configs) // (workers * 8))))
    chunks = _chunks(configs, size)
    out: list[Optional[dict[str, Column]]] = [None] * len(chunks)
    if workers == 1:
        for i, c in enumerate(chunks):
            out[i] = run_chunk(c)
            bar(len(c))
        return [r for r in out if r is not None]
    pool: Executor = (
        ThreadPoolExecutor(max_workers=workers) if executor == "thread" else ProcessPoolExecutor(max_workers=workers)
    )
    with pool:
        futures = {pool.submit(run_chunk, c): i for i, c in enumerate(chunks)}
        try:
            for f in as_completed(futures):
                i = futures[f]
                out[i] = f.result()
                bar(len(chunks[i]))
        except BaseException:
            # Ctrl-C (or an error) reaches this thread only: stop the rest before leaving.
            _stop(pool)
            raise
    return [r for r in out if r is not None]


def _stop(pool: Executor) -> None:
    """Drops the chunks not started and stops the ones running: worker threads' runs stop at
    their next progress report (`cancel_runs`; signals never reach those threads), worker
    processes are terminated (a notebook's interrupt signals this process only)."""
    pool.shutdown(wait=False, cancel_futures=True)
    if isinstance(pool, ProcessPoolExecutor):
        terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
        if terminate is not None:
            terminate()
        else:
            for proc in list((getattr(pool, "_processes", None) or {}).values()):
                proc.terminate()
    else:
        _native.cancel_runs()


def _ray(
    configs: list[dict[str, Any]],
    workers: Optional[int],
    address: Optional[str],
    bar: Callable[[int], object],
    runtime_env: Optional[dict[str, Any]],
) -> list[dict[str, Column]]:
    import ray

    if not ray.is_initialized():
        if address is None:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
        else:
            ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
    task = ray.remote(num_cpus=1)(run_point)
    refs = [task.remote(c) for c in configs]
    index = {r: i for i, r in enumerate(refs)}
    rows: list[Optional[dict[str, Any]]] = [None] * len(configs)
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=min(len(pending), 64), timeout=1.0)
        for ref, value in zip(done, ray.get(done)):
            rows[index[ref]] = value
            bar(1)
    # The same columns as the local backend's chunks.
    flat = [r for r in rows if r is not None]
    columns: dict[str, Column] = {k: [r[k] for r in flat] for k in flat[0]} if flat else {}
    return [columns] if flat else []


def sweep(
    grid: Mapping[str, Any],
    workload: Optional[Mapping[str, Any]] = None,
    base: Config = None,
    backend: Literal["local", "ray"] = "local",
    workers: Optional[int] = None,
    address: Optional[str] = None,
    progress: bool = True,
    executor: Literal["thread", "process"] = "thread",
    runtime_env: Optional[dict[str, Any]] = None,
) -> pd.DataFrame:
    """Runs every point of `grid` and returns one row per run: its parameters (the grid's
    dotted keys) followed by the flattened `RunResult` columns.

    - `grid`: dotted config keys to sequences of values (lists, ranges, 1-D NumPy arrays,
      pandas Series), e.g. `{"configuration": ["strict", "default"],
      "hardware.cost": ["vtd-2008", "modern"], "workload.ios": [1000]}`.
    - `workload`: keys set under `workload` in every point; `base`: the config every point
      starts from (dict or TOML string).
    - `backend="local"`: `workers` (default `os.cpu_count()`) threads (the GIL is released
      during runs) or processes (`executor="process"`).
    - `backend="ray"`: one Ray task per point; with no `address` a local Ray with `workers`
      CPUs is started, with `address` (`"auto"`, `"ray://head:10001"`) an existing cluster is
      joined. `runtime_env` is passed to `ray.init`.

    Every config is validated before anything runs, so a wrong key raises `ConfigError`
    at once. Runs are deterministic given their seeds: the same grid gives the same rows on
    every backend, except the wall-clock columns (`results.MEASURED_COLUMNS`).
    """
    # Checked first: the one-call path below would otherwise ignore a misspelt choice.
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', not {backend!r}")
    if executor not in ("thread", "process"):
        raise ValueError(f"executor must be 'thread' or 'process', not {executor!r}")
    params = expand_grid(grid)
    configs = [point_config(p, base, workload) for p in params]
    if not configs:
        return pd.DataFrame(columns=list(grid))
    n = (os.cpu_count() or 1) if workers is None else workers
    if n < 1:
        raise ValueError(f"workers must be at least 1, not {n}")
    if backend == "local" and n == 1 and not progress:
        # One native call: it validates every point before running any, as `_validate`
        # would, and nothing needs chunks (no bar, no other worker).
        return _frame(params, [run_chunk(configs)])
    _validate(configs)
    with tqdm(total=len(configs), disable=not progress, desc="sweep", unit="run") as bar:
        if backend == "local":
            chunks = _local(configs, n, executor, bar.update)
        else:
            chunks = _ray(configs, workers, address, bar.update, runtime_env)
    return _frame(params, chunks)


def _validate(configs: list[dict[str, Any]]) -> None:
    """Parses and validates every config in the core before anything runs."""
    _native.run_batch(configs, validate_only=True)


def iter_grid(grid: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The grid points one at a time (for custom loops)."""
    yield from expand_grid(grid)


__all__ = ["column", "expand_grid", "iter_grid", "point_config", "run_chunk", "run_point", "sweep"]
