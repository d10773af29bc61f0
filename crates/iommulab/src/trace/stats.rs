//! Trace statistics in one streaming pass ([`stats`]): event counts, mappings outstanding,
//! working set, page reuse distances, mapping sizes.
//!
//! Memory is bounded by the trace's distinct pages, not its length: a hash map entry per
//! distinct physical page (reuse tracking), per distinct IOVA page, per live page and per
//! live mapping, and a Fenwick tree of at most twice the distinct physical pages.
//!
//! Definitions (also in docs/trace-format.md, "Statistics"):
//!
//! - **maps**: `map` + `alloc` + `map_sg` (one per call, not per segment). **unmaps**: `unmap`
//!   + `free` + `unmap_sg`.
//! - **Mappings outstanding**: mapped and not yet unmapped. A single mapping is keyed by
//!   (device, DMA address), which `unmap`/`free` name; a scatter-gather mapping by (device,
//!   physical address of its first segment), which `unmap_sg` repeats (Linux's
//!   `dma_unmap_sg` tracepoint records no DMA addresses).
//!   `mean_outstanding` is **time-weighted** over `[first_ns, last_ns]` (per-event when the
//!   trace spans no time).
//! - **Pages** are 4 KiB; a mapping counts at most 2^20 pages (4 GiB), see
//!   `oversized_maps`. `distinct_pages` counts physical pages ever mapped,
//!   `distinct_iovas` DMA-address pages ever mapped, `working_set_pages` the most distinct
//!   physical pages mapped at once.
//! - **Reuse distance** (LRU stack distance) of a physical page each time a mapping covers it:
//!   the number of distinct other pages mapped since it was last mapped, or *cold* the first
//!   time. O(log n) per page with a Fenwick tree over last-access slots (Bennett & Kruskal),
//!   compacted when full.
//! - Histograms are log2-bucketed: bucket 0 holds 0, bucket `i ≥ 1` holds `[2^(i-1), 2^i)`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::oracle_general::{MAX_PAGES_PER_MAP, PAGE_BYTES, pages};
use super::{Event, EventKind, EventSource, TraceError};

/// Counts in log2 buckets: bucket 0 holds the value 0, bucket `i ≥ 1` holds `[2^(i-1), 2^i)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Log2Histogram {
    /// Counts per bucket; trailing empty buckets are omitted.
    pub buckets: Vec<u64>,
}

impl Log2Histogram {
    /// The bucket of `v`.
    pub const fn bucket(v: u64) -> usize {
        (64 - v.leading_zeros()) as usize
    }

    /// The values bucket `i` holds, as text: `0`, `1`, `2-3`, `4-7`, ...
    pub fn label(i: usize) -> String {
        match i {
            0 => "0".to_owned(),
            1 => "1".to_owned(),
            64 => format!("{}-{}", 1u64 << 63, u64::MAX),
            i if i < 64 => format!("{}-{}", 1u64 << (i - 1), (1u64 << i) - 1),
            _ => String::new(),
        }
    }

    /// Counts one value.
    pub fn add(&mut self, v: u64) {
        let b = Self::bucket(v);
        if self.buckets.len() <= b {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
    }

    /// All counts.
    pub fn total(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// What [`stats`] reports. Serialises to JSON with these field names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceStats {
    /// Events read.
    pub events: u64,
    /// Events per kind ([`EventKind::name`]), every kind present.
    pub by_kind: BTreeMap<String, u64>,
    /// The device table (names), as it stood at the end.
    pub devices: Vec<String>,
    /// `map` + `alloc` + `map_sg` (a scatter-gather call counts once).
    pub maps: u64,
    /// `unmap` + `free` + `unmap_sg`.
    pub unmaps: u64,
    /// Unmaps that matched no outstanding mapping.
    pub unmatched_unmaps: u64,
    /// Bytes mapped (sum of `len` over maps).
    pub bytes_mapped: u64,
    /// Maps longer than 4 GiB, whose pages beyond the first 2^20 are not counted.
    pub oversized_maps: u64,
    /// Distinct 4 KiB physical pages ever mapped.
    pub distinct_pages: u64,
    /// Distinct 4 KiB DMA-address (IOVA) pages ever mapped.
    pub distinct_iovas: u64,
    /// Most distinct physical pages mapped at once.
    pub working_set_pages: u64,
    /// Most mappings outstanding at once.
    pub max_outstanding: u64,
    /// Time-weighted mean of mappings outstanding (per-event mean if the trace spans no time).
    pub mean_outstanding: f64,
    /// Mappings still outstanding at the end.
    pub outstanding_at_end: u64,
    /// Reuse (LRU stack) distances of physical pages across maps.
    pub reuse_distance: Log2Histogram,
    /// First-time page mappings (infinite reuse distance).
    pub reuse_cold: u64,
    /// Mapping sizes (`len` of maps), log2 buckets of bytes.
    pub map_size: Log2Histogram,
    /// Time of the first event.
    pub first_ns: Option<u64>,
    /// Latest event time.
    pub last_ns: Option<u64>,
    /// `last_ns - first_ns`.
    pub duration_ns: u64,
}

/// LRU stack distances with a Fenwick tree over access slots; one slot per distinct page is
/// live (its last access), and the tree is compacted when it runs out of slots.
#[derive(Debug, Default)]
struct Reuse {
    last: HashMap<u64, usize>,
    tree: Vec<u32>,
    next: usize,
}

impl Reuse {
    fn inc(&mut self, slot: usize) {
        let mut i = slot + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] += 1;
            i += i & i.wrapping_neg();
        }
    }

    fn dec(&mut self, slot: usize) {
        let mut i = slot + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] -= 1;
            i += i & i.wrapping_neg();
        }
    }

    /// Live slots in `[0, k)`.
    fn prefix(&self, k: usize) -> u64 {
        let mut i = k;
        let mut s = 0u64;
        while i > 0 {
            s += u64::from(self.tree[i - 1]);
            i &= i - 1;
        }
        s
    }

    /// Renumbers the live slots `0..d` in access order and rebuilds the tree.
    fn compact(&mut self) {
        let mut order: Vec<(usize, u64)> = self.last.iter().map(|(&p, &s)| (s, p)).collect();
        order.sort_unstable();
        let d = order.len();
        for (i, (_, p)) in order.into_iter().enumerate() {
            self.last.insert(p, i);
        }
        let n = (2 * d).max(1024);
        self.tree = vec![0; n];
        for i in 1..=n {
            if i <= d {
                self.tree[i - 1] += 1;
            }
            let j = i + (i & i.wrapping_neg());
            if j <= n {
                self.tree[j - 1] += self.tree[i - 1];
            }
        }
        self.next = d;
    }

    /// Records an access to `page`; its stack distance, or `None` the first time.
    fn access(&mut self, page: u64) -> Option<u64> {
        if self.next == self.tree.len() {
            self.compact();
        }
        let slot = self.next;
        self.next += 1;
        let r = self.last.insert(page, slot).map(|prev| {
            let d = self.prefix(slot) - self.prefix(prev + 1);
            self.dec(prev);
            d
        });
        self.inc(slot);
        r
    }
}

/// The key an unmap names its mapping by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Single(u16, u64),
    Sg(u16, u64),
}

/// An open `map_sg`/`unmap_sg` collecting its segments.
#[derive(Debug)]
struct SgGroup {
    map: bool,
    device: u16,
    left: u32,
    key: Option<u64>,
    ranges: Vec<(u64, u64)>,
}

#[derive(Debug, Default)]
struct Acc {
    s: TraceStats,
    reuse: Reuse,
    iovas: HashSet<u64>,
    live_pages: HashMap<u64, u32>,
    live: HashMap<Key, Vec<(u64, u64)>>,
    sg: Option<SgGroup>,
    prev_ns: Option<u64>,
    weighted: u128,
    per_event: u128,
}

impl Acc {
    fn map_pages(&mut self, ranges: &[(u64, u64)]) {
        for &(first, count) in ranges {
            for page in first..first.saturating_add(count) {
                match self.reuse.access(page) {
                    Some(d) => self.s.reuse_distance.add(d),
                    None => self.s.reuse_cold += 1,
                }
                let c = self.live_pages.entry(page).or_insert(0);
                *c += 1;
            }
        }
        self.s.working_set_pages = self.s.working_set_pages.max(self.live_pages.len() as u64);
    }

    fn unmap_pages(&mut self, ranges: &[(u64, u64)]) {
        for &(first, count) in ranges {
            for page in first..first.saturating_add(count) {
                if let Some(c) = self.live_pages.get_mut(&page) {
                    *c -= 1;
                    if *c == 0 {
                        self.live_pages.remove(&page);
                    }
                }
            }
        }
    }

    fn mapped(&mut self, key: Option<Key>, ranges: Vec<(u64, u64)>) {
        self.map_pages(&ranges);
        if let Some(old) = key.and_then(|key| self.live.insert(key, ranges)) {
            self.unmap_pages(&old);
        }
        self.s.max_outstanding = self.s.max_outstanding.max(self.live.len() as u64);
    }

    fn unmapped(&mut self, key: Option<Key>) {
        match key.and_then(|k| self.live.remove(&k)) {
            Some(ranges) => self.unmap_pages(&ranges),
            None => self.s.unmatched_unmaps += 1,
        }
    }

    fn close_sg(&mut self) {
        let Some(g) = self.sg.take() else { return };
        let key = g.key.map(|a| Key::Sg(g.device, a));
        if g.map {
            self.mapped(key, g.ranges);
        } else {
            self.unmapped(key);
        }
    }

    fn range(addr: Option<u64>, len: u64) -> Vec<(u64, u64)> {
        match addr {
            Some(a) => {
                let r = pages(a, len);
                vec![(*r.start(), r.end() - r.start() + 1)]
            }
            None => Vec::new(),
        }
    }

    fn note_iovas(&mut self, dma: Option<u64>, len: u64) {
        if let Some(d) = dma {
            for p in pages(d, len) {
                self.iovas.insert(p);
            }
        }
    }

    fn event(&mut self, e: &Event) {
        let s = &mut self.s;
        s.events += 1;
        *s.by_kind.entry(e.kind.name().to_owned()).or_insert(0) += 1;
        // Time: the integral of outstanding mappings up to this event.
        let outstanding = self.live.len() as u128;
        match self.prev_ns {
            None => s.first_ns = Some(e.time_ns),
            Some(p) if e.time_ns > p => self.weighted += outstanding * u128::from(e.time_ns - p),
            Some(_) => {}
        }
        self.prev_ns = Some(self.prev_ns.map_or(e.time_ns, |p| p.max(e.time_ns)));
        s.last_ns = self.prev_ns;

        if e.kind == EventKind::SgSeg {
            if let Some(g) = self.sg.as_mut() {
                g.left -= 1;
                if g.key.is_none() {
                    g.key = e.phys.or(e.dma);
                }
                if let (true, Some(p)) = (g.map, e.phys) {
                    let r = pages(p, e.len);
                    g.ranges.push((*r.start(), r.end() - r.start() + 1));
                }
                let (map, left) = (g.map, g.left);
                if map {
                    self.note_iovas(e.dma, e.len);
                }
                if left == 0 {
                    self.close_sg();
                }
            }
        } else {
            // A group cut short by another event: close it with what it has.
            self.close_sg();
            let s = &mut self.s;
            match e.kind {
                EventKind::Map | EventKind::Alloc => {
                    s.maps += 1;
                    if e.len > MAX_PAGES_PER_MAP * PAGE_BYTES {
                        s.oversized_maps += 1;
                    }
                    s.bytes_mapped = s.bytes_mapped.saturating_add(e.len);
                    s.map_size.add(e.len);
                    self.note_iovas(e.dma, e.len);
                    let key = e.dma.map(|d| Key::Single(e.device, d));
                    self.mapped(key, Self::range(e.phys, e.len));
                }
                EventKind::Unmap | EventKind::Free => {
                    s.unmaps += 1;
                    self.unmapped(e.dma.map(|d| Key::Single(e.device, d)));
                }
                EventKind::MapSg | EventKind::UnmapSg => {
                    let map = e.kind == EventKind::MapSg;
                    if map {
                        s.maps += 1;
                        s.bytes_mapped = s.bytes_mapped.saturating_add(e.len);
                        s.map_size.add(e.len);
                    } else {
                        s.unmaps += 1;
                    }
                    self.sg = Some(SgGroup {
                        map,
                        device: e.device,
                        left: e.nents,
                        key: None,
                        ranges: Vec::new(),
                    });
                    if e.nents == 0 {
                        self.close_sg();
                    }
                }
                _ => {}
            }
        }
        self.per_event += self.live.len() as u128;
    }

    fn finish(mut self, devices: &[String]) -> TraceStats {
        self.close_sg();
        let mut s = self.s;
        for k in EventKind::ALL {
            s.by_kind.entry(k.name().to_owned()).or_insert(0);
        }
        s.devices = devices.to_vec();
        s.distinct_pages = self.reuse.last.len() as u64;
        s.distinct_iovas = self.iovas.len() as u64;
        s.outstanding_at_end = self.live.len() as u64;
        s.duration_ns = match (s.first_ns, s.last_ns) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        s.mean_outstanding = if s.duration_ns > 0 {
            self.weighted as f64 / s.duration_ns as f64
        } else if s.events > 0 {
            self.per_event as f64 / s.events as f64
        } else {
            0.0
        };
        s
    }
}

/// Reads `src` to its end and returns its statistics (module doc for the definitions).
///
/// # Examples
///
/// ```
/// use iommulab::trace::{Event, EventKind, TraceHeader, stats};
/// use iommulab::trace::format::{NativeReader, NativeWriter};
///
/// let h = TraceHeader { devices: vec!["nvme0".into()], source: String::new() };
/// let mut w = NativeWriter::new(Vec::new(), &h).unwrap();
/// let mut m = Event::new(EventKind::Map);
/// (m.dma, m.phys, m.len) = (Some(0xf000), Some(0x1000), 8192);
/// w.write(&m).unwrap();
/// let mut u = m;
/// u.kind = EventKind::Unmap;
/// w.write(&u).unwrap();
/// let bytes = w.finish().unwrap();
/// let s = stats(&mut NativeReader::new(&bytes[..], "t.iot".into()).unwrap()).unwrap();
/// assert_eq!((s.maps, s.unmaps, s.distinct_pages, s.working_set_pages), (1, 1, 2, 2));
/// ```
pub fn stats(src: &mut dyn EventSource) -> Result<TraceStats, TraceError> {
    let mut acc = Acc::default();
    let mut batch = Vec::new();
    while src.read_batch(&mut batch)? != 0 {
        for e in &batch {
            acc.event(e);
        }
    }
    Ok(acc.finish(&src.header().devices))
}

impl TraceStats {
    /// A table for people.
    pub fn to_table(&self) -> String {
        let mut t = String::new();
        let mut row = |k: &str, v: String| {
            let _ = writeln!(t, "{k:<22} {v}");
        };
        row("events", self.events.to_string());
        row("devices", self.devices.join(", "));
        row("duration", format!("{} ns", self.duration_ns));
        row("maps", self.maps.to_string());
        row("unmaps", self.unmaps.to_string());
        row("unmatched unmaps", self.unmatched_unmaps.to_string());
        row("bytes mapped", self.bytes_mapped.to_string());
        row("distinct pages", self.distinct_pages.to_string());
        row("distinct iova pages", self.distinct_iovas.to_string());
        row("working set (pages)", self.working_set_pages.to_string());
        row("max outstanding", self.max_outstanding.to_string());
        row("mean outstanding", format!("{:.2}", self.mean_outstanding));
        row("outstanding at end", self.outstanding_at_end.to_string());
        for (k, v) in &self.by_kind {
            if *v > 0 {
                row(&format!("  {k}"), v.to_string());
            }
        }
        let mut hist = |title: &str, h: &Log2Histogram, extra: Option<(&str, u64)>| {
            let _ = writeln!(t, "{title}");
            for (i, c) in h.buckets.iter().enumerate() {
                if *c > 0 {
                    let _ = writeln!(t, "  {:<20} {c}", Log2Histogram::label(i));
                }
            }
            if let Some((k, v)) = extra {
                let _ = writeln!(t, "  {k:<20} {v}");
            }
        };
        hist(
            "reuse distance (pages)",
            &self.reuse_distance,
            Some(("cold", self.reuse_cold)),
        );
        hist("map size (bytes)", &self.map_size, None);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceHeader;

    struct VecSource(TraceHeader, std::vec::IntoIter<Event>);
    impl EventSource for VecSource {
        fn header(&self) -> &TraceHeader {
            &self.0
        }
        fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
            Ok(self.1.next())
        }
    }

    fn run(events: Vec<Event>) -> TraceStats {
        let h = TraceHeader {
            devices: vec!["d".into()],
            source: String::new(),
        };
        stats(&mut VecSource(h, events.into_iter())).unwrap()
    }

    fn ev(kind: EventKind, t: u64, dma: Option<u64>, phys: Option<u64>, len: u64) -> Event {
        let mut e = Event::new(kind);
        (e.time_ns, e.dma, e.phys, e.len) = (t, dma, phys, len);
        e
    }

    /// Naive LRU stack distance: distinct pages since the last access.
    fn naive_distances(seq: &[u64]) -> Vec<Option<u64>> {
        (0..seq.len())
            .map(|i| {
                let prev = seq[..i].iter().rposition(|&p| p == seq[i])?;
                let between: HashSet<_> = seq[prev + 1..i].iter().collect();
                Some(between.len() as u64)
            })
            .collect()
    }

    #[test]
    fn reuse_matches_naive_stack_distance_across_compactions() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        let seq: Vec<u64> = (0..5000).map(|_| rng.gen_range(0..300)).collect();
        let mut r = Reuse::default();
        let got: Vec<_> = seq.iter().map(|&p| r.access(p)).collect();
        assert_eq!(got, naive_distances(&seq));
    }

    #[test]
    fn counts_maps_unmaps_and_outstanding() {
        // Two overlapping 8 KiB maps over 10 ns, then unmaps.
        let s = run(vec![
            ev(EventKind::Map, 0, Some(0xa000), Some(0x1000), 8192),
            ev(EventKind::Map, 4, Some(0xc000), Some(0x2000), 8192),
            ev(EventKind::Unmap, 6, Some(0xa000), None, 8192),
            ev(EventKind::Unmap, 10, Some(0xc000), None, 8192),
            ev(EventKind::Unmap, 10, Some(0xe000), None, 8192),
        ]);
        assert_eq!((s.maps, s.unmaps, s.unmatched_unmaps), (2, 3, 1));
        assert_eq!(s.distinct_pages, 3);
        assert_eq!(s.distinct_iovas, 4);
        assert_eq!(s.working_set_pages, 3);
        assert_eq!(s.max_outstanding, 2);
        // 1 mapping over [0,4), 2 over [4,6), 1 over [6,10): 12 / 10.
        assert!((s.mean_outstanding - 1.2).abs() < 1e-9);
        assert_eq!(s.reuse_cold, 3);
        // Page 2 again after page 1 (first map: 1,2; second: 2,3): distance 0.
        assert_eq!(s.reuse_distance.buckets, [1]);
        assert_eq!(s.map_size.buckets[Log2Histogram::bucket(8192)], 2);
        assert_eq!(
            (s.first_ns, s.last_ns, s.duration_ns),
            (Some(0), Some(10), 10)
        );
    }

    #[test]
    fn map_sg_counts_once_and_unmap_sg_matches_by_phys() {
        let mut m = ev(EventKind::MapSg, 0, None, None, 8192);
        m.nents = 2;
        let mut u = ev(EventKind::UnmapSg, 5, None, None, 8192);
        u.nents = 2;
        let s = run(vec![
            m,
            ev(EventKind::SgSeg, 0, Some(0x10_000), Some(0x5000), 4096),
            ev(EventKind::SgSeg, 0, Some(0x11_000), Some(0x9000), 4096),
            u,
            ev(EventKind::SgSeg, 5, None, Some(0x5000), 4096),
            ev(EventKind::SgSeg, 5, None, Some(0x9000), 4096),
        ]);
        assert_eq!((s.maps, s.unmaps, s.unmatched_unmaps), (1, 1, 0));
        assert_eq!(s.distinct_pages, 2);
        assert_eq!(s.outstanding_at_end, 0);
        assert_eq!(s.by_kind["sg_seg"], 4);
        assert_eq!(s.by_kind["free"], 0);
    }

    #[test]
    fn table_and_json_carry_required_fields() {
        let s = run(vec![ev(EventKind::Alloc, 0, Some(0), Some(0), 4096)]);
        let json = serde_json::to_value(&s).unwrap();
        for k in ["maps", "unmaps", "distinct_pages"] {
            assert!(json.get(k).is_some(), "{k}");
        }
        let t = s.to_table();
        assert!(t.contains("distinct pages"));
        assert!(t.contains("cold"));
        assert_eq!(Log2Histogram::label(3), "4-7");
    }
}
