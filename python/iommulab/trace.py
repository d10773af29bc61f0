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
    dma_masks: Optional[dict[str, Union[int, str]]] = None,
    iommu: bool = True,
    max_findings: Optional[int] = None,
    leaks: bool = False,
    from_boot: bool = False,
) -> dict[str, Any]:
    """`iommulab check --json` as a dict: Linux dma-debug's checks on what the trace's drivers
    did (`findings_total`, `by_kind`, `findings` with the file line of the map and of the
    offending call, device, task, CPU and the debug.c message). `dma_masks` maps device names
    to DMA masks as the CLI's `--dma-mask DEVICE=MASK`: an int is a number of bits, 1 to 64
    (`{"0000:00:01.0": 32}` is the mask 0xffffffff), a string is `"0x..."` (the mask itself)
    or bits; anything else raises `ConfigError` naming the device. `leaks` and `from_boot` are
    the CLI's `--leaks` (mappings still live when tracing stopped are `leak` findings, not only
    `outstanding_at_end`) and `--from-boot` (the capture began before any mapping, so an unmap
    of an address it never mapped is `unmap_not_mapped`, not `mapped_before_tracing`). A
    missing file raises `FileNotFoundError`, an unreadable trace `TraceError`."""
    masks = list(dma_masks.items()) if dma_masks else None
    return _native.trace_check(
        path,
        format=format,
        lenient=lenient,
        dma_masks=masks,
        iommu=iommu,
        max_findings=max_findings,
        leaks=leaks,
        from_boot=from_boot,
    )


def validate(
    path: Union[str, os.PathLike[str]],
    kernel: str = "6.12",
    lazy: bool = False,
    warmup: float = 0.0,
    lenient: bool = False,
    cpus: Optional[int] = None,
    dma_masks: Optional[dict[str, Union[int, str]]] = None,
    groups: Optional[list[list[str]]] = None,
    start_pfn: int = 1,
    aperture_bits: int = 48,
    reserved: Optional[list[tuple[int, int]]] = None,
    default_windows: bool = True,
    forcedac: bool = False,
    max_mismatches: int = 20,
) -> dict[str, Any]:
    """`iommulab validate --json` as a dict: replays the trace's `iommu:map`/`iommu:unmap`
    through the Linux 6.x IOVA allocator model and scores each IOVA it predicts against the
    kernel's (`allocations`, `open_loop_rate`, `one_step_rate` in 0-1, `devices`,
    `mismatch_kinds`, `first_mismatches` with trace lines). `groups` lists devices sharing
    one IOMMU group; `dma_masks` are as `check`'s (bits, or a `"0x..."` mask); `reserved` adds inclusive byte windows `(start, end)` to q35's defaults
    (`default_windows=False` drops those). An unmatched event raises `TraceError` naming the
    line, unless `lenient`."""
    masks = list(dma_masks.items()) if dma_masks else None
    return _native.trace_validate(
        path,
        kernel=kernel,
        lazy=lazy,
        warmup=warmup,
        lenient=lenient,
        cpus=cpus,
        dma_masks=masks,
        groups=groups,
        start_pfn=start_pfn,
        aperture_bits=aperture_bits,
        reserved=reserved,
        default_windows=default_windows,
        forcedac=forcedac,
        max_mismatches=max_mismatches,
    )


def generate(
    workload: Union[str, dict[str, Any]],
    events: int,
    path: Union[str, os.PathLike[str]],
    seed: Optional[int] = None,
) -> int:
    """Records a built-in workload (its name, `"pseudo-scsi"`, `"netperf-send"`,
    `"apache-sendfile"`, `"block"`, `"uniform-random"`, `"net-rx"`, `"nic-duplex"`, or a dict
    with `kind` and the workload's keys) to `path` (native `.iot`, `.csv`, `.oracleGeneral`,
    optionally `.gz`, by extension) until at least `events` events are written, as `iommulab
    trace generate --events`: the operation that reaches the limit is written whole and the
    mappings still live are then unmapped, so the trace is closed and may hold a few more
    events. Returns the events written (the CLI's "N events (M workload operations)")."""
    return _native.trace_generate(workload, events, path, seed=seed)


__all__ = ["check", "generate", "stats", "validate"]
