"""`iommulab.validate`: the Linux 6.x IOVA allocator model against a real kernel's trace
(issue 12), from Python: the same numbers as `iommulab validate --json`."""

from __future__ import annotations

from pathlib import Path

import pytest

import iommulab

QEMU = Path(__file__).parents[2] / "traces" / "qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst"
PROBE = Path(__file__).parents[2] / "traces" / "probe-6.12.95+deb12-amd64.txt.zst"

# A 64-bit PCI device's first two pages, top-down from 4 GiB; the freed first page comes back
# from CPU 0's magazine; then a "kernel" choice the model would not make.
HAND = """\
# tracer: nop
# entries-in-buffer/entries-written: 1/1   #P:1
 t-1 [000] ..... 1.000001: map: IOMMU: iova=0x00000000fffff000 - 0x0000000100000000 paddr=0x0000000001000000 size=4096
 t-1 [000] ..... 1.000002: dma_map_page: 0000:00:04.0 dir=TO_DEVICE dma_addr=fffff000 size=4096 phys_addr=1000000 attrs=
 t-1 [000] ..... 1.000003: map: IOMMU: iova=0x00000000ffffe000 - 0x00000000fffff000 paddr=0x0000000001000000 size=4096
 t-1 [000] ..... 1.000004: dma_map_page: 0000:00:04.0 dir=TO_DEVICE dma_addr=ffffe000 size=4096 phys_addr=1000000 attrs=
 t-1 [000] ..... 1.000005: unmap: IOMMU: iova=0x00000000fffff000 - 0x0000000100000000 size=4096 unmapped_size=4096
 t-1 [000] ..... 1.000006: dma_unmap_page: 0000:00:04.0 dir=TO_DEVICE dma_addr=fffff000 size=4096 attrs=
 t-1 [000] ..... 1.000007: map: IOMMU: iova=0x00000000fffff000 - 0x0000000100000000 paddr=0x0000000001000000 size=4096
 t-1 [000] ..... 1.000008: dma_map_page: 0000:00:04.0 dir=TO_DEVICE dma_addr=fffff000 size=4096 phys_addr=1000000 attrs=
 t-1 [000] ..... 1.000009: map: IOMMU: iova=0x00000000ffff0000 - 0x00000000ffff1000 paddr=0x0000000001000000 size=4096
 t-1 [000] ..... 1.000010: dma_map_page: 0000:00:04.0 dir=TO_DEVICE dma_addr=ffff0000 size=4096 phys_addr=1000000 attrs=
"""


def test_validate_real_trace_matches_the_cli_numbers() -> None:
    r = iommulab.validate(QEMU)
    assert (r["allocations"], r["frees"], r["cpus"]) == (3263, 3008, 1)
    assert (r["one_step"]["exact"], r["open_loop"]["exact"]) == (3262, 3118)
    assert r["one_step_rate"] >= 0.97
    assert all(d["one_step_rate"] >= 0.97 for d in r["devices"])
    assert r["mismatch_kinds"]["one_step"] == {"free_in_tree": 1}


def test_validate_cold_boot_probe_trace_is_exact() -> None:
    # A boot-time trace on 2 CPUs (traces/README.md): every allocation predicted, both modes.
    r = iommulab.validate(PROBE)
    assert (r["allocations"], r["frees"], r["cpus"]) == (792, 522, 2)
    assert r["one_step_rate"] == 1.0 and r["open_loop_rate"] == 1.0
    assert r["direct_mappings"] == 1
    assert all(d["one_step_rate"] == 1.0 for d in r["devices"])


def test_validate_hand_trace(tmp_path: Path) -> None:
    p = tmp_path / "t.txt"
    p.write_text(HAND)
    r = iommulab.validate(p)
    assert r["allocations"] == 4
    assert r["one_step"]["exact"] == 3 and r["open_loop"]["exact"] == 3
    m = [m for m in r["first_mismatches"] if m["mode"] == "one_step"][0]
    assert (m["line"], m["kernel_iova"], m["model_iova"], m["kind"]) == (
        11,
        0xFFFF0000,
        0xFFFFD000,
        "free_in_tree",
    )
    assert iommulab.trace.validate(p, warmup=0.5)["scored"] == 2


def test_validate_errors(tmp_path: Path) -> None:
    p = tmp_path / "t.txt"
    p.write_text(HAND + " t-1 [000] ..... 1.000011: map: IOMMU: iova=0x0000000000001000 - 0x0000000000002000 paddr=0x0 size=4096\n")
    with pytest.raises(iommulab.TraceError, match="t.txt:13"):
        iommulab.validate(p)
    assert iommulab.validate(p, lenient=True)["skipped"]["unclosed_map_runs"] == 1
    with pytest.raises(iommulab.ConfigError, match="kernel"):
        iommulab.validate(p, kernel="5.4")
    with pytest.raises(FileNotFoundError):
        iommulab.validate(tmp_path / "missing.txt")
