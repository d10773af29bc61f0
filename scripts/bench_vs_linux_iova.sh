#!/usr/bin/env bash
# iommulab's IOVA allocators side by side with Linux 6.12's own (drivers/iommu/iova.c built
# in user space), on the shapes of crates/iommulab/benches/iova.rs.
#
# Extracts iova.c, lib/rbtree.c and their rbtree/iova headers from Debian's
# linux-source-6.12 tarball into a temporary directory (installing the package with apt-get
# if the tarball is missing; nothing of the kernel is kept), compiles them with gcc -O2 over
# scripts/linux-iova/kshim.h twice (real spinlocks, no-op spinlocks) with the driver
# scripts/linux-iova/bench.c, builds the example crates/iommulab/examples/iova_shapes, and
# runs every shape on every implementation ROUNDS times, alternating the order each round.
#
# Fidelity first: every run prints a checksum of every pfn it was handed; each iommulab
# allocator must print Linux's on every shape, or the script stops with exit 1 and names the
# first allocation that differs. Then one table of median ns per step and the ratios.
#
# Usage: scripts/bench_vs_linux_iova.sh [ROUNDS]
#   ROUNDS  alternating rounds (default 5)
# Environment: LINUX_SRC_TAR (default /usr/src/linux-source-6.12.tar.xz), CARGO_TARGET_DIR,
# TMPDIR, KEEP=1 to keep the temporary directory (kernel files, binaries, raw timings),
# IOVA_SHAPES=PATH to run another build of the example instead of building it.
# Needs: gcc, tar with xz, cargo; root for apt-get only when the tarball is missing.
set -euo pipefail
ROUNDS=${1:-5}
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS = '$ROUNDS': expected a positive integer" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TAR=${LINUX_SRC_TAR:-/usr/src/linux-source-6.12.tar.xz}
KDIR=linux-source-6.12
DIR=$(mktemp -d "${TMPDIR:-/tmp}/linux-iova.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "keeping $DIR" >&2; else trap 'rm -rf "$DIR"' EXIT; fi
die() { echo "bench_vs_linux_iova: $*" >&2; exit 2; }

# ---- the kernel source ------------------------------------------------------------------
if [ ! -f "$TAR" ]; then
    [ -z "${LINUX_SRC_TAR:-}" ] || die "LINUX_SRC_TAR=$TAR does not exist"
    command -v apt-get >/dev/null || die "$TAR is missing and there is no apt-get to install linux-source-6.12"
    [ "$(id -u)" = 0 ] || die "$TAR is missing; install it as root: apt-get install -y linux-source-6.12"
    echo "installing linux-source-6.12 (for $TAR) ..." >&2
    # --reinstall brings the tarball back if the package is installed but the file was removed.
    APT=(env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends --reinstall linux-source-6.12)
    if ! "${APT[@]}" >"$DIR/apt.log" 2>&1; then
        apt-get update >>"$DIR/apt.log" 2>&1 || true
        "${APT[@]}" >>"$DIR/apt.log" 2>&1 ||
            { tail -20 "$DIR/apt.log" >&2; die "apt-get install linux-source-6.12 failed (log above)"; }
    fi
    [ -f "$TAR" ] || die "linux-source-6.12 is installed but $TAR is not there"
fi
FILES=(drivers/iommu/iova.c lib/rbtree.c include/linux/iova.h include/linux/rbtree.h
    include/linux/rbtree_types.h include/linux/rbtree_augmented.h)
tar -xJf "$TAR" -C "$DIR" "${FILES[@]/#/$KDIR/}" 2>"$DIR/tar.log" ||
    { cat "$DIR/tar.log" >&2; die "could not extract ${FILES[*]} from $TAR (is it Debian's linux-source-6.12 tarball?)"; }
KVER=$(dpkg-query -W -f '${Version}' linux-source-6.12 2>/dev/null || echo "unknown version")

# ---- the C builds -----------------------------------------------------------------------
command -v gcc >/dev/null || die "gcc not found (apt-get install -y gcc)"
mkdir -p "$DIR/shim/linux"
cp "$ROOT/scripts/linux-iova/kshim.h" "$DIR/shim/"
# Every kernel header the two files include, other than the extracted ones, is kshim.h.
for h in types kernel dma-mapping kmemleak module slab smp bitops cpu workqueue container_of \
    stddef rcupdate compiler export; do
    echo '#include "../kshim.h"' >"$DIR/shim/linux/$h.h"
done
CFLAGS=(-O2 -Wall -Wextra -Werror -Wno-sign-compare -Wno-unused-parameter
    -I"$DIR/shim" -I"$DIR/$KDIR/include")
for L in 1 0; do
    for src in "$KDIR/drivers/iommu/iova.c" "$KDIR/lib/rbtree.c" "$ROOT/scripts/linux-iova/bench.c"; do
        [[ "$src" = /* ]] || src="$DIR/$src"
        gcc "${CFLAGS[@]}" -DSHIM_LOCKS=$L -c "$src" -o "$DIR/$(basename "$src" .c)$L.o" 2>"$DIR/gcc.log" ||
            { cat "$DIR/gcc.log" >&2; die "gcc failed on $src (SHIM_LOCKS=$L): the shim may lack what this kernel version uses"; }
    done
    gcc -O2 "$DIR/bench$L.o" "$DIR/iova$L.o" "$DIR/rbtree$L.o" -o "$DIR/bench$L" 2>"$DIR/gcc.log" ||
        { cat "$DIR/gcc.log" >&2; die "linking the C bench failed"; }
done

# ---- the Rust build ---------------------------------------------------------------------
if [ -n "${IOVA_SHAPES:-}" ]; then
    RUST=$IOVA_SHAPES
else
    (cd "$ROOT" && cargo build --release -q -p iommulab --example iova_shapes) ||
        die "cargo build --release -p iommulab --example iova_shapes failed"
    RUST=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/iova_shapes
fi
[ -x "$RUST" ] || die "no example binary at $RUST"

# ---- the runs ---------------------------------------------------------------------------
# shape live ops iommulab-allocators
SHAPES=(
    "tree_fifo 32 2000000 rbtree,gap-tree"
    "tree_fifo 40960 2000000 rbtree,gap-tree"
    "fast_fifo 32 2000000 magazine+rbtree"
    "fast_fifo 40960 2000000 magazine+rbtree"
    "tree_churn 40960 4000 rbtree,gap-tree"
    "tree_mixed 4096 20000 rbtree,gap-tree"
    "fast_mixed 4096 20000 magazine+rbtree"
    "tree_mixed 30000 10000 rbtree,gap-tree"
    "fast_mixed 30000 10000 magazine+rbtree"
    "tree_dma 40960 10000 rbtree,gap-tree"
    "fast_dma 40960 10000 magazine+rbtree"
)
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# cmd_of IMPL SHAPE LIVE OPS: the command line of one implementation.
cmd_of() {
    case $1 in
        linux-locks) echo "$DIR/bench1 $2 $3 $4" ;;
        linux-nolocks) echo "$DIR/bench0 $2 $3 $4" ;;
        *) echo "$RUST $2 $3 $4 --alloc ${1#iommulab-}" ;;
    esac
}
dump_of() { if [[ $1 == linux-* ]]; then echo "$(cmd_of "$@") dump"; else echo "$(cmd_of "$@") --dump"; fi; }
# Stops at the first pfn IMPL was handed that Linux was not.
mismatch() {
    local impl=$1 shape=$2 live=$3 ops=$4 want=$5 got=$6
    echo "PICKS DIFFER on $shape live=$live ops=$ops:" >&2
    echo "  linux:  $want" >&2
    echo "  $impl: $got" >&2
    $(dump_of linux-locks "$shape" "$live" "$ops") >"$DIR/want.pfns"
    $(dump_of "$impl" "$shape" "$live" "$ops") >"$DIR/got.pfns"
    paste -d' ' "$DIR/want.pfns" "$DIR/got.pfns" | awk '$1 != $2 {
        printf "  first difference: allocation #%d (0-based, fill first): linux pfn %s, iommulab pfn %s\n", NR - 1, $1, $2
        exit }' >&2 || true # awk leaves early: paste's SIGPIPE is expected
    exit 1
}

echo "Linux: $KDIR $KVER ($TAR); iommulab: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?');" \
    "$(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $ROUNDS rounds" >&2
mkdir -p "$DIR/t"
for round in $(seq "$ROUNDS"); do
    for s in "${SHAPES[@]}"; do
        read -r shape live ops allocs <<<"$s"
        impls=(linux-locks linux-nolocks)
        for a in ${allocs//,/ }; do impls+=("iommulab-$a"); done
        if ((round % 2 == 0)); then # reverse the order every other round
            for ((i = 0, j = ${#impls[@]} - 1; i < j; i++, j--)); do
                t=${impls[i]}; impls[i]=${impls[j]}; impls[j]=$t
            done
        fi
        for impl in "${impls[@]}"; do
            out=$($(cmd_of "$impl" "$shape" "$live" "$ops")) || die "$impl failed on $shape $live $ops"
            pick="count=$(field "$out" count) checksum=$(field "$out" checksum) first=$(field "$out" first)"
            echo "$pick" >"$DIR/t/$shape-$live-$impl.pick"
            field "$out" ns >>"$DIR/t/$shape-$live-$impl.ns"
        done
        want=$(cat "$DIR/t/$shape-$live-linux-locks.pick")
        for impl in "${impls[@]}"; do
            got=$(cat "$DIR/t/$shape-$live-$impl.pick")
            [ "$got" = "$want" ] || mismatch "$impl" "$shape" "$live" "$ops" "$want" "$got"
        done
    done
    echo "round $round/$ROUNDS: picks identical on every shape" >&2
done

# ---- the table --------------------------------------------------------------------------
echo "| shape | live | steps | Linux, locks | Linux, no locks | iommulab | iommulab ns | iommulab ÷ Linux, locks | iommulab ÷ Linux, no locks | picks (count, checksum) |"
echo "|---|---:|---:|---:|---:|---|---:|---:|---:|---|"
for s in "${SHAPES[@]}"; do
    read -r shape live ops allocs <<<"$s"
    lk=$(median <"$DIR/t/$shape-$live-linux-locks.ns")
    nl=$(median <"$DIR/t/$shape-$live-linux-nolocks.ns")
    pick=$(cat "$DIR/t/$shape-$live-linux-locks.pick")
    for a in ${allocs//,/ }; do
        r=$(median <"$DIR/t/$shape-$live-iommulab-$a.ns")
        awk -v s="$shape" -v l="$live" -v o="$ops" -v lk="$lk" -v nl="$nl" -v a="$a" -v r="$r" \
            -v c="$(field "$pick" count)" -v h="$(field "$pick" checksum)" \
            'BEGIN { printf "| %s | %d | %d | %.1f ns | %.1f ns | %s | %.1f ns | %.2f | %.2f | same (%d, %s) |\n", s, l, o, lk, nl, a, r, r / lk, r / nl, c, h }'
    done
done
