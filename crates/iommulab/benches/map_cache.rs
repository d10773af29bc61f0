//! Wall-clock speed of the guest map cache and the one-pass hit-rate curves (the
//! hit rates themselves come from the CLI / reproduction, not from here).
//!
//! Cases:
//! - `map_cache/replay/{lru,fifo,prefetch,opt,opt_batch}`: replay of a 1 M-event stream
//!   (500 k map/unmap pairs: 60% a ring of 2048 buffers in order, the netperf shape; 40%
//!   a hot set of 512 pages; one page in 16 mapped twice nested) through a map cache with a
//!   quota of 1024 pages (40% of the working set). Throughput in events (maps + unmaps).
//!   Target (the brief): LRU ≥ 30 M events/s on one core. Its 2.5 K pages stay in the CPU
//!   cache: the speed of the policies' bookkeeping, not of a trace-scale replay.
//! - `map_cache/replay_zipf_10m/{lru,fifo,opt}`: the trace-scale shape of 10 M
//!   map/unmap pairs of pages drawn Zipf(1) from 2^20 (≈ 786 K distinct pages expected:
//!   the sum over ranks of 1 − (1 − p_k)^N), quota 2^16 pages; the cache's tables outgrow the
//!   CPU caches.
//! - `mrc/lru_10m`: the one-pass LRU curve up to quota 4096 over the small ring + hot-set
//!   stream, 10 M maps (20 M events): 2.5 K distinct pages.
//! - `mrc/lru_zipf_10m`: the one-pass LRU curve over every cache size (up to 2^20) of the
//!   10 M-map Zipf stream. The target: ≤ 2 s.
//! - `mrc/opt_1m`: the one-pass OPT curve up to quota 256 over a 1 M-map stream.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use iommulab::addr::Pfn;
use iommulab::mrc::{lru_one_pass, opt_one_pass};
use iommulab::virt::{
    EvictionPolicy, Fifo, FifoConfig, Lookahead, Lru, LruConfig, MapCache, Opt, OptBatch,
    OptBatchConfig, OptConfig, PageRef, Prefetch, PrefetchConfig, replay_into,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const SEED: u64 = 0x5157_0210;
const QUOTA: usize = 1024;

/// `pairs` map/unmap pairs of the mixed ring + hot-set shape.
fn stream(pairs: usize, seed: u64) -> Vec<PageRef> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut v = Vec::with_capacity(pairs * 2 + pairs / 8);
    let mut ring = 0u64;
    for _ in 0..pairs {
        let g = if rng.gen_range(0..10) < 6 {
            ring = (ring + 1) % 2048;
            0x10_000 + ring
        } else {
            // A skewed hot set: the product of two uniforms favours low pages.
            let (x, y) = (rng.gen_range(0..512u64), rng.gen_range(0..512u64));
            0x80_000 + x * y / 512
        };
        let p = Pfn::new(g);
        v.push(PageRef::Map(p));
        if rng.gen_range(0..16) == 0 {
            v.push(PageRef::Map(p));
            v.push(PageRef::Unmap(p));
        }
        v.push(PageRef::Unmap(p));
    }
    v
}

/// Pages of the Zipf streams, and their exponent.
const ZIPF_PAGES: usize = 1 << 20;
const ZIPF_S: f64 = 1.0;

/// `pairs` map/unmap pairs of pages drawn Zipf([`ZIPF_S`]) from [`ZIPF_PAGES`] pages (rank
/// `k` with probability ∝ 1/k^s, by inverting the cumulative distribution); the ranks are
/// scattered over page numbers so popular pages are not neighbours.
fn zipf_stream(pairs: usize, seed: u64) -> Vec<PageRef> {
    let mut cdf = Vec::with_capacity(ZIPF_PAGES);
    let mut total = 0.0;
    for k in 1..=ZIPF_PAGES {
        total += (k as f64).powf(-ZIPF_S);
        cdf.push(total);
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut v = Vec::with_capacity(pairs * 2);
    for _ in 0..pairs {
        let u = rng.gen_range(0.0..total);
        let rank = cdf.partition_point(|&c| c < u) as u64;
        // An odd multiplier permutes the ranks modulo 2^20.
        let p = Pfn::new(0x100_000 + (rank.wrapping_mul(0x9e37_79b1) & (ZIPF_PAGES as u64 - 1)));
        v.push(PageRef::Map(p));
        v.push(PageRef::Unmap(p));
    }
    v
}

fn bench_replay<E: EvictionPolicy>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    refs: &[PageRef],
    config: &E::Config,
    la: &Arc<Lookahead>,
) {
    bench_replay_quota::<E>(c, refs, QUOTA, config, la);
}

fn bench_replay_quota<E: EvictionPolicy>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    refs: &[PageRef],
    quota: usize,
    config: &E::Config,
    la: &Arc<Lookahead>,
) {
    c.bench_function(E::NAME, |b| {
        b.iter_batched_ref(
            || MapCache::<E>::new(quota, config, Some(la.clone())).unwrap(),
            |cache| {
                replay_into(cache, black_box(refs));
                black_box(cache.stats().hits)
            },
            BatchSize::LargeInput,
        );
    });
}

fn replay(c: &mut Criterion) {
    let refs = stream(500_000, SEED);
    let la = Arc::new(Lookahead::from_refs(&refs));
    let mut g = c.benchmark_group("map_cache/replay");
    g.throughput(Throughput::Elements(refs.len() as u64));
    g.sample_size(20);
    bench_replay::<Lru>(&mut g, &refs, &LruConfig::default(), &la);
    bench_replay::<Fifo>(&mut g, &refs, &FifoConfig::default(), &la);
    bench_replay::<Prefetch>(&mut g, &refs, &PrefetchConfig::default(), &la);
    bench_replay::<Opt>(&mut g, &refs, &OptConfig::default(), &la);
    bench_replay::<OptBatch>(&mut g, &refs, &OptBatchConfig::default(), &la);
    g.finish();
    drop((refs, la));

    let refs = zipf_stream(10_000_000, SEED + 3);
    let la = Arc::new(Lookahead::from_refs(&refs));
    let mut g = c.benchmark_group("map_cache/replay_zipf_10m");
    g.throughput(Throughput::Elements(refs.len() as u64));
    g.sample_size(10);
    bench_replay_quota::<Lru>(&mut g, &refs, ZIPF_QUOTA, &LruConfig::default(), &la);
    bench_replay_quota::<Fifo>(&mut g, &refs, ZIPF_QUOTA, &FifoConfig::default(), &la);
    bench_replay_quota::<Opt>(&mut g, &refs, ZIPF_QUOTA, &OptConfig::default(), &la);
    g.finish();
}

/// The quota of the Zipf replays: 2^16 pages.
const ZIPF_QUOTA: usize = 1 << 16;

fn curves(c: &mut Criterion) {
    let mut g = c.benchmark_group("mrc");
    g.sample_size(10);
    let big = stream(10_000_000, SEED + 1);
    g.throughput(Throughput::Elements(10_000_000));
    g.bench_function("lru_10m", |b| {
        b.iter(|| black_box(lru_one_pass(black_box(&big), 4096).points.len()));
    });
    drop(big);
    let zipf = zipf_stream(10_000_000, SEED + 3);
    g.bench_function("lru_zipf_10m", |b| {
        b.iter(|| black_box(lru_one_pass(black_box(&zipf), ZIPF_PAGES).points.len()));
    });
    drop(zipf);
    let mid = stream(1_000_000, SEED + 2);
    g.throughput(Throughput::Elements(1_000_000));
    g.bench_function("opt_1m", |b| {
        b.iter(|| black_box(opt_one_pass(black_box(&mid), 256).points.len()));
    });
    g.finish();
}

criterion_group!(benches, replay, curves);
criterion_main!(benches);
