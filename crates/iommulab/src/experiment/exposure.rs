//! Per-device accounting of a trace replay, for `iommulab compare`: the modeled CPU each
//! device's DMA-API calls cost, the IOTLB invalidations they caused, and the **exposure
//! window** of every unmap — the time from the unmap's return (the buffer is the kernel's
//! again) to the invalidation that covers it, during which a device may still reach the
//! pages through a stale IOTLB entry (S0.6).
//!
//! The window is read from the flush policy's own bookkeeping
//! ([`FlushPolicy::covered_unmaps`]), never by probing: no access is made, so nothing is
//! added to the modeled clock, and the cost columns are those of a benign device.
//!
//! Time bases: the windows are in the trace's own time (its timestamps, which the replay
//! advances in steps of at most [`crate::workload::replay::TICK_NS`] = 10 µs, the windows'
//! resolution); the flush timers fire by that clock too (the runner's clock is the later of
//! the trace's and the modeled one). The CPU cycles are the modeled clock's: each call's
//! price, whenever it ran.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::addr::PAGE_4K;
use crate::clock::Cycles;
use crate::dma::{DeviceHandle, DmaApi, Native};
use crate::flush::FlushPolicy;
use crate::hw::unit::RemapUnit;
use crate::iova::IovaAllocator;

/// Sub-buckets per power of two of the window histogram: values are kept to within 1/128
/// (0.8%) of themselves; below 128 ns exactly.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets: 128 exact values, then 128 per power of two up to 2^64.
const BUCKETS: usize = (1 << SUB_BITS) * (64 - SUB_BITS as usize + 1);

/// A log-linear histogram of nanoseconds: fixed size, so recording never allocates.
#[derive(Clone, Debug)]
pub struct WindowHistogram {
    counts: Box<[u64]>,
    n: u64,
    max: u64,
}

impl Default for WindowHistogram {
    fn default() -> Self {
        Self {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            n: 0,
            max: 0,
        }
    }
}

impl WindowHistogram {
    // The casts hold values below 2^7 and exponents below 64.
    #[allow(clippy::cast_possible_truncation)]
    fn bucket(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let e = 63 - v.leading_zeros(); // >= SUB_BITS
        let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
        ((e - SUB_BITS + 1) as usize) * SUB as usize + sub as usize
    }

    /// The smallest value of bucket `b`.
    #[allow(clippy::cast_possible_truncation)] // `hi` < 64
    fn low(b: usize) -> u64 {
        let (hi, sub) = ((b as u64) / SUB, (b as u64) % SUB);
        if hi == 0 {
            return sub;
        }
        let e = hi as u32 + SUB_BITS - 1;
        (1u64 << e) | (sub << (e - SUB_BITS))
    }

    /// Records one window.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[Self::bucket(ns)] += 1;
        self.n += 1;
        self.max = self.max.max(ns);
    }

    /// Adds `other`'s windows.
    pub fn merge(&mut self, other: &Self) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.n += other.n;
        self.max = self.max.max(other.max);
    }

    /// Windows recorded.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether none was recorded.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The `q`-quantile (0..=1): the lowest value of the bucket holding the
    /// `ceil(q × n)`-th window (exact below 128 ns, within 0.8% above), never above the
    /// largest window; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = crate::clock::saturating_u64((q.clamp(0.0, 1.0) * self.n as f64).ceil()).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::low(b).min(self.max);
            }
        }
        self.max
    }

    /// The largest window.
    pub fn max(&self) -> u64 {
        self.max
    }
}

/// The exposure of a device's (or all devices') unmaps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Exposure {
    /// Median window from an unmap's return to the invalidation covering it, ns of trace
    /// time (0 under strict invalidation).
    pub p50_ns: u64,
    /// 99th percentile of the windows, ns.
    pub p99_ns: u64,
    /// Longest window, ns.
    pub max_ns: u64,
    /// Most bytes (whole pages of the unmapped ranges) left reachable at once: unmapped,
    /// with no invalidation covering them yet.
    pub bytes: u64,
    /// Most pages left reachable at once (`bytes` / 4096).
    pub pages: u64,
    /// Most unmapped ranges waiting for an invalidation at once.
    pub max_pending: u64,
    /// Unmaps whose window was longer than 0.
    pub exposed_unmaps: u64,
}

/// One device's (or the total's) numbers.
#[derive(Clone, Debug, Default)]
pub struct Account {
    /// I/Os completed (unmaps).
    pub ios: u64,
    /// Modeled CPU cycles of the IOMMU's work for these I/Os: DMA-API calls, the IOVA
    /// allocator, the flush policy, page-table writes and invalidations (not the I/O path
    /// a machine without an IOMMU runs as well).
    pub cpu_cycles: u64,
    /// IOTLB invalidation requests.
    pub invalidations: u64,
    /// The exposure windows.
    pub windows: WindowHistogram,
    pending: u64,
    pending_pages: u64,
    max_pending: u64,
    max_pages: u64,
    exposed: u64,
}

impl Account {
    /// The exposure summary.
    pub fn exposure(&self) -> Exposure {
        Exposure {
            p50_ns: self.windows.quantile(0.5),
            p99_ns: self.windows.quantile(0.99),
            max_ns: self.windows.max(),
            bytes: self.max_pages * PAGE_4K.bytes(),
            pages: self.max_pages,
            max_pending: self.max_pending,
            exposed_unmaps: self.exposed,
        }
    }

    fn open(&mut self, pages: u64) {
        self.pending += 1;
        self.pending_pages += pages;
        self.max_pending = self.max_pending.max(self.pending);
        self.max_pages = self.max_pages.max(self.pending_pages);
    }

    fn close(&mut self, pages: u64, window_ns: u64, counted: bool) {
        if counted {
            self.pending -= 1;
            self.pending_pages -= pages;
        }
        self.windows.record(window_ns);
        if window_ns > 0 {
            self.exposed += 1;
        }
    }
}

/// An unmap waiting for the invalidation that covers it.
#[derive(Clone, Copy, Debug)]
struct Open {
    at_ns: u64,
    device: u16,
    pages: u64,
    /// Counted as pending: not before the op that made it is over (a strict unmap is
    /// covered before it returns, and never pending).
    counted: bool,
}

/// What the runner keeps when asked for per-device numbers ([`crate::experiment::compare`]).
#[derive(Clone, Debug, Default)]
pub struct Accounting {
    /// Per device of the workload (its index), the numbers of its calls.
    pub devices: Vec<Account>,
    /// All devices together (its `pending` figures are the whole system's at once).
    pub total: Account,
    /// The first and last trace time seen, ns.
    pub first_ns: Option<u64>,
    /// The last trace time seen, ns.
    pub last_ns: u64,
    /// Per flush policy: unmaps waiting for an invalidation, oldest first, and how many of
    /// the policy's unmaps were seen and closed.
    open: Vec<VecDeque<Open>>,
    seen: Vec<u64>,
    closed: Vec<u64>,
    /// Before the op: the modeled CPU cycles and the invalidations so far.
    cycles_before: u64,
    inv_before: u64,
    /// Scratch: ranges each device had closed by the op (for charging a timer's flush).
    closed_by: Vec<u64>,
    /// The device of each domain (by the domain's index), once it made a call.
    domain_device: Vec<Option<u16>>,
    /// Around a timer tick: each domain's own cycles (its allocator, and its flush policy
    /// when every domain has one) and its policy's flushes, before and after.
    pub(crate) domain_before: Vec<(u64, u64)>,
    pub(crate) domain_after: Vec<(u64, u64)>,
    /// Scratch: the flushes each domain's policy made in a tick.
    domain_flushes: Vec<u64>,
}

/// The page span of a buffer: `[addr, addr + len)` in 4 KiB pages.
#[inline]
pub fn pages_of(addr: u64, len: u64) -> u64 {
    let first = addr >> PAGE_4K.shift();
    let last = (addr + len.max(1) - 1) >> PAGE_4K.shift();
    last - first + 1
}

/// The modeled CPU cycles of the IOMMU's work so far, and the invalidations.
pub(crate) type Snapshot = (u64, u64);

impl Accounting {
    /// Accounting for a workload of `devices` devices.
    pub fn new(devices: usize) -> Self {
        Self {
            devices: vec![Account::default(); devices.max(1)],
            closed_by: vec![0; devices.max(1)],
            ..Self::default()
        }
    }

    fn device(&mut self, d: u16) -> usize {
        let i = usize::from(d);
        if i >= self.devices.len() {
            self.devices.resize_with(i + 1, Account::default);
            self.closed_by.resize(i + 1, 0);
        }
        i
    }

    /// The trace's clock moved to `ns`.
    #[inline]
    pub fn at(&mut self, ns: u64) {
        self.first_ns.get_or_insert(ns);
        self.last_ns = self.last_ns.max(ns);
    }

    /// Before an op: what the counters say now.
    #[inline]
    pub(crate) fn before(&mut self, now: Snapshot) {
        (self.cycles_before, self.inv_before) = now;
    }

    /// After an op of device `device` (`None`: a timer or the end of the run), with the
    /// counters `now`: charges the op's cycles and invalidations, opens the windows of its
    /// unmaps (`pages` each, the first taking them all when one call made several) and
    /// closes those an invalidation covered. A timer's cycles go to the devices whose domains
    /// spent them ([`Accounting::domain_before`]/`domain_after`); what no domain spent alone
    /// (an invalidation, a shared policy) to the devices whose ranges it covered, by their
    /// share of them, else to the busiest device.
    pub(crate) fn after<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
        &mut self,
        api: &DmaApi<A, F, Native<U>>,
        now: Snapshot,
        device: Option<(u16, DeviceHandle)>,
        unmapped_pages: u64,
    ) {
        let (cycles, inv) = (
            now.0.saturating_sub(self.cycles_before),
            now.1.saturating_sub(self.inv_before),
        );
        let policies = api.flush_policies();
        if self.open.len() < policies.len() {
            self.open.resize_with(policies.len(), VecDeque::new);
            self.seen.resize(policies.len(), 0);
            self.closed.resize(policies.len(), 0);
        }
        if let Some((d, handle)) = device
            && let Some(k) = api.domain_of(handle)
        {
            let k = usize::from(k.get()).saturating_sub(1);
            if self.domain_device.len() <= k {
                self.domain_device.resize(k + 1, None);
            }
            self.domain_device[k].get_or_insert(d);
        }
        // New unmaps: only the op's device makes them.
        if let Some((d, handle)) = device
            && let Some(i) = api.flush_index_of(handle)
        {
            self.device(d);
            let new = policies[i].stats().unmaps.saturating_sub(self.seen[i]);
            for k in 0..new {
                let pages = if k == 0 { unmapped_pages } else { 0 };
                self.open[i].push_back(Open {
                    at_ns: self.last_ns,
                    device: d,
                    pages,
                    counted: false,
                });
            }
            self.seen[i] += new;
        }
        // Covered unmaps, any device's.
        let mut closed_any = 0;
        for (i, p) in policies.iter().enumerate() {
            let covered = p.covered_unmaps();
            while self.closed[i] < covered {
                let Some(o) = self.open[i].pop_front() else {
                    break;
                };
                self.closed[i] += 1;
                let window = self.last_ns.saturating_sub(o.at_ns);
                let di = self.device(o.device);
                self.devices[di].close(o.pages, window, o.counted);
                self.total.close(o.pages, window, o.counted);
                self.closed_by[di] += 1;
                closed_any += 1;
            }
        }
        // The op's unmaps no invalidation covered yet are pending from now on (the newest,
        // at the back of their queue).
        if let Some((_, handle)) = device
            && let Some(i) = api.flush_index_of(handle)
        {
            for o in self.open[i].iter_mut().rev() {
                if o.counted {
                    break;
                }
                o.counted = true;
                let di = usize::from(o.device);
                self.devices[di].open(o.pages);
                self.total.open(o.pages);
            }
        }
        self.total.cpu_cycles += cycles;
        self.total.invalidations += inv;
        match device {
            Some((d, _)) => {
                let di = self.device(d);
                self.devices[di].cpu_cycles += cycles;
                self.devices[di].invalidations += inv;
            }
            None if cycles > 0 || inv > 0 => {
                let mut shared = cycles;
                let n = self.domain_after.len().min(self.domain_before.len());
                self.domain_flushes.clear();
                for k in 0..n {
                    let (after, before) = (self.domain_after[k], self.domain_before[k]);
                    let own = after.0.saturating_sub(before.0);
                    let device = self.domain_device.get(k).copied().flatten();
                    self.domain_flushes.push(if device.is_some() {
                        after.1.saturating_sub(before.1)
                    } else {
                        0
                    });
                    if let Some(d) = device
                        && own > 0
                    {
                        let di = self.device(d);
                        let own = own.min(shared);
                        self.devices[di].cpu_cycles += own;
                        shared -= own;
                    }
                }
                // Each domain's flush is one invalidation of its own domain, at one price:
                // the tick's invalidations and their cycles go by the flushes each made.
                let flushes: u64 = self.domain_flushes.iter().sum();
                if flushes > 0 && flushes <= inv {
                    let (mut c_left, mut i_left) = (shared, flushes);
                    for k in 0..n {
                        let f = self.domain_flushes[k];
                        let Some(d) = self.domain_device.get(k).copied().flatten() else {
                            continue;
                        };
                        if f == 0 {
                            continue;
                        }
                        let c = (shared * f / flushes).min(c_left);
                        let di = self.device(d);
                        self.devices[di].cpu_cycles += c;
                        self.devices[di].invalidations += f;
                        c_left -= c;
                        i_left -= f;
                    }
                    debug_assert_eq!(i_left, 0);
                    self.charge_shared(c_left, inv - flushes, closed_any);
                } else {
                    self.charge_shared(shared, inv, closed_any);
                }
            }
            None => {}
        }
        if closed_any > 0 {
            self.closed_by.iter_mut().for_each(|n| *n = 0);
        }
    }

    /// Charges `cycles` and `inv` that no one domain spent: to the devices whose ranges were
    /// just covered (`closed_by`), by their share; with none, to the device with the most
    /// I/Os, so the devices always add up to the total.
    fn charge_shared(&mut self, cycles: u64, inv: u64, closed_any: u64) {
        if cycles == 0 && inv == 0 {
            return;
        }
        if closed_any == 0 {
            let busiest = (0..self.devices.len())
                .max_by_key(|&i| self.devices[i].ios)
                .unwrap_or(0);
            self.devices[busiest].cpu_cycles += cycles;
            self.devices[busiest].invalidations += inv;
            return;
        }
        let (mut c_left, mut i_left) = (cycles, inv);
        let last = self.closed_by.iter().rposition(|&n| n > 0).unwrap_or(0);
        for (di, &n) in self.closed_by.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let (c, v) = if di == last {
                (c_left, i_left)
            } else {
                (cycles * n / closed_any, inv * n / closed_any)
            };
            c_left -= c;
            i_left -= v;
            self.devices[di].cpu_cycles += c;
            self.devices[di].invalidations += v;
        }
    }

    /// An unmap of device `d` completed.
    #[inline]
    pub(crate) fn io(&mut self, d: u16) {
        let di = self.device(d);
        self.devices[di].ios += 1;
        self.total.ios += 1;
    }
}

/// The counters [`Accounting`] reads around each op: the modeled CPU cycles of the IOMMU's
/// work (without the I/O path) and the invalidation requests so far.
pub(crate) fn snapshot<A: IovaAllocator, F: FlushPolicy, U: RemapUnit>(
    api: &DmaApi<A, F, Native<U>>,
    iommu_cycles: Cycles,
) -> Snapshot {
    let s = api.unit().stats();
    (iommu_cycles.get(), s.inv_page + s.inv_domain + s.inv_global)
}

/// The pages a scatter-gather list's DMA addresses span.
pub(crate) fn sg_pages(sg: &[crate::dma::SgEntry]) -> u64 {
    sg.iter().map(|e| pages_of(e.dma.get(), e.len)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_exact_below_128_and_close_above() {
        let mut h = WindowHistogram::default();
        for v in 0..100 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 49);
        assert_eq!(h.quantile(1.0), 99);
        let mut h = WindowHistogram::default();
        for v in [10_000_000u64, 10_000_000, 12_000_000] {
            h.record(v);
        }
        let p50 = h.quantile(0.5);
        assert!(
            p50 <= 10_000_000 && p50 as f64 > 10_000_000.0 * 0.99,
            "{p50}"
        );
        assert_eq!(h.max(), 12_000_000);
        assert_eq!(h.quantile(0.99), h.quantile(1.0));
        for b in 0..BUCKETS {
            assert_eq!(WindowHistogram::bucket(WindowHistogram::low(b)), b, "{b}");
        }
    }

    #[test]
    fn page_span() {
        assert_eq!(pages_of(0, 1), 1);
        assert_eq!(pages_of(0xfff, 2), 2);
        assert_eq!(pages_of(0x1000, 0x1000), 1);
        assert_eq!(pages_of(0x1800, 0x1000), 2);
    }
}
