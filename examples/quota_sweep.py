# %% [markdown]
# # Eviction policy × quota on a DMA trace
#
# The guest map cache of on-demand DMA mapping (Yassour et al., SYSTOR 2010) holds at most
# `quota` guest pages mapped in the host IOMMU. This notebook takes a trace (a recorded one,
# or a generated apache-sendfile trace), computes the hit-rate curve of each eviction policy over
# every quota with `iommulab.mrc`, and plots them (the paper's Figures 3–4).
#
# Run it as a script (`python examples/quota_sweep.py [TRACE]`) or cell by cell in an editor
# that understands `# %%`.

# %%
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pandas as pd

import iommulab
from iommulab import plots

out = Path("results/examples")
out.mkdir(parents=True, exist_ok=True)

# %% Load a trace, or generate one with the library.
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    trace = Path(sys.argv[1])
else:
    trace = out / "apache-sendfile.iot"
    if not trace.exists():
        iommulab.trace.generate("apache-sendfile", 20_000, trace, seed=7)
stats = iommulab.trace.stats(trace)
print(f"{trace}: {stats['events']} records, {stats['dma_api']['maps']} DMA-API maps")

# %% One curve per policy over every quota, on the page sequence (the paper's method: every
# page map an independent reference; LRU and OPT in one pass), plus LRU on the pinned map cache
# (pages stay pinned while their DMA is in flight), which hits less at small quotas.
policies = ["fifo", "lru", "opt", "prefetch"]
curves = [iommulab.mrc(trace, p) for p in policies] + [iommulab.mrc(trace, "lru", pinning=True)]
for c in curves:
    view = "pinned" if c["pinning"] else "page sequence"
    print(f"{c['policy']:>8} ({view}): {c['method']}, {c['distinct_pages']} distinct pages")

# %% The same numbers as a DataFrame: curve × quota.
df = pd.concat(
    [
        pd.DataFrame(
            {
                "curve": c["policy"] + (" pinned" if c["pinning"] else ""),
                "quota": c["quota"],
                "hit_rate": c["hit_rate"],
            }
        )
        for c in curves
    ],
    ignore_index=True,
)
table = df.pivot(index="quota", columns="curve", values="hit_rate")
print(table.iloc[:: max(1, len(table) // 40)].round(3).to_string())

# %% Plot and save.
ax = plots.plot_mrc(curves, relative=True, title=f"map-cache hit rate: {trace.name}")
png = out / "quota_sweep.png"
ax.figure.savefig(png, dpi=120)
print(f"wrote {png}")
