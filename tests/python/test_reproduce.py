"""`iommulab.reproduce`: the library's reproductions from Python, checked against the quick
golden outputs that `iommulab reproduce all --quick` wrote (crates/iommulab-report/tests/golden)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import iommulab
from iommulab.results import MEASURED_COLUMNS

GOLDEN = Path(__file__).resolve().parents[2] / "crates" / "iommulab-report" / "tests" / "golden" / "quick"


def without_measured(v: Any) -> Any:
    """`v` without the wall-clock fields (the only ones that differ between two runs)."""
    if isinstance(v, dict):
        return {k: without_measured(x) for k, x in v.items() if k not in MEASURED_COLUMNS}
    if isinstance(v, list):
        return [without_measured(x) for x in v]
    return v


@pytest.fixture(scope="module")
def quick_all(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, iommulab.Reproduction]]:
    """Both quick reproductions, written to a folder (with the tqdm bar)."""
    out = tmp_path_factory.mktemp("results")
    return out, iommulab.reproduce("all", quick=True, out=out, progress=True)


def test_fujita_default_is_the_golden_number(quick_all: tuple[Path, dict[str, iommulab.Reproduction]]) -> None:
    r = quick_all[1]["fujita2008"]
    assert r.name == "fujita2008" and r.quick
    golden = json.loads((GOLDEN / "fujita2008" / "results.json").read_text())["results"]
    ours = {a["config"]: a for a in r.results}
    gold = {a["config"]: a for a in golden}
    # Exactly the same float: the model is deterministic, only wall-clock fields vary.
    assert ours["default"]["relative_to_disabled"] == gold["default"]["relative_to_disabled"]
    assert 0.79 < ours["default"]["relative_to_disabled"] < 0.82
    assert without_measured(r.results) == without_measured(golden)
    fig4 = r.tables["figure4"].set_index("config")
    assert fig4.loc["default", "relative_to_disabled"] == gold["default"]["relative_to_disabled"]
    assert fig4.loc["bitmap", "paper_relative_to_disabled"] == 0.87
    assert fig4["paper_relative_to_disabled"].isna().loc["modern"]
    # The paper's numbers come with the data.
    assert r.paper["default_iops"] == 124_337.2
    assert [p["config"] for p in r.paper["figure4"]] == list(fig4.index)
    # runs.json as a DataFrame: 6 configurations x 2 seeds, then 6 malicious runs.
    runs = r.tables["runs"]
    assert len(runs) == 18 and "stats.iommu.iotlb.hits" in runs.columns


def test_claims_are_a_dataframe_with_the_golden_verdicts(
    quick_all: tuple[Path, dict[str, iommulab.Reproduction]],
) -> None:
    verdicts = {"reproduced", "partly", "not reproduced", "input — not tested"}
    for name, r in quick_all[1].items():
        golden = json.loads((GOLDEN / name / "results.json").read_text())["claims"]
        claims = r.claims
        assert list(claims.columns) == ["id", "claim", "section", "published", "inferred", "ours", "verdict", "rule", "why"]
        assert list(claims["id"]) == [c["id"] for c in golden], name
        assert list(claims["verdict"]) == [c["verdict"] for c in golden], name
        assert set(claims["verdict"]) <= verdicts
        assert claims["id"].is_unique and (claims["rule"].str.len() > 0).all(), name
        assert r.tables["claims"].equals(claims)


@pytest.mark.parametrize(
    "folder", [GOLDEN, Path(__file__).resolve().parents[2] / "docs" / "reproductions"], ids=["quick", "committed"]
)
def test_every_csv_loads_into_its_header_columns(folder: Path) -> None:
    import csv as csvmod

    files = sorted(folder.glob("*/*.csv"))
    assert files, folder
    for f in files:
        with f.open(newline="") as fh:
            rows = list(csvmod.reader(fh))
        header = rows[0]
        assert all(len(row) == len(header) for row in rows[1:]), f
        df = pd.read_csv(f)
        assert list(df.columns) == header, f
        assert isinstance(df.index, pd.RangeIndex) and len(df) == len(rows) - 1, f


def test_fujita_table_has_the_csv_columns_at_full_precision(
    quick_all: tuple[Path, dict[str, iommulab.Reproduction]],
) -> None:
    fig4 = quick_all[1]["fujita2008"].tables["figure4"]
    csv = pd.read_csv(GOLDEN / "fujita2008" / "results.csv")
    assert list(fig4.columns) == list(csv.columns)
    deterministic = [c for c in csv.columns if c not in MEASURED_COLUMNS and pd.api.types.is_numeric_dtype(csv[c])]
    # The CSV rounds (iops to 0.1, ratios to 1e-4); the table does not.
    np.testing.assert_allclose(fig4[deterministic].to_numpy(float), csv[deterministic].to_numpy(float), atol=0.051)


def test_yassour_results_are_the_golden_ones(quick_all: tuple[Path, dict[str, iommulab.Reproduction]]) -> None:
    r = quick_all[1]["yassour2010"]
    golden = json.loads((GOLDEN / "yassour2010" / "results.json").read_text())
    # results.json holds the results and, beside them, the judged claims.
    assert r.results == {k: v for k, v in golden.items() if k != "claims"}
    assert list(r.claims["verdict"]) == [c["verdict"] for c in golden["claims"]]
    netperf = next(w for w in r.results["workloads"] if w["workload"] == "netperf-send")
    assert netperf["working_set_pages"] == 69
    for name in ("hit_rate", "cpu"):
        csv = pd.read_csv(GOLDEN / "yassour2010" / f"{name}.csv")
        df = r.tables[name]
        assert list(df.columns) == list(csv.columns) and len(df) == len(csv)
        num = [c for c in csv.columns if pd.api.types.is_numeric_dtype(csv[c])]
        np.testing.assert_allclose(df[num].to_numpy(float), csv[num].to_numpy(float), atol=0.051)
    prot = r.tables["protection"]
    stale = prot.set_index(["workload", "strategy", "cache_only"])["stale_accesses"]
    assert stale["netperf-send", "single-use", "all"] == 0
    assert stale["netperf-send", "on-demand", "all"] > 0
    assert [f["id"] for f in r.paper][:2] == ["lru_fifo_low_quota", "opt_batch_at_10"]


def test_iosup_tables_and_headline(quick_all: Any) -> None:
    r = quick_all[1]["iosup"]
    assert r.name == "iosup" and r.quick
    runs = r.tables["runs"]
    assert set(runs["group"]) == {"cache-disabled", "cache-pre-enabled", "cache-dynamic-enabled"}
    groups = r.tables["groups"].set_index("group")
    assert groups.loc["cache-pre-enabled", "flushes_per_minute"] < groups.loc["cache-disabled", "flushes_per_minute"] / 100
    golden = json.loads((GOLDEN / "iosup" / "results.json").read_text())
    assert r.results["alloc_change"] == golden["alloc_change"]


def test_expether_runs_and_receive_limit(quick_all: Any) -> None:
    r = quick_all[1]["expether"]
    assert r.name == "expether" and r.quick
    runs = r.tables["runs"]
    assert {"direction", "hosts", "gbps"} <= set(runs.columns)
    fig9 = runs[(runs["figure"] == "9") & (runs["qos"] == "false")].set_index(["direction", "hosts"])
    # Send is the wire's goodput; receive is N reads per round trip, below it.
    assert abs(fig9.loc[("send", 3), "gbps"] - 9.90) < 0.01
    assert fig9.loc[("receive", 1), "gbps"] < fig9.loc[("send", 1), "gbps"]
    assert list(r.paper["receive_gbps"]) == [7.7, 6.1, 6.0]
    assert r.results["read_limit"]["reads_to_remove_limit"] == 12
    golden = json.loads((GOLDEN / "expether" / "results.json").read_text())
    assert r.results["runs"][0]["gbps"] == golden["runs"][0]["gbps"]


def test_out_writes_the_cli_files(quick_all: tuple[Path, dict[str, iommulab.Reproduction]]) -> None:
    out, runs = quick_all
    assert list(runs) == list(iommulab.REPRODUCTIONS)
    for r in runs.values():
        assert r.report == out / r.name / "README.md"
        assert r.files and all(f.is_file() for f in r.files)
        on_disk = sorted(p for p in (out / r.name).iterdir())
        assert on_disk == sorted(r.files)
    # Deterministic files are byte-for-byte the CLI's.
    for f in ("index.md", "yassour2010/results.json", "yassour2010/cpu.csv", "yassour2010/README.md"):
        assert (out / f).read_bytes() == (GOLDEN / f).read_bytes(), f
    # index.html embeds measured numbers (not golden): one self-contained page over both.
    html = (out / "index.html").read_text()
    assert "Not rendered yet" not in html
    for name in runs:
        assert f'<section id="{name}">' in html
    assert html.count('src="data:image/svg+xml;base64,') == sum(
        1 for r in runs.values() for f in r.files if f.suffix == ".svg"
    )
    fujita = json.loads((out / "fujita2008" / "results.json").read_text())["results"]
    golden = json.loads((GOLDEN / "fujita2008" / "results.json").read_text())["results"]
    assert without_measured(fujita) == without_measured(golden)
    assert (out / "fujita2008" / "figure4.png").read_bytes().startswith(b"\x89PNG")
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]


def test_progress_callback_sees_every_step() -> None:
    seen: list[iommulab.ReproProgress] = []
    r = iommulab.reproduce("yassour2010", quick=True, progress=seen.append)
    assert r.report is None and r.files == []
    total = seen[0].total
    assert [p.done for p in seen] == list(range(total + 1))
    assert all(p.name == "yassour2010" and p.total == total for p in seen)
    assert seen[-1].step == "done" and seen[0].step.startswith("netperf-send")


class Stop(Exception):
    pass


def test_an_exception_in_the_callback_stops_the_run() -> None:
    calls = []

    def stop_at_third(p: iommulab.ReproProgress) -> None:
        calls.append(p)
        if p.done == 2:
            raise Stop("enough")

    with pytest.raises(Stop, match="enough"):
        iommulab.reproduce("fujita2008", quick=True, progress=stop_at_third)
    assert len(calls) == 3


def test_unknown_reproduction_names_the_known_ones() -> None:
    with pytest.raises(iommulab.ConfigError, match="fujita2008, yassour2010, benyehuda2007, iosup, expether, peleg2015, all"):
        iommulab.reproduce("smith1999")


def test_an_unwritable_out_is_an_os_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OSError, match="cannot create"):
        iommulab.reproduce("yassour2010", quick=True, out=blocker, progress=False)


def test_benyehuda2007_measures_the_options_of_s2_6() -> None:
    r = iommulab.reproduce("benyehuda2007", quick=True, progress=False)
    opts = r.tables["options"]
    streaming = opts[(opts["scenario"] == "dom0") & (opts["option"] == "streaming")].iloc[0]
    assert abs(float(streaming["hypercalls_per_pair"]) - 2.0) < 0.001
    assert int(streaming["late_probes_through"]) == 0
    never_free = opts[opts["option"] == "never-free"].iloc[0]
    assert int(never_free["late_probes_through"]) == int(never_free["late_probes"]) > 0
    pre = opts[opts["option"] == "pre-allocate"].iloc[0]
    assert int(pre["foreign_accesses_after_flips"]) > 0
    mc = r.tables["multicalls"]
    assert mc["workload"].nunique() == 3
    assert len(r.results["options"]) == 7
