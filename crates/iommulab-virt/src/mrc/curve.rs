//! The hit-rate curve of a trace: one entry point for the CLI (`iommulab mrc`), Python
//! (`iommulab.mrc`) and the libCacheSim cross-check, over either view of the trace.
//!
//! **Two views** of a trace's page references (S1.9):
//!
//! - the **page sequence** (default, `pinning: false`): every 4 KiB page a mapped buffer
//!   spans is one independent reference, unmapped at once ([`page_sequence`]). This is the
//!   paper's method for Figures 3 and 4 ("recorded access patterns") and exactly the request
//!   stream of the `.oracleGeneral` export that libCacheSim reads, so LRU, FIFO and OPT here
//!   equal libCacheSim's LRU, FIFO and Belady at every quota;
//! - the **pinned map cache** (`pinning: true`): the trace's own maps and unmaps, so a page
//!   stays pinned while its DMA is in flight: victims come only from unpinned pages and a
//!   map is refused when every cached page is pinned (S1.2). On a real trace, where many
//!   buffers are in flight at once, the two differ at small quotas (the committed QEMU
//!   trace, up to 263 pages in flight: LRU at 8 pages hits 13.7% of the page sequence and
//!   9.3% pinned, with 86% of maps refused).
//!
//! **Method**: LRU and OPT are stack algorithms on a stream without pinning, so one pass
//! gives every quota ([`lru_one_pass`], [`opt_one_pass`]); that is always the case for the
//! page sequence, and for the pinned view only if the trace never has another page in
//! flight at a map. Otherwise (FIFO, optimal batching, prefetching, or LRU/OPT with pinning)
//! the map cache is simulated once per quota ([`mrc_by_simulation_config`], which builds the
//! [`Lookahead`](crate::Lookahead) the offline policies read, over the same view).
//! Quotas above the trace's distinct pages behave as the distinct page count (nothing is
//! ever evicted or refused), so they cost nothing extra.

use serde::{Deserialize, Serialize};

use super::stream::{Feeding, StreamedCurve, curve_is_streamed};
use super::{
    MrcMethod, MrcPoint, distinct_pages, lru_one_pass, max_pinned, mrc_by_simulation_config,
    opt_one_pass, page_sequence, pinning_free,
};
use crate::{CacheOnly, EvictionConfig, PageRef, PageRun, guest_page_refs};
use iommulab_base::addr::Pfn;
use iommulab_trace::EventSource;
use iommulab_trace::oracle_general::{OracleGeneralReader, RECORD_BYTES, record_obj_id};
use iommulab_workload::{InGuest, TraceWorkload};
use iommulab_workload::{ParamError, WorkloadError};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// Largest quota a caller may ask for, in pages (2^24 pages = 64 GiB of 4 KiB pages). A
/// curve over `0..=N` has N + 1 entries, so a mistyped `--max-quota` must not allocate
/// terabytes; the default range (the trace's distinct pages) is not bounded by this.
pub const MAX_QUOTA: usize = 1 << 24;

/// Which quotas a curve has.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quotas {
    /// Every quota `0..=N` up to the trace's distinct pages, then `N` itself: every quota
    /// past the distinct pages gives the distinct count's point, so listing each of them
    /// (up to 2^24 rows for a trace of a few pages) would say nothing more.
    UpTo(usize),
    /// These quotas (sorted and deduplicated by [`hit_rate_curve`]).
    List(Vec<usize>),
}

/// What curve to compute.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CurveRequest {
    /// The eviction policy (and its parameters).
    pub policy: EvictionConfig,
    /// `false`: the page sequence (S1.9's method, the default); `true`: the map cache with
    /// in-flight pages pinned (see the [module docs](self)).
    pub pinning: bool,
    /// The quotas; `None` is `0..=` the trace's distinct pages (past which nothing changes).
    pub quotas: Option<Quotas>,
}

/// A hit-rate curve of one policy over one view of a trace, as parallel arrays (one entry
/// per quota, in increasing quota order) for tables, JSON and plotting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HitRateCurve {
    /// The policy's name (`lru`, `fifo`, `opt`, `opt_batch`, `prefetch`).
    pub policy: String,
    /// The policy with its parameters.
    pub policy_config: EvictionConfig,
    /// Which view: `false` the page sequence, `true` the pinned map cache.
    pub pinning: bool,
    /// One pass over stack distances or one simulation per quota.
    pub method: MrcMethod,
    /// Every entry is what the map cache counts at that quota (always true here: one pass
    /// is used only where it is exact).
    pub exact: bool,
    /// Page map requests in the trace (one per 4 KiB page per mapped buffer).
    pub maps: u64,
    /// Distinct pages mapped (quotas above this change nothing).
    pub distinct_pages: usize,
    /// Most pages the trace has mapped at once (S1.2's |P|): in the pinned view a quota of at
    /// least this never refuses a map. The page sequence pins one page at a time. `None`
    /// where it is not counted: the page sequence of LRU, FIFO and OPT reads a trace's maps
    /// alone ([`trace_hit_rate_curve`]); the pinned view counts it.
    pub max_pinned: Option<u64>,
    /// The quotas, in pages, increasing.
    pub quota: Vec<usize>,
    /// Map hits at each quota.
    pub hits: Vec<u64>,
    /// Map misses (hypercalls) at each quota.
    pub misses: Vec<u64>,
    /// Refused maps at each quota (every map at quota 0; in the pinned view also maps that
    /// find every cached page pinned).
    pub refused: Vec<u64>,
    /// `hits / maps` at each quota (0 for a trace without maps).
    pub hit_rate: Vec<f64>,
}

impl HitRateCurve {
    /// Number of quotas.
    pub fn len(&self) -> usize {
        self.quota.len()
    }

    /// Whether the curve has no quotas (never, from [`hit_rate_curve`]).
    pub fn is_empty(&self) -> bool {
        self.quota.is_empty()
    }

    /// The point at index `i`.
    pub fn point(&self, i: usize) -> MrcPoint {
        MrcPoint {
            quota: self.quota[i],
            hits: self.hits[i],
            misses: self.misses[i],
            refused: self.refused[i],
        }
    }

    /// The point for `quota`, if the curve has it.
    pub fn at(&self, quota: usize) -> Option<MrcPoint> {
        self.quota.binary_search(&quota).ok().map(|i| self.point(i))
    }
}

/// The page references of a trace as the guest map cache sees them: every 4 KiB page of
/// every mapped buffer, maps and unmaps in trace order, read through the replay's
/// [`TraceWorkload`] (so `iommu:` events duplicating `dma:` ones are skipped, scatter-gather
/// segments are expanded, and so on, exactly as `iommulab replay` does).
pub fn trace_page_refs<S: EventSource>(src: S) -> Result<Vec<PageRef>, WorkloadError> {
    let mut w = InGuest::new(TraceWorkload::new(src).mappings_only());
    guest_page_refs(&mut w, CacheOnly::All)
}

/// The hit-rate curve of a trace (its events, e.g. an opened `.iot`): [`hit_rate_curve`]
/// over [`trace_page_refs`], except that the page sequence of LRU, FIFO and OPT is computed
/// while the trace is read, without holding the reference stream (module `stream`). The
/// curve is the same either way, apart from `method` at a few listed quotas (a simulation
/// per quota when streamed).
///
/// # Errors
/// As [`hit_rate_curve`], [`CurveError::Workload`] for a trace that cannot be read, and
/// [`CurveError::TooLarge`] when streamed past 2^30 page numbers (pages are numbered 16 at a
/// time: 64 KiB chunks touched) or, for OPT, 2^32 − 2 page maps.
pub fn trace_hit_rate_curve<S: EventSource>(
    src: S,
    req: &CurveRequest,
) -> Result<HitRateCurve, CurveError> {
    if !curve_is_streamed(req) {
        let mut w = InGuest::new(TraceWorkload::new(src).mappings_only());
        let refs = guest_page_refs(&mut w, CacheOnly::All)?;
        return hit_rate_curve(&refs, req);
    }
    // The page sequence needs the maps alone: the replay's page-request path, without its
    // tables of live mappings. A guest's buffers are at the trace's physical addresses
    // (`InGuest` relabels them as they are).
    let mut w = TraceWorkload::new(src).mappings_only();
    streamed(req, Feeding::Maps, |out| {
        w.for_each_map_buffer(|phys, len| out.push(PageRun::mapping(phys, len)))
    })
    .map_err(|e| match e {
        StreamError::Curve(c) => c,
        StreamError::Read(w) => w.into(),
    })
}

/// The hit-rate curve of a trace of page requests, libCacheSim's `.oracleGeneral` (each
/// object one 4 KiB page, its id the page number): the page sequence is the requests in
/// order, each mapped and unmapped at once (so nothing is ever pinned, and the pinned view
/// is the same sequence). LRU, FIFO and OPT are computed while the file is read, as for a
/// trace of events; the other policies over the requests held whole.
///
/// # Errors
/// As [`trace_hit_rate_curve`]; [`CurveError::Workload`] for a file that cannot be read or
/// ends inside a request.
pub fn requests_hit_rate_curve(
    reader: &mut OracleGeneralReader,
    req: &CurveRequest,
) -> Result<HitRateCurve, CurveError> {
    let mut ids = Vec::new();
    if !curve_is_streamed(req) {
        let mut refs = Vec::new();
        while reader
            .read_requests(&mut ids)
            .map_err(WorkloadError::from)?
            > 0
        {
            refs.extend(ids.iter().flat_map(|&p| {
                let p = Pfn::new(p);
                [PageRef::Map(p), PageRef::Unmap(p)]
            }));
        }
        return hit_rate_curve(&refs, req);
    }
    // One thread: a batch of requests is parsed in the read buffer where it lands, so
    // reading costs a few instructions a request and handing batches to a second thread
    // would cost more than it saves.
    resolve_quotas(req.quotas.as_ref(), 0)?;
    let mut curve = StreamedCurve::new(req, Feeding::Requests);
    loop {
        let records = reader.read_records().map_err(WorkloadError::from)?;
        if records.is_empty() {
            break;
        }
        curve.requests(records.chunks_exact(RECORD_BYTES).map(record_obj_id));
    }
    curve.finish()
}

/// What the reading thread hands the computing one.
trait Feed: Copy + Send {
    fn feed(self, c: &mut StreamedCurve);
    /// A whole batch, in order.
    #[inline]
    fn feed_all(batch: &[Self], c: &mut StreamedCurve) {
        batch.iter().for_each(|&r| r.feed(c));
    }
}

impl Feed for PageRun {
    #[inline]
    fn feed(self, c: &mut StreamedCurve) {
        c.run(self);
    }

    fn feed_all(batch: &[Self], c: &mut StreamedCurve) {
        c.runs(batch);
    }
}

/// The reading thread's side of the hand-over: items gathered into batches.
struct Batches<'a, T> {
    batch: Vec<T>,
    full: &'a SyncSender<Vec<T>>,
    empty: &'a Receiver<Vec<T>>,
}

impl<T> Batches<'_, T> {
    #[inline]
    fn push(&mut self, t: T) {
        self.batch.push(t);
        if self.batch.len() == STREAM_BATCH {
            self.hand_over();
        }
    }

    // Out of line: the per-item path is the push alone.
    #[cold]
    fn hand_over(&mut self) {
        let spare = self
            .empty
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(STREAM_BATCH));
        // The computing thread ends only after this sender is dropped (or if it panics,
        // which `join` reports).
        let _ = self.full.send(std::mem::replace(&mut self.batch, spare));
    }
}

/// Why a streamed curve failed: reading, or the curve itself.
enum StreamError<E> {
    Read(E),
    Curve(CurveError),
}

/// `req`'s curve (which [`curve_is_streamed`] accepts) over the items `read` pushes, on two
/// threads: this one reads (`read`) into batches, the other computes the curve (each about
/// half the work; batches are recycled).
fn streamed<T: Feed, E>(
    req: &CurveRequest,
    feeding: Feeding,
    read: impl FnOnce(&mut Batches<'_, T>) -> Result<(), E>,
) -> Result<HitRateCurve, StreamError<E>> {
    // Validated before the trace is read, as `hit_rate_curve` does; resolved against the
    // trace's distinct pages at the end.
    resolve_quotas(req.quotas.as_ref(), 0).map_err(|e| StreamError::Curve(e.into()))?;
    let curve = StreamedCurve::new(req, feeding);
    let (full_tx, full_rx) = sync_channel::<Vec<T>>(STREAM_BATCHES);
    let (empty_tx, empty_rx) = sync_channel::<Vec<T>>(STREAM_BATCHES);
    std::thread::scope(|scope| {
        let sim = scope.spawn(move || {
            let mut curve = curve;
            for mut batch in full_rx {
                T::feed_all(&batch, &mut curve);
                batch.clear();
                // The reader may have finished: a batch it no longer takes is dropped.
                let _ = empty_tx.try_send(batch);
            }
            curve.finish()
        });
        let mut out = Batches {
            batch: Vec::with_capacity(STREAM_BATCH),
            full: &full_tx,
            empty: &empty_rx,
        };
        let r = read(&mut out);
        let _ = full_tx.send(std::mem::take(&mut out.batch));
        drop(full_tx);
        let curve = sim
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        r.map_err(StreamError::Read)?;
        curve.map_err(StreamError::Curve)
    })
}

/// Page runs per batch handed from the reading thread to the simulating one (512 KiB). A
/// hand-over often wakes a thread that waits: at 4,096 runs a batch, FIFO on a 20 M-event
/// uniform-random trace took 12–18% longer (BENCHMARKS.md).
const STREAM_BATCH: usize = 1 << 15;
/// Batches in flight between the two threads.
const STREAM_BATCHES: usize = 4;

/// About what one simulated map costs against one step of OPT's one-pass stack walk (a
/// heap update and a hash lookup against a compare): OPT is simulated per quota when the
/// quotas times this are fewer than the top quota.
const OPT_SIMULATION_STEPS: usize = 64;

/// Why a curve cannot be computed as asked.
#[derive(Debug, thiserror::Error)]
pub enum CurveError {
    /// A quota request that cannot work (the façade reports it as a configuration error).
    #[error(transparent)]
    Param(#[from] ParamError),
    /// A policy whose parameters cannot work.
    #[error(transparent)]
    Policy(#[from] crate::Error),
    /// The trace could not be read ([`trace_hit_rate_curve`]).
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// A trace past a limit of the streamed path's page numbers or 32-bit positions.
    #[error("the trace needs more than {limit} {what}, the most a streamed curve keeps")]
    TooLarge {
        /// What overflowed (`distinct pages`, `page maps`).
        what: &'static str,
        /// The most it numbers.
        limit: u64,
    },
}

fn too_large(key: &str, value: usize) -> ParamError {
    ParamError {
        key: key.into(),
        value: value.to_string(),
        expected: format!(
            "at most {MAX_QUOTA} pages (2^24; quotas above the trace's distinct pages change \
             nothing)"
        ),
    }
}

/// The sorted, deduplicated, validated quotas of `req` for a trace of `distinct` pages.
pub(super) fn resolve_quotas(
    quotas: Option<&Quotas>,
    distinct: usize,
) -> Result<Vec<usize>, ParamError> {
    match quotas {
        None => Ok((0..=distinct).collect()),
        Some(Quotas::UpTo(n)) => {
            if *n > MAX_QUOTA {
                return Err(too_large("max_quota", *n));
            }
            Ok((0..=(*n).min(distinct))
                .chain((*n > distinct).then_some(*n))
                .collect())
        }
        Some(Quotas::List(list)) => {
            if list.is_empty() {
                return Err(ParamError {
                    key: "quotas".into(),
                    value: "[]".into(),
                    expected: "at least one quota".into(),
                });
            }
            if let Some(&q) = list.iter().find(|&&q| q > MAX_QUOTA) {
                return Err(too_large("quotas", q));
            }
            let mut v = list.clone();
            v.sort_unstable();
            v.dedup();
            Ok(v)
        }
    }
}

/// The hit-rate curve of `req.policy` over `refs` (a trace's page references, e.g. from
/// [`trace_page_refs`]) in the view and at the quotas `req` asks for. See the
/// [module docs](self) for the views and the method.
///
/// # Errors
/// [`CurveError::Param`] for a quota above [`MAX_QUOTA`] or an empty quota list; a
/// policy whose parameters cannot work ([`CurveError::Policy`]).
///
/// # Examples
/// ```
/// use iommulab_base::addr::Pfn;
/// use iommulab_virt::mrc::{CurveRequest, MrcMethod, hit_rate_curve};
/// use iommulab_virt::{EvictionConfig, PageRef};
/// let (a, b) = (Pfn::new(1), Pfn::new(2));
/// // Page 1 stays in flight while 2 is mapped and 1 is mapped again.
/// let refs = [PageRef::Map(a), PageRef::Map(b), PageRef::Unmap(b), PageRef::Map(a)];
/// let seq = hit_rate_curve(&refs, &CurveRequest::default()).unwrap();
/// assert_eq!((seq.method, seq.quota.clone(), seq.hits.clone()), (MrcMethod::StackDistance, vec![0, 1, 2], vec![0, 0, 1]));
/// let pinned = hit_rate_curve(&refs, &CurveRequest { pinning: true, ..Default::default() }).unwrap();
/// // At quota 1 the map of 2 is refused (1 is pinned), then 1 hits.
/// assert_eq!((pinned.hits[1], pinned.refused[1]), (1, 1));
/// ```
pub fn hit_rate_curve(refs: &[PageRef], req: &CurveRequest) -> Result<HitRateCurve, CurveError> {
    let distinct = distinct_pages(refs);
    let quotas = resolve_quotas(req.quotas.as_ref(), distinct)?;
    let most_pinned = max_pinned(refs);
    let seq;
    let view: &[PageRef] = if req.pinning {
        refs
    } else {
        seq = page_sequence(refs);
        &seq
    };
    // Quotas past the distinct pages equal the distinct page count: compute up to there.
    let top = quotas.last().copied().unwrap_or(0).min(distinct);
    // OPT's one pass costs up to `top` steps per map (a truncated stack); one simulation per
    // quota costs about a heap operation per map: for a few large quotas the simulations
    // are far cheaper (one quota of 65,536 pages over 33 M maps: minutes against seconds).
    // Both are exact here, so the choice changes only `method` and the time.
    let opt_cheaper_by_simulation = quotas.len().saturating_mul(OPT_SIMULATION_STEPS) < top;
    let stack = match req.policy {
        EvictionConfig::Lru(_) => true,
        EvictionConfig::Opt(_) => !opt_cheaper_by_simulation,
        _ => false,
    } && (!req.pinning || pinning_free(refs));
    let (method, maps, by_quota) = if stack {
        let c = match req.policy {
            EvictionConfig::Lru(_) => lru_one_pass(view, top),
            _ => opt_one_pass(view, top),
        };
        debug_assert!(c.exact);
        (c.method, c.maps, c.points)
    } else {
        let mut effective: Vec<usize> = quotas.iter().map(|&q| q.min(distinct)).collect();
        effective.dedup();
        let c = mrc_by_simulation_config(view, &effective, &req.policy)?;
        (c.method, c.maps, c.points)
    };
    let n = quotas.len();
    let mut out = HitRateCurve {
        policy: req.policy.name().to_owned(),
        policy_config: req.policy.clone(),
        pinning: req.pinning,
        method,
        exact: true,
        maps,
        distinct_pages: distinct,
        max_pinned: Some(most_pinned),
        quota: Vec::with_capacity(n),
        hits: Vec::with_capacity(n),
        misses: Vec::with_capacity(n),
        refused: Vec::with_capacity(n),
        hit_rate: Vec::with_capacity(n),
    };
    for q in quotas {
        let eff = q.min(distinct);
        let i = by_quota
            .binary_search_by_key(&eff, |p| p.quota)
            .expect("every effective quota was computed");
        let p = by_quota[i];
        out.quota.push(q);
        out.hits.push(p.hits);
        out.misses.push(p.misses);
        out.refused.push(p.refused);
        out.hit_rate.push(p.hit_ratio().unwrap_or(0.0));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FifoConfig, LruConfig, OptBatchConfig, OptConfig, PrefetchConfig};
    use iommulab_base::addr::Pfn;

    fn p(g: u64) -> Pfn<iommulab_base::addr::Gpa> {
        Pfn::new(g)
    }

    /// A stream with up to three buffers in flight, some spanning two pages.
    fn overlapping() -> Vec<PageRef> {
        let mut refs = Vec::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut live: Vec<Vec<u64>> = Vec::new();
        for _ in 0..600 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if live.len() == 3 || (!live.is_empty() && x.is_multiple_of(3)) {
                let b = live.remove(((x / 3) % live.len() as u64) as usize);
                refs.extend(b.into_iter().map(|g| PageRef::Unmap(p(g))));
            } else {
                let g = (x >> 8) % 23;
                let b: Vec<u64> = if x.is_multiple_of(5) {
                    vec![g, g + 1]
                } else {
                    vec![g]
                };
                refs.extend(b.iter().map(|&g| PageRef::Map(p(g))));
                live.push(b);
            }
        }
        refs
    }

    fn all_policies() -> [EvictionConfig; 5] {
        [
            EvictionConfig::Fifo(FifoConfig::default()),
            EvictionConfig::Lru(LruConfig::default()),
            EvictionConfig::Opt(OptConfig::default()),
            EvictionConfig::OptBatch(OptBatchConfig {
                batch: Some(4),
                window: 64,
            }),
            EvictionConfig::Prefetch(PrefetchConfig::default()),
        ]
    }

    /// The page sequence of LRU/OPT uses one pass, and equals simulating the page sequence.
    #[test]
    fn page_sequence_one_pass_equals_its_simulation() {
        let refs = overlapping();
        assert!(!pinning_free(&refs));
        let seq = page_sequence(&refs);
        for policy in [
            EvictionConfig::Lru(LruConfig::default()),
            EvictionConfig::Opt(OptConfig::default()),
        ] {
            let c = hit_rate_curve(
                &refs,
                &CurveRequest {
                    policy: policy.clone(),
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(c.method, MrcMethod::StackDistance);
            assert!(!c.pinning && c.exact);
            assert_eq!(c.quota, (0..=c.distinct_pages).collect::<Vec<_>>());
            let sim = mrc_by_simulation_config(&seq, &c.quota, &policy).unwrap();
            let points: Vec<MrcPoint> = (0..c.len()).map(|i| c.point(i)).collect();
            assert_eq!(points, sim.points, "{}", c.policy);
        }
    }

    /// The pinned view simulates every policy; the page sequence simulates the non-stack ones.
    #[test]
    fn pinned_view_simulates_and_refuses() {
        let refs = overlapping();
        for policy in all_policies() {
            let req = |pinning| CurveRequest {
                policy: policy.clone(),
                pinning,
                quotas: Some(Quotas::UpTo(6)),
            };
            let pinned = hit_rate_curve(&refs, &req(true)).unwrap();
            assert_eq!(pinned.method, MrcMethod::Simulation);
            assert!(pinned.pinning);
            let direct = mrc_by_simulation_config(&refs, &pinned.quota, &policy).unwrap();
            assert_eq!(pinned.at(3), direct.at(3).copied(), "{}", pinned.policy);
            // Two pages may be in flight with a third mapped: quota 1 refuses some maps.
            assert!(pinned.refused[1] > 0, "{}", pinned.policy);
            let seq = hit_rate_curve(&refs, &req(false)).unwrap();
            assert!(seq.refused[1..].iter().all(|&r| r == 0), "{}", seq.policy);
            assert_eq!(seq.refused[0], seq.maps);
            assert_eq!(pinned.max_pinned, seq.max_pinned);
            assert!(seq.max_pinned >= Some(3));
        }
    }

    /// A quota list is sorted and deduplicated; quotas past the distinct pages equal it.
    #[test]
    fn quota_lists_are_sorted_deduplicated_and_clamped_for_every_policy() {
        let refs = overlapping();
        let distinct = distinct_pages(&refs);
        for policy in all_policies() {
            for pinning in [false, true] {
                let c = hit_rate_curve(
                    &refs,
                    &CurveRequest {
                        policy: policy.clone(),
                        pinning,
                        quotas: Some(Quotas::List(vec![distinct + 50, 2, 0, 2, distinct])),
                    },
                )
                .unwrap();
                assert_eq!(c.quota, [0, 2, distinct, distinct + 50]);
                // The clamp is what the map cache does: simulate above the distinct pages.
                let view = if pinning {
                    refs.clone()
                } else {
                    page_sequence(&refs)
                };
                let sim = mrc_by_simulation_config(&view, &[distinct + 50], &policy).unwrap();
                let mut far = sim.points[0];
                far.quota = distinct + 50;
                assert_eq!(c.at(distinct + 50), Some(far), "{} {pinning}", c.policy);
                assert_eq!(c.hits[2], c.hits[3]);
                assert_eq!(c.hits[3] + c.misses[3], c.maps);
                assert_eq!(c.refused[0], c.maps);
            }
        }
    }

    #[test]
    fn quotas_above_the_limit_and_empty_lists_are_errors() {
        let refs = overlapping();
        let err = |quotas| {
            hit_rate_curve(
                &refs,
                &CurveRequest {
                    quotas: Some(quotas),
                    ..Default::default()
                },
            )
            .unwrap_err()
            .to_string()
        };
        // Up to a quota past the distinct pages: every quota up to them, then the one asked
        // for (it used to list all 2^24 + 1, for minutes and a gigabyte of JSON).
        let c = hit_rate_curve(
            &refs,
            &CurveRequest {
                quotas: Some(Quotas::UpTo(MAX_QUOTA)),
                ..Default::default()
            },
        )
        .unwrap();
        let d = c.distinct_pages;
        assert_eq!(c.quota, (0..=d).chain([MAX_QUOTA]).collect::<Vec<_>>());
        assert_eq!(c.hits[d + 1], c.hits[d]);
        let e = err(Quotas::UpTo(MAX_QUOTA + 1));
        assert!(e.contains("max_quota") && e.contains("16777216"), "{e}");
        let e = err(Quotas::List(vec![3, 1 << 40]));
        assert!(e.contains("quotas") && e.contains("16777216"), "{e}");
        assert!(err(Quotas::List(vec![])).contains("at least one quota"));
        // The limit itself is allowed and costs no more than the distinct pages.
        let c = hit_rate_curve(
            &refs,
            &CurveRequest {
                quotas: Some(Quotas::List(vec![MAX_QUOTA])),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(c.hits[0], c.maps - c.distinct_pages as u64);
    }

    /// Optimal batching needs a lookahead (built over the view) and its parameters checked.
    #[test]
    fn offline_batching_gets_its_lookahead_and_bad_parameters_are_errors() {
        let refs = overlapping();
        let c = hit_rate_curve(
            &refs,
            &CurveRequest {
                policy: EvictionConfig::OptBatch(OptBatchConfig::default()),
                quotas: Some(Quotas::List(vec![4, 40])),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(c.method, MrcMethod::Simulation);
        assert!(c.hits[0] > 0 && c.hits[1] >= c.hits[0]);
        let e = hit_rate_curve(
            &refs,
            &CurveRequest {
                policy: EvictionConfig::OptBatch(OptBatchConfig {
                    batch: Some(0),
                    window: 1,
                }),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("batch"), "{e}");
    }

    /// A pinned view without pinning (each map unmapped before the next) uses one pass.
    #[test]
    fn pinned_view_of_a_pinning_free_trace_uses_one_pass() {
        let refs: Vec<PageRef> = [1u64, 2, 1, 3]
            .iter()
            .flat_map(|&g| [PageRef::Map(p(g)), PageRef::Unmap(p(g))])
            .collect();
        let c = hit_rate_curve(
            &refs,
            &CurveRequest {
                pinning: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(c.method, MrcMethod::StackDistance);
        assert_eq!((c.hits.clone(), c.max_pinned), (vec![0, 0, 1, 1], Some(1)));
        assert_eq!(c.hit_rate, [0.0, 0.0, 0.25, 0.25]);
    }

    #[test]
    fn a_trace_without_maps_has_zero_hit_rates() {
        let c = hit_rate_curve(&[], &CurveRequest::default()).unwrap();
        assert_eq!(
            (c.quota.clone(), c.hit_rate.clone(), c.maps),
            (vec![0], vec![0.0], 0)
        );
    }
}

#[cfg(test)]
mod opt_by_simulation {
    use super::*;
    use crate::{LruConfig, OptConfig};
    use iommulab_base::addr::Pfn;

    /// A page sequence over 1,000 pages, skewed so that some pages recur often.
    fn skewed() -> Vec<PageRef> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..20_000)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let g = (x % 1000) * (x % 1000) / 1000;
                [PageRef::Map(Pfn::new(g)), PageRef::Unmap(Pfn::new(g))]
            })
            .collect()
    }

    /// A few large quotas run OPT by simulation, many by the one pass; the hits are the same
    /// (and LRU stays one pass).
    #[test]
    fn few_large_quotas_simulate_opt_with_the_same_hits() {
        let refs = skewed();
        let req = |policy, quotas: Vec<usize>| CurveRequest {
            policy,
            quotas: Some(Quotas::List(quotas)),
            ..CurveRequest::default()
        };
        let opt = EvictionConfig::Opt(OptConfig::default());
        let few = hit_rate_curve(&refs, &req(opt.clone(), vec![100, 400])).unwrap();
        assert_eq!(few.method, MrcMethod::Simulation);
        let all = hit_rate_curve(&refs, &req(opt, (0..=400).collect())).unwrap();
        assert_eq!(all.method, MrcMethod::StackDistance);
        assert_eq!(few.hits, [all.hits[100], all.hits[400]]);
        let lru = EvictionConfig::Lru(LruConfig::default());
        let one = hit_rate_curve(&refs, &req(lru, vec![400])).unwrap();
        assert_eq!(one.method, MrcMethod::StackDistance);
    }
}
