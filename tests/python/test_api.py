"""The Python API: runs, replays, traces, hit-rate curves and the exception tree. Doubles as
the tutorial."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import iommulab

SMALL = {"configuration": "strict", "workload": {"ios": 500}}


def test_run_returns_attributes_and_dict() -> None:
    r = iommulab.run(SMALL)
    assert r.config == "strict"
    assert r.ops == 500
    assert r.iops > 0
    d = r.to_dict()
    assert d["iops"] == r.iops
    assert d["stats"]["iommu"] == r.stats["iommu"]  # __getattr__ over the dict
    assert r.peak_metadata_bytes == d["peak_metadata_bytes"]
    with pytest.raises(AttributeError):
        _ = r.no_such_field


def test_cpus_runs_the_many_core_model() -> None:
    # One tree lock and strict invalidation on 8 CPUs against magazines + flush queue: the
    # per-core results say which resource the CPUs queue for.
    def on(configuration: str, cpus: int) -> dict:
        r = iommulab.run(
            {"configuration": configuration, "workload": {"ios": 2000 * cpus}}, cpus=cpus
        )
        assert r.cores is not None and r.cores == r.to_dict()["cores"]
        return r.cores

    one, eight = on("pre-4.7-strict", 1), on("pre-4.7-strict", 8)
    assert eight["cpus"] == 8 and eight["ios_per_cpu_min"] == eight["ios_per_cpu_max"] == 2000
    assert one["wait_cycles_per_io"] == 0
    assert eight["wait_cycles_per_io"] > 0
    assert eight["tree_lock"]["hold_cycles"] > 0 and eight["tree_lock"]["acquisitions"] > 0
    assert eight["invalidation"]["batches"] > 0
    strict_speedup = eight["throughput"] / one["throughput"]
    lazy_speedup = on("linux-lazy", 8)["throughput"] / on("linux-lazy", 1)["throughput"]
    assert lazy_speedup > strict_speedup
    assert iommulab.run(SMALL).cores is None
    with pytest.raises(ValueError, match="cpus"):
        iommulab.run(SMALL, cpus=0)


def test_dict_and_toml_configs_give_the_same_run() -> None:
    toml = 'configuration = "strict"\n[workload]\nios = 500\n'
    a = iommulab.run(SMALL).to_dict()
    b = iommulab.run(toml).to_dict()
    for k in iommulab.results.MEASURED_COLUMNS:
        a.pop(k), b.pop(k)
    assert a == b


def test_default_config_runs() -> None:
    assert iommulab.run({"workload": {"ios": 10}}).config == "default"


def test_none_values_mean_absent() -> None:
    r = iommulab.run({"configuration": "modern", "duration_s": None, "workload": {"ios": 10}})
    assert r.ops == 10


def test_wrong_key_names_the_key_and_the_allowed_ones() -> None:
    with pytest.raises(iommulab.ConfigError) as e:
        iommulab.run({"configuraton": "strict"})
    msg = str(e.value)
    assert "configuraton" in msg and "`configuration`" in msg and "`workload`" in msg


def test_wrong_value_names_the_key_and_the_allowed_values() -> None:
    with pytest.raises(iommulab.ConfigError) as e:
        iommulab.run({"configuration": "fast"})
    msg = str(e.value)
    assert "configuration = \"fast\"" in msg and "strict-bitmap" in msg


def test_validation_error_is_the_cores_message() -> None:
    with pytest.raises(iommulab.ConfigError, match=r"invalid value \"2\" for `hardware.levels`: expected 3, 4 or 5"):
        iommulab.run({"hardware": {"levels": 2}})


def test_nested_cost_override_names_the_field() -> None:
    with pytest.raises(iommulab.ConfigError, match="hardware.cost_overrides.inv_pgae"):
        iommulab.run({"hardware": {"cost_overrides": {"inv_pgae": 1}}, "workload": {"ios": 1}})


def test_config_that_is_not_a_dict_or_string_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        iommulab.run(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "exc", [iommulab.ConfigError, iommulab.TraceError, iommulab.DmaError, iommulab.IovaError, iommulab.VirtError, iommulab.MapError]
)
def test_exceptions_are_iommulab_errors(exc: type[Exception]) -> None:
    assert issubclass(exc, iommulab.IommulabError)
    assert issubclass(iommulab.IommulabError, Exception)


def test_bench_fills_relative_to_disabled() -> None:
    rs = iommulab.bench(configs=["disabled", "strict"], ops=300, repeats=2)
    assert [r.config for r in rs] == ["disabled", "disabled", "strict", "strict"]
    assert [r.seed for r in rs[:2]] == [1, 2] or rs[0].seed + 1 == rs[1].seed
    assert all(r.relative_to_disabled is not None for r in rs)
    assert rs[2].relative_to_disabled < 1.0


def test_bench_unknown_configuration() -> None:
    with pytest.raises(iommulab.ConfigError, match="strict-bitmap"):
        iommulab.bench(configs=["fastest"], ops=1)


def test_trace_stats(trace_path: Path) -> None:
    s = iommulab.trace.stats(trace_path)
    assert s["dma_api"]["maps"] == s["dma_api"]["unmaps"] > 0
    assert s["devices"] == ["sim0"]
    assert [d["device"] for d in s["dma_api_by_device"]] == ["sim0"]
    assert s["iommu"] is None  # no iommu:map/unmap records in a generated trace


def test_missing_trace_is_file_not_found() -> None:
    # Decision: an I/O error is Python's own OSError subclass, with the CLI's message.
    with pytest.raises(FileNotFoundError, match="cannot read or write trace .*no-such.csv"):
        iommulab.trace.stats("/no/such/dir/no-such.csv")
    with pytest.raises(FileNotFoundError):
        iommulab.replay("/no/such/dir/no-such.csv")


def test_corrupt_trace_is_trace_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("this is not a trace\n1,2,3\n")
    with pytest.raises(iommulab.TraceError):
        iommulab.trace.stats(bad)


def test_replay_default_is_linux_lazy_on_modern(trace_path: Path) -> None:
    r = iommulab.replay(trace_path)
    assert (r.config, r.cost_preset) == ("linux-lazy", "modern")
    assert r.ops == iommulab.trace.stats(trace_path)["dma_api"]["maps"]


def test_replay_with_config_and_formats(trace_path: Path, block_trace: Path) -> None:
    a = iommulab.replay(trace_path, {"configuration": "strict"})
    assert a.config == "strict"
    assert a.iotlb_flushes > 0
    b = iommulab.replay(block_trace, 'configuration = "default"', format="native")
    assert b.ops > 0
    with pytest.raises(iommulab.ConfigError, match="format"):
        iommulab.replay(trace_path, format="pcap")


def test_generate_round_trips_through_native_and_csv(tmp_path: Path) -> None:
    for ext in ("csv", "iot", "csv.gz"):
        p = tmp_path / f"t.{ext}"
        n = iommulab.trace.generate({"kind": "pseudo-scsi", "seed": 5}, 400, p)
        assert iommulab.trace.stats(p)["events"] == n
    with pytest.raises(iommulab.ConfigError, match="uniform-random"):
        iommulab.trace.generate("nope", 10, tmp_path / "x.csv")


def test_mrc_is_monotone_and_reaches_the_working_set(trace_path: Path) -> None:
    lru = iommulab.mrc(trace_path, "lru")
    opt = iommulab.mrc(trace_path, {"kind": "opt"})
    for c in (lru, opt):
        assert c["quota"] == list(range(c["distinct_pages"] + 1))
        rates = c["hit_rate"]
        assert rates[0] == 0.0
        assert all(b >= a - 1e-12 for a, b in zip(rates, rates[1:]))
    # OPT is never worse than LRU at any quota.
    assert all(o >= l - 1e-12 for o, l in zip(opt["hit_rate"], lru["hit_rate"]))
    short = iommulab.mrc(trace_path, "fifo", max_quota=4)
    assert short["quota"] == [0, 1, 2, 3, 4] and not any(math.isnan(x) for x in short["hit_rate"])


def test_mrc_unknown_policy(trace_path: Path) -> None:
    with pytest.raises(iommulab.ConfigError, match="opt_batch"):
        iommulab.mrc(trace_path, "clock")


def test_mrc_default_is_the_page_sequence_and_pinning_is_the_map_cache(trace_path: Path) -> None:
    seq = iommulab.mrc(trace_path, quotas=[1, 4])
    pinned = iommulab.mrc(trace_path, "lru", pinning=True, quotas=[1, 4])
    full = iommulab.mrc(trace_path, max_quota=4)
    # A few listed quotas are simulated while the trace is read; the whole curve is one pass
    # over stack distances; both count the same hits.
    assert (seq["policy"], seq["pinning"], seq["method"]) == ("lru", False, "simulation")
    assert full["method"] == "stack_distance" and seq["hits"] == [full["hits"][q] for q in (1, 4)]
    assert (pinned["pinning"], pinned["method"]) == (True, "simulation")
    for key in ("policy_config", "exact", "maps", "distinct_pages", "max_pinned", "quota", "hits", "misses", "refused", "hit_rate"):
        assert key in seq and key in pinned, key
    # netperf keeps several buffers in flight: the pinned cache refuses maps at one page.
    assert pinned["max_pinned"] > 1 and pinned["refused"][0] > 0
    assert seq["refused"] == [0, 0]
    # At 4 pages the in-flight buffers crowd the pinned cache out (at 1 page it can hit more:
    # a page mapped again while in flight hits, and other maps are refused, not evicting it).
    assert pinned["hit_rate"][1] < seq["hit_rate"][1]


def test_mrc_quota_lists_and_limits(trace_path: Path) -> None:
    full = iommulab.mrc(trace_path, "opt")
    listed = iommulab.mrc(trace_path, "opt", quotas=(3, 0, 3, 2))
    assert listed["quota"] == [0, 2, 3]
    assert listed["hits"] == [full["hits"][q] for q in (0, 2, 3)]
    with pytest.raises(iommulab.ConfigError, match="not both"):
        iommulab.mrc(trace_path, max_quota=3, quotas=[1])
    with pytest.raises(iommulab.ConfigError, match="16777216"):
        iommulab.mrc(trace_path, max_quota=10**12)
    with pytest.raises(iommulab.ConfigError, match="at least one quota"):
        iommulab.mrc(trace_path, quotas=[])
    # The CLI's spelling and the TOML one name the same policy; parameters go in a dict.
    a = iommulab.mrc(trace_path, "opt-batch", quotas=[4])
    b = iommulab.mrc(trace_path, {"kind": "opt_batch", "batch": 32}, quotas=[4])
    assert a["hits"] == b["hits"] and a["policy"] == "opt_batch"


def test_mrc_of_the_committed_qemu_trace() -> None:
    trace = Path(__file__).resolve().parents[2] / "traces" / "qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst"
    seq = iommulab.mrc(trace, quotas=[8])
    pinned = iommulab.mrc(trace, pinning=True, quotas=[8])
    assert seq["maps"] == pinned["maps"] > 10_000
    assert pinned["hit_rate"][0] < seq["hit_rate"][0]
    with pytest.raises(FileNotFoundError):
        iommulab.mrc(trace.with_name("missing.txt"))


def test_version() -> None:
    assert iommulab.__version__ == iommulab.version()


def test_cost_overrides_from_a_dict_equal_toml() -> None:
    a = iommulab.run({"configuration": "strict", "hardware": {"cost_overrides": {"inv_page": 25000}}, "workload": {"ios": 300}})
    b = iommulab.run('configuration = "strict"\n[hardware.cost_overrides]\ninv_page = 25000\n[workload]\nios = 300\n')
    c = iommulab.run({"configuration": "strict", "workload": {"ios": 300}})
    assert a.modeled_ns_per_op == b.modeled_ns_per_op > c.modeled_ns_per_op
