#!/usr/bin/env python3
"""Writes a synthetic ftrace text of N event lines for timing `iommulab check` (BENCHMARKS.md).

The shape of the committed QEMU trace: per call an `iommu:map` then `dma_map_page`, later an
`iommu:unmap` then `dma_unmap_page`, on 2 CPUs and 4 devices, up to 256 buffers in flight
per device. The trace is valid: `iommulab check` must report it clean.

    python3 scripts/gen-ftrace-check-bench.py 10000000 > /tmp/check10m.txt

With `--unmapped`, N `dma_unmap_page` lines of addresses never mapped instead: with
`iommulab check --from-boot` each one is a finding (`unmap_not_mapped`), for the memory of
`check --json` with millions of findings:

    python3 scripts/gen-ftrace-check-bench.py 2000000 --unmapped > /tmp/check2m-findings.txt
"""

import sys

n = int(sys.argv[1])
out = sys.stdout
w = out.write
w("# tracer: nop\n")
if "--unmapped" in sys.argv[2:]:
    for i in range(n):
        t = i + 1
        ts = f"{100 + t // 1000000}.{t % 1000000:06d}"
        w(
            f"           fio-{1000 + i % 2} [{i % 2:03d}] ..... {ts}: dma_unmap_page: 0000:00:01.0 "
            f"dir=FROM_DEVICE dma_addr={0x100000000 + i * 4096:x} size=4096 attrs=\n"
        )
    sys.exit(0)
lines = 0
t = 0
live = [[] for _ in range(4)]
nxt = [0] * 4
slot = 0
while lines < n:
    dev = slot % 4
    cpu = slot % 2
    slot += 1
    t += 1
    ts = f"{100 + t // 1000000}.{t % 1000000:06d}"
    head = f"           fio-{1000 + cpu} [{cpu:03d}] ..... {ts}: "
    d = f"0000:00:0{dev + 1}.0"
    if len(live[dev]) >= 256 or (live[dev] and t % 3 == 0):
        iova, phys = live[dev].pop(0)
        w(f"{head}unmap: IOMMU: iova=0x{iova:016x} - 0x{iova + 4096:016x} size=4096 unmapped_size=4096\n")
        w(f"{head}dma_unmap_page: {d} dir=FROM_DEVICE dma_addr={iova:x} size=4096 attrs=\n")
    else:
        nxt[dev] = (nxt[dev] + 1) % 65536
        iova = 0xF0000000 - nxt[dev] * 4096
        phys = 0x100000000 + (dev * 65536 + nxt[dev]) * 4096
        live[dev].append((iova, phys))
        w(f"{head}map: IOMMU: iova=0x{iova:016x} - 0x{iova + 4096:016x} paddr=0x{phys:016x} size=4096\n")
        w(f"{head}dma_map_page: {d} dir=FROM_DEVICE dma_addr={iova:x} size=4096 phys_addr={phys:x} attrs=\n")
    lines += 2
for dev in range(4):
    for iova, phys in live[dev]:
        head = "           fio-1000 [000] ..... 999.000000: "
        w(f"{head}unmap: IOMMU: iova=0x{iova:016x} - 0x{iova + 4096:016x} size=4096 unmapped_size=4096\n")
        w(f"{head}dma_unmap_page: 0000:00:0{dev + 1}.0 dir=FROM_DEVICE dma_addr={iova:x} size=4096 attrs=\n")
