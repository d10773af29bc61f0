"""Hit-rate curves of the guest map cache over a trace (S1.9)."""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Union

from iommulab import _native


def mrc(
    trace: Union[str, os.PathLike[str]],
    policy: Union[str, dict[str, Any]] = "lru",
    pinning: bool = False,
    max_quota: Optional[int] = None,
    quotas: Optional[Sequence[int]] = None,
    format: str = "auto",
    lenient: bool = False,
) -> dict[str, Any]:
    """The hit-rate curve of `policy` over a trace: `iommulab mrc --json` as a dict.

    `policy` is `"lru"`, `"fifo"`, `"opt"`, `"opt_batch"` (or `"opt-batch"`), `"prefetch"`,
    or a dict with `kind` and the policy's parameters (`{"kind": "opt_batch", "batch": 8}`).

    Two views of the trace (S1.9):

    - `pinning=False` (default): the **page sequence**, the paper's method for its Figures 3-4.
      Every 4 KiB page a mapped buffer spans is one independent reference, so nothing is
      pinned and nothing refused at a quota of at least 1. LRU, FIFO and OPT here equal
      libCacheSim's LRU, FIFO and Belady on the trace's `.oracleGeneral` export.
    - `pinning=True`: the **pinned map cache**. A page stays pinned while its DMA is in
      flight, so victims come only from unpinned pages and maps are refused when every cached
      page is pinned. On a real trace this hits much less at small quotas.

    (Before this version the curve was always the pinned map cache; pass `pinning=True` for
    that.)

    Quotas: every quota `0..=max_quota` pages (default: the trace's distinct pages, past which
    nothing changes: a larger `max_quota` adds only its own row), or only the listed `quotas`
    (sorted, duplicates dropped); not both.

    The result has `policy`, `policy_config`, `pinning`, `method` (`"stack_distance"`: one pass,
    LRU and OPT without pinning over every quota; `"simulation"`: one cache run per quota,
    FIFO's, and up to 8 listed quotas of LRU or OPT; the page sequence of LRU, FIFO and OPT
    is computed while the trace is read, without holding it), `exact`,
    `maps`, `distinct_pages`, `max_pinned` (None for the page sequence of LRU, FIFO and OPT,
    which reads the trace's maps alone; the pinned view counts it), and one list entry per
    quota in `quota`, `hits`, `misses`, `refused` and `hit_rate` (`hits / maps`).
    """
    return _native.mrc(
        trace,
        policy,
        pinning=pinning,
        max_quota=max_quota,
        quotas=None if quotas is None else list(quotas),
        format=format,
        lenient=lenient,
    )


__all__ = ["mrc"]
