//! Wall-clock speed of the Linux ftrace importer.
//!
//! Cases:
//! - `ftrace/import`: a generated in-memory `/sys/kernel/tracing/trace` text of 100 000
//!   realistic mixed lines — per I/O on one of 4 devices: `dma_map_page`, `iommu:map`,
//!   `iommu:unmap`, `dma_unmap_page` and `dma_sync_single_for_cpu`; every 8th I/O a merged
//!   `dma_map_sg`/`dma_unmap_sg` pair; every 16th line a `sched_switch` — read to the end.
//! - `ftrace/import_trace_cmd`: the same events in the `trace-cmd report` shape (no flags
//!   column, TGID column, padded event names, 9-decimal timestamps).
//!
//! Throughput is in lines per second. Target (the brief): ≥ 2 M lines/s on one core.

use std::fmt::Write as _;
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use iommulab::trace::EventSource;
use iommulab::trace::ftrace::{FtraceOptions, FtraceReader};

const LINES: usize = 100_000;
const DEVICES: [&str; 4] = ["0000:3b:00.0", "0000:3b:00.1", "0000:01:00.0", "virtio0"];

/// `(event, body)` pairs of a realistic capture.
fn events() -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(LINES);
    let mut io: u64 = 0;
    while out.len() < LINES {
        let dev = DEVICES[usize::try_from(io % 4).unwrap()];
        let iova = 0xffff_0000u64 - (io % 4096) * 0x1000;
        let phys = 0x1_2000_0000u64 + (io * 0x3_7000) % 0x4000_0000;
        let size = 64 + (io * 37) % 1500;
        out.push((
            "dma_map_page",
            format!("{dev} dir=TO_DEVICE dma_addr={iova:x} size={size} phys_addr={phys:x} attrs="),
        ));
        out.push((
            "map",
            format!(
                "IOMMU: iova=0x{iova:016x} - 0x{:016x} paddr=0x{:016x} size=4096",
                iova + 4096,
                phys & !0xfff
            ),
        ));
        out.push((
            "dma_sync_single_for_cpu",
            format!("{dev} dir=FROM_DEVICE dma_addr={iova:x} size={size}"),
        ));
        out.push((
            "unmap",
            format!(
                "IOMMU: iova=0x{iova:016x} - 0x{:016x} size=4096 unmapped_size=4096",
                iova + 4096
            ),
        ));
        out.push((
            "dma_unmap_page",
            format!("{dev} dir=TO_DEVICE dma_addr={iova:x} size={size} attrs=SKIP_CPU_SYNC"),
        ));
        if io.is_multiple_of(8) {
            let p = [phys, phys + 0x2_0000, phys + 0x5_0000];
            let list = format!("{{0x{:x},0x{:x},0x{:x}}}", p[0], p[1], p[2]);
            out.push(("dma_map_sg", format!("{dev} dir=FROM_DEVICE dma_addrs={{0x{iova:x}}} sizes={{0x30000}} phys_addrs={list} attrs=")));
            out.push((
                "dma_unmap_sg",
                format!("{dev} dir=FROM_DEVICE phys_addrs={list} attrs="),
            ));
        }
        if io.is_multiple_of(3) {
            out.push(("sched_switch", "prev_comm=iperf3 prev_pid=2041 prev_prio=120 prev_state=S ==> next_comm=swapper/5 next_pid=0 next_prio=120".to_owned()));
        }
        io += 1;
    }
    out.truncate(LINES);
    out
}

/// The `trace` file shape.
fn tracefs_text() -> Vec<u8> {
    let mut s = String::from("# tracer: nop\n#\n");
    for (i, (ev, body)) in events().iter().enumerate() {
        let ts = 8_123_000_000 + i as u64 * 3;
        let _ = writeln!(
            s,
            "          iperf3-2041    [{:03}] ..s1. {}.{:06}: {ev}: {body}",
            i % 8,
            ts / 1_000_000,
            ts % 1_000_000
        );
    }
    s.into_bytes()
}

/// The `trace-cmd report` shape.
fn trace_cmd_text() -> Vec<u8> {
    let mut s = String::from("cpus=8\nversion = 6\n");
    for (i, (ev, body)) in events().iter().enumerate() {
        let ts = 8_123_000_000_000 + i as u64 * 3_001;
        let _ = writeln!(
            s,
            "        iperf3-2041  (  2041) [{:03}]  {}.{:09}: {:<24} {body}",
            i % 8,
            ts / 1_000_000_000,
            ts % 1_000_000_000,
            format!("{ev}:"),
        );
    }
    s.into_bytes()
}

fn drain(text: &[u8]) -> u64 {
    let mut r = FtraceReader::new(text, "bench.txt".into(), FtraceOptions::default());
    let mut n = 0;
    while let Some(e) = r.next_event().unwrap() {
        n += e.len;
    }
    n
}

fn import(c: &mut Criterion) {
    let mut g = c.benchmark_group("ftrace");
    let tracefs = tracefs_text();
    let trace_cmd = trace_cmd_text();
    g.throughput(Throughput::Elements(LINES as u64));
    g.bench_function("import", |b| b.iter(|| drain(black_box(&tracefs))));
    g.bench_function("import_trace_cmd", |b| {
        b.iter(|| drain(black_box(&trace_cmd)))
    });
    g.finish();
}

criterion_group!(benches, import);
criterion_main!(benches);
