"""Hypothesis: dict → TOML → run → dict. A config written as a dict and the same config
written as TOML give the same run, and the run reports the config it was given."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import iommulab

CONFIGS = ["disabled", "default", "strict", "bitmap", "strict-bitmap", "modern"]
COSTS = ["vtd-2008", "kvm-2010", "modern"]


def to_toml(cfg: dict[str, Any]) -> str:
    top = [f"{k} = {_v(v)}" for k, v in cfg.items() if not isinstance(v, dict)]
    tables = [f"[{k}]\n" + "\n".join(f"{kk} = {_v(vv)}" for kk, vv in v.items()) for k, v in cfg.items() if isinstance(v, dict)]
    return "\n".join(top + tables) + "\n"


def _v(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


configs = st.fixed_dictionaries(
    {
        "configuration": st.sampled_from(CONFIGS),
        "hardware": st.fixed_dictionaries({"cost": st.sampled_from(COSTS), "levels": st.sampled_from([3, 4, 5])}),
        "workload": st.fixed_dictionaries(
            {
                "ios": st.integers(1, 200),
                "io_size": st.sampled_from([512, 4096, 65536]),
                "outstanding": st.integers(1, 8),
                "seed": st.integers(0, 2**32),
                "touch": st.booleans(),
            }
        ),
        "dma_debug": st.booleans(),
    }
)


@settings(max_examples=40, deadline=None)
@given(configs)
def test_dict_toml_run_dict(cfg: dict[str, Any]) -> None:
    a = iommulab.run(cfg).to_dict()
    b = iommulab.run(to_toml(cfg)).to_dict()
    for k in iommulab.results.MEASURED_COLUMNS:
        a.pop(k), b.pop(k)
    assert a == b
    assert a["config"] == cfg["configuration"]
    assert a["cost_preset"] == cfg["hardware"]["cost"]
    assert a["ops"] == cfg["workload"]["ios"]
    assert a["seed"] == cfg["workload"]["seed"]
    assert a["io_size"] == cfg["workload"]["io_size"]
    assert a["touch"] == cfg["workload"]["touch"]


@settings(max_examples=30, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12))
def test_any_unknown_top_level_key_is_a_config_error_naming_it(key: str) -> None:
    known = {"configuration", "mechanisms", "hardware", "workload", "device", "dma_debug", "dma_bits", "software_clock", "duration_s"}
    if key in known:
        return
    try:
        iommulab.run({key: 1})
    except iommulab.ConfigError as e:
        assert key in str(e) and "`configuration`" in str(e)
    else:
        raise AssertionError(f"{key!r} accepted")
