#!/usr/bin/env bash
# Records a real DMA-mapping ftrace from a Debian kernel booted under QEMU with an emulated
# Intel VT-d IOMMU (docs/capture.md §7; the committed result and its story are in traces/).
#
#   bash scripts/capture-qemu.sh OUTDIR
#
# Needs root and Debian bookworm (it uses apt-get and bookworm-backports for a >= 6.12 kernel,
# whose dma:* tracepoints 6.1 lacks). Everything it downloads or builds goes under OUTDIR/work:
# the kernel .deb, the initramfs, the disk images. It writes
#
#   OUTDIR/qemu-virtio-KVER.txt.zst   the guest's /sys/kernel/tracing/trace, unedited
#   OUTDIR/console.log                the guest's serial console
#   OUTDIR/versions.txt               kernel package, QEMU version, command lines, date
#
# The guest: 1 vCPU, 512 MiB, q35 + intel-iommu, two virtio-blk disks and one virtio-net NIC,
# all with iommu_platform=on so they use the DMA API through the IOMMU, and an NVMe disk. Its /init (a busybox
# script) enables the dma:* and iommu:map/unmap events, loads the virtio modules (so their
# probe-time allocations are traced), reads and writes the data disk with O_DIRECT dd at
# several sizes and through an ext4 file system, reads and writes the NVMe disk (the only
# device here whose driver uses dma_map_sg), sends pings whose frames QEMU loops back into
# the NIC (a UDP socket netdev on 127.0.0.1 that talks to itself: nothing leaves the host),
# stops tracing, writes the trace to the second disk and powers off.
#
# Environment: KPKG (a kernel package name, default: what bookworm-backports'
# linux-image-cloud-amd64 depends on now), TIMEOUT (seconds for QEMU, default 1800),
# NET_PORT (the loopback UDP port, default 47361).
set -euo pipefail

OUT=${1:?usage: capture-qemu.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$OUT/work
TIMEOUT=${TIMEOUT:-1800}
NET_PORT=${NET_PORT:-47361}
rm -rf "$WORK"
mkdir -p "$WORK"

log() { printf '== %s\n' "$*" >&2; }

# --- 1. Host tools and the kernel package ------------------------------------------------------
BPO=/etc/apt/sources.list.d/bookworm-backports.list
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    # The same mirror as this machine's bookworm line (one-line or deb822 format).
    mirror=$({
        cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
            sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) bookworm .*/\2/p'
        cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
            awk '/^URIs:/ { u = $2 } /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") print u }'
    } | head -n1)
    [ -n "$mirror" ] || { echo "no bookworm line in the apt sources" >&2; exit 1; }
    log "adding bookworm-backports from $mirror"
    echo "deb $mirror bookworm-backports main" >"$BPO"
fi
log "apt-get update"
apt-get update -qq
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v zstd >/dev/null || need+=(zstd)
command -v xz >/dev/null || need+=(xz-utils)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    # A backports qemu-utils on the host conflicts with bookworm's qemu-system-x86: then take
    # QEMU from backports too.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports "${need[@]}"
fi

if [ -z "${KPKG:-}" ]; then
    KPKG=$(apt-cache depends -t bookworm-backports linux-image-cloud-amd64 |
        sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n1)
fi
[ -n "$KPKG" ] || { echo "no kernel package found in bookworm-backports" >&2; exit 1; }
log "downloading $KPKG"
(cd "$WORK" && apt-get download -t bookworm-backports "$KPKG" 2>/dev/null ||
    apt-get download "$KPKG")
DEB=$(ls "$WORK"/linux-image-*.deb)
KVERSION=$(dpkg-deb -f "$DEB" Version)
dpkg-deb -x "$DEB" "$WORK/kernel"
KREL=$(ls "$WORK/kernel/lib/modules")
VMLINUZ=$WORK/kernel/boot/vmlinuz-$KREL
MODDIR=$WORK/kernel/lib/modules/$KREL/kernel
for opt in CONFIG_INTEL_IOMMU=y CONFIG_EVENT_TRACING=y CONFIG_VIRTIO_PCI=y; do
    grep -qx "$opt" "$WORK/kernel/boot/config-$KREL" || { echo "$KREL lacks $opt" >&2; exit 1; }
done

# --- 2. The initramfs ---------------------------------------------------------------------------
log "building the initramfs"
ROOT=$WORK/initramfs
mkdir -p "$ROOT"/{bin,dev,proc,sys,tmp,mnt,modules}
cp /bin/busybox "$ROOT/bin/busybox"
# virtio_net needs net_failover, which needs failover. Modules that are built in (=y) in some
# other kernel are simply not found and not loaded.
for m in net/core/failover drivers/net/net_failover drivers/net/virtio_net \
    drivers/block/virtio_blk; do
    name=$(basename "$m")
    for ext in ko.xz ko.zst ko; do
        f=$MODDIR/$m.$ext
        [ -f "$f" ] || continue
        case $ext in
        ko.xz) xz -dc "$f" >"$ROOT/modules/$name.ko" ;;
        ko.zst) zstd -qdc "$f" >"$ROOT/modules/$name.ko" ;;
        ko) cp "$f" "$ROOT/modules/$name.ko" ;;
        esac
        echo "$name" >>"$ROOT/modules/order"
    done
done

cat >"$ROOT/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs nodev /sys/kernel/tracing
T=/sys/kernel/tracing
say() { echo "capture: $*" >/dev/console; }

say "kernel $(uname -r): $(cat /proc/cmdline)"
say "iommu groups: $(ls /sys/kernel/iommu_groups | wc -l)"
say "dma events: $(ls $T/events/dma 2>/dev/null | grep -v -e enable -e filter | tr '\n' ' ')"

# docs/capture.md section 2, command by command.
echo 0 > $T/tracing_on
echo nop > $T/current_tracer
echo 0 > $T/events/enable
echo > $T/trace
echo 16384 > $T/buffer_size_kb
echo 0 > $T/options/overwrite
[ -d $T/events/dma ] && echo 1 > $T/events/dma/enable
echo 1 > $T/events/iommu/map/enable
echo 1 > $T/events/iommu/unmap/enable
echo mono > $T/trace_clock
echo 1 > $T/tracing_on

# Load the drivers with tracing on: their probe-time DMA allocations are in the trace.
for m in $(cat /modules/order); do insmod /modules/$m.ko; done
for i in $(seq 1 100); do [ -b /dev/vda ] && [ -b /dev/vdb ] && break; sleep 0.1; done
[ -b /dev/vdb ] || { say "no /dev/vdb"; poweroff -f; }
for d in /sys/bus/virtio/devices/*; do
    say "$(basename $d) on PCI $(basename $(readlink -f $d/..)) iommu_group $(basename $(readlink -f $d/../iommu_group))"
done

# Block: O_DIRECT reads and writes at several sizes (one request each).
say "block: direct reads"
dd if=/dev/vda of=/dev/null bs=512 count=32 iflag=direct 2>/dev/null
dd if=/dev/vda of=/dev/null bs=4096 count=64 iflag=direct 2>/dev/null
dd if=/dev/vda of=/dev/null bs=65536 count=16 skip=8 iflag=direct 2>/dev/null
dd if=/dev/vda of=/dev/null bs=1048576 count=4 skip=2 iflag=direct 2>/dev/null
say "block: direct writes"
dd if=/dev/urandom of=/dev/vda bs=4096 count=32 seek=4096 oflag=direct 2>/dev/null
dd if=/dev/urandom of=/dev/vda bs=131072 count=8 seek=256 oflag=direct 2>/dev/null
# Buffered: the page cache and readahead make multi-segment scatter-gather requests.
say "block: buffered read"
dd if=/dev/vda of=/dev/null bs=65536 count=64 skip=256 2>/dev/null
# A file system: metadata and data writes, then a cold read back.
say "block: ext4"
mke2fs -q -b 4096 /dev/vda 16384 >/dev/null 2>&1
if mount -t ext4 /dev/vda /mnt; then
    for i in 1 2 3 4 5 6 7 8; do
        dd if=/dev/urandom of=/mnt/f$i bs=1024 count=$((i * 24)) 2>/dev/null
    done
    sync
    umount /mnt
    echo 3 > /proc/sys/vm/drop_caches
    mount -t ext4 -o ro /dev/vda /mnt && cat /mnt/f* | md5sum >/dev/console && umount /mnt
else
    say "mount failed"
fi

# NVMe (built into the kernel; it uses dma_map_sg for multi-segment requests, which virtio
# never does: virtio_ring maps each segment with dma_map_page).
say "nvme"
if [ -b /dev/nvme0n1 ]; then
    dd if=/dev/nvme0n1 of=/dev/null bs=4096 count=32 iflag=direct 2>/dev/null
    dd if=/dev/nvme0n1 of=/dev/null bs=131072 count=16 iflag=direct 2>/dev/null
    dd if=/dev/urandom of=/dev/nvme0n1 bs=65536 count=16 seek=64 oflag=direct 2>/dev/null
    dd if=/dev/nvme0n1 of=/dev/null bs=1048576 count=8 skip=8 2>/dev/null
    dd if=/dev/urandom of=/dev/nvme0n1 bs=1048576 count=2 seek=32 conv=fsync 2>/dev/null
else
    say "no /dev/nvme0n1"
fi

# Network: frames to a neighbour that does not exist; QEMU's socket netdev sends each frame
# to itself over 127.0.0.1 and hands it back to the NIC (TX and RX DMA).
say "net"
ifconfig eth0 169.254.77.1 netmask 255.255.0.0 up
arp -s 169.254.77.2 52:54:00:00:77:02
ifconfig eth0 promisc
ping -c 16 -i 0.2 -s 1200 169.254.77.2 >/dev/null 2>&1
ping -c 16 -i 0.2 -s 56 169.254.77.2 >/dev/null 2>&1
ifconfig eth0 down

echo 0 > $T/tracing_on
say "events: $(grep -vc '^#' $T/trace) lines; $(grep -c LOST $T/trace) lost markers"
# The trace goes to the second disk (zeros before: the host cuts at the first NUL).
cat $T/trace > /dev/vdb
sync
say "trace written"
poweroff -f
EOF
chmod +x "$ROOT/init"
(cd "$ROOT" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -9) >"$WORK/initramfs.cpio.gz"

# --- 3. Disks and QEMU --------------------------------------------------------------------------
truncate -s 128M "$WORK/data.img"
truncate -s 64M "$WORK/trace.img"
truncate -s 64M "$WORK/nvme.img"
APPEND="console=ttyS0 intel_iommu=on iommu.strict=1 panic=-1"
QEMU=(qemu-system-x86_64
    -machine q35 -accel tcg -cpu max -smp 1 -m 512M
    -device intel-iommu,intremap=off
    -kernel "$VMLINUZ" -initrd "$WORK/initramfs.cpio.gz" -append "$APPEND"
    -drive file="$WORK/data.img",if=none,id=d0,format=raw,cache=unsafe
    -device virtio-blk-pci,drive=d0,iommu_platform=on,disable-legacy=on
    -drive file="$WORK/trace.img",if=none,id=d1,format=raw
    -device virtio-blk-pci,drive=d1,iommu_platform=on,disable-legacy=on
    -drive file="$WORK/nvme.img",if=none,id=d2,format=raw,cache=unsafe
    -device nvme,serial=iommulab0,drive=d2
    -netdev socket,id=n0,udp=127.0.0.1:$NET_PORT,localaddr=127.0.0.1:$NET_PORT
    -device virtio-net-pci,netdev=n0,iommu_platform=on,disable-legacy=on,mac=52:54:00:00:77:01
    -display none -no-reboot -nodefaults -serial stdio)
log "booting $KREL under QEMU (TCG; timeout ${TIMEOUT}s)"
start=$(date +%s)
timeout "$TIMEOUT" "${QEMU[@]}" </dev/null >"$OUT/console.log" 2>&1 || {
    echo "QEMU failed or timed out; see $OUT/console.log" >&2
    tail -n 20 "$OUT/console.log" >&2
    exit 1
}
elapsed=$(($(date +%s) - start))

# --- 4. The trace -------------------------------------------------------------------------------
grep -q 'capture: trace written' "$OUT/console.log" || {
    echo "the guest did not write the trace; see $OUT/console.log" >&2
    exit 1
}
NAME=qemu-virtio-$KREL.txt
tr -d '\000' <"$WORK/trace.img" >"$WORK/$NAME"
zstd -q -19 -f "$WORK/$NAME" -o "$OUT/$NAME.zst"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel package: $KPKG $KVERSION"
    echo "kernel release: $KREL"
    echo "qemu: $(qemu-system-x86_64 --version | head -n1)"
    echo "busybox: $(busybox | head -n1)"
    echo "guest run time: ${elapsed}s"
    echo "kernel command line: $APPEND"
    echo "qemu command line: ${QEMU[*]}"
    echo "trace: $NAME.zst, $(wc -l <"$WORK/$NAME") lines, $(wc -c <"$WORK/$NAME") bytes uncompressed"
} | tee "$OUT/versions.txt" >&2
