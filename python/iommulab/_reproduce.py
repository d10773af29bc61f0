"""Reproductions of published results (`iommulab reproduce` from Python)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, NamedTuple, Optional, Union, overload

import pandas as pd

from iommulab import _native
from iommulab.results import to_frame

#: The reproductions that exist, in the order `"all"` runs them.
REPRODUCTIONS = ("fujita2008", "yassour2010", "benyehuda2007", "iosup", "expether", "peleg2015")


class ReproProgress(NamedTuple):
    """A progress report: `done` of `total` steps of reproduction `name` finished; `step`
    names the one starting (`"done"` at the end)."""

    name: str
    step: str
    done: int
    total: int


@dataclass(frozen=True)
class Reproduction:
    """One reproduction's results.

    `results` is the content of its `results.json` (a list of per-configuration aggregates
    for `fujita2008`, a dict with `workloads` and `sensitivity` for `yassour2010`, the whole
    results object for `iosup`, `expether` and `peleg2015`); `paper`
    holds the numbers the paper published; `tables` the report's tables as DataFrames (the
    CSV files' rows at full precision — `figure4` is `results.csv`, `hit_rate` and `cpu` the
    Yassour CSVs, `runs` and `groups` for IOSUP, `runs` and `sweep` for ExpEther, `runs` for Peleg et al. — plus `runs`, `prices` (each `vtd-2008` price and its source), `sweep` (the
    sensitivity sweep) and `dma_paths` (Figure 4 on `dma_map_sg` and `dma_map_single`) for
    Fujita & Mori and
    `prefetch`, `protection` and `sensitivity` for Yassour et al.); `claims` every claim of
    the paper judged on this run, one row each (`id`, `claim`, `section`, `published`,
    `inferred`, `ours`, `verdict`, `rule`, `why`; also `tables["claims"]` and
    `results.json`'s `claims`); `data` everything the library returned. With `out`,
    `report` is the markdown page written and `files` every file of the report folder.
    """

    name: str
    title: str
    quick: bool
    results: Any
    paper: Any
    tables: dict[str, pd.DataFrame]
    data: dict[str, Any]
    claims: pd.DataFrame = field(default_factory=pd.DataFrame)
    report: Optional[Path] = None
    files: list[Path] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Everything the library returned (`results` is `results.json`'s content)."""
        return self.data


def _tqdm_progress() -> Optional[Callable[[str, str, int, int], None]]:
    """One tqdm bar per reproduction, or `None` without tqdm."""
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency, but optional here
        return None
    bars: dict[str, Any] = {}

    def report(name: str, step: str, done: int, total: int) -> None:
        bar = bars.get(name)
        if bar is None:
            for other in bars.values():
                other.close()
            bar = bars[name] = tqdm(total=total, desc=name, unit="step", leave=False)
        bar.update(done - bar.n)
        bar.set_postfix_str(step, refresh=False)
        if done >= total:
            bar.close()

    return report


def _native_progress(
    progress: Union[bool, Callable[[ReproProgress], object], None],
) -> Optional[Callable[[str, str, int, int], object]]:
    if progress is True:
        return _tqdm_progress()
    if not progress:
        return None
    user = progress
    return lambda name, step, done, total: user(ReproProgress(name, step, done, total))


def _reproduction(item: dict[str, Any], out: Optional[Path]) -> Reproduction:
    data: dict[str, Any] = item["data"]
    tables = {name: pd.DataFrame(cols) for name, cols in item["tables"].items()}
    if "runs" in data and "runs" not in tables:
        tables["runs"] = to_frame(data["runs"])
    return Reproduction(
        name=item["name"],
        title=item["title"],
        quick=item["quick"],
        # benyehuda2007's results.json is the whole of `data`; its paper's claims `published`.
        results=data.get("results", data),
        paper=data.get("paper", data.get("published")),
        tables=tables,
        data=data,
        claims=tables["claims"],
        report=Path(item["report"]) if item["report"] is not None else None,
        files=[out / f for f in item["files"]] if out is not None else [],
    )


@overload
def reproduce(
    name: Literal["fujita2008", "yassour2010", "benyehuda2007", "iosup", "expether", "peleg2015"],
    quick: bool = False,
    out: Union[str, os.PathLike[str], None] = None,
    progress: Union[bool, Callable[[ReproProgress], object], None] = True,
) -> Reproduction: ...
@overload
def reproduce(
    name: Literal["all"],
    quick: bool = False,
    out: Union[str, os.PathLike[str], None] = None,
    progress: Union[bool, Callable[[ReproProgress], object], None] = True,
) -> dict[str, Reproduction]: ...
@overload
def reproduce(
    name: str,
    quick: bool = False,
    out: Union[str, os.PathLike[str], None] = None,
    progress: Union[bool, Callable[[ReproProgress], object], None] = True,
) -> Union[Reproduction, dict[str, Reproduction]]: ...
def reproduce(
    name: str,
    quick: bool = False,
    out: Union[str, os.PathLike[str], None] = None,
    progress: Union[bool, Callable[[ReproProgress], object], None] = True,
) -> Union[Reproduction, dict[str, Reproduction]]:
    """Reruns a paper's experiments, as `iommulab reproduce NAME [--quick] [--out OUT]`.

    `name` is `"fujita2008"`, `"yassour2010"`, `"benyehuda2007"`, `"iosup"`, `"expether"`, `"peleg2015"` or `"all"` (a dict of
    all, by name). With
    `out`, writes exactly the CLI's files: `OUT/<name>/` (results.json, CSV, SVG/PNG figures,
    README.md) and, for `"all"`, `OUT/index.md` and `OUT/index.html` (one self-contained page over both: figures inline,
    tables, explanations, links to the files). `progress`: `True` for
    a tqdm bar, `False` for none, or a callable receiving a `ReproProgress` before each step
    (an exception it raises stops the run and propagates, as does Ctrl-C). The run releases
    the GIL.
    """
    out_path = Path(out) if out is not None else None
    raw = _native.reproduce(name, quick=quick, out=out_path, progress=_native_progress(progress))
    runs = {item["name"]: _reproduction(item, out_path) for item in raw["reproductions"]}
    return runs if name == "all" else runs[name]


__all__ = ["REPRODUCTIONS", "ReproProgress", "Reproduction", "reproduce"]
