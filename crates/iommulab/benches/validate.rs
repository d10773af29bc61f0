//! Wall-clock speed of `iommulab validate`: a 1 M-allocation ftrace text,
//! generated in memory, replayed through both models (open loop and one step).
//!
//! The "kernel" that made the trace is the model itself ([`IovaDomain`], the Linux 6.x
//! allocator), so every prediction is exact and this times the common path: a prediction
//! (`peek_iova`) and an allocation per allocation in each model, a free per free, and the
//! ftrace import. The workload: 4 PCI devices (one domain each), 2 CPUs (`#P:2`), up to 256
//! buffers in flight per device, sizes 1–8 pages with every 16th allocation 64 pages (past
//! the magazines), freed in a scrambled order, each free on the CPU that made the map
//! 3 times in 4. Throughput is in allocations per second.

use std::fmt::Write as _;
use std::hint::black_box;
use std::io::Cursor;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use iommulab::addr::{CpuId, Pfn};
use iommulab::iova::{DeviceIova, DomainConfig, IovaDomain, MagazineConfig};
use iommulab::trace::ftrace::{FtraceOptions, FtraceReader};
use iommulab::validate::{ValidateOptions, validate_ftrace};

const ALLOCS: u64 = 1_000_000;
const DEVICES: [&str; 4] = [
    "0000:00:01.0",
    "0000:00:02.0",
    "0000:00:03.0",
    "0000:00:04.0",
];

/// The trace text and its allocation count.
fn trace() -> (Vec<u8>, u64) {
    let config = DomainConfig {
        magazine: MagazineConfig {
            cpus: 2,
            ..MagazineConfig::default()
        },
        ..DomainConfig::default()
    };
    let mut domains: Vec<IovaDomain> = (0..4).map(|_| IovaDomain::new(&config).unwrap()).collect();
    let mut devs = [DeviceIova::new(u64::MAX, true, false); 4];
    let mut live: Vec<Vec<(u64, u64, u16)>> = vec![Vec::new(); 4];
    let mut t = String::with_capacity(600 << 20);
    t.push_str("# tracer: nop\n# entries-in-buffer/entries-written: 0/0   #P:2\n");
    let mut us = 0u64;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut line = |t: &mut String, cpu: u16, body: std::fmt::Arguments<'_>| {
        us += 1;
        let _ = writeln!(
            t,
            "         fio-1000   [{cpu:03}] ..... {}.{:06}: {body}",
            100 + us / 1_000_000,
            us % 1_000_000
        );
    };
    let mut allocs = 0;
    while allocs < ALLOCS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let d = usize::try_from(x % 4).unwrap();
        let cpu = u16::from((x >> 8).is_multiple_of(2));
        let dev = DEVICES[d];
        if live[d].len() >= 256 || (!live[d].is_empty() && (x >> 12) % 8 < 3) {
            let i = usize::try_from((x >> 20) % live[d].len() as u64).unwrap();
            let (pfn, pages, mcpu) = live[d].swap_remove(i);
            let fcpu = if (x >> 30).is_multiple_of(4) {
                1 - mcpu
            } else {
                mcpu
            };
            domains[d]
                .free_iova(CpuId::new(fcpu), Pfn::new(pfn), pages)
                .unwrap();
            let (a, n) = (pfn << 12, pages << 12);
            line(
                &mut t,
                fcpu,
                format_args!(
                    "unmap: IOMMU: iova=0x{a:016x} - 0x{:016x} size={n} unmapped_size={n}",
                    a + n
                ),
            );
            line(
                &mut t,
                fcpu,
                format_args!(
                    "dma_unmap_page: {dev} dir=FROM_DEVICE dma_addr={a:x} size={n} attrs="
                ),
            );
        } else {
            let pages = if (x >> 40).is_multiple_of(16) {
                64
            } else {
                1 + (x >> 44) % 8
            };
            let pfn = domains[d]
                .alloc_iova(&mut devs[d], CpuId::new(cpu), pages)
                .unwrap()
                .get();
            live[d].push((pfn, pages, cpu));
            let (a, n) = (pfn << 12, pages << 12);
            line(
                &mut t,
                cpu,
                format_args!(
                    "map: IOMMU: iova=0x{a:016x} - 0x{:016x} paddr=0x0000000012340000 size={n}",
                    a + n
                ),
            );
            line(
                &mut t,
                cpu,
                format_args!(
                    "dma_map_page: {dev} dir=FROM_DEVICE dma_addr={a:x} size={n} phys_addr=12340000 attrs="
                ),
            );
            allocs += 1;
        }
    }
    (t.into_bytes(), allocs)
}

fn bench(c: &mut Criterion) {
    let (text, allocs) = trace();
    // The generator and the validator agree on every choice (else this times the wrong path).
    let run = || {
        let mut r = FtraceReader::new(
            Cursor::new(text.as_slice()),
            "bench.txt".into(),
            FtraceOptions::default(),
        );
        validate_ftrace(&mut r, &ValidateOptions::default()).unwrap()
    };
    let report = run();
    assert_eq!(report.allocations, allocs);
    assert_eq!(report.one_step.exact, allocs, "{:?}", report.mismatch_kinds);
    assert_eq!(report.open_loop.exact, allocs);
    let mut g = c.benchmark_group("validate");
    g.sample_size(10);
    g.throughput(Throughput::Elements(allocs));
    g.bench_function("1m_allocations", |b| b.iter(|| black_box(run())));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
