"""Hit-rate curves of the guest map cache over a trace (S1.9)."""

from __future__ import annotations

import os
from typing import Any, Optional, Union

from iommulab import _native


def mrc(
    trace: Union[str, os.PathLike[str]],
    policy: Union[str, dict[str, Any]] = "lru",
    max_quota: Optional[int] = None,
    format: str = "auto",
    lenient: bool = False,
) -> dict[str, Any]:
    """The hit-rate curve of `policy` (`"lru"`, `"opt"`, `"fifo"`, `"opt_batch"`,
    `"prefetch"`, or a dict with `kind` and the policy's parameters) over quotas
    `0..=max_quota` pages (default: the trace's distinct pages).

    Each 4 KiB guest page a mapped buffer spans is one map reference. The result is the core's
    curve (`policy`, `method`, `exact`, `maps`, `distinct_pages`, `points`) plus the arrays
    `quota` and `hit_rate` for plotting.
    """
    curve = _native.mrc(trace, policy, max_quota=max_quota, format=format, lenient=lenient)
    points = curve["points"]
    curve["quota"] = [p["quota"] for p in points]
    curve["hit_rate"] = [
        p["hits"] / n if (n := p["hits"] + p["misses"] + p["refused"]) else float("nan") for p in points
    ]
    return curve


__all__ = ["mrc"]
