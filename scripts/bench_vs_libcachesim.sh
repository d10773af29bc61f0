#!/usr/bin/env bash
# Whole-process speed of `iommulab mrc` against libCacheSim's C request loop on the same
# trace (BENCHMARKS.md records the runs). Writes one generated trace, its .oracleGeneral
# export, then for each policy runs, alternating, `iommulab mrc TRACE --policy P --quotas Q` and
# `scripts/libcachesim_crosscheck.py EXPORT Q --policies P` (libCacheSim's `process_trace`,
# the C loop over `cache->get`), REPEAT times each, and prints the median wall-clock seconds
# of each and their ratio. Both processes include reading the file; both print the same hits
# (checked). The acceptance ratio is whole process against whole process; libCacheSim's
# process also starts Python, imports the binding and counts the trace's objects, so the
# script prints, beside it, the median time inside `process_trace` alone (`loop s`) and
# iommulab's whole process against that (`vs loop`), the stricter comparison.
#
# Usage: scripts/bench_vs_libcachesim.sh [EVENTS] [QUOTA] [REPEAT]
#   EVENTS  events of the generated uniform-random trace (default 20000000)
#   QUOTA   the cache size in 4 KiB pages (default 65536)
#   REPEAT  runs per tool and policy (default 5)
# Needs: a release build (`cargo build --release -p iommulab-cli`) and `make py-deps` (.venv
# with libcachesim). Set IOMMULAB to another binary, TMPDIR for the files.
set -euo pipefail
EVENTS=${1:-20000000}
QUOTA=${2:-65536}
REPEAT=${3:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${IOMMULAB:-${CARGO_TARGET_DIR:-$ROOT/target}/release/iommulab}
PY=$ROOT/.venv/bin/python
DIR=$(mktemp -d "${TMPDIR:-/tmp}/lcs-bench.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
[ -x "$BIN" ] || { echo "no iommulab binary at $BIN (cargo build --release -p iommulab-cli)" >&2; exit 2; }
[ -x "$PY" ] && "$PY" -c "import libcachesim" 2>/dev/null || { echo "no libcachesim in $PY (make py-deps)" >&2; exit 2; }

"$BIN" trace generate uniform-random --events "$EVENTS" -o "$DIR/t.iot" -q
"$BIN" trace convert "$DIR/t.iot" -o "$DIR/t.oracleGeneral" -q

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

printf '%-5s %12s %12s %8s %8s %8s %12s\n' policy "iommulab s" "libCacheSim s" ratio "loop s" "vs loop" hits
for P in lru fifo opt; do
    : >"$DIR/i.t"
    : >"$DIR/l.t"
    : >"$DIR/c.t"
    for _ in $(seq "$REPEAT"); do
        # Each tool's process alone is timed; its JSON is read afterwards.
        t0=$(now)
        "$BIN" mrc "$DIR/t.iot" --policy "$P" --quotas "$QUOTA" --json -q >"$DIR/i.json"
        t1=$(now)
        "$PY" "$ROOT/scripts/libcachesim_crosscheck.py" "$DIR/t.oracleGeneral" "$QUOTA" --policies "$P" --time \
            >"$DIR/l.json" 2>"$DIR/loop"
        t2=$(now)
        ih=$("$PY" -c 'import json,sys; print(json.load(sys.stdin)["hits"][0])' <"$DIR/i.json")
        lh=$("$PY" -c "import json,sys; print(json.load(sys.stdin)['$P']['$QUOTA'])" <"$DIR/l.json")
        [ "$ih" = "$lh" ] || { echo "$P: iommulab $ih hits, libCacheSim $lh" >&2; exit 1; }
        echo "$t1 - $t0" | bc >>"$DIR/i.t"
        echo "$t2 - $t1" | bc >>"$DIR/l.t"
        awk '/process_trace seconds/ {print $NF}' "$DIR/loop" >>"$DIR/c.t"
    done
    i=$(median <"$DIR/i.t")
    l=$(median <"$DIR/l.t")
    c=$(median <"$DIR/c.t")
    printf '%-5s %12.2f %12.2f %8.2f %8.2f %8.2f %12s\n' "$P" "$i" "$l" "$(echo "$l / $i" | bc -l)" \
        "$c" "$(echo "$c / $i" | bc -l)" "$ih"
done
