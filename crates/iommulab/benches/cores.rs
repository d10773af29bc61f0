//! Wall-clock speed of the many-core model alone (`iommulab::experiment::cores`): the
//! discrete-event stepping of 16 CPUs over the shared locks and the invalidation unit,
//! without the one-CPU model that prices each operation in a run.
//!
//! Cases (`cores/16cpus/{magazine-flush-queue,global-lock-strict,global-lock-deferred}`):
//! `OPS` operations per iteration, dealt round robin to 16 CPUs, each operation's demand
//! from a fixed table shaped like a run's of that design on the `modern` preset (a map and
//! an unmap per I/O; the deferred design flushes every 250 unmaps, freeing 250 IOVAs under
//! the flush lock). Throughput is in operations per second; a 16-CPU run of 10 M operations
//! spends `10 M / that` seconds in the model.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use iommulab::clock::ClockRate;
use iommulab::experiment::cores::{CoreModel, Demand, InvWork, Scopes};
use iommulab::hw::cost::ContentionPrices;
use iommulab::hw::invalidate::InvalidationInterface;

/// Operations per iteration.
const OPS: u64 = 100_000;
const CPUS: u16 = 16;

fn demand(private: u64, tree: u64, depot: u64, flush: u64, inv: InvWork) -> Demand {
    Demand {
        private,
        tree,
        tree_sections: u32::from(tree > 0),
        depot,
        flush,
        inv,
    }
}

/// The `i`th operation of a design: even ones map, odd ones unmap.
fn op(design: &str, i: u64) -> Demand {
    let unmap = i % 2 == 1;
    let none = InvWork::default();
    let strict = InvWork {
        cpu: 50,
        hw: 1000,
        wait: 500,
    };
    match (design, unmap) {
        ("magazine-flush-queue", false) => {
            demand(1800, 0, u64::from(i.is_multiple_of(512)) * 60, 0, none)
        }
        ("magazine-flush-queue", true) => {
            let batch = i % 512 == 1;
            let inv = if batch {
                InvWork {
                    cpu: 50,
                    hw: 1500,
                    wait: 500,
                }
            } else {
                none
            };
            demand(2000, 0, 0, 0, inv)
        }
        ("global-lock-strict", false) => demand(1800, 250, 0, 0, none),
        ("global-lock-strict", true) => demand(1700, 150, 0, 0, strict),
        (_, false) => demand(1800, 250, 0, 0, none),
        (_, true) if i % 500 == 499 => Demand {
            tree: 250 * 150,
            tree_sections: 251,
            flush: 45,
            inv: InvWork {
                cpu: 50,
                hw: 1500,
                wait: 500,
            },
            ..demand(1700, 0, 0, 0, none)
        },
        (_, true) => demand(1700, 0, 0, 45, none),
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("cores/16cpus");
    g.throughput(Throughput::Elements(OPS));
    for (design, interface, global_flush_lock) in [
        ("magazine-flush-queue", InvalidationInterface::Queued, false),
        ("global-lock-strict", InvalidationInterface::Queued, false),
        ("global-lock-deferred", InvalidationInterface::Queued, true),
    ] {
        let ops: Vec<Demand> = (0..OPS).map(|i| op(design, i)).collect();
        g.bench_function(design, |b| {
            b.iter(|| {
                let mut m = CoreModel::new(
                    CPUS,
                    Scopes {
                        interface,
                        global_flush_lock,
                    },
                    ContentionPrices::DEFAULT,
                    ClockRate::ghz(3.0),
                );
                for (i, d) in ops.iter().enumerate() {
                    let cpu = u16::try_from(i / 2 % usize::from(CPUS)).unwrap_or(0);
                    m.push(cpu, *d, i % 2 == 1);
                }
                black_box(m.finish())
            });
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
