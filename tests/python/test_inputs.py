"""Inputs the API must take or refuse by name (a user audit): config values of other Python
types, sweep grids, arguments out of range, the CLI's meaning of the same argument."""

from __future__ import annotations

import copy
import gzip
import math
import pathlib
import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import iommulab
from iommulab import _native

TINY = {"configuration": "strict", "workload": {"ios": 50}}


# --- Config values -----------------------------------------------------------------------


def test_numpy_scalars_are_their_values() -> None:
    a = iommulab.run({"configuration": "strict", "workload": {"ios": np.int64(50), "touch": np.bool_(True)}})
    b = iommulab.run({"configuration": "strict", "workload": {"ios": 50, "touch": True}})
    assert a.ops == b.ops == 50 and a.touch is True
    c = iommulab.run({"hardware": {"cost_overrides": {"ghz": np.float64(2.5)}}, "workload": {"ios": 50}})
    d = iommulab.run({"hardware": {"cost_overrides": {"ghz": 2.5}}, "workload": {"ios": 50}})
    assert c.modeled_ns_per_op == d.modeled_ns_per_op


def test_path_values_are_strings(trace_path: Path) -> None:
    # A trace workload's path as a pathlib.Path (any os.PathLike).
    r = iommulab.run({"configuration": "strict", "workload": {"trace": pathlib.Path(trace_path)}})
    assert r.ops == iommulab.run({"configuration": "strict", "workload": {"trace": str(trace_path)}}).ops > 0


@pytest.mark.parametrize("value, shown", [(math.nan, "NaN"), (math.inf, "inf"), (-math.inf, "-inf")])
def test_non_finite_floats_name_the_key(value: float, shown: str) -> None:
    with pytest.raises(iommulab.ConfigError, match=rf'invalid value "{shown}" for `duration_s`'):
        iommulab.run({"duration_s": value})
    with pytest.raises(iommulab.ConfigError, match="hardware.cost_overrides.ghz"):
        iommulab.run({"hardware": {"cost_overrides": {"ghz": value}}, "workload": {"ios": 10}})


def test_large_ints_are_exact_or_refused_by_key(tmp_path: Path) -> None:
    # Plain u64 keys take up to 2**64-1 (reserved byte addresses, say).
    top = 2**64 - 1
    iommulab.validate_config({"reserved": [{"start": top - 4095, "end": top}]})
    # A workload's keys go through the core's TOML table (signed 64-bit): 2**63-1 at most,
    # and past it an error naming the key, not "u64 value was too large" alone.
    r = iommulab.run({"workload": {"ios": 10, "seed": 2**63 - 1}})
    assert r.seed == 2**63 - 1
    with pytest.raises(iommulab.ConfigError, match=r"key `workload.seed`: an integer above 2\*\*63-1"):
        iommulab.run({"workload": {"ios": 10, "seed": 2**63}})
    # A workload dict of its own (trace generation) is not that table: it takes them all.
    assert iommulab.trace.generate({"kind": "block", "seed": 2**63}, 10, tmp_path / "g.iot") >= 10
    with pytest.raises(iommulab.ConfigError, match="requestz"):
        iommulab.trace.generate({"kind": "block", "seed": 2**63, "requestz": 1}, 10, tmp_path / "h.iot")
    # Beyond 64 bits: refused by key before the schema.
    with pytest.raises(iommulab.ConfigError, match=r'"18446744073709551616" for `workload.seed`'):
        iommulab.run({"workload": {"ios": 10, "seed": 2**64}})
    with pytest.raises(iommulab.ConfigError, match="workload.seed"):
        _native.run_batch([{"workload": {"ios": 10, "seed": -(2**70)}}])


def test_none_in_a_list_names_the_key() -> None:
    with pytest.raises(iommulab.ConfigError, match=r"`reserved\[0\]`"):
        iommulab.run({"reserved": [None]})


def test_a_value_of_another_type_names_the_key() -> None:
    with pytest.raises(iommulab.ConfigError, match=r"`workload.ios`.*object"):
        iommulab.run({"workload": {"ios": object()}})


def test_run_batch_of_toml_text_says_it_takes_dicts() -> None:
    with pytest.raises(TypeError, match=r"configs\[1\] is a str, not a dict"):
        _native.run_batch([{"workload": {"ios": 1}}, 'configuration = "strict"'])  # type: ignore[list-item]


def test_validate_config_is_exported() -> None:
    iommulab.validate_config({"configuration": "strict"})
    with pytest.raises(iommulab.ConfigError, match="strictx"):
        iommulab.validate_config({"configuration": "strictx"})


# --- check/validate DMA masks: the CLI's bits ----------------------------------------------

BUGGY = """\
 fio-3310 [002] ..... 8123.500001: dma_map_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=fff00000 size=4096 phys_addr=12c400000 attrs=
 fio-3310 [002] ..... 8123.500002: dma_unmap_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=fff00000 size=4096 attrs=
"""


def test_dma_mask_int_is_bits_as_the_cli(tmp_path: Path) -> None:
    p = tmp_path / "t.txt"
    p.write_text(BUGGY)
    dev = "0000:01:00.0"
    # 0xfff00000 + 4 KiB fits 32 bits (the CLI's `--dma-mask DEV=32`) but not 28.
    assert "beyond_dma_mask" not in iommulab.check(p, dma_masks={dev: 32})["by_kind"]
    assert iommulab.check(p, dma_masks={dev: 28})["by_kind"]["beyond_dma_mask"] == 1
    assert iommulab.check(p, dma_masks={dev: "0xfffffff"})["by_kind"]["beyond_dma_mask"] == 1
    assert "beyond_dma_mask" not in iommulab.check(p, dma_masks={dev: "32"})["by_kind"]
    assert "beyond_dma_mask" not in iommulab.check(p, dma_masks={dev: 64})["by_kind"]
    for bad in (0, 65, -1, 0xFFFFFFFF, "0x0", "0xzz", "", 2**80, 1.5, True):
        with pytest.raises(iommulab.ConfigError, match=r'dma_masks\["0000:01:00.0"\].*1 to 64'):
            iommulab.check(p, dma_masks={dev: bad})  # type: ignore[dict-item]
        with pytest.raises(iommulab.ConfigError, match=r'dma_masks\["0000:01:00.0"\]'):
            iommulab.validate(p, dma_masks={dev: bad})  # type: ignore[dict-item]


# --- replay: the CLI's defaults, and no keys it ignores ------------------------------------


def test_replay_refuses_keys_it_does_not_use(trace_path: Path) -> None:
    for cfg in ({"duration_s": 0.001}, {"workload": {"ios": 5}}, "duration_s = 0.5", {"configuration": "strict", "workload": {"kind": "block"}}):
        with pytest.raises(iommulab.ConfigError, match=r"`(duration_s|workload)`.*the trace is the workload"):
            iommulab.replay(trace_path, cfg)
    # None is "absent", as everywhere.
    assert iommulab.replay(trace_path, {"configuration": "strict", "duration_s": None}).config == "strict"


def test_replay_config_is_the_clis_config_file(trace_path: Path) -> None:
    # Without a config: `iommulab replay TRACE` (linux-lazy on modern); with one: `--config-file`
    # (the schema's defaults for the keys it leaves out: the same preset, one for every entry point).
    assert (iommulab.replay(trace_path).config, iommulab.replay(trace_path).cost_preset) == ("linux-lazy", "modern")
    r = iommulab.replay(trace_path, {"configuration": "strict"})
    assert (r.config, r.cost_preset) == ("strict", "modern")


# --- bench: the CLI's rules ----------------------------------------------------------------


def test_bench_base_with_a_configuration_is_one_run_as_config_file() -> None:
    rs = iommulab.bench(ops=100, base={"configuration": "strict"})
    assert [r.config for r in rs] == ["strict"]
    mech = {"translation": "iommu", "allocator": "bitmap", "flush": {"kind": "per_lap"}}
    rs = iommulab.bench(ops=100, base={"mechanisms": mech})
    assert [(r.config, r.allocator) for r in rs] == [("custom", "bitmap")]
    rs = iommulab.bench(ops=100, base='configuration = "modern"\n')
    assert [r.config for r in rs] == ["modern"]
    # configs= still names the runs; a base without either runs all six.
    assert [r.config for r in iommulab.bench(configs=["disabled", "strict"], ops=100, base={"configuration": "modern"})] == ["disabled", "strict"]
    assert len(iommulab.bench(ops=50, base={"workload": {"io_size": 512}})) == 6


def test_bench_refuses_what_the_cli_refuses() -> None:
    for repeats in (0, 101, -1):
        with pytest.raises(ValueError, match=rf"repeats must be an integer from 1 to 100, not {repeats}"):
            iommulab.bench(configs=["strict"], ops=10, repeats=repeats)
    with pytest.raises(iommulab.ConfigError, match="`configs`.*at least one of"):
        iommulab.bench(configs=[], ops=10)
    with pytest.raises(ValueError, match="ops must be an integer from 1"):
        iommulab.bench(configs=["strict"], ops=0)
    with pytest.raises(iommulab.ConfigError, match=r'"18446744073709551615" for `seed`'):
        iommulab.bench(configs=["strict"], ops=10, seed=2**64 - 1, repeats=2)
    with pytest.raises(iommulab.ConfigError, match="`workload.seed`"):
        iommulab.bench(configs=["strict"], repeats=3, base={"workload": {"ios": 10, "seed": 2**64 - 2}})
    assert [r.seed for r in iommulab.bench(configs=["strict"], ops=10, seed=2**64 - 2, repeats=2)] == [2**64 - 2, 2**64 - 1]


# --- Unsigned arguments --------------------------------------------------------------------


def test_negative_unsigned_arguments_are_value_errors_naming_them(trace_path: Path, tmp_path: Path) -> None:
    calls = {
        "max_quota": lambda: iommulab.mrc(trace_path, max_quota=-1),
        "quotas": lambda: iommulab.mrc(trace_path, quotas=[4, -1]),
        "events": lambda: iommulab.trace.generate("block", -1, tmp_path / "a.iot"),
        "seed": lambda: iommulab.trace.generate("block", 10, tmp_path / "b.iot", seed=-1),
        "max_findings": lambda: iommulab.check(trace_path, max_findings=-1),
        "max_mismatches": lambda: iommulab.validate(trace_path, max_mismatches=-1),
        "start_pfn": lambda: iommulab.validate(trace_path, start_pfn=-1),
        "cpus": lambda: iommulab.validate(trace_path, cpus=-2),
        "ops": lambda: iommulab.bench(configs=["strict"], ops=-5),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=rf"^{name} must be an integer from"):
            call()
    with pytest.raises(ValueError, match=r"^max_quota must be an integer from 0 to \d+, not 1267650600228229401496703205376$"):
        iommulab.mrc(trace_path, max_quota=2**100)
    # NumPy integers are ints here too.
    assert iommulab.mrc(trace_path, quotas=np.array([1, 4]))["quota"] == [1, 4]  # type: ignore[arg-type]


# --- Traces --------------------------------------------------------------------------------


def test_truncated_compressed_trace_is_a_trace_error(trace_path: Path, tmp_path: Path) -> None:
    data = gzip.compress(trace_path.read_bytes())
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(data[: len(data) // 2])
    for call in (iommulab.trace.stats, iommulab.replay, iommulab.mrc, iommulab.check):
        with pytest.raises(iommulab.TraceError):
            call(cut)


def test_validate_of_a_non_ftrace_file_says_what_it_is(trace_path: Path) -> None:
    with pytest.raises(iommulab.TraceError, match=r"needs the iommu: events' CPUs and lines\), and this file is an iommulab CSV trace$"):
        iommulab.validate(trace_path)


def test_generate_writes_at_least_events_and_closes_the_trace(tmp_path: Path) -> None:
    p = tmp_path / "g.csv"
    n = iommulab.trace.generate("netperf-send", 10, p, seed=1)
    s = iommulab.trace.stats(p)
    assert n == s["events"] >= 10
    assert s["dma_api"]["maps"] == s["dma_api"]["unmaps"]


# --- RunResult as a value ------------------------------------------------------------------


def test_run_result_pickles_copies_and_compares() -> None:
    r = iommulab.run(TINY)
    for back in (pickle.loads(pickle.dumps(r)), copy.deepcopy(r), copy.copy(r)):
        assert type(back) is iommulab.RunResult
        assert back == r and back.to_dict() == r.to_dict() and back.seed == r.seed
    (big,) = iommulab.bench(configs=["strict"], ops=10, seed=2**64 - 1)
    assert pickle.loads(pickle.dumps(big)).seed == 2**64 - 1
    other = iommulab.run({"configuration": "default", "workload": {"ios": 50}})
    assert other != r and r != "strict"
    assert iommulab.RunResult.from_json(__import__("json").dumps(r.to_dict())) == r


def test_run_results_cross_processes() -> None:
    with ProcessPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(iommulab.run, [TINY, {"configuration": "modern", "workload": {"ios": 50}}]))
    assert [r.config for r in results] == ["strict", "modern"]
    assert results[0].ops == 50
