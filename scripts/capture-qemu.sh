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
#
# SCENARIO selects what the guest does; unset or `default` is the run described above, which
# made the first committed trace. The others (docs/capture.md §8) trace from the kernel
# command line, so from a cold start before any driver probes, and use the generic Debian
# kernel (linux-image-amd64: the cloud flavour has no e1000e). Each writes
# OUTDIR/SCENARIO-KREL.txt.zst:
#
#   probe          nvme, 2 virtio-blk, virtio-net, e1000e probed with tracing on; a few reads
#                  and pings; strict (iommu.strict=1)
#   fio            probe, then fio O_DIRECT random reads/writes (libaio, several block sizes and
#                  iodepths) on NVMe and virtio-blk, and iperf3 both ways on the e1000e; strict
#   lazy           fio, with iommu.strict=0 (the flush queue)
#   yassour-tcp    S1.9's netperf TCP_STREAM send stand-in: the guest sends a TCP stream with a
#                  64 KiB socket buffer (iperf3 -w 64K) over the e1000e (TSO on); strict
#   yassour-httpd  S1.9's Apache stand-in: busybox httpd in the guest serves static pages over
#                  the e1000e to curl on the host; strict
#
# Three more start tracing from /init (tracefs, as docs/capture.md §2 does on a running
# system) instead of the command line:
#
#   midrun         a user's capture of a running system: the drivers probed and a warm-up
#                  (fio on both disks, pings, the e1000e's receive ring filled) done with
#                  tracing off; then tracing on, a shorter fio run on NVMe and virtio-blk and
#                  iperf3 both ways on the e1000e; strict. Run it with SMP=2.
#   midrun-tx      also mid-run: the guest sends a TCP stream (iperf3 -R from the host) with
#                  iperf3 pinned to CPU 0 and every e1000e interrupt on CPU 1, so transmit
#                  buffers are mapped on CPU 0 and unmapped by the completion on CPU 1; strict
#   lazy-kprobe    fio's workload, shortened, with iommu.strict=0 and a kprobe on the IOVA
#                  free path (free_iova_fast: its iova_domain, pfn and size from the argument
#                  registers) recording every free's moment and CPU; tracing starts in /init
#                  before the modules load, so every device's probe is in the trace
#
# FREE_KPROBE=1 adds the same kprobe to midrun and midrun-tx.
#
# The e1000e's peer is the host, through QEMU user networking with restrict=on (the guest can
# reach nothing; only the host's connections to 127.0.0.1 ports forwarded into the guest
# pass): IPERF_PORT (default 47362), HTTP_PORT (47363), DONE_PORT (47364). SMP (vCPUs,
# default 1) and MEM (default 2G) apply to these scenarios.
set -euo pipefail

OUT=${1:?usage: capture-qemu.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$OUT/work
TIMEOUT=${TIMEOUT:-1800}
NET_PORT=${NET_PORT:-47361}
SCENARIO=${SCENARIO:-default}
case $SCENARIO in
default) KMETA=linux-image-cloud-amd64 ;;
probe | fio | lazy | yassour-tcp | yassour-httpd | midrun | midrun-tx | lazy-kprobe) KMETA=linux-image-amd64 ;;
*) echo "unknown SCENARIO '$SCENARIO' (default, probe, fio, lazy, yassour-tcp, yassour-httpd, midrun, midrun-tx, lazy-kprobe)" >&2; exit 2 ;;
esac
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
if [ "$SCENARIO" != default ]; then
    command -v depmod >/dev/null || need+=(kmod)
    command -v fio >/dev/null || need+=(fio)
    command -v iperf3 >/dev/null || need+=(iperf3)
    command -v ethtool >/dev/null || need+=(ethtool)
    command -v curl >/dev/null || need+=(curl)
fi
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    # A backports qemu-utils on the host conflicts with bookworm's qemu-system-x86: then take
    # QEMU from backports too.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports "${need[@]}"
fi

if [ -z "${KPKG:-}" ]; then
    KPKG=$(apt-cache depends -t bookworm-backports $KMETA |
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
for opt in CONFIG_INTEL_IOMMU=y CONFIG_EVENT_TRACING=y CONFIG_VIRTIO_PCI=y CONFIG_KPROBE_EVENTS=y; do
    grep -qx "$opt" "$WORK/kernel/boot/config-$KREL" || { echo "$KREL lacks $opt" >&2; exit 1; }
done

# --- Scenarios other than the default (docs/capture.md §8) ------------------------------------
# The same steps as sections 2-4 below for the default run, with tracing turned on by the
# kernel command line instead of by /init, more devices, and a host side for the network.
scenario_capture() {
    local SMP=${SMP:-1} MEM=${MEM:-2G}
    local IPERF_PORT=${IPERF_PORT:-47362} HTTP_PORT=${HTTP_PORT:-47363} DONE_PORT=${DONE_PORT:-47364}
    local STRICT=1 BUF_MB=192 KPROBE=${FREE_KPROBE:-0}
    case $SCENARIO in lazy | lazy-kprobe) STRICT=0 ;; esac
    [ "$SCENARIO" = lazy-kprobe ] && KPROBE=1
    # Per-CPU ring buffer: 192 MiB failed to allocate for a second CPU at boot in a 2 GiB
    # guest ("failed to allocate ring buffer on CPU 1", and the CPU stays offline).
    case $SCENARIO in probe) BUF_MB=32 ;; fio | lazy | midrun | lazy-kprobe) BUF_MB=96 ;; esac

    log "building the initramfs ($SCENARIO)"
    local ROOT=$WORK/initramfs
    mkdir -p "$ROOT"/{bin,dev,proc,sys,tmp,mnt,modules,www}
    cp /bin/busybox "$ROOT/bin/busybox"
    # Modules and their dependencies in load order, from the package's own modules.dep.
    depmod -b "$WORK/kernel" "$KREL"
    local m f name
    for m in nvme virtio_blk virtio_net e1000e; do
        modprobe -d "$WORK/kernel" -S "$KREL" --show-depends "$m" | sed -n 's/^insmod \([^ ]*\).*/\1/p'
    done | awk '!seen[$0]++' | while read -r f; do
        name=$(basename "$f")
        name=${name%%.ko*}
        case $f in
        *.ko.xz) xz -dc "$f" >"$ROOT/modules/$name.ko" ;;
        *.ko.zst) zstd -qdc "$f" >"$ROOT/modules/$name.ko" ;;
        *) cp "$f" "$ROOT/modules/$name.ko" ;;
        esac
        echo "$name" >>"$ROOT/modules/order"
    done
    # Dynamically linked tools with the libraries ldd lists, at the same paths.
    local tools=(/usr/sbin/ethtool)
    case $SCENARIO in
    fio | lazy | midrun | lazy-kprobe) tools+=(/usr/bin/fio /usr/bin/iperf3) ;;
    yassour-tcp | midrun-tx) tools+=(/usr/bin/iperf3) ;;
    esac
    local t lib
    for t in "${tools[@]}"; do
        cp --parents -L "$t" "$ROOT"
        for lib in $(ldd "$t" | grep -o '/[^ ]*'); do
            [ -e "$ROOT$lib" ] || cp --parents -L "$lib" "$ROOT"
        done
    done
    printf 'SCENARIO=%s\nSMP=%s\nKPROBE=%s\nBUF_MB=%s\n' "$SCENARIO" "$SMP" "$KPROBE" "$BUF_MB" >"$ROOT/scenario.env"
    # yassour-httpd's pages: 100 files of 2-64 KiB (sizes from a fixed-seed LCG: 2^k KiB
    # times 1 to 2, k = 1..5), random bytes.
    local i x=2010 base
    for i in $(seq 0 99); do
        x=$(((x * 1103515245 + 12345) % 2147483648))
        base=$((2048 << (x % 5)))
        head -c $((base + (x >> 7) % base)) /dev/urandom >"$ROOT/www/p$i.html"
    done

    cat >"$ROOT/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs nodev /sys/kernel/tracing
. /scenario.env
T=/sys/kernel/tracing
say() { echo "capture: $*" >/dev/console; }
# The network interface a driver (e1000e, virtio_net) made.
nic() { for n in /sys/class/net/*; do
    [ "$(basename "$(readlink -f $n/device/driver 2>/dev/null)")" = "$1" ] && basename $n; done; }

say "scenario $SCENARIO, kernel $(uname -r): $(cat /proc/cmdline)"
say "tracing since boot: tracing_on $(cat $T/tracing_on), clock $(sed 's/.*\[\(.*\)\].*/\1/' $T/trace_clock), buffer $(cat $T/buffer_size_kb) KiB per CPU, $(grep -c . $T/set_event) events, $(cat $T/options/overwrite) overwrite"
say "iommu groups: $(ls /sys/kernel/iommu_groups | wc -l); cpus $(grep -c ^processor /proc/cpuinfo)"
[ "$(grep -c ^processor /proc/cpuinfo)" = "$SMP" ] || { say "only $(grep -c ^processor /proc/cpuinfo) of $SMP CPUs online"; poweroff -f; }

# Tracing turned on from tracefs on the running system, as docs/capture.md §2 does (the
# scenarios that do not trace from the command line). KPROBE=1 adds a kprobe on the IOVA
# free path: in 6.12 every free goes through free_iova_fast(iovad, pfn, size) (strict: from
# iommu_dma_free_iova; lazy: from the flush queue's fq_ring_free_locked), x86-64 passing the
# three arguments in rdi, rsi, rdx.
trace_on() {
    echo 0 >$T/tracing_on
    echo $((BUF_MB * 1024)) >$T/buffer_size_kb
    echo 0 >$T/options/overwrite
    echo mono >$T/trace_clock
    echo >$T/trace
    echo 1 >$T/events/dma/enable
    echo 1 >$T/events/iommu/map/enable
    echo 1 >$T/events/iommu/unmap/enable
    if [ "$KPROBE" = 1 ]; then
        echo 'p:free_iova_fast free_iova_fast iovad=%di:x64 pfn=%si:x64 size=%dx:u64' >>$T/kprobe_events ||
            { say "kprobe on free_iova_fast refused"; poweroff -f; }
        echo 1 >$T/events/kprobes/free_iova_fast/enable
    fi
    echo 1 >$T/tracing_on
    say "tracing on from tracefs: clock $(sed 's/.*\[\(.*\)\].*/\1/' $T/trace_clock), buffer $(cat $T/buffer_size_kb) KiB per CPU, $(grep -c . $T/set_event) events, $(cat $T/options/overwrite) overwrite, kprobes: $(cat $T/kprobe_events)"
}
# fio: O_DIRECT, libaio; each job a fixed number of I/Os (so the run's length does not
# depend on the host's speed); numjobs=2 where there are 2 CPUs to spread over. Arguments:
# "rw bs iodepth number_ios" specs, run on NVMe then virtio-blk.
fio_one() { # DEV RW BS IODEPTH NUMBER_IOS
    r=$(fio --name=j --filename=$1 --direct=1 --ioengine=libaio --thread \
        --rw=$2 --bs=$3 --iodepth=$4 --number_ios=$5 --size=192M --numjobs=$J \
        --group_reporting --minimal 2>&1 | awk -F';' '{ print "read " $6 " KiB " $8 " IOPS, write " $47 " KiB " $49 " IOPS" }')
    say "fio $1 $2 bs=$3 iodepth=$4 number_ios=$5 numjobs=$J: $r"
}
fio_runs() {
    J=1
    [ "$(grep -c ^processor /proc/cpuinfo)" -gt 1 ] && J=2
    for dev in /dev/nvme0n1 /dev/vda; do
        for spec in "$@"; do
            fio_one $dev $spec
        done
    done
}
# The shorter run of midrun and lazy-kprobe (each trace a few MB compressed).
fio_runs_short() {
    fio_runs "randread 4k 1 500" "randread 4k 32 2000" "randwrite 4k 16 1000" \
        "randread 16k 8 1000" "randrw 64k 8 500" "randread 1m 2 50"
}

[ "$SCENARIO" = lazy-kprobe ] && trace_on
for m in $(cat /modules/order); do insmod /modules/$m.ko; done
for i in $(seq 1 200); do
    [ -b /dev/vda ] && [ -b /dev/vdb ] && [ -b /dev/nvme0n1 ] && [ -n "$(nic e1000e)" ] && break
    sleep 0.1
done
[ -b /dev/vdb ] || { say "no /dev/vdb"; poweroff -f; }
for d in /sys/bus/pci/devices/*; do
    drv=none
    [ -e $d/driver ] && drv=$(basename "$(readlink -f $d/driver)")
    say "$(basename $d) $(cat $d/vendor):$(cat $d/device) driver $drv iommu_group $(basename "$(readlink -f $d/iommu_group)")"
done
E=$(nic e1000e)
V=$(nic virtio_net)
say "e1000e $E, virtio_net $V"

# virtio-net: pings to a made-up neighbour, looped back by QEMU's socket netdev (as default).
vnet_ping() {
    ifconfig $V 169.254.77.1 netmask 255.255.0.0 up
    arp -s 169.254.77.2 52:54:00:00:77:02
    ping -c 8 -i 0.2 -s 1200 169.254.77.2 >/dev/null 2>&1
    ping -c 8 -i 0.2 -s 56 169.254.77.2 >/dev/null 2>&1
    ifconfig $V down
}
# e1000e on QEMU user networking (10.0.2.0/24; the host reaches the guest only through the
# forwarded ports). The driver's offloads as it set them.
e1000e_up() {
    ifconfig $E 10.0.2.15 netmask 255.255.255.0 up
    for i in $(seq 1 50); do grep -q 1 /sys/class/net/$E/carrier 2>/dev/null && break; sleep 0.1; done
    say "$E: $(ethtool -k $E | grep -e 'tcp-segmentation-offload:' -e 'scatter-gather:' -e 'generic-segmentation' | tr -s '\t\n' '  ')"
}
# Wait until the host closes the run (it connects to the forwarded DONE port).
wait_host() { say "net ready"; nc -l -p 7000 </dev/null >/dev/null 2>&1; say "host done"; }

case $SCENARIO in
probe)
    say "probe: a few reads"
    dd if=/dev/vda of=/dev/null bs=4096 count=16 iflag=direct 2>/dev/null
    dd if=/dev/vda of=/dev/null bs=65536 count=4 iflag=direct 2>/dev/null
    dd if=/dev/nvme0n1 of=/dev/null bs=4096 count=16 iflag=direct 2>/dev/null
    dd if=/dev/nvme0n1 of=/dev/null bs=131072 count=4 iflag=direct 2>/dev/null
    vnet_ping
    e1000e_up
    sleep 1
    ifconfig $E down
    ;;
fio | lazy)
    fio_runs "randread 4k 1 2000" "randread 4k 32 4000" "randwrite 4k 16 2000" \
        "randread 16k 8 2000" "randrw 64k 8 1000" "randwrite 128k 4 500" "randread 1m 2 200"
    vnet_ping
    e1000e_up
    iperf3 -s -p 5201 >/dev/null 2>&1 &
    wait_host
    kill $!
    ifconfig $E down
    ;;
midrun)
    # The warm-up, untraced: every ring and buffer mapped now is "mapped before tracing".
    say "warm-up, tracing off"
    fio_runs "randread 4k 8 500" "randwrite 64k 4 200"
    ifconfig $V 169.254.77.1 netmask 255.255.0.0 up
    arp -s 169.254.77.2 52:54:00:00:77:02
    ping -c 4 -i 0.2 169.254.77.2 >/dev/null 2>&1
    e1000e_up
    trace_on
    fio_runs_short
    ping -c 8 -i 0.2 -s 1200 169.254.77.2 >/dev/null 2>&1
    ifconfig $V down
    iperf3 -s -p 5201 >/dev/null 2>&1 &
    wait_host
    kill $!
    ifconfig $E down
    ;;
lazy-kprobe)
    fio_runs_short
    vnet_ping
    e1000e_up
    iperf3 -s -p 5201 >/dev/null 2>&1 &
    wait_host
    kill $!
    ifconfig $E down
    ;;
midrun-tx)
    e1000e_up
    # iperf3 and the e1000e's receive (and "other") vectors on CPU 0, its transmit vector on
    # CPU 1: transmit buffers are mapped on CPU 0 (iperf3's sendmsg, and the ACKs' receive
    # soft-IRQ sending more), and the transmit-completion interrupt unmaps them on CPU 1.
    for i in $(grep "$E" /proc/interrupts | cut -d: -f1); do
        m=1
        grep "^ *$i:" /proc/interrupts | grep -q -- '-tx-' && m=2
        echo $m >/proc/irq/$i/smp_affinity
    done
    say "e1000e interrupts: $(grep "$E" /proc/interrupts | tr -s ' \n' ' ')"
    taskset 1 iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
    P=$!
    trace_on
    say "net ready"
    wait $P
    say "e1000e interrupts after: $(grep "$E" /proc/interrupts | tr -s ' \n' ' ')"
    ifconfig $E down
    ;;
yassour-tcp)
    e1000e_up
    # iperf3's server in reverse mode is the sender: the host's `iperf3 -c -R -w 64K` makes it
    # set SO_SNDBUF (and SO_RCVBUF) to 64 KiB on its data socket; -J reports what it got.
    iperf3 -s -1 -p 5201 -J >/tmp/iperf3.json 2>&1 &
    P=$!
    say "net ready"
    wait $P
    say "iperf3 server: $(grep -e '"sock_bufsize"' -e '"sndbuf_actual"' -e '"rcvbuf_actual"' -e '"bytes"' -e '"bits_per_second"' /tmp/iperf3.json | head -n 8 | tr -s ' \n' ' ')"
    ifconfig $E down
    ;;
yassour-httpd)
    # /www: the host put 100 static pages there (S1.9: static wiki pages).
    say "pages: $(ls /www | wc -l) files, $(du -sk /www | cut -f1) KiB"
    e1000e_up
    httpd -p 80 -h /www
    wait_host
    ifconfig $E down
    ;;
esac

echo 0 > $T/tracing_on
say "$(grep -m1 entries-in-buffer $T/trace)"
for c in $T/per_cpu/cpu*; do say "$(basename $c): $(grep -e overrun -e dropped $c/stats | tr '\n' ' ')"; done
say "events: $(grep -vc '^#' $T/trace) lines; $(grep -c LOST $T/trace) lost markers"
cat $T/trace > /dev/vdb
sync
say "trace written"
poweroff -f
EOF
    chmod +x "$ROOT/init"
    # Not compressed: fio's libraries are ~80 MB, which TCG would take long to inflate.
    (cd "$ROOT" && find . | busybox cpio -o -H newc 2>/dev/null) >"$WORK/initramfs.cpio"

    truncate -s 256M "$WORK/data.img"
    truncate -s 1G "$WORK/trace.img"
    truncate -s 256M "$WORK/nvme.img"
    APPEND="console=ttyS0 intel_iommu=on iommu.strict=$STRICT panic=-1 trace_event=dma:*,iommu:map,iommu:unmap trace_buf_size=${BUF_MB}M trace_clock=mono trace_options=nooverwrite"
    # Tracing from tracefs in /init: the boot buffer stays small until trace_on sizes it.
    case $SCENARIO in midrun | midrun-tx | lazy-kprobe) APPEND="console=ttyS0 intel_iommu=on iommu.strict=$STRICT panic=-1" ;; esac
    QEMU=(qemu-system-x86_64
        -machine q35 -accel tcg -cpu max -smp "$SMP" -m "$MEM"
        -device intel-iommu,intremap=off
        -kernel "$VMLINUZ" -initrd "$WORK/initramfs.cpio" -append "$APPEND"
        -drive file="$WORK/data.img",if=none,id=d0,format=raw,cache=unsafe
        -device virtio-blk-pci,drive=d0,iommu_platform=on,disable-legacy=on
        -drive file="$WORK/trace.img",if=none,id=d1,format=raw
        -device virtio-blk-pci,drive=d1,iommu_platform=on,disable-legacy=on
        -drive file="$WORK/nvme.img",if=none,id=d2,format=raw,cache=unsafe
        -device nvme,serial=iommulab0,drive=d2
        -netdev socket,id=n0,udp=127.0.0.1:$NET_PORT,localaddr=127.0.0.1:$NET_PORT
        -device virtio-net-pci,netdev=n0,iommu_platform=on,disable-legacy=on,mac=52:54:00:00:77:01
        -netdev "user,id=n1,restrict=on,net=10.0.2.0/24,hostfwd=tcp:127.0.0.1:$IPERF_PORT-10.0.2.15:5201,hostfwd=tcp:127.0.0.1:$HTTP_PORT-10.0.2.15:80,hostfwd=tcp:127.0.0.1:$DONE_PORT-10.0.2.15:7000"
        -device e1000e,netdev=n1,mac=52:54:00:00:77:11
        -display none -no-reboot -nodefaults -serial stdio)
    log "booting $KREL under QEMU (TCG, $SMP vCPU; timeout ${TIMEOUT}s)"
    local start elapsed qpid
    start=$(date +%s)
    : >"$OUT/host.log"
    timeout "$TIMEOUT" "${QEMU[@]}" </dev/null >"$OUT/console.log" 2>&1 &
    qpid=$!
    # The host side: wait for the guest's "net ready", then drive the traffic.
    if [ "$SCENARIO" != probe ]; then
        until grep -q 'capture: net ready' "$OUT/console.log"; do
            kill -0 $qpid 2>/dev/null || break
            sleep 1
        done
        case $SCENARIO in
        midrun | lazy-kprobe)
            # 8 MiB to the guest, then 8 MiB from it, retried as for fio.
            local dir try
            for dir in "" -R; do
                for try in 1 2 3 4 5; do
                    iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -n 8M $dir >>"$OUT/host.log" 2>&1 && break
                    sleep 2
                done
            done
            ;;
        midrun-tx)
            iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -R -n 32M >>"$OUT/host.log" 2>&1
            ;;
        fio | lazy)
            # 16 MiB to the guest, then 16 MiB from it. iperf3 3.12's server, right after a
            # test, may drop the next control connection: then try again.
            local dir try
            for dir in "" -R; do
                for try in 1 2 3 4 5; do
                    iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -n 16M $dir >>"$OUT/host.log" 2>&1 && break
                    sleep 2
                done
            done
            ;;
        yassour-tcp)
            iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -R -w 64K -n 48M >>"$OUT/host.log" 2>&1
            ;;
        yassour-httpd)
            # 400 requests, one connection each; page i = 100 u^2 for u uniform in [0, 1)
            # from a fixed-seed LCG, so low-numbered pages are the popular ones.
            local n=0 code k x=1 u
            for k in $(seq 1 400); do
                x=$(((x * 1103515245 + 12345) % 2147483648))
                u=$(((x >> 16) % 1000))
                i=$((u * u / 10000))
                code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HTTP_PORT/p$i.html")
                [ "$code" = 200 ] && n=$((n + 1))
            done
            echo "curl: $n of 400 requests answered 200" >>"$OUT/host.log"
            ;;
        esac
        if [ "$SCENARIO" != yassour-tcp ] && [ "$SCENARIO" != midrun-tx ]; then
            (exec 3<>"/dev/tcp/127.0.0.1/$DONE_PORT" && echo done >&3) || true
        fi
    fi
    wait $qpid || {
        echo "QEMU failed or timed out; see $OUT/console.log" >&2
        tail -n 20 "$OUT/console.log" >&2
        exit 1
    }
    elapsed=$(($(date +%s) - start))
    grep -q 'capture: trace written' "$OUT/console.log" || {
        echo "the guest did not write the trace; see $OUT/console.log" >&2
        exit 1
    }
    local NAME=$SCENARIO-$KREL.txt
    tr -d '\000' <"$WORK/trace.img" >"$WORK/$NAME"
    zstd -q -19 -T0 -f "$WORK/$NAME" -o "$OUT/$NAME.zst"
    {
        echo "scenario: $SCENARIO"
        echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "kernel package: $KPKG $KVERSION"
        echo "kernel release: $KREL"
        echo "qemu: $(qemu-system-x86_64 --version | head -n1)"
        echo "busybox: $(busybox | head -n1)"
        for t in fio iperf3 ethtool curl; do echo "$t: $(dpkg-query -W -f='${Version}' $t)"; done
        echo "guest run time: ${elapsed}s"
        echo "kernel command line: $APPEND"
        echo "qemu command line: ${QEMU[*]}"
        echo "trace: $NAME.zst, $(wc -l <"$WORK/$NAME") lines, $(wc -c <"$WORK/$NAME") bytes uncompressed, $(wc -c <"$OUT/$NAME.zst") compressed"
        grep 'capture: ' "$OUT/console.log" | grep -e entries-in-buffer -e 'lost markers' -e overrun
        cat "$OUT/host.log"
    } | tee "$OUT/versions.txt" >&2
}
if [ "$SCENARIO" != default ]; then
    scenario_capture
    exit 0
fi

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
