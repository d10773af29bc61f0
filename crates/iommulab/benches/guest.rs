//! Wall-clock speed of the full guest path: driver map/unmap → the guest's
//! `DmaApi` (identity addressing) → `HypercallBackend` (strategy, map cache, batching) →
//! hypercalls → host checks, pin table and VT-d page tables.
//!
//! Cases (the same 1 M-event stream shape as `map_cache/replay`: 60% a ring of 2048
//! buffers, 40% a skewed hot set of 512 pages, one page in 16 mapped twice nested; quota
//! 1024 pages, one-page buffers):
//! - `guest/on_demand_lru`: on-demand, LRU, no batching, protection oracle off. Events =
//!   driver maps + unmaps.
//! - `guest/on_demand_lru_piggyback`: the same with unmap piggyback.
//! - `guest/on_demand_lru_oracle`: with the stale-access oracle on (the DMA API tracks live
//!   mappings; two IOMMU translations per page left without DMA after an unmap).
//! - `guest/netperf_run_guest`: `run_guest` over 50 k netperf-send packets (events =
//!   workload ops).

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use iommulab::addr::{CpuId, DmaDirection, Gpa};
use iommulab::virt::strategy::OnDemand;
use iommulab::virt::{Batching, Guest, GuestConfig, Lru, LruConfig, run_guest};
use iommulab::workload::{DmaOp, InGuest, NetperfSend, NetperfSendConfig, Workload};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const SEED: u64 = 0x5157_0210;

#[derive(Clone, Copy)]
enum Ev {
    Map(u64),
    Unmap,
}

fn stream(pairs: usize) -> Vec<Ev> {
    let mut rng = SmallRng::seed_from_u64(SEED);
    let mut v = Vec::with_capacity(pairs * 2 + pairs / 8);
    let mut ring = 0u64;
    for _ in 0..pairs {
        let g = if rng.gen_range(0..10) < 6 {
            ring = (ring + 1) % 2048;
            0x10_000 + ring
        } else {
            let (x, y) = (rng.gen_range(0..512u64), rng.gen_range(0..512u64));
            0x20_000 + x * y / 512
        };
        v.push(Ev::Map(g));
        if rng.gen_range(0..16) == 0 {
            v.push(Ev::Map(g));
            v.push(Ev::Unmap);
        }
        v.push(Ev::Unmap);
    }
    v
}

fn cfg(batching: Batching, oracle: bool) -> GuestConfig {
    GuestConfig {
        quota: 1024,
        batching,
        guest_pages: 1 << 18,
        protection_oracle: oracle,
        ..GuestConfig::default()
    }
}

/// The stream as driver calls: one-page buffers, the nested map in its own slot.
fn ops(evs: &[Ev]) -> Vec<DmaOp<Gpa>> {
    let mut depth = 0u32;
    let cpu = CpuId::new(0);
    evs.iter()
        .map(|e| match *e {
            Ev::Map(p) => {
                depth += 1;
                DmaOp::Map {
                    slot: depth - 1,
                    cpu,
                    device: 0,
                    phys: Gpa::new(p << 12),
                    len: 4096,
                    dir: DmaDirection::ToDevice,
                    dma_alloc: false,
                }
            }
            Ev::Unmap => {
                depth -= 1;
                DmaOp::Unmap { slot: depth, cpu }
            }
        })
        .collect()
}

fn drive(g: &mut Guest<OnDemand<Lru>>, ops: &[DmaOp<Gpa>]) {
    let mut d = g.driver(2);
    for &op in ops {
        d.step(op, &[]).unwrap();
    }
}

fn guest(c: &mut Criterion) {
    let evs = ops(&stream(500_000));
    let mut grp = c.benchmark_group("guest");
    grp.throughput(Throughput::Elements(evs.len() as u64));
    grp.sample_size(10);
    for (name, b, oracle) in [
        ("on_demand_lru", Batching::None, false),
        ("on_demand_lru_piggyback", Batching::Piggyback, false),
        ("on_demand_lru_oracle", Batching::None, true),
    ] {
        grp.bench_function(name, |bch| {
            bch.iter_batched_ref(
                || {
                    let cfg = cfg(b, oracle);
                    let s = OnDemand::<Lru>::new(&cfg, &LruConfig::default(), None).unwrap();
                    Guest::new(cfg, s).unwrap()
                },
                |g| {
                    drive(g, black_box(&evs));
                    black_box(g.result().hits)
                },
                BatchSize::LargeInput,
            );
        });
    }
    let np = NetperfSendConfig {
        packets: 50_000,
        ..NetperfSendConfig::default()
    };
    let mut w = NetperfSend::new(np).unwrap();
    let mut ops = 0u64;
    while w.next_op().unwrap().is_some() {
        ops += 1;
    }
    grp.throughput(Throughput::Elements(ops));
    grp.bench_function("netperf_run_guest", |bch| {
        bch.iter(|| {
            let mut w = InGuest::new(NetperfSend::new(np).unwrap());
            let gc = GuestConfig {
                quota: 8,
                protection_oracle: false,
                ..GuestConfig::default()
            };
            black_box(run_guest(&mut w, &gc, None).unwrap().hits)
        });
    });
    grp.finish();
}

criterion_group!(benches, guest);
criterion_main!(benches);
