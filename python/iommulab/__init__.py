"""iommulab: a software model of IOMMU hardware and the DMA-mapping software that drives it.

The Python API over the Rust core. Configs are dicts or TOML strings with the same schema as
the CLI and config files (docs/configuration.md)::

    import iommulab
    r = iommulab.run({"configuration": "strict", "workload": {"ios": 10_000}})
    r.iops, r.to_dict()
    df = iommulab.sweep({"configuration": ["default", "strict"], "workload.ios": [1000, 10000]})
    fig4 = iommulab.reproduce("fujita2008", quick=True).tables["figure4"]
    c = iommulab.compare("traces/fio-6.12.95+deb12-amd64.txt.zst")  # Linux strict vs lazy
    x = iommulab.expether({"streams": [1, 1], "params": {"outstanding_reads": 16}})
    p = iommulab.iosup({"churn": {"minutes": 10, "forks_per_minute": 2000}})  # IOSUP's groups
"""

from __future__ import annotations

from iommulab import plots, results, trace
from iommulab._native import (
    ConfigError,
    DmaError,
    IommulabError,
    IovaError,
    MapError,
    RunResult,
    TraceError,
    VirtError,
    bench,
    cancel_runs,
    compare,
    expether,
    iosup,
    replay,
    run,
    version,
)
from iommulab._native import validate as validate_config
from iommulab._mrc import mrc
from iommulab.trace import check, validate
from iommulab._reproduce import REPRODUCTIONS, ReproProgress, Reproduction, reproduce
from iommulab.sweep import expand_grid, sweep

__version__ = version()

__all__ = [
    "ConfigError",
    "DmaError",
    "IommulabError",
    "IovaError",
    "MapError",
    "REPRODUCTIONS",
    "ReproProgress",
    "Reproduction",
    "RunResult",
    "TraceError",
    "VirtError",
    "__version__",
    "bench",
    "cancel_runs",
    "check",
    "compare",
    "expand_grid",
    "expether",
    "iosup",
    "mrc",
    "plots",
    "replay",
    "reproduce",
    "results",
    "run",
    "sweep",
    "trace",
    "validate",
    "validate_config",
    "version",
]
