//! Eviction policies of the guest map cache (S1.3, S1.4): which evictable page to
//! give up when a miss finds the cache at its quota, and — for batching policies — which
//! extra pages to map in the same hypercall.
//!
//! | file | policy | kind | victim cost |
//! |---|---|---|---|
//! | [`fifo`] | [`Fifo`]: first mapped, first evicted (§4.2) | online | O(1 + pinned pages ahead of the victim) |
//! | [`lru`] | [`Lru`]: least recently used (§2.4, §4.2) | online | O(1) |
//! | [`opt`] | [`Opt`]: Belady, farthest next map (§2.3) | offline | O(log n) |
//! | [`opt_batch`] | [`OptBatch`]: OPT victims + map the next distinct future pages (§2.3) | offline | O(log n) + O(batch log batch) per miss |
//! | [`prefetch`] | [`Prefetch`]: LRU victims + map frequent followers (§2.5, §3.3) | online | O(1) + O(max_batch) per miss |
//!
//! Policies address cached pages by [`CacheSlot`], the map cache's stable index of the page's
//! entry, so per-page policy state lives in plain vectors indexed by slot (an LRU list costs
//! 8 bytes per page, no hashing). The page number comes along for policies that key on it.
//!
//! Invariants every policy keeps (tested for all policies in `tests/map_cache_props.rs`):
//! - [`EvictionPolicy::victim`] returns only a slot for which the `evictable` predicate
//!   holds (refcount 0); pinned pages are never victims.
//! - it returns `None` only if no tracked page is evictable.
//! - [`EvictionPolicy::prefetch`] proposes only pages the `cached` lookup does not find, at
//!   most `room.free + room.evictable` of them, so prefetching never evicts a page of the
//!   same batch.

pub mod fifo;
pub mod lru;
pub mod opt;
pub mod opt_batch;
pub mod prefetch;

use std::fmt::Debug;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::{Lookahead, Result};
use iommulab_base::addr::{Gpa, Pfn};

pub use fifo::{Fifo, FifoConfig};
pub use lru::{Lru, LruConfig};
pub use opt::{Opt, OptConfig};
pub use opt_batch::{OptBatch, OptBatchConfig};
pub use prefetch::{Prefetch, PrefetchConfig};

/// The map cache's stable index of a cached page's entry. Valid from
/// [`EvictionPolicy::on_insert`] to [`EvictionPolicy::on_remove`]; the cache reuses it for
/// another page afterwards. Slots are dense: `0..` the number of slots reserved through
/// [`EvictionPolicy::reserve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CacheSlot(u32);

impl CacheSlot {
    /// Wraps a raw index (the map cache hands these out; tests may build their own).
    pub const fn new(index: u32) -> Self {
        Self(index)
    }
    /// The index, for per-slot vectors.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
    /// The raw index.
    pub const fn get(self) -> u32 {
        self.0
    }
}

/// How many extra pages a miss's hypercall could take without evicting a page of the
/// same batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Room {
    /// Free entries under the quota (`Q − |S|`).
    pub free: usize,
    /// Evictable pages (`|E|`), the missing page excluded (it is pinned).
    pub evictable: usize,
}

impl Room {
    /// `free + evictable`: the most pages a batch can add.
    pub const fn total(self) -> usize {
        self.free + self.evictable
    }
}

/// Chooses which evictable map-cache page to give up, and which pages a miss maps ahead.
///
/// The map cache calls, in this order for one `map(gfn)`:
/// 1. [`on_reference`](Self::on_reference) — every request, even one that will be refused;
/// 2. on a hit, [`on_hit`](Self::on_hit); on a miss, [`victim`](Self::victim) +
///    [`on_remove`](Self::on_remove) as often as needed, then
///    [`on_insert`](Self::on_insert)`(…, pinned = true)`, then
///    [`prefetch`](Self::prefetch) and, per prefetched page, victims and
///    `on_insert(…, pinned = false)`.
///
/// `unmap` that drops the refcount to 0 calls [`on_unpin`](Self::on_unpin). A quota shrink
/// calls `victim` + `on_remove`.
///
/// Invariants: see the [module docs](self).
pub trait EvictionPolicy: Sized {
    /// Per-policy knobs; the TOML table under `[eviction]`.
    type Config: Clone + Default + Debug + Serialize + DeserializeOwned;
    /// The policy's name, equal to its [`EvictionConfig::name`].
    const NAME: &'static str;
    /// Whether [`new`](Self::new) needs a [`Lookahead`] (the policy reads the future).
    const OFFLINE: bool = false;

    /// A policy for a cache of `capacity` pages (a sizing hint: the quota can change; see
    /// [`reserve`](Self::reserve)). Offline policies fail with
    /// [`Error::LookaheadRequired`](crate::Error::LookaheadRequired) without
    /// `lookahead`; online ones ignore it.
    fn new(
        capacity: usize,
        config: &Self::Config,
        lookahead: Option<Arc<Lookahead>>,
    ) -> Result<Self>;

    /// The cache may hand out slots `0..slots` from now on: size per-slot state exactly.
    fn reserve(&mut self, slots: usize);

    /// The driver asks to map `gfn` (before the cache decides hit, miss or refusal).
    /// Offline policies advance their position in the lookahead here; the prefetcher
    /// records followers.
    fn on_reference(&mut self, gfn: Pfn<Gpa>) {
        let _ = gfn;
    }

    /// `gfn` entered the cache in `slot`, pinned (the missing page) or evictable (a
    /// prefetched page). The caller guarantees `slot` is not tracked.
    fn on_insert(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>, pinned: bool);

    /// A map hit on the page in `slot`; `was_evictable` says it was in E (refcount 0) and
    /// is now pinned.
    fn on_hit(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>, was_evictable: bool);

    /// The page's refcount dropped to 0: it joins E (stays mapped).
    fn on_unpin(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>);

    /// The page in `slot` left the cache (evicted); forget it.
    fn on_remove(&mut self, slot: CacheSlot, gfn: Pfn<Gpa>);

    /// The next page to evict: a slot for which `evictable` is true, or `None` if every
    /// tracked page is pinned. Does not remove it (the cache calls `on_remove`).
    fn victim(&mut self, evictable: impl FnMut(CacheSlot) -> bool) -> Option<CacheSlot>;

    /// Extra pages to map in the hypercall that maps the missing page `missing` (already
    /// inserted and pinned), in order; `cached` returns the slot of a cached page (`None`:
    /// not cached). Push at most `room.total()` pages, none cached, no duplicates. The
    /// pages are then inserted in order, each evicting [`victim`](Self::victim)s as needed,
    /// so a policy that wants to keep a cached page through the batch must order its state
    /// accordingly here. Default: none (demand mapping).
    fn prefetch(
        &mut self,
        missing: Pfn<Gpa>,
        room: Room,
        cached: impl Fn(Pfn<Gpa>) -> Option<CacheSlot>,
        out: &mut Vec<Pfn<Gpa>>,
    ) {
        let _ = (missing, room, cached, out);
    }

    /// The map cache has inserted every page of the batch [`prefetch`](Self::prefetch)
    /// proposed (called after every miss). Default: nothing.
    fn on_batch_end(&mut self) {}

    /// Heap bytes of the policy's state that scales with the cache: per-slot arrays and
    /// fixed scratch buffers (the issue's ≤ 32 bytes per cached page is measured on this
    /// plus the map cache's own slab and index).
    fn metadata_bytes(&self) -> usize;

    /// Heap bytes of state kept for pages that are *not* cached (history over every page
    /// ever mapped: the prefetcher's follower table, S1.4). Default 0.
    fn history_bytes(&self) -> usize {
        0
    }
}

/// Test-only view of a policy's queue (after foyer's `Dump`): lets FIFO/LRU tests
/// assert the exact eviction order.
#[cfg(any(test, feature = "test-utils"))]
pub trait Dump {
    /// The policy's candidates, next victim first. May include pinned pages (FIFO keeps
    /// them in its queue and skips them); [`crate::MapCache::eviction_order`] filters
    /// those out.
    fn dump(&self) -> Vec<CacheSlot>;
}

/// The eviction policy of a run, as configured (TOML `[eviction] kind = "lru"`).
///
/// Turned into a concrete `MapCache<E>` by [`with_eviction!`](crate::with_eviction) (the
/// experiment builder's one dispatch point).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EvictionConfig {
    /// [`Fifo`].
    Fifo(FifoConfig),
    /// [`Lru`].
    Lru(LruConfig),
    /// [`Opt`] (offline).
    Opt(OptConfig),
    /// [`OptBatch`] (offline).
    OptBatch(OptBatchConfig),
    /// [`Prefetch`].
    Prefetch(PrefetchConfig),
}

impl Default for EvictionConfig {
    fn default() -> Self {
        EvictionConfig::Lru(LruConfig::default())
    }
}

impl EvictionConfig {
    /// The policy's name (`fifo`, `lru`, `opt`, `opt_batch`, `prefetch`), as in TOML.
    pub const fn name(&self) -> &'static str {
        match self {
            EvictionConfig::Fifo(_) => Fifo::NAME,
            EvictionConfig::Lru(_) => Lru::NAME,
            EvictionConfig::Opt(_) => Opt::NAME,
            EvictionConfig::OptBatch(_) => OptBatch::NAME,
            EvictionConfig::Prefetch(_) => Prefetch::NAME,
        }
    }

    /// Whether the policy needs a [`Lookahead`] (reads the future).
    pub const fn is_offline(&self) -> bool {
        matches!(self, EvictionConfig::Opt(_) | EvictionConfig::OptBatch(_))
    }

    /// Whether a miss may map more than the missing page.
    pub const fn is_batching(&self) -> bool {
        matches!(
            self,
            EvictionConfig::OptBatch(_) | EvictionConfig::Prefetch(_)
        )
    }

    /// Every policy with its default config, in the paper's order (Figures 3–4).
    pub fn all_default() -> [EvictionConfig; 5] {
        [
            EvictionConfig::Fifo(FifoConfig::default()),
            EvictionConfig::Lru(LruConfig::default()),
            EvictionConfig::Opt(OptConfig::default()),
            EvictionConfig::OptBatch(OptBatchConfig::default()),
            EvictionConfig::Prefetch(PrefetchConfig::default()),
        ]
    }
}

/// Runs `$body` with `$E` a type alias for the concrete policy of `$cfg: &EvictionConfig`
/// and `$c` bound to its `&E::Config` — the one place a config enum becomes a policy type.
/// Each arm is monomorphised.
///
/// ```
/// use iommulab_virt::{EvictionConfig, EvictionPolicy};
/// let cfg = EvictionConfig::default();
/// let name = iommulab_virt::with_eviction!(&cfg, E, _c => <E as EvictionPolicy>::NAME);
/// assert_eq!(name, "lru");
/// ```
#[macro_export]
macro_rules! with_eviction {
    ($cfg:expr, $E:ident, $c:pat => $body:expr) => {
        match $cfg {
            $crate::EvictionConfig::Fifo($c) => {
                type $E = $crate::Fifo;
                $body
            }
            $crate::EvictionConfig::Lru($c) => {
                type $E = $crate::Lru;
                $body
            }
            $crate::EvictionConfig::Opt($c) => {
                type $E = $crate::Opt;
                $body
            }
            $crate::EvictionConfig::OptBatch($c) => {
                type $E = $crate::OptBatch;
                $body
            }
            $crate::EvictionConfig::Prefetch($c) => {
                type $E = $crate::Prefetch;
                $body
            }
        }
    };
}

/// "No link" in a [`CacheSlotList`].
const NIL: u32 = u32::MAX;
/// `prev` of a slot that is not in the list.
const DETACHED: u32 = u32::MAX - 1;

/// An intrusive doubly-linked list of slots (FIFO order, LRU recency): 8 bytes per slot,
/// O(1) push, remove and front, no allocation after [`CacheSlotList::reserve`].
#[derive(Clone, Debug, Default)]
pub(crate) struct CacheSlotList {
    /// `[prev, next]` per slot; `prev == DETACHED` when the slot is not in the list.
    links: Vec<[u32; 2]>,
    head: u32,
    tail: u32,
}

impl CacheSlotList {
    pub(crate) fn with_capacity(slots: usize) -> Self {
        let mut l = Self {
            links: Vec::new(),
            head: NIL,
            tail: NIL,
        };
        l.reserve(slots);
        l
    }

    /// Makes slots `0..slots` addressable (exact capacity).
    pub(crate) fn reserve(&mut self, slots: usize) {
        if slots > self.links.len() {
            self.links.reserve_exact(slots - self.links.len());
            self.links.resize(slots, [DETACHED, NIL]);
        }
    }

    #[inline]
    fn grow_to(&mut self, i: usize) {
        if i >= self.links.len() {
            self.reserve(i + 1);
        }
    }

    #[inline]
    pub(crate) fn contains(&self, s: CacheSlot) -> bool {
        self.links.get(s.index()).is_some_and(|l| l[0] != DETACHED)
    }

    #[inline]
    pub(crate) fn push_back(&mut self, s: CacheSlot) {
        let i = s.index();
        self.grow_to(i);
        debug_assert!(!self.contains(s), "slot {i} linked twice");
        self.links[i] = [self.tail, NIL];
        if self.tail == NIL {
            self.head = s.0;
        } else {
            self.links[self.tail as usize][1] = s.0;
        }
        self.tail = s.0;
    }

    /// Unlinks `s`; no-op if it is not in the list.
    #[inline]
    pub(crate) fn remove(&mut self, s: CacheSlot) {
        if !self.contains(s) {
            return;
        }
        let [prev, next] = self.links[s.index()];
        if prev == NIL {
            self.head = next;
        } else {
            self.links[prev as usize][1] = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.links[next as usize][0] = prev;
        }
        self.links[s.index()] = [DETACHED, NIL];
    }

    #[inline]
    pub(crate) fn front(&self) -> Option<CacheSlot> {
        (self.head != NIL).then_some(CacheSlot(self.head))
    }

    #[inline]
    pub(crate) fn next(&self, s: CacheSlot) -> Option<CacheSlot> {
        let n = self.links[s.index()][1];
        (n != NIL).then_some(CacheSlot(n))
    }

    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) fn iter(&self) -> impl Iterator<Item = CacheSlot> + '_ {
        std::iter::successors(self.front(), move |&s| self.next(s))
    }

    pub(crate) fn bytes(&self) -> usize {
        self.links.capacity() * std::mem::size_of::<[u32; 2]>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_list_keeps_order_and_unlinks_anywhere() {
        let mut l = CacheSlotList::with_capacity(4);
        for i in [2, 0, 3, 1] {
            l.push_back(CacheSlot(i));
        }
        l.remove(CacheSlot(3));
        l.remove(CacheSlot(3)); // no-op
        assert_eq!(l.iter().map(CacheSlot::get).collect::<Vec<_>>(), [2, 0, 1]);
        l.remove(CacheSlot(2));
        l.remove(CacheSlot(1));
        assert_eq!(l.iter().map(CacheSlot::get).collect::<Vec<_>>(), [0]);
        l.push_back(CacheSlot(7)); // grows on demand
        assert_eq!(l.iter().map(CacheSlot::get).collect::<Vec<_>>(), [0, 7]);
    }

    #[test]
    fn config_names_round_trip_through_toml() {
        for cfg in EvictionConfig::all_default() {
            let s = toml::to_string(&cfg).unwrap();
            assert!(s.contains(&format!("kind = \"{}\"", cfg.name())), "{s}");
            let back: EvictionConfig = toml::from_str(&s).unwrap();
            assert_eq!(back, cfg);
        }
        let c: EvictionConfig = toml::from_str("kind = \"opt_batch\"\nbatch = 4").unwrap();
        assert_eq!(
            c,
            EvictionConfig::OptBatch(OptBatchConfig {
                batch: Some(4),
                ..OptBatchConfig::default()
            })
        );
    }
}
