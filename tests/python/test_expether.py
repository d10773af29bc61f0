"""`iommulab.expether`: S4.4's ExpEther timing model with a user's run (a dict or TOML, any
subset of the parameters), and bad parameters named by key."""

from __future__ import annotations

import pytest

import iommulab

SHORT = {"duration_s": 0.01}


def test_receive_is_n_reads_per_round_trip() -> None:
    r = iommulab.expether({**SHORT, "streams": [1, 1, 1]})
    limit = r["read_limit_gbps"]
    assert abs(r["result"]["total_gbps"] - limit) / limit < 0.02
    assert len(r["result"]["per_host_gbps"]) == 3
    assert r["changed"] == []
    lifted = iommulab.expether({**SHORT, "params": {"outstanding_reads": 16}})
    assert lifted["changed"] == ["outstanding_reads"]
    assert lifted["result"]["total_gbps"] > limit + 2.0


def test_toml_text_and_send() -> None:
    r = iommulab.expether('direction = "send"\nduration_s = 0.01\n[params]\nswitch_ns = 900\n')
    assert r["run"]["direction"] == "send"
    assert r["read_limit_gbps"] is None
    assert r["result"]["total_gbps"] <= r["line_goodput_gbps"] * 1.005


def test_a_partial_run_keeps_every_other_estimate() -> None:
    base = iommulab.expether(SHORT)
    r = iommulab.expether({**SHORT, "qos": True, "params": {"bridge_ns": 300}})
    assert r["run"]["qos"] is True
    changed = {k for k, v in r["run"]["params"].items() if base["run"]["params"][k] != v}
    assert changed == {"bridge_ns"} == set(r["changed"])
    # A shorter bridge pass shortens the round trip and raises the read limit.
    assert r["result"]["unloaded_read_rtt_ns"] < base["result"]["unloaded_read_rtt_ns"]
    assert r["read_limit_gbps"] > base["read_limit_gbps"]


def test_bad_parameters_are_named() -> None:
    with pytest.raises(iommulab.ConfigError, match="outstanding_read"):
        iommulab.expether({"params": {"outstanding_read": 4}})
    with pytest.raises(iommulab.ConfigError, match=r"params\.outstanding_reads"):
        iommulab.expether({"params": {"outstanding_reads": 0}})
    with pytest.raises(iommulab.ConfigError, match="streams"):
        iommulab.expether({"streams": []})
