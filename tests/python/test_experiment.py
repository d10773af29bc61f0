"""One experiment description (issue 9): guest and bare-metal systems, generator and trace
workloads, through `run`, `validate` and `sweep` like any other configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

import iommulab
import iommulab._native

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "traces" / "qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst"

GUEST = {
    "system": {"kind": "guest", "strategy": "on-demand", "quota": 64, "eviction": {"kind": "lru"}},
    "hardware": {"cost": "kvm-2010"},
    "workload": {"kind": "netperf-send", "packets": 2000},
}


def test_a_guest_run_has_the_guest_part() -> None:
    r = iommulab.run(GUEST)
    d = r.to_dict()
    assert r.config == "guest-on-demand"
    g = d["guest"]
    assert g["strategy"] == "on-demand" and g["quota"] == 64
    assert 0 < g["hits"] <= g["maps"]
    assert d["ops"] == g["buffers"]
    assert "replay" not in d
    flat = r.to_dict(flat=True)
    assert flat["guest.hit_rate"] == g["hit_rate"]


def test_a_trace_workload_has_the_replay_part() -> None:
    r = iommulab.run({"configuration": "strict", "workload": {"trace": str(TRACE)}})
    d = r.to_dict()
    assert d["replay"]["maps"] > 3000
    assert "guest" not in d


def test_a_guest_refuses_what_it_cannot_honour() -> None:
    with pytest.raises(iommulab.ConfigError, match="dma_debug"):
        iommulab._native.validate({**GUEST, "dma_debug": True})
    with pytest.raises(iommulab.ConfigError, match="quotaa"):
        iommulab._native.validate({"system": {"kind": "guest", "quotaa": 1}})


def test_a_sweep_over_the_guest_quota_rises_with_it() -> None:
    df = iommulab.sweep({"system.quota": [4, 16, 64]}, base=GUEST, progress=False)
    rates = list(df["guest.hit_rate"])
    assert rates == sorted(rates) and rates[0] < rates[-1]


def test_a_mixed_batch_has_the_union_of_the_columns() -> None:
    bare = {"configuration": "strict", "workload": {"kind": "netperf-send", "packets": 2000}}
    df = iommulab.sweep({"system.kind": ["bare-metal", "guest"]}, base=bare, progress=False)
    assert len(df) == 2
    assert df["guest.hits"].isna().tolist() == [True, False]
    assert (df["ops"] > 0).all()


XEN = {
    "system": {"kind": "xen-pv", "option": "streaming"},
    "hardware": {"unit": "calgary", "cost": "vtd-2008", "cost_overrides": {"hypercall": 1000}},
    "workload": {"kind": "net-rx", "packets": 5000},
}


def test_a_xen_pv_run_has_the_xen_part() -> None:
    d = iommulab.run(XEN).to_dict()
    x = d["xen_pv"]
    assert d["config"] == "xen-pv-streaming@calgary"
    assert x["option"] == "streaming" and x["pairs"] == 5000
    assert abs(x["hypercalls_per_pair"] - 2.0) < 0.01
    assert x["single_entry_fraction"] == 1.0
    assert "guest" not in d


def test_a_sweep_over_the_s2_6_options() -> None:
    options = ["streaming", "map-multi", "never-free", "pre-allocate", "in-advance"]
    df = iommulab.sweep({"system.option": options}, base=XEN, progress=False)
    per_pair = dict(zip(df["xen_pv.option"], df["xen_pv.hypercalls_per_pair"]))
    # Each option crosses into the hypervisor less than the streaming API it improves on.
    assert all(per_pair[o] < per_pair["streaming"] for o in options[1:])
    assert per_pair["pre-allocate"] == 0.0
    late = dict(zip(df["xen_pv.option"], df["xen_pv.late_probes_through"]))
    assert late["streaming"] == 0 and late["never-free"] > 0
