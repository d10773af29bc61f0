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
print(f"{trace}: {stats['events']} events, {stats['maps']} maps")

# %% One curve per policy over every quota (LRU and OPT in one pass when the stream allows).
policies = ["fifo", "lru", "opt", "prefetch"]
curves = [iommulab.mrc(trace, p) for p in policies]
for c in curves:
    print(f"{c['policy']:>8}: {c['method']}, {c['distinct_pages']} distinct pages, exact={c['exact']}")

# %% The same numbers as a DataFrame: policy × quota.
df = pd.concat(
    [pd.DataFrame({"policy": c["policy"], "quota": c["quota"], "hit_rate": c["hit_rate"]}) for c in curves],
    ignore_index=True,
)
print(df.pivot(index="quota", columns="policy", values="hit_rate").iloc[:: max(1, len(df) // 40)].round(3).to_string())

# %% Plot and save.
ax = plots.plot_mrc(curves, relative=True, title=f"map-cache hit rate: {trace.name}")
png = out / "quota_sweep.png"
ax.figure.savefig(png, dpi=120)
print(f"wrote {png}")
