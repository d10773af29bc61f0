#!/usr/bin/env bash
# Whole-process speed of `iommulab mrc --quotas Q` against libCacheSim's C request loop on the
# same traces (BENCHMARKS.md records the runs). For each trace kind it writes one generated
# trace (.iot) and its .oracleGeneral export, then for each quota (65,536 and the requests /
# 1000), policy and input (the .iot, then the .oracleGeneral) runs, alternating,
# `iommulab mrc INPUT --policy P --quotas Q` and `scripts/libcachesim_crosscheck.py EXPORT Q
# --policies P --time` (libCacheSim's `process_trace`, the C loop over `cache->get`), REPEAT
# times each, and prints the medians of iommulab's whole process and of the time libCacheSim
# spends inside `process_trace` alone (its process also starts Python, imports the binding and
# counts the trace's objects), each as wall-clock and CPU seconds (user + system; both of
# iommulab's threads for an .iot; /usr/bin/time's, so ours is rounded to 10 ms), and their ratios (`loop / iommulab`). On a shared, loaded machine a
# process waits for a CPU most of its wall time: compare the CPU ratios there. Both print the
# same hits (checked).
#
# Then, per trace kind, the full curves (every quota) of LRU and OPT from the .iot: wall
# seconds and peak resident memory (`/usr/bin/time`), in bytes per event.
#
# Usage: scripts/bench_vs_libcachesim.sh [EVENTS] [REPEAT] [KINDS] [POLICIES]
#   EVENTS    events of each generated trace (default 20000000)
#   REPEAT    runs per tool, policy, quota and input (default 3)
#   KINDS     trace kinds, comma separated (default uniform-random,apache-sendfile)
#   POLICIES  comma separated (default lru,fifo)
# Needs: a release build (`cargo build --release -p iommulab-cli`) and `make py-deps` (.venv
# with libcachesim). Set IOMMULAB to another binary, PY to another Python, TMPDIR for the
# files, FULL=0 to skip the full curves.
set -euo pipefail
EVENTS=${1:-20000000}
REPEAT=${2:-3}
KINDS=${3:-uniform-random,apache-sendfile}
POLICIES=${4:-lru,fifo}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${IOMMULAB:-${CARGO_TARGET_DIR:-$ROOT/target}/release/iommulab}
PY=${PY:-$ROOT/.venv/bin/python}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/lcs-bench.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
[ -x "$BIN" ] || { echo "no iommulab binary at $BIN (cargo build --release -p iommulab-cli)" >&2; exit 2; }
[ -x "$PY" ] && "$PY" -c "import libcachesim" 2>/dev/null || { echo "no libcachesim in $PY (make py-deps)" >&2; exit 2; }

# a / b with two decimals, `-` when b is 0 (a time below the clock's resolution).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
json_get() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-16s %9s %10s %-6s %-13s %8s %8s %8s %8s %8s %8s %10s\n' trace requests quota policy input \
    "iom s" "loop s" wall× "iom cpu" "loop cpu" cpu× hits
for K in ${KINDS//,/ }; do
    T=$DIR/$K.iot
    OG=$DIR/$K.oracleGeneral
    "$BIN" trace generate "$K" --events "$EVENTS" -o "$T" -q
    "$BIN" trace convert "$T" -o "$OG" -q
    N=$("$BIN" trace stats "$OG" --json | json_get 'd["requests"]')
    for Q in 65536 $((N / 1000)); do
        for P in ${POLICIES//,/ }; do
            for IN in "$T" "$OG"; do
                : >"$DIR/i.t"
                : >"$DIR/c.t"
                : >"$DIR/ic.t"
                : >"$DIR/cc.t"
                for _ in $(seq "$REPEAT"); do
                    # Each tool's process alone is timed; its JSON is read afterwards.
                    /usr/bin/time -f '%e %U %S' -o "$DIR/time" \
                        "$BIN" mrc "$IN" --policy "$P" --quotas "$Q" --json -q >"$DIR/i.json"
                    "$PY" "$ROOT/scripts/libcachesim_crosscheck.py" "$OG" "$Q" --policies "$P" --time \
                        >"$DIR/l.json" 2>"$DIR/loop"
                    ih=$(json_get 'd["hits"][0]' <"$DIR/i.json")
                    lh=$(json_get "d['$P']['$Q']" <"$DIR/l.json")
                    [ "$ih" = "$lh" ] || { echo "$K $P $Q: iommulab $ih hits, libCacheSim $lh" >&2; exit 1; }
                    awk '{print $1}' "$DIR/time" >>"$DIR/i.t"
                    awk '{print $2 + $3}' "$DIR/time" >>"$DIR/ic.t"
                    awk '/process_trace seconds/ {print $NF}' "$DIR/loop" >>"$DIR/c.t"
                    awk '/process_trace cpu seconds/ {print $NF}' "$DIR/loop" >>"$DIR/cc.t"
                done
                i=$(median <"$DIR/i.t")
                c=$(median <"$DIR/c.t")
                ic=$(median <"$DIR/ic.t")
                cc=$(median <"$DIR/cc.t")
                printf '%-16s %9s %10s %-6s %-13s %8.3f %8.3f %8s %8.3f %8.3f %8s %10s\n' "$K" "$N" "$Q" \
                    "$P" "${IN##*.}" "$i" "$c" "$(ratio "$c" "$i")" "$ic" "$cc" "$(ratio "$cc" "$ic")" "$ih"
            done
        done
    done
    if [ "${FULL:-1}" != 0 ]; then
        for P in lru opt; do
            /usr/bin/time -f '%e %M' -o "$DIR/time" "$BIN" mrc "$T" --policy "$P" --json -q >"$DIR/full.json"
            read -r secs kb <"$DIR/time"
            printf 'full curve %-16s %-4s %8.2f s  peak %8d KB  %6.2f B/event  %s quotas\n' "$K" "$P" "$secs" "$kb" \
                "$(echo "$kb * 1024 / $EVENTS" | bc -l)" "$(json_get 'len(d["quota"])' <"$DIR/full.json")"
        done
    fi
    rm -f "$T" "$OG"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
