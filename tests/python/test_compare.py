"""`iommulab.compare`: the same numbers as the CLI's `compare --json` (held to the committed
file the CLI test checks too) and as a config giving the same configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import iommulab

REPO = Path(__file__).resolve().parents[2]
QEMU = REPO / "traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst"
GOLDEN = REPO / "crates/iommulab-cli/tests/golden/compare-qemu-virtio.json"


def test_compare_matches_the_cli() -> None:
    got = iommulab.compare(QEMU)
    assert got == json.loads(GOLDEN.read_text())
    assert got["preset"] == "modern"
    assert [c["name"] for c in got["configs"]] == ["linux-strict", "linux-lazy"]
    strict = got["configs"][0]["total"]["exposure"]
    assert strict["max_ns"] == 0


def test_a_config_and_an_alias_give_the_same_numbers() -> None:
    got = iommulab.compare(QEMU, configs=["lazy"], config={"configuration": "modern"})
    by = {c["name"]: c for c in got["configs"]}
    assert set(by) == {"linux-strict", "linux-lazy", "modern"}
    assert by["modern"]["total"] == by["linux-lazy"]["total"]
    assert by["modern"]["devices"] == by["linux-lazy"]["devices"]


def test_one_device() -> None:
    whole = iommulab.compare(QEMU, configs=[])
    first = whole["configs"][1]["devices"][0]
    one = iommulab.compare(QEMU, device=first["device"])
    assert one["configs"][1]["total"]["ios"] == first["ios"]
    with pytest.raises(iommulab.IommulabError, match="0000:99:00.0"):
        iommulab.compare(QEMU, device="0000:99:00.0")
    with pytest.raises(iommulab.ConfigError, match="configuration"):
        iommulab.compare(QEMU, configs=["fast"])
