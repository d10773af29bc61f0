"""`iommulab.check`: dma-debug of a recorded trace from Python (issue 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

import iommulab

BUGGY = """\
 fio-3310 [002] ..... 8123.500001: dma_map_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=fff00000 size=4096 phys_addr=12c400000 attrs=
 fio-3310 [002] ..... 8123.500002: dma_unmap_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=fff00000 size=4096 attrs=
 fio-3310 [002] ..... 8123.500003: dma_unmap_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=fff00000 size=4096 attrs=
 fio-3310 [002] ..... 8123.500004: dma_map_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=ffef0000 size=4096 phys_addr=1fc401000 attrs=
"""

QEMU = Path(__file__).parents[2] / "traces" / "qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst"


def test_check_finds_the_bugs(tmp_path: Path) -> None:
    p = tmp_path / "buggy.txt"
    p.write_text(BUGGY)
    r = iommulab.check(p, leaks=True)
    assert r["findings_total"] == 2
    assert r["by_kind"] == {"double_unmap": 1, "leak": 1}
    f = r["findings"][0]
    assert (f["kind"], f["at"]["line"], f["map"]["line"]) == ("double_unmap", 3, 1)
    assert f["at"]["task"] == "fio-3310" and f["at"]["cpu"] == 2
    assert "has not allocated" in f["linux_check"]
    assert iommulab.trace.check(p, max_findings=1, leaks=True)["findings_not_listed"] == 1
    # Without --leaks the mapping still live is only counted.
    r = iommulab.check(p)
    assert r["by_kind"] == {"double_unmap": 1}
    assert r["outstanding_at_end"] == 1


def test_check_mapped_before_tracing(tmp_path: Path) -> None:
    p = tmp_path / "mid.txt"
    # An unmap of a mapping made before the capture began, then a double unmap of it.
    p.write_text("\n".join(BUGGY.splitlines()[2:3] * 2) + "\n")
    r = iommulab.check(p)
    assert r["by_kind"] == {"double_unmap": 1}
    assert r["mapped_before_tracing"] == 1
    r = iommulab.check(p, from_boot=True)
    assert r["by_kind"] == {"unmap_not_mapped": 2}


def test_check_dma_mask(tmp_path: Path) -> None:
    p = tmp_path / "t.txt"
    p.write_text(BUGGY)
    # As the CLI's `--dma-mask`: a "0x..." string is the mask, an int a number of bits.
    r = iommulab.check(p, dma_masks={"0000:01:00.0": "0xfffffff"})
    assert r["by_kind"]["beyond_dma_mask"] == 2
    assert iommulab.check(p, dma_masks={"0000:01:00.0": 28})["by_kind"] == r["by_kind"]


def test_check_qemu_trace_clean_and_explained_leaks() -> None:
    r = iommulab.check(QEMU)
    assert r["by_kind"] == {}
    assert r["outstanding_at_end"] == 255
    assert r["iommu_checked"] is True
    assert iommulab.check(QEMU, leaks=True, from_boot=True)["by_kind"] == {"leak": 3}


def test_check_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        iommulab.check(tmp_path / "missing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_text("not a trace\n")
    with pytest.raises(iommulab.TraceError, match="bad.txt:1"):
        iommulab.check(bad)
