"""matplotlib helpers over sweep DataFrames and hit-rate curves (matplotlib is imported on
first use, so `import iommulab` works without it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Optional

import pandas as pd

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _axes(ax: Optional[Axes]) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=(7, 4), layout="constrained")
    return new


def plot_bars(df: pd.DataFrame, x: str, y: str, hue: Optional[str] = None, ax: Optional[Axes] = None, title: Optional[str] = None) -> Axes:
    """Bars of `y` per value of `x` (mean over repeats), grouped by `hue` if given."""
    ax = _axes(ax)
    if hue is None:
        df.groupby(x, sort=False)[y].mean().plot.bar(ax=ax, rot=0)
    else:
        df.pivot_table(index=x, columns=hue, values=y, aggfunc="mean", sort=False).plot.bar(ax=ax, rot=0)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if title:
        ax.set_title(title)
    return ax


def plot_curves(df: pd.DataFrame, x: str, y: str, hue: Optional[str] = None, ax: Optional[Axes] = None, marker: str = "o", title: Optional[str] = None, logx: bool = False) -> Axes:
    """One line of `y` against `x` per value of `hue` (mean over repeats)."""
    ax = _axes(ax)
    groups: Iterable[tuple[Any, pd.DataFrame]] = df.groupby(hue, sort=False) if hue else [(y, df)]
    for name, g in groups:
        line = g.groupby(x)[y].mean().sort_index()
        ax.plot(line.index.to_numpy(), line.to_numpy(), marker=marker, label=str(name))
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if logx:
        ax.set_xscale("log")
    if hue:
        ax.legend(title=hue)
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return ax


def plot_mrc(curves: Iterable[Mapping[str, Any]], ax: Optional[Axes] = None, relative: bool = False, title: Optional[str] = None) -> Axes:
    """Hit rate against quota for curves from `iommulab.mrc`, one line per policy.
    `relative=True` plots the quota as a fraction of the trace's distinct pages (S1.9's axes)."""
    ax = _axes(ax)
    for c in curves:
        q = [v / max(1, c["distinct_pages"]) for v in c["quota"]] if relative else c["quota"]
        view = "pinned" if c.get("pinning") else "page sequence"
        ax.plot(q, c["hit_rate"], label=f"{c['policy']} ({view})")
    ax.set_xlabel("quota / distinct pages" if relative else "quota (pages)")
    ax.set_ylabel("hit rate")
    ax.set_ylim(0, 1.02)
    ax.legend()
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    return ax


__all__ = ["plot_bars", "plot_curves", "plot_mrc"]
