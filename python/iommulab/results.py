"""DataFrame helpers over run results."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from iommulab._native import RunResult

#: Columns taken from the wall clock of this machine: they differ between two runs of the same
#: config, while every other column is a function of the config and its seeds.
MEASURED_COLUMNS = ("software_ns_per_op", "measured_iops", "wall_seconds")


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level of dotted keys (`stats.iommu.iotlb_hits`)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        # `type(...) is dict` first: the ABC check of `Mapping` costs more than a small run.
        if type(v) is dict or (type(v) is not str and isinstance(v, Mapping)):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def to_frame(runs: Iterable[RunResult | Mapping[str, Any]]) -> pd.DataFrame:
    """One row per run, with the nested `stats` flattened into dotted columns."""
    rows = [flatten(r.to_dict() if isinstance(r, RunResult) else r) for r in runs]
    return pd.DataFrame(rows)


def deterministic(df: pd.DataFrame) -> pd.DataFrame:
    """`df` without the wall-clock columns (for comparing two sweeps of the same grid)."""
    cols = [c for c in df.columns if c not in MEASURED_COLUMNS and not c.endswith(tuple("." + m for m in MEASURED_COLUMNS))]
    return df[cols]


__all__ = ["MEASURED_COLUMNS", "deterministic", "flatten", "to_frame"]
