"""Sweeps: grid expansion, local backends, Ray (a local cluster, a few seconds), plots."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import iommulab
from iommulab.results import deterministic

GRID = {"configuration": ["disabled", "strict", "modern"], "hardware.cost": ["vtd-2008", "modern"], "workload.seed": [1, 2]}


def test_expand_grid_is_the_cartesian_product_last_key_fastest() -> None:
    pts = iommulab.expand_grid({"a": [1, 2], "b.c": ["x", "y", "z"]})
    assert len(pts) == 6
    assert pts[:2] == [{"a": 1, "b.c": "x"}, {"a": 1, "b.c": "y"}]
    with pytest.raises(TypeError):
        iommulab.expand_grid({"a": "strict"})  # type: ignore[dict-item]


def test_point_config_sets_dotted_keys() -> None:
    from iommulab.sweep import point_config

    cfg = point_config({"hardware.cost": "modern", "workload.ios": 5}, base={"dma_debug": True}, workload={"io_size": 512})
    assert cfg == {"dma_debug": True, "workload": {"io_size": 512, "ios": 5}, "hardware": {"cost": "modern"}}


def test_local_sweep_rows_and_columns() -> None:
    df = iommulab.sweep(GRID, workload={"ios": 300}, workers=2, progress=False)
    assert isinstance(df, pd.DataFrame)
    assert len(df) == 12
    assert list(df.columns[:3]) == list(GRID)
    assert (df["config"] == df["configuration"]).all()
    assert (df["cost_preset"] == df["hardware.cost"]).all()
    assert "stats.iommu.iotlb_misses" in df.columns or any(c.startswith("stats.iommu.") for c in df.columns)


def test_threads_processes_and_serial_agree() -> None:
    grid = {"configuration": ["strict", "default"], "workload.seed": [1, 2]}
    serial = iommulab.sweep(grid, workload={"ios": 200}, workers=1, progress=False)
    threads = iommulab.sweep(grid, workload={"ios": 200}, workers=2, progress=False)
    procs = iommulab.sweep(grid, workload={"ios": 200}, workers=2, executor="process", progress=False)
    pd.testing.assert_frame_equal(deterministic(serial), deterministic(threads))
    pd.testing.assert_frame_equal(deterministic(serial), deterministic(procs))


def test_sweep_wrong_key_fails_before_running() -> None:
    with pytest.raises(iommulab.ConfigError, match="unknown field `ioss`"):
        iommulab.sweep({"workload.ioss": [1, 2]}, progress=False)
    # The last point is bad and the first would run for minutes: every path checks all
    # points before running any (the serial no-progress path in its one native call), so
    # the error comes at once.
    for workers, progress in ((1, False), (1, True), (2, False)):
        with pytest.raises(iommulab.ConfigError, match="hardware.levels"):
            iommulab.sweep({"hardware.levels": [4, 9]}, workload={"ios": 10**9}, workers=workers, progress=progress)


def test_sweep_bad_backend() -> None:
    with pytest.raises(ValueError, match="backend"):
        iommulab.sweep({"configuration": ["strict"]}, backend="slurm", progress=False)  # type: ignore[arg-type]


@pytest.mark.ray
def test_ray_sweep_equals_local_sweep() -> None:
    pytest.importorskip("ray")
    import ray

    local = iommulab.sweep(GRID, workload={"ios": 300}, workers=2, progress=False)
    try:
        remote = iommulab.sweep(GRID, workload={"ios": 300}, backend="ray", workers=2, progress=False)
    finally:
        ray.shutdown()
    pd.testing.assert_frame_equal(deterministic(local), deterministic(remote))


def test_plots_write_pngs(tmp_path: Path, trace_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from iommulab import plots

    df = iommulab.sweep({"configuration": ["disabled", "strict"], "workload.io_size": [512, 4096]}, workload={"ios": 200}, progress=False)
    ax = plots.plot_bars(df, "configuration", "iops", hue="workload.io_size")
    ax.figure.savefig(tmp_path / "bars.png")
    ax = plots.plot_curves(df, "workload.io_size", "modeled_ns_per_op", hue="configuration", logx=True)
    ax.figure.savefig(tmp_path / "curves.png")
    ax = plots.plot_mrc([iommulab.mrc(trace_path, p) for p in ("lru", "opt")], relative=True)
    ax.figure.savefig(tmp_path / "mrc.png")
    assert all((tmp_path / f).stat().st_size > 1000 for f in ("bars.png", "curves.png", "mrc.png"))


def test_run_batch_columns_equal_single_runs() -> None:
    from iommulab import _native

    cfgs = [{"configuration": c, "workload": {"ios": 100, "seed": s}} for c in ("strict", "modern") for s in (1, 2)]
    from iommulab.sweep import column

    raw = _native.run_batch(cfgs)
    cols = {k: list(column(c)) for k, c in raw.items()}
    singles = [iommulab.run(c).to_dict(flat=True) for c in cfgs]
    assert list(cols) == list(singles[0])
    # Numeric columns come typed, for numpy (the frame skips pandas' type inference).
    assert isinstance(raw["stats.dma.maps"], tuple) and raw["stats.dma.maps"][0] == "<i8"
    for k in cols:
        if k not in iommulab.results.MEASURED_COLUMNS:
            assert cols[k] == [s[k] for s in singles], k
    with pytest.raises(iommulab.ConfigError, match="hardware.levels"):
        _native.run_batch([cfgs[0], {"hardware": {"levels": 9}}])


def test_sweep_takes_numpy_arrays_and_series() -> None:
    grids = [np.arange(100, 301, 100), pd.Series([100, 200, 300]), list(np.arange(100, 301, 100)), range(100, 301, 100)]
    frames = [iommulab.sweep({"workload.ios": g}, progress=False, workers=1) for g in grids]
    for df in frames:
        assert df["workload.ios"].tolist() == [100, 200, 300] == df["ops"].tolist()
    with pytest.raises(TypeError, match="2-dimensional"):
        iommulab.expand_grid({"workload.ios": np.ones((2, 2))})
    with pytest.raises(TypeError, match="dict"):
        iommulab.expand_grid({"a": {"x": 1}})


@pytest.mark.parametrize("workers", [1, 2])
def test_sweep_refuses_unknown_executor_and_backend(workers: int) -> None:
    with pytest.raises(ValueError, match="executor must be 'thread' or 'process', not 'fork'"):
        iommulab.sweep({"workload.ios": [10, 20]}, progress=False, executor="fork", workers=workers)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="backend must be 'local' or 'ray', not 'dask'"):
        iommulab.sweep({"workload.ios": [10]}, progress=False, backend="dask", workers=workers)  # type: ignore[arg-type]
