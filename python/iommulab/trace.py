"""Traces: statistics, generation and dma-debug (the CLI's `iommulab trace stats|generate`, `iommulab check`)."""

from __future__ import annotations

import os
from typing import Any, Optional, Union

from iommulab import _native


def stats(path: Union[str, os.PathLike[str]], format: str = "auto", lenient: bool = False) -> dict[str, Any]:
    """`iommulab trace stats --json` as a dict: `events`, `devices`, times, then the layers apart
    (never summed): `dma_api` (the `dma:*` records of every device), `dma_api_by_device` (a list,
    one dict per device with its `device` name) and `iommu` (the `iommu:map`/`unmap` page-table
    records counted by IOVA page, or None). Fields: docs/trace-format.md, "Statistics". A missing
    file raises `FileNotFoundError`."""
    return _native.trace_stats(path, format=format, lenient=lenient)


def check(
    path: Union[str, os.PathLike[str]],
    format: str = "auto",
    lenient: bool = False,
    dma_masks: Optional[dict[str, int]] = None,
    iommu: bool = True,
    max_findings: Optional[int] = None,
) -> dict[str, Any]:
    """`iommulab check --json` as a dict: Linux dma-debug's checks on what the trace's drivers
    did (`findings_total`, `by_kind`, `findings` with the file line of the map and of the
    offending call, device, task, CPU and the debug.c message). `dma_masks` maps device names
    to DMA masks (`{"0000:00:01.0": 0xffffffff}`). A missing file raises `FileNotFoundError`,
    an unreadable trace `TraceError`."""
    masks = list(dma_masks.items()) if dma_masks else None
    return _native.trace_check(
        path, format=format, lenient=lenient, dma_masks=masks, iommu=iommu, max_findings=max_findings
    )


def generate(
    workload: Union[str, dict[str, Any]],
    events: int,
    path: Union[str, os.PathLike[str]],
    seed: Optional[int] = None,
) -> int:
    """Records `events` events of a built-in workload (`"pseudo-scsi"`, `"netperf-send"`,
    `"apache-sendfile"`, `"block"`, `"uniform-random"`, `"net-rx"`, or a dict with `kind`) to `path`
    (native `.iot`, `.csv`, `.oracleGeneral`, optionally `.gz`, by extension). Returns the events written."""
    return _native.trace_generate(workload, events, path, seed=seed)


__all__ = ["check", "generate", "stats"]
