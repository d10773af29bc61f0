//! The curve of the page sequence (LRU, FIFO, OPT) computed while the trace is read
//! (`iommulab mrc TRACE`): the whole-trace path of [`hit_rate_curve`] holds the reference
//! stream (16 bytes per page map or unmap) and its page sequence before computing anything,
//! about 120 bytes per event.
//!
//! Here pages are numbered as they are first mapped (16 consecutive pages at a time,
//! `iommulab-trace`'s `PageIds`), so per-page state lives in flat arrays; one thread reads
//! the trace while another computes ([`trace_hit_rate_curve`](super::trace_hit_rate_curve));
//! a trace of requests, cheap to read, is read and computed on one thread.
//!
//! At up to 8 listed quotas (`--quotas Q`) each quota keeps a cache of page numbers:
//!
//! - **LRU**: a doubly linked recency list, a pair of `u32` links per page number (a hit
//!   unlinks and relinks at the head, a miss on a full cache drops the tail; a page never
//!   requested has a `next` link of its own, so a miss tells a page's first request);
//! - **FIFO**: a ring of page numbers in insertion order and a membership bit per page (a hit
//!   changes nothing), and a bit per page requested before, read on a miss;
//! - **OPT** (Belady's MIN; S1.3): needs the future, so the pass keeps each map's page number
//!   (4 bytes), a backward pass adds each map's next use (4 bytes), and each quota runs over
//!   them with a max-heap keyed by next use (module `belady`).
//!
//! At every quota (no `--quotas`, `--max-quota`, or a longer list):
//!
//! - **LRU** is a stack algorithm: each map's stack distance, from the workspace's one
//!   counter ([`StackDistance`], `iommulab-trace`), goes into a histogram as the trace is
//!   read; memory is proportional to the distinct pages, not to the maps;
//! - **OPT** is one too (Mattson et al. 1970), and a map's OPT depth depends only on the
//!   maps before it: each map's depth goes into a histogram as the trace is read, from the
//!   critical markers of Bilardi, Ekanadham and Pattnaik (module `opt_markers`, O(log D)
//!   per map for D distinct pages); memory is proportional to the distinct pages. Its loop
//!   runs in a copy compiled for AVX2 where the CPU has it (`isa_dispatch`, chosen once per
//!   curve);
//! - **FIFO** is not a stack algorithm (Belady's anomaly: a larger FIFO cache can hit less),
//!   so no single pass gives every quota: the pass keeps each map's page number (4 bytes)
//!   and FIFO is simulated once per quota over that one array, O(maps) time per quota
//!   (a ring and a bit per page). A full FIFO curve of D distinct pages costs D passes.
//!
//! The counts are those of [`hit_rate_curve`] on the same trace (tests below and
//! `crates/iommulab/tests/mrc_trace.rs`). In the page sequence every map is an independent
//! reference (S1.9), so a trace is read for its maps alone ([`Feeding::Maps`]: the replay's
//! page-request path, without its tables of live mappings), and the most pages in flight
//! ([`HitRateCurve::max_pinned`]) are counted only when the unmaps are fed too
//! ([`Feeding::Buffers`]).
//!
//! [`hit_rate_curve`]: super::hit_rate_curve

use super::belady::{belady_hits, next_uses};
use super::curve::{HitRateCurve, Quotas, resolve_quotas};
use super::opt_markers::OptMarkers;
use super::{CurveError, CurveRequest, MrcMethod};
use crate::{EvictionConfig, PageRun};
use iommulab_trace::page_ids::{ID_CHUNK, PageIds};
use iommulab_trace::stack_distance::StackDistance;
use isa_dispatch::{Isa, Kernel};

/// Most quotas simulated at once while the trace is read (each costs a cache per quota);
/// longer lists and `0..=N` curves take the every-quota methods (module docs).
pub(super) const STREAM_MAX_QUOTAS: usize = 8;

/// "No page" in the LRU list links.
const NIL: u32 = u32::MAX - 2;
/// "Not cached" in the LRU `next` links (distinct from [`NIL`], the tail's next): a page
/// is cached while its `next` link is below this.
const OUT: u32 = u32::MAX - 1;
/// "Never requested" in the LRU `next` links: not cached, and a miss is the page's first.
const NEW: u32 = u32::MAX;
/// The "mapped at least once" bit of a page's in-flight count (maps in flight stay far
/// below 2^31: each needs a live buffer).
const SEEN: u32 = 1 << 31;
/// Most distinct pages the numbering holds ([`PageIds`]: 2^30 numbers, 16 per chunk).
const MAX_PAGES: usize = 1 << 30;
/// Most page maps OPT keeps (positions are `u32`, `u32::MAX` meaning never).
const MAX_MAPS: usize = u32::MAX as usize - 1;
/// What [`MAX_MAPS`] counts, in [`CurveError::TooLarge`].
const PAGE_MAPS: &str = "page maps";

/// Whether [`trace_hit_rate_curve`](super::trace_hit_rate_curve) computes `req` while the
/// trace is read (the page sequence of LRU, FIFO or OPT, at any quotas) rather than after
/// reading it whole.
pub fn curve_is_streamed(req: &CurveRequest) -> bool {
    !req.pinning
        && matches!(
            req.policy,
            EvictionConfig::Lru(_) | EvictionConfig::Fifo(_) | EvictionConfig::Opt(_)
        )
}

/// Whether `quotas` are few enough to simulate each while the trace is read.
fn few_quotas(quotas: Option<&Quotas>) -> bool {
    matches!(quotas, Some(Quotas::List(l)) if l.len() <= STREAM_MAX_QUOTAS)
}

/// A simulated cache of page numbers at one quota (LRU or FIFO; OPT needs the future).
trait QuotaCache {
    /// Room for page numbers below `ids`.
    fn grow(&mut self, ids: usize);
    /// A map of page `id`; whether it is the page's first (known on a miss alone, so a
    /// hit costs nothing more).
    fn access(&mut self, id: u32) -> bool;
    /// Hits so far.
    fn hits(&self) -> u64;
}

/// The maps of pages `ids`, in order, through the pins and every quota's cache.
#[inline]
fn map_each<C: QuotaCache>(cs: &mut [C], pins: &mut Pins, ids: std::ops::Range<u32>) {
    ids.for_each(|id| {
        pins.map(id);
        cs.iter_mut().for_each(|c| {
            c.access(id);
        });
    });
}

/// The limit [`PageIds`] can refuse.
const TOO_MANY_PAGES: &str = "page numbers (16 per 64 KiB chunk touched)";

/// Requests of pages `pages` (each mapped and unmapped at once) through every quota's cache
/// (at least one): [`StreamedCurve::request`]'s work with the caches' type known and without
/// the pins (nothing is pinned); the caches tell a page's first request on a miss. Returns
/// the requests and the pages first requested.
#[inline]
fn request_each<C: QuotaCache>(
    ids: &mut PageIds,
    cs: &mut [C],
    pages: impl Iterator<Item = u64>,
    overflow: &mut Option<&'static str>,
) -> (u64, usize) {
    let (mut requests, mut distinct) = (0u64, 0usize);
    for page in pages {
        let id = match ids.id(page) {
            Some(id) => id,
            None => {
                let Ok(run) = ids.run(page, page + 1) else {
                    *overflow = Some(TOO_MANY_PAGES);
                    continue;
                };
                let n = ids.len();
                cs.iter_mut().for_each(|c| c.grow(n));
                run.base + run.lo
            }
        };
        requests += 1;
        // Every cache sees every request: each tells the same first requests.
        let mut first = false;
        cs.iter_mut().for_each(|c| first = c.access(id));
        distinct += usize::from(first);
    }
    (requests, distinct)
}

/// One LRU cache of page numbers.
#[derive(Debug)]
struct LruCache {
    cap: u32,
    len: u32,
    /// Most recent page, or [`NIL`].
    head: u32,
    /// Least recent page, or [`NIL`].
    tail: u32,
    /// Per page: towards the head ([`NIL`] at the head) and towards the tail ([`NIL`] at the
    /// tail, [`OUT`] if not cached), side by side (one cache line per page visit).
    links: Vec<[u32; 2]>,
    hits: u64,
}

impl LruCache {
    fn new(cap: u32) -> Self {
        Self {
            cap,
            len: 0,
            head: NIL,
            tail: NIL,
            links: Vec::new(),
            hits: 0,
        }
    }

    #[inline]
    fn unlink(&mut self, id: u32) {
        let [p, n] = self.links[id as usize];
        if p == NIL {
            self.head = n;
        } else {
            self.links[p as usize][1] = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.links[n as usize][0] = p;
        }
    }

    #[inline]
    fn push_front(&mut self, id: u32) {
        self.links[id as usize] = [NIL, self.head];
        if self.head == NIL {
            self.tail = id;
        } else {
            self.links[self.head as usize][0] = id;
        }
        self.head = id;
    }
}

impl QuotaCache for LruCache {
    fn grow(&mut self, ids: usize) {
        self.links.resize(ids, [NIL, NEW]);
    }

    #[inline]
    fn access(&mut self, id: u32) -> bool {
        let next = self.links[id as usize][1];
        if next < OUT {
            self.hits += 1;
            if self.head != id {
                self.unlink(id);
                self.push_front(id);
            }
            return false;
        }
        if self.len == self.cap {
            let victim = self.tail;
            self.unlink(victim);
            self.links[victim as usize][1] = OUT;
        } else {
            self.len += 1;
        }
        self.push_front(id);
        next == NEW
    }

    fn hits(&self) -> u64 {
        self.hits
    }
}

/// One FIFO cache of page numbers.
#[derive(Debug)]
struct FifoCache {
    cap: usize,
    /// Cached pages, oldest first.
    queue: std::collections::VecDeque<u32>,
    /// One bit per page: cached.
    cached: Vec<u64>,
    /// One bit per page: requested before (read on a miss alone).
    seen: Vec<u64>,
    hits: u64,
}

impl FifoCache {
    fn new(cap: u32) -> Self {
        Self {
            cap: cap as usize,
            queue: std::collections::VecDeque::new(),
            cached: Vec::new(),
            seen: Vec::new(),
            hits: 0,
        }
    }
}

impl QuotaCache for FifoCache {
    fn grow(&mut self, ids: usize) {
        self.cached.resize(ids.div_ceil(64), 0);
        self.seen.resize(ids.div_ceil(64), 0);
    }

    #[inline]
    fn access(&mut self, id: u32) -> bool {
        let (w, bit) = (id as usize / 64, 1u64 << (id % 64));
        if self.cached[w] & bit != 0 {
            self.hits += 1;
            return false;
        }
        if self.queue.len() == self.cap
            && let Some(old) = self.queue.pop_front()
        {
            self.cached[old as usize / 64] &= !(1u64 << (old % 64));
        }
        self.queue.push_back(id);
        self.cached[w] |= bit;
        let first = self.seen[w] & bit == 0;
        self.seen[w] |= bit;
        first
    }

    fn hits(&self) -> u64 {
        self.hits
    }
}

/// What the pass keeps for one policy's curve.
#[derive(Debug)]
enum Caches {
    /// LRU at a few quotas: a cache per positive quota.
    Lru(Vec<LruCache>),
    /// FIFO at a few quotas: a cache per positive quota.
    Fifo(Vec<FifoCache>),
    /// OPT at a few quotas, and FIFO at many: each map's page number, until the end.
    Seq(Vec<u32>),
    /// LRU at every quota: `hist[d]` maps at stack depth d (1-based).
    LruAll { sd: StackDistance, hist: Vec<u64> },
    /// OPT at every quota: `hist[d]` maps at OPT stack depth d (1-based).
    OptAll { m: OptMarkers, hist: Vec<u64> },
}

/// What a streamed curve is fed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Feeding {
    /// The page runs of every map and unmap: the most pages in flight are counted.
    Buffers,
    /// The page runs of the maps alone (a trace's page-request path): the most pages in
    /// flight are not known.
    Maps,
    /// Page requests, each mapped and unmapped at once (`.oracleGeneral`): one page in
    /// flight at a time.
    Requests,
}

/// Per page number: the maps in flight (for the most pages in flight) and the pages seen.
#[derive(Debug, Default)]
struct Pins {
    /// Whether maps are counted in flight (unmaps are fed).
    counted: bool,
    /// Maps in flight per page number, and [`SEEN`] once mapped (one array: one cache line
    /// per page visit).
    in_flight: Vec<u32>,
    distinct: usize,
    pinned_now: u64,
    most_pinned: u64,
    maps: u64,
}

impl Pins {
    /// A map of page `id`; whether it is the page's first (so surely a miss).
    #[inline(always)]
    fn map(&mut self, id: u32) -> bool {
        let c = &mut self.in_flight[id as usize];
        let fresh = *c & SEEN == 0;
        if fresh {
            *c = SEEN;
            self.distinct += 1;
        }
        self.maps += 1;
        if !self.counted {
            return fresh;
        }
        if *c == SEEN {
            self.pinned_now += 1;
            self.most_pinned = self.most_pinned.max(self.pinned_now);
        }
        // Saturates rather than wraps (2^31 − 1 maps of one page in flight).
        *c = c.saturating_add(1);
        fresh
    }

    /// An unmap of page `id` (ignored if none of its maps is in flight).
    #[inline]
    fn unmap(&mut self, id: u32) {
        let c = &mut self.in_flight[id as usize];
        if *c & !SEEN > 0 {
            *c -= 1;
            if *c == SEEN {
                self.pinned_now -= 1;
            }
        }
    }
}

/// The state of a streamed curve: feed it the trace's page runs in order
/// ([`run`](Self::run)), then [`finish`](Self::finish).
#[derive(Debug)]
pub(super) struct StreamedCurve {
    req: CurveRequest,
    feeding: Feeding,
    /// Page numbers, 16 consecutive pages at a time (a run's pages inside one 16-page chunk
    /// cost one lookup).
    ids: PageIds,
    pins: Pins,
    caches: Caches,
    /// What the batches of maps are compiled for ([`runs`](Self::runs),
    /// [`requests`](Self::requests)): the best the CPU has for OPT at every quota, whose tree
    /// passes over 16 lanes need a 32-bit vector min and compare; the baseline otherwise.
    isa: Isa,
    /// Set once a limit of the page numbering is passed; reported by `finish`.
    overflow: Option<&'static str>,
}

/// Runs ahead of the one being mapped whose first page's slots OPT asks the cache for
/// ([`OptMarkers::prefetch`]): a map's first loads (its page's slot, then that slot's and
/// the next one's tree group) are dependent misses at tens of thousands of pages. 2 to 16
/// runs ahead measured alike (BENCHMARKS.md).
const AHEAD: usize = 4;

/// A batch of page runs through a curve, compiled once per instruction set
/// ([`StreamedCurve::runs`]).
struct Runs<'a> {
    curve: &'a mut StreamedCurve,
    batch: &'a [PageRun],
}

/// A batch of requests (`.oracleGeneral`) through a curve, compiled once per instruction
/// set ([`StreamedCurve::requests`]).
struct Requests<'a, I> {
    curve: &'a mut StreamedCurve,
    pages: I,
}

impl<I: Iterator<Item = u64>> Kernel for Requests<'_, I> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        for p in self.pages {
            self.curve.request(p);
        }
    }
}

impl Kernel for Runs<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let Runs { curve, batch } = self;
        for (i, &r) in batch.iter().enumerate() {
            if let (Caches::OptAll { m, .. }, Some(a)) = (&curve.caches, batch.get(i + AHEAD))
                && let Some(id) = curve.ids.id(a.first.get())
            {
                m.prefetch(id);
            }
            curve.run(r);
        }
    }
}

impl StreamedCurve {
    /// A curve for `req`, which [`curve_is_streamed`] accepts, with its quotas validated
    /// (they are resolved against the trace's distinct pages by [`finish`](Self::finish)).
    // Quotas are at most MAX_QUOTA (2^24) after validation.
    #[allow(clippy::cast_possible_truncation)]
    pub(super) fn new(req: &CurveRequest, feeding: Feeding) -> Self {
        let listed = match &req.quotas {
            Some(Quotas::List(l)) if few_quotas(req.quotas.as_ref()) => {
                let mut l = l.clone();
                l.sort_unstable();
                l.dedup();
                l
            }
            _ => Vec::new(),
        };
        let positive = listed.iter().filter(|&&q| q > 0).map(|&q| q as u32);
        let few = few_quotas(req.quotas.as_ref());
        let caches = match req.policy {
            EvictionConfig::Lru(_) if few => Caches::Lru(positive.map(LruCache::new).collect()),
            EvictionConfig::Fifo(_) if few => Caches::Fifo(positive.map(FifoCache::new).collect()),
            EvictionConfig::Lru(_) => Caches::LruAll {
                sd: StackDistance::default(),
                hist: Vec::new(),
            },
            EvictionConfig::Opt(_) if !few => Caches::OptAll {
                m: OptMarkers::default(),
                hist: Vec::new(),
            },
            _ => Caches::Seq(Vec::new()),
        };
        let isa = if matches!(caches, Caches::OptAll { .. }) {
            Isa::detect()
        } else {
            Isa::BASELINE
        };
        Self {
            req: req.clone(),
            feeding,
            ids: PageIds::default(),
            pins: Pins {
                counted: feeding == Feeding::Buffers,
                ..Pins::default()
            },
            caches,
            isa,
            overflow: None,
        }
    }

    /// The page runs of `batch`, in order, as [`run`](Self::run) takes each, compiled for
    /// the instruction set chosen when the curve was made.
    pub(super) fn runs(&mut self, batch: &[PageRun]) {
        self.isa.run(Runs { curve: self, batch });
    }

    /// The next run of page references of the trace: split at 16-page chunks, each part's
    /// page numbers found (numbered, for a map) once, then its pages taken in order.
    #[inline(always)]
    pub(super) fn run(&mut self, r: PageRun) {
        let mut page = r.first.get();
        let end = page + u64::from(r.pages);
        while page < end {
            let part_end = (page / ID_CHUNK + 1) * ID_CHUNK;
            let part_end = part_end.min(end);
            if r.unmap {
                // An unmap of a chunk never mapped changes nothing.
                if let Some(base) = self.ids.chunk_base(page) {
                    // Below ID_CHUNK: offsets inside the chunk.
                    #[allow(clippy::cast_possible_truncation)]
                    let lo = base + (page % ID_CHUNK) as u32;
                    #[allow(clippy::cast_possible_truncation)]
                    let hi = lo + (part_end - page) as u32;
                    (lo..hi).for_each(|id| self.pins.unmap(id));
                }
            } else if !self.map_part(page, part_end) {
                return;
            }
            page = part_end;
        }
    }

    /// A request of page `page` in a trace of requests (`.oracleGeneral`): mapped and
    /// unmapped at once, as the page sequence takes every map.
    #[inline(always)]
    pub(super) fn request(&mut self, page: u64) {
        self.map_part(page, page + 1);
    }

    /// Requests of pages `pages`, in order, each as [`Self::request`]; LRU and FIFO at a few
    /// quotas choose their caches once for the whole batch, not per request.
    #[inline]
    pub(super) fn requests(&mut self, pages: impl Iterator<Item = u64>) {
        let (ids, overflow) = (&mut self.ids, &mut self.overflow);
        let (requests, distinct) = match &mut self.caches {
            Caches::Lru(cs) if !cs.is_empty() => request_each(ids, cs, pages, overflow),
            Caches::Fifo(cs) if !cs.is_empty() => request_each(ids, cs, pages, overflow),
            _ => {
                let isa = self.isa;
                isa.run(Requests { curve: self, pages });
                return;
            }
        };
        // The pins of such a curve count nothing else (nothing is pinned).
        self.pins.maps += requests;
        self.pins.distinct += distinct;
    }

    /// The maps of pages `page..end` (inside one chunk); `false` once a limit is passed.
    #[inline(always)]
    fn map_part(&mut self, page: u64, end: u64) -> bool {
        let Ok(run) = self.ids.run(page, end) else {
            self.overflow = Some(TOO_MANY_PAGES);
            return false;
        };
        if run.fresh {
            let ids = self.ids.len();
            self.pins.in_flight.resize(ids, 0);
            match &mut self.caches {
                Caches::Lru(cs) => cs.iter_mut().for_each(|c| c.grow(ids)),
                Caches::Fifo(cs) => cs.iter_mut().for_each(|c| c.grow(ids)),
                Caches::Seq(_) | Caches::LruAll { .. } | Caches::OptAll { .. } => {}
            }
        }
        let ids = run.base + run.lo..run.base + run.hi;
        let pins = &mut self.pins;
        match &mut self.caches {
            Caches::Lru(cs) => map_each(cs, pins, ids),
            Caches::Fifo(cs) => map_each(cs, pins, ids),
            Caches::LruAll { sd, hist } => ids.for_each(|id| {
                pins.map(id);
                // Distance d (other pages since the last map): a hit at every quota above d.
                if let Some(d) = sd.access(id) {
                    // Below the distinct pages, which are below 2^30.
                    #[allow(clippy::cast_possible_truncation)]
                    let d = d as usize + 1;
                    if d >= hist.len() {
                        hist.resize((d + 1).next_power_of_two(), 0);
                    }
                    hist[d] += 1;
                }
            }),
            Caches::OptAll { m, hist } => {
                // A loop, not a closure: compiled into `runs`' copy for the CPU's
                // instruction set (a closure may stay a call to the baseline's code).
                for id in ids {
                    pins.map(id);
                    // Depth d: a hit at every quota ≥ d.
                    if let Some(d) = m.access(id) {
                        let d = d as usize;
                        if d >= hist.len() {
                            hist.resize((d + 1).next_power_of_two(), 0);
                        }
                        hist[d] += 1;
                    }
                }
            }
            Caches::Seq(seq) => {
                if seq.len() + ids.len() > MAX_MAPS {
                    self.overflow = Some(PAGE_MAPS);
                    return false;
                }
                ids.for_each(|id| {
                    pins.map(id);
                    seq.push(id);
                });
            }
        }
        true
    }

    /// The curve, as [`hit_rate_curve`](super::hit_rate_curve) gives it.
    ///
    /// # Errors
    /// [`CurveError::TooLarge`] past [`MAX_PAGES`] page numbers or, for OPT at a few quotas
    /// and FIFO at many, [`MAX_MAPS`] page maps.
    pub(super) fn finish(self) -> Result<HitRateCurve, CurveError> {
        if let Some(what) = self.overflow {
            let limit = if what == PAGE_MAPS {
                MAX_MAPS
            } else {
                MAX_PAGES
            };
            return Err(CurveError::TooLarge {
                what,
                limit: limit as u64,
            });
        }
        let (distinct, numbered) = (self.pins.distinct, self.ids.len());
        let maps = self.pins.maps;
        let most_pinned = match self.feeding {
            Feeding::Buffers => Some(self.pins.most_pinned),
            Feeding::Maps => None,
            Feeding::Requests => Some(maps.min(1)),
        };
        let quotas = resolve_quotas(self.req.quotas.as_ref(), distinct)?;
        drop(self.ids);
        drop(self.pins);
        let fifo = matches!(self.req.policy, EvictionConfig::Fifo(_));
        // Hits at each quota of `quotas` past 0 (a quota past the distinct pages is theirs).
        let effective = quotas.iter().filter(|&&q| q > 0).map(|&q| q.min(distinct));
        let (method, mut positive): (MrcMethod, Vec<u64>) = match self.caches {
            Caches::Lru(cs) => (
                MrcMethod::Simulation,
                cs.iter().map(QuotaCache::hits).collect(),
            ),
            Caches::Fifo(cs) => (
                MrcMethod::Simulation,
                cs.iter().map(QuotaCache::hits).collect(),
            ),
            Caches::LruAll { hist, .. } | Caches::OptAll { hist, .. } => {
                (MrcMethod::StackDistance, cumulative(&hist, effective))
            }
            Caches::Seq(seq) if fifo => (
                MrcMethod::Simulation,
                effective.map(|q| fifo_hits(&seq, numbered, q)).collect(),
            ),
            Caches::Seq(seq) => {
                // OPT at a few quotas: Belady per quota, over the next uses.
                let next = next_uses(&seq, numbered);
                (
                    MrcMethod::Simulation,
                    effective
                        .map(|q| belady_hits(&seq, &next, numbered, q))
                        .collect(),
                )
            }
        };
        positive.reverse();
        let n = quotas.len();
        let mut out = HitRateCurve {
            policy: self.req.policy.name().to_owned(),
            policy_config: self.req.policy.clone(),
            pinning: false,
            method,
            exact: true,
            maps,
            distinct_pages: distinct,
            max_pinned: most_pinned,
            quota: Vec::with_capacity(n),
            hits: Vec::with_capacity(n),
            misses: Vec::with_capacity(n),
            refused: Vec::with_capacity(n),
            hit_rate: Vec::with_capacity(n),
        };
        for q in quotas {
            let (hits, misses, refused) = if q == 0 {
                (0, 0, maps)
            } else {
                let h = positive.pop().expect("one count per positive quota");
                (h, maps - h, 0)
            };
            out.quota.push(q);
            out.hits.push(hits);
            out.misses.push(misses);
            out.refused.push(refused);
            #[allow(clippy::cast_precision_loss)] // a ratio for display
            out.hit_rate.push(if maps == 0 {
                0.0
            } else {
                hits as f64 / maps as f64
            });
        }
        Ok(out)
    }
}

/// Hits at each quota of `quotas` (increasing) from a histogram of stack depths: the maps
/// at depth ≤ q.
fn cumulative(hist: &[u64], quotas: impl Iterator<Item = usize>) -> Vec<u64> {
    let (mut at, mut sum) = (0usize, 0u64);
    quotas
        .map(|q| {
            while at < hist.len() && at <= q {
                sum += hist[at];
                at += 1;
            }
            sum
        })
        .collect()
}

/// FIFO's hits on the page sequence `seq` (page numbers below `numbered`) at quota `q ≥ 1`.
// Quotas are at most MAX_QUOTA (2^24).
#[allow(clippy::cast_possible_truncation)]
fn fifo_hits(seq: &[u32], numbered: usize, q: usize) -> u64 {
    let mut c = FifoCache::new(q as u32);
    c.grow(numbered);
    seq.iter().for_each(|&id| {
        c.access(id);
    });
    c.hits()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrc::hit_rate_curve;
    use crate::{FifoConfig, LruConfig, OptConfig, PageRef};
    use iommulab_base::addr::{Gpa, Pfn};

    fn p(g: u64) -> Pfn<Gpa> {
        Pfn::new(g)
    }

    /// A stream of buffers (page runs) of one to three pages, and one in eight of up to 40
    /// (across 16-page chunks), up to four in flight, pages drawn with locality from
    /// 0..span.
    fn stream(seed: u64, len: usize, span: u64) -> Vec<PageRun> {
        let mut x = seed | 1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut runs, mut live): (Vec<PageRun>, Vec<PageRun>) = (Vec::new(), Vec::new());
        while runs.len() < len {
            let r = rnd();
            if live.len() == 4 || (!live.is_empty() && r % 3 == 0) {
                let b = live.remove((r / 3) as usize % live.len());
                runs.push(PageRun { unmap: true, ..b });
            } else {
                let g = if r % 4 == 0 {
                    r % span
                } else {
                    (r >> 8) % (span / 4 + 1)
                };
                let pages = if (r >> 30) % 8 == 0 {
                    1 + (r >> 40) % 40
                } else {
                    1 + (r >> 20) % 3
                };
                let b = PageRun {
                    first: p(g),
                    pages: u32::try_from(pages).unwrap(),
                    unmap: false,
                };
                runs.push(b);
                live.push(b);
            }
        }
        runs
    }

    fn streamed(runs: &[PageRun], req: &CurveRequest) -> HitRateCurve {
        let mut s = StreamedCurve::new(req, Feeding::Buffers);
        runs.iter().for_each(|&r| s.run(r));
        s.finish().unwrap()
    }

    #[test]
    fn streamed_curves_equal_the_whole_trace_ones() {
        let policies = [
            EvictionConfig::Lru(LruConfig::default()),
            EvictionConfig::Fifo(FifoConfig::default()),
            EvictionConfig::Opt(OptConfig::default()),
        ];
        for seed in 1..6u64 {
            let runs = stream(seed * 0x9E37_79B9, 2000, 40 + seed * 30);
            let refs: Vec<_> = runs.iter().flat_map(|r| r.refs()).collect();
            for policy in &policies {
                let many: Vec<usize> = (0..40).map(|q| q * 3).collect();
                for quotas in [
                    Some(Quotas::List(vec![0, 1, 2, 7])),
                    Some(Quotas::List(vec![13, 3, 3, 1000])),
                    Some(Quotas::List(vec![25])),
                    Some(Quotas::List(many.clone())),
                    Some(Quotas::UpTo(60)),
                    Some(Quotas::UpTo(100_000)),
                    None,
                ] {
                    let req = CurveRequest {
                        policy: policy.clone(),
                        pinning: false,
                        quotas: quotas.clone(),
                    };
                    assert!(curve_is_streamed(&req));
                    let mut whole = hit_rate_curve(&refs, &req).unwrap();
                    let s = streamed(&runs, &req);
                    // Only the method may differ (LRU and OPT take one pass on the whole
                    // trace; streamed, at a few quotas, a simulation per quota).
                    whole.method = s.method;
                    assert_eq!(s, whole, "seed {seed}, {policy:?}, quotas {quotas:?}");
                    assert!(s.hits.iter().any(|&h| h > 0), "the stream has reuse");
                    let few = matches!(&quotas, Some(Quotas::List(l)) if l.len() <= 8);
                    let fifo = matches!(policy, EvictionConfig::Fifo(_));
                    let expected = if few || fifo {
                        MrcMethod::Simulation
                    } else {
                        MrcMethod::StackDistance
                    };
                    assert_eq!(s.method, expected, "{policy:?}, quotas {quotas:?}");
                }
            }
        }
    }

    /// Requests (`.oracleGeneral`), fed in batches of uneven size, give the curve of the
    /// same pages each mapped and unmapped at once: the caches' own count of first requests
    /// (LRU's and FIFO's request path keeps no pins) is the distinct pages.
    #[test]
    fn requests_equal_the_whole_trace_curve() {
        for seed in 1..4u64 {
            let pages: Vec<u64> = stream(seed * 0x51_7CC1, 3000, 200 + seed * 100)
                .iter()
                .filter(|r| !r.unmap)
                .map(|r| r.first.get() + u64::from(r.pages) - 1)
                .collect();
            let refs: Vec<_> = pages
                .iter()
                .flat_map(|&g| [PageRef::Map(p(g)), PageRef::Unmap(p(g))])
                .collect();
            for policy in [
                EvictionConfig::Lru(LruConfig::default()),
                EvictionConfig::Fifo(FifoConfig::default()),
                EvictionConfig::Opt(OptConfig::default()),
            ] {
                for quotas in [vec![0, 5, 40, 10_000], vec![17], vec![0]] {
                    let req = CurveRequest {
                        policy: policy.clone(),
                        pinning: false,
                        quotas: Some(Quotas::List(quotas.clone())),
                    };
                    let mut s = StreamedCurve::new(&req, Feeding::Requests);
                    pages.chunks(97).for_each(|b| s.requests(b.iter().copied()));
                    let s = s.finish().unwrap();
                    let mut whole = hit_rate_curve(&refs, &req).unwrap();
                    whole.method = s.method;
                    assert_eq!(s, whole, "seed {seed}, {policy:?}, quotas {quotas:?}");
                    assert!(s.distinct_pages > 50 && s.distinct_pages < pages.len());
                    assert!(s.hits.iter().any(|&h| h > 0) || quotas == [0]);
                }
            }
        }
    }

    /// OPT at every quota compiled for this CPU (AVX2 where it has it) and for the baseline
    /// target: the same depth of every map, on a stream over enough pages for three levels
    /// of the slot tree and renumbered slots, fed in uneven batches, and its first pages as
    /// requests (`.oracleGeneral`). (Without AVX2 both are
    /// the baseline; `IOMMULAB_ISA=baseline` makes the CLI take the fallback anywhere.)
    #[test]
    fn opt_for_this_cpu_equals_the_baseline() {
        let runs = stream(0xD1B5_4A32, 40_000, 16_000);
        let req = CurveRequest {
            policy: EvictionConfig::Opt(OptConfig::default()),
            pinning: false,
            quotas: None,
        };
        let hist = |isa: Isa, requests: bool| {
            let feeding = if requests {
                Feeding::Requests
            } else {
                Feeding::Buffers
            };
            let mut s = StreamedCurve::new(&req, feeding);
            assert_eq!(
                s.isa,
                Isa::detect(),
                "OPT at every quota takes the CPU's best"
            );
            s.isa = isa;
            if requests {
                s.requests(runs.iter().filter(|r| !r.unmap).map(|r| r.first.get()));
            } else {
                runs.chunks(777).for_each(|b| s.runs(b));
            }
            let Caches::OptAll { hist, .. } = &s.caches else {
                panic!("OPT at every quota keeps a histogram");
            };
            (hist.clone(), s.finish().unwrap())
        };
        let (base, base_curve) = hist(Isa::BASELINE, false);
        let (best, best_curve) = hist(Isa::detect(), false);
        assert!(base.len() > 4_096 && base[1..].iter().filter(|&&n| n > 0).count() > 1_000);
        assert_eq!(best, base, "{}", Isa::detect().name());
        assert_eq!(best_curve, base_curve);
        // The same pages as requests (`.oracleGeneral`): one per run, its first.
        assert_eq!(hist(Isa::detect(), true), hist(Isa::BASELINE, true));
    }

    #[test]
    fn only_the_page_sequence_of_lru_fifo_and_opt_streams() {
        let mut req = CurveRequest {
            quotas: Some(Quotas::List(vec![4])),
            ..CurveRequest::default()
        };
        assert!(curve_is_streamed(&req));
        req.pinning = true;
        assert!(!curve_is_streamed(&req));
        req.pinning = false;
        req.quotas = Some(Quotas::UpTo(4));
        assert!(curve_is_streamed(&req));
        req.quotas = Some(Quotas::List((0..=STREAM_MAX_QUOTAS).collect()));
        assert!(curve_is_streamed(&req));
        req.quotas = Some(Quotas::List(vec![4]));
        req.policy = EvictionConfig::Prefetch(crate::PrefetchConfig::default());
        assert!(!curve_is_streamed(&req));
    }

    #[test]
    fn an_empty_trace_gives_an_empty_curve() {
        let req = CurveRequest {
            quotas: Some(Quotas::List(vec![0, 8])),
            ..CurveRequest::default()
        };
        let c = streamed(&[], &req);
        assert_eq!(
            (c.maps, c.hits.clone(), c.hit_rate.clone()),
            (0, vec![0, 0], vec![0.0, 0.0])
        );
    }
}
