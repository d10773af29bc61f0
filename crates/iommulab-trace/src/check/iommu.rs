//! The IOMMU layer against the DMA layer: every DMA map must be backed by `iommu:map`
//! records covering its IOVA pages, and every unmap of a backed mapping must be followed or
//! preceded by `iommu:unmap` records tearing them down. A mismatch names the lines, and
//! also catches events the trace lost.
//!
//! `iommu:` events name no device (each device has its own IOVA space, so one IOVA can be
//! mapped by several at once) but come from the same call, in the same context of the same
//! CPU, as the `dma:` event they belong to: `iommu:map` before `dma_map_page`/`dma_map_sg`/
//! `dma_alloc`, `iommu:unmap` before `dma_unmap_page` but after `dma_unmap_sg` and
//! `dma_free` (6.12 traces the latter on entry; traces/README.md). A hard interrupt on the
//! same CPU can slip calls of its own in between (a task's `dma_map_sg` mapping page after
//! page while the NIC's IRQ unmaps), so events wait in a *lane*: the CPU and the context
//! ftrace's flags column records (task, softirq, hardirq, NMI; one of each at most runs on a
//! CPU at a time). Without a flags column every event of a CPU shares one lane. Page-table
//! events wait to be claimed by the DMA call whose IOVA range they overlap, and a DMA unmap
//! not yet torn down waits for the `iommu:unmap`s that follow. What is still unclaimed
//! [`WINDOW`] DMA-layer calls later in its lane is a finding. Pages are 4 KiB (x86's IOVA
//! granule).
//!
//! Not findings, but counted:
//! - an unclaimed `iommu:map` whose IOVA equals its physical address, made in task
//!   context: the identity map of a reserved region, which the IOMMU core sets up when it
//!   attaches a device to a DMA domain (`iommu_create_device_direct_mappings` maps every
//!   `IOMMU_RESV_DIRECT`/`_RELAXABLE` region with `iova == paddr`: VT-d's RMRRs, the 16 MiB
//!   ISA-bridge window of `CONFIG_INTEL_IOMMU_FLOPPY_WA`), with no DMA call around it;
//! - events whose partner lies beyond an edge of the trace: a page-table event before the
//!   first DMA-layer call of its lane, a DMA map that is the first call of its lane (its
//!   `iommu:map`s came before tracing began), and what is still waiting at the end with no
//!   later DMA-layer call in its lane (tracing stopped between the two halves of a call).
//!
//! An unmap of a mapping made before tracing began still claims its page-table events: by
//! its IOVA range (`dma_unmap_page`, `dma_free`), or, for a `dma_unmap_sg` of a list the
//! trace never showed (its event prints physical addresses only), the next `iommu:unmap` of
//! its lane (`iommu_dma_unmap_sg` tears a list down with one `iommu_unmap_fast`).
//!
//! A device none of whose maps is backed (a trace without `iommu:` events, or a device in
//! an identity or passthrough domain) is not checked: its `iommu_map_missing` findings are
//! held (at most [`HELD`] listed) until one of its maps turns out backed, and dropped with a
//! note at the end if none does.

use std::collections::VecDeque;

use super::{At, FindingKind, Raw, Sink};
use crate::ftrace::IrqContext;
use crate::{Event, EventKind, TraceHeader};

/// DMA-layer calls in a lane after which an unclaimed page-table event, or an unmap not
/// torn down, is reported.
pub const WINDOW: u64 = 64;

/// Unclaimed events kept per lane and queue; beyond, the oldest is reported at once.
const QUEUE_CAP: usize = 4096;

/// `iommu_map_missing` findings listed per device before it is known to be translated.
const HELD: usize = 64;

const PAGE: u64 = 4096;

/// `[start, end)` of the 4 KiB IOVA pages `[addr, addr + len)` touches.
fn pages(addr: u64, len: u64) -> (u64, u64) {
    let start = addr & !(PAGE - 1);
    let end = addr.saturating_add(len.max(1)).saturating_add(PAGE - 1) & !(PAGE - 1);
    (start, if end == 0 { u64::MAX } else { end })
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Removes `cut` from every range of `ranges`, in place (the pieces are appended, then the
/// originals dropped: no allocation once the vector has room).
fn subtract(ranges: &mut Vec<(u64, u64)>, cut: (u64, u64)) {
    let n = ranges.len();
    for i in 0..n {
        let r = ranges[i];
        if !overlaps(r, cut) {
            ranges.push(r);
            continue;
        }
        if r.0 < cut.0 {
            ranges.push((r.0, cut.0));
        }
        if cut.1 < r.1 {
            ranges.push((cut.1, r.1));
        }
    }
    ranges.drain(..n);
}

fn show(ranges: &[(u64, u64)]) -> String {
    ranges
        .iter()
        .map(|(s, e)| format!("[{s:#x}-{:#x}]", e - 1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// An unclaimed `iommu:map` or `iommu:unmap`.
#[derive(Debug, Clone, Copy)]
struct Pending {
    range: (u64, u64),
    at: At,
    born: u64,
    /// An `iommu:map` with `iova == paddr` in task context (a reserved region's identity
    /// map, if no DMA call claims it).
    identity: bool,
}

/// Whether `iommu:map`s backed a DMA map.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Backing {
    /// No (an identity or passthrough domain, or a trace without `iommu:` events).
    #[default]
    No,
    Yes,
    /// Not known: the map was the first call of its lane, its `iommu:map`s perhaps before
    /// tracing began.
    Unknown,
}

/// How an unmap waiting for its `iommu:unmap`s knows what they must cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A backed mapping of the trace: pages not torn down are a finding.
    Backed,
    /// A mapping made before tracing began, or whose backing is unknown: claims what it
    /// can, reports nothing.
    Unknown,
    /// A `dma_unmap_sg` of a list made before tracing began: claims the next `iommu:unmap`
    /// of its lane, whatever its range.
    NextInLane,
}

/// A DMA unmap whose pages are not all torn down yet.
#[derive(Debug, Clone)]
struct Awaiting {
    dev: u16,
    left: Vec<(u64, u64)>,
    at: At,
    map_at: At,
    born: u64,
    expect: Expect,
    /// Whether its `iommu:unmap`s follow the DMA event (`dma_unmap_sg`, `dma_free`), so
    /// that tracing may have stopped in between.
    follows: bool,
}

/// The events of one context of one CPU.
#[derive(Debug, Default)]
struct Lane {
    /// DMA-layer calls seen in this lane.
    clock: u64,
    /// The line (record) of its first DMA-layer call.
    first_line: u64,
    maps: VecDeque<Pending>,
    unmaps: VecDeque<Pending>,
    awaiting: VecDeque<Awaiting>,
}

#[derive(Debug, Default)]
struct Device {
    backed: u64,
    unbacked: u64,
    held: Vec<Raw>,
    held_more: u64,
    /// Maps not fully covered that were the first call of their lane.
    cut_at_start: u64,
}

/// What the IOMMU layer counted instead of reporting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct IommuCounts {
    /// Reserved regions' identity maps (unclaimed `iommu:map`s with `iova == paddr`).
    pub(super) identity_maps: u64,
    /// Their bytes.
    pub(super) identity_bytes: u64,
    /// Events whose partner came before tracing began.
    pub(super) cut_at_start: u64,
    /// Events whose partner came after tracing stopped.
    pub(super) cut_at_end: u64,
    /// Whether any event carried a context (the flags column).
    pub(super) by_context: bool,
}

#[derive(Debug, Default)]
pub(super) struct IommuState {
    lanes: Vec<Lane>,
    devices: Vec<Device>,
    page_table_events: u64,
    counts: IommuCounts,
    /// Scratch page ranges of the DMA call being checked (kept: no allocation per call).
    want: Vec<(u64, u64)>,
    left: Vec<(u64, u64)>,
}

impl IommuState {
    fn lane(&mut self, lane: usize) -> &mut Lane {
        if self.lanes.len() <= lane {
            self.lanes.resize_with(lane + 1, Lane::default);
        }
        &mut self.lanes[lane]
    }

    /// What was counted instead of reported.
    pub(super) fn counts(&self) -> IommuCounts {
        self.counts
    }

    /// Reports or counts an unclaimed page-table event leaving its lane's queue.
    fn expire(&mut self, kind: FindingKind, p: Pending, sink: &mut Sink) {
        if p.identity {
            self.counts.identity_maps += 1;
            self.counts.identity_bytes += p.range.1 - p.range.0;
        } else if p.born == 0 && kind == FindingKind::IommuUnmapOrphan {
            // Before its lane's first DMA call: the dma_unmap_sg/dma_free it belongs to came
            // before tracing began.
            self.counts.cut_at_start += 1;
        } else {
            orphan(kind, p, sink);
        }
    }

    /// Reports an unmap whose pages were not all torn down, if it must be.
    fn expire_awaiting(a: Awaiting, sink: &mut Sink) {
        if a.expect == Expect::Backed {
            not_torn_down(a, sink);
        }
    }

    fn device(&mut self, dev: u16) -> &mut Device {
        let i = usize::from(dev);
        if self.devices.len() <= i {
            self.devices.resize_with(i + 1, Device::default);
        }
        &mut self.devices[i]
    }

    /// An `iommu:map`/`iommu:unmap` record.
    pub(super) fn page_table_event(&mut self, e: &Event, at: At, sink: &mut Sink) {
        let Some(iova) = e.dma else { return };
        self.page_table_events += 1;
        self.counts.by_context |= at.ctx.is_some();
        let range = pages(iova, e.len);
        let lane = at.lane();
        match e.kind {
            EventKind::Map => {
                let identity = e.phys == Some(iova) && at.ctx.is_none_or(|c| c == IrqContext::Task);
                let c = self.lane(lane);
                let born = c.clock;
                c.maps.push_back(Pending {
                    range,
                    at,
                    born,
                    identity,
                });
                if c.maps.len() > QUEUE_CAP
                    && let Some(p) = c.maps.pop_front()
                {
                    self.expire(FindingKind::IommuMapOrphan, p, sink);
                }
            }
            EventKind::Unmap => {
                // Tear down waiting DMA unmaps: this lane's first, then any.
                let n = self.lanes.len();
                let mut used = false;
                for i in std::iter::once(lane).chain((0..n).filter(|&i| i != lane)) {
                    let Some(c) = self.lanes.get_mut(i) else {
                        continue;
                    };
                    for a in c.awaiting.iter_mut() {
                        if a.left.iter().any(|&r| overlaps(r, range)) {
                            subtract(&mut a.left, range);
                            used = true;
                        }
                    }
                    c.awaiting
                        .retain(|a| a.expect == Expect::NextInLane || !a.left.is_empty());
                    if used {
                        break;
                    }
                }
                if !used
                    && let Some(c) = self.lanes.get_mut(lane)
                    && let Some(i) = c
                        .awaiting
                        .iter()
                        .position(|a| a.expect == Expect::NextInLane)
                {
                    c.awaiting.remove(i);
                    used = true;
                }
                if !used {
                    let c = self.lane(lane);
                    let born = c.clock;
                    c.unmaps.push_back(Pending {
                        range,
                        at,
                        born,
                        identity: false,
                    });
                    if c.unmaps.len() > QUEUE_CAP
                        && let Some(p) = c.unmaps.pop_front()
                    {
                        self.expire(FindingKind::IommuUnmapOrphan, p, sink);
                    }
                }
            }
            _ => {}
        }
    }

    /// A DMA-layer call in `lane` ([`At::lane`]): ages that lane's waiting events.
    pub(super) fn tick(&mut self, lane: usize, line: u64, sink: &mut Sink) {
        let c = self.lane(lane);
        if c.clock == 0 {
            c.first_line = line;
        }
        c.clock += 1;
        let now = c.clock;
        let old = |born: u64| born + WINDOW < now;
        for maps in [true, false] {
            loop {
                let c = &mut self.lanes[lane];
                let q = if maps { &mut c.maps } else { &mut c.unmaps };
                let Some(p) = q.front().copied().filter(|p| old(p.born)) else {
                    break;
                };
                q.pop_front();
                let kind = if maps {
                    FindingKind::IommuMapOrphan
                } else {
                    FindingKind::IommuUnmapOrphan
                };
                self.expire(kind, p, sink);
            }
        }
        let c = &mut self.lanes[lane];
        while c.awaiting.front().is_some_and(|a| old(a.born)) {
            if let Some(a) = c.awaiting.pop_front() {
                Self::expire_awaiting(a, sink);
            }
        }
    }

    /// Claims waiting `queue` entries of `lane` (then of any lane) overlapping what is left
    /// of `left`.
    fn claim(&mut self, lane: usize, maps: bool, left: &mut Vec<(u64, u64)>) {
        let n = self.lanes.len();
        for i in std::iter::once(lane).chain((0..n).filter(|&i| i != lane)) {
            if left.is_empty() {
                return;
            }
            let Some(c) = self.lanes.get_mut(i) else {
                continue;
            };
            let q = if maps { &mut c.maps } else { &mut c.unmaps };
            q.retain(|p| {
                if left.iter().any(|&r| overlaps(r, p.range)) {
                    subtract(left, p.range);
                    false
                } else {
                    true
                }
            });
        }
    }

    /// A DMA map of `ranges` (address, length): whether `iommu:map`s backed it.
    pub(super) fn dma_map(
        &mut self,
        dev: u16,
        ranges: &[(u64, u64)],
        at: At,
        sink: &mut Sink,
    ) -> Backing {
        let (mut want, mut left) = (
            std::mem::take(&mut self.want),
            std::mem::take(&mut self.left),
        );
        want.clear();
        want.extend(ranges.iter().map(|&(a, l)| pages(a, l)));
        left.clear();
        left.extend_from_slice(&want);
        self.claim(at.lane(), true, &mut left);
        let backed = left != want;
        let r = self.map_checked(dev, &left, backed, at, sink);
        (self.want, self.left) = (want, left);
        r
    }

    /// [`dma_map`](Self::dma_map) once the page-table events are claimed: `left` is what no
    /// `iommu:map` covered.
    fn map_checked(
        &mut self,
        dev: u16,
        left: &[(u64, u64)],
        backed: bool,
        at: At,
        sink: &mut Sink,
    ) -> Backing {
        let first_in_lane = self.lane(at.lane()).first_line == at.line;
        let d = self.device(dev);
        if left.is_empty() {
            d.backed += 1;
            if !d.held.is_empty() || d.held_more > 0 {
                for r in d.held.drain(..) {
                    sink.emit(r);
                }
                sink.count_only(FindingKind::IommuMapMissing, d.held_more);
                d.held_more = 0;
            }
            return Backing::Yes;
        }
        if backed {
            d.backed += 1;
        } else {
            d.unbacked += 1;
        }
        if first_in_lane {
            // Its iommu:maps may have come before tracing began (counted at the end if the
            // device turns out translated).
            d.cut_at_start += 1;
            return Backing::Unknown;
        }
        let backing = if backed { Backing::Yes } else { Backing::No };
        if d.backed == 0 && d.held.len() >= HELD {
            // Only counted: the finding's text is not built (a trace without `iommu:`
            // events gets here on every map).
            d.held_more += 1;
            return backing;
        }
        let raw = Raw {
            kind: FindingKind::IommuMapMissing,
            device: Some(dev),
            at,
            map: None,
            detail: format!("IOVA pages not mapped by any iommu:map: {}", show(left)),
        };
        if d.backed > 0 {
            sink.emit(raw);
        } else {
            d.held.push(raw);
        }
        backing
    }

    /// The DMA unmap at `at` of a mapping made at `map_at` with `backing`; `follows` when
    /// the kernel tears the pages down after tracing the call (`dma_unmap_sg`, `dma_free`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dma_unmap(
        &mut self,
        dev: u16,
        ranges: &[(u64, u64)],
        at: At,
        map_at: At,
        backing: Backing,
        follows: bool,
        sink: &mut Sink,
    ) {
        let expect = match backing {
            Backing::No => return,
            Backing::Yes => Expect::Backed,
            Backing::Unknown => Expect::Unknown,
        };
        self.unmap_expecting(dev, ranges, at, map_at, expect, follows, sink);
    }

    /// The DMA unmap at `at` of a mapping made before tracing began: `ranges` when the
    /// call names them, `None` for a `dma_unmap_sg` of an unknown list.
    pub(super) fn dma_unmap_before_tracing(
        &mut self,
        dev: u16,
        ranges: Option<&[(u64, u64)]>,
        at: At,
        follows: bool,
        sink: &mut Sink,
    ) {
        match ranges {
            Some(r) => {
                let e = Expect::Unknown;
                self.unmap_expecting(dev, r, at, At::default(), e, follows, sink);
            }
            None => {
                // An iommu:unmap after it in its lane, or none (not translated).
                let c = self.lane(at.lane());
                let born = c.clock;
                c.awaiting.push_back(Awaiting {
                    dev,
                    left: Vec::new(),
                    at,
                    map_at: At::default(),
                    born,
                    expect: Expect::NextInLane,
                    follows: true,
                });
                self.cap_awaiting(at.lane(), sink);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn unmap_expecting(
        &mut self,
        dev: u16,
        ranges: &[(u64, u64)],
        at: At,
        map_at: At,
        expect: Expect,
        follows: bool,
        sink: &mut Sink,
    ) {
        let mut left = std::mem::take(&mut self.left);
        left.clear();
        left.extend(ranges.iter().map(|&(a, l)| pages(a, l)));
        self.claim(at.lane(), false, &mut left);
        // Nothing to wait for when it is all torn down, or when the teardown comes before
        // the call (dma_unmap_page) and the mapping's backing is unknown.
        if left.is_empty() || (expect == Expect::Unknown && !follows) {
            // Kept as the scratch of the next call.
            self.left = left;
            return;
        }
        let c = self.lane(at.lane());
        let born = c.clock;
        c.awaiting.push_back(Awaiting {
            dev,
            left,
            at,
            map_at,
            born,
            expect,
            follows,
        });
        self.cap_awaiting(at.lane(), sink);
    }

    fn cap_awaiting(&mut self, lane: usize, sink: &mut Sink) {
        let c = self.lane(lane);
        if c.awaiting.len() > QUEUE_CAP
            && let Some(a) = c.awaiting.pop_front()
        {
            Self::expire_awaiting(a, sink);
        }
    }

    /// Reports what is still waiting; returns whether the IOMMU layer was checked.
    pub(super) fn finish(
        &mut self,
        header: &TraceHeader,
        sink: &mut Sink,
        notes: &mut Vec<String>,
    ) -> bool {
        let mut lanes = std::mem::take(&mut self.lanes);
        for c in &mut lanes {
            // What no later DMA-layer call of its lane could claim: its partner came after
            // tracing stopped.
            let end = c.clock;
            for (maps, q) in [(true, &mut c.maps), (false, &mut c.unmaps)] {
                for p in q.drain(..) {
                    if p.born == end && !p.identity {
                        self.counts.cut_at_end += 1;
                        continue;
                    }
                    let kind = if maps {
                        FindingKind::IommuMapOrphan
                    } else {
                        FindingKind::IommuUnmapOrphan
                    };
                    self.expire(kind, p, sink);
                }
            }
            for a in c.awaiting.drain(..) {
                if a.born == end && a.follows && a.expect == Expect::Backed {
                    self.counts.cut_at_end += 1;
                } else {
                    Self::expire_awaiting(a, sink);
                }
            }
        }
        if self.page_table_events == 0 {
            notes.push(
                "IOMMU layer not checked: the trace has no iommu:map/iommu:unmap events".to_owned(),
            );
            return false;
        }
        if !self.counts.by_context {
            notes.push(
                "the trace has no flags column (task/softirq/hardirq context): iommu: events were paired with DMA calls per CPU only, so an interrupt's calls between a call's halves can show as findings".to_owned(),
            );
        }
        let mut checked = false;
        for (i, d) in self.devices.iter().enumerate() {
            if d.backed > 0 {
                checked = true;
                self.counts.cut_at_start += d.cut_at_start;
            } else if d.unbacked > 0 {
                let name = header.devices.get(i).map_or("?", String::as_str);
                notes.push(format!(
                    "IOMMU layer not checked for {name}: none of its {} maps was backed by iommu:map records (identity or passthrough domain?)",
                    d.unbacked
                ));
            }
        }
        checked
    }
}

fn orphan(kind: FindingKind, p: Pending, sink: &mut Sink) {
    let what = if kind == FindingKind::IommuMapOrphan {
        "no DMA map claimed this iommu:map"
    } else {
        "no DMA unmap claimed this iommu:unmap"
    };
    sink.emit(Raw {
        kind,
        device: None,
        at: p.at,
        map: None,
        detail: format!("{what}: IOVA pages {}", show(&[p.range])),
    });
}

fn not_torn_down(a: Awaiting, sink: &mut Sink) {
    sink.emit(Raw {
        kind: FindingKind::IommuUnmapMissing,
        device: Some(a.dev),
        at: a.at,
        map: Some(a.map_at),
        detail: format!("IOVA pages no iommu:unmap tore down: {}", show(&a.left)),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtract_and_pages() {
        let mut r = vec![(0, 10), (20, 30)];
        subtract(&mut r, (5, 25));
        assert_eq!(r, [(0, 5), (25, 30)]);
        assert_eq!(pages(0x1234, 1), (0x1000, 0x2000));
        assert_eq!(pages(0x1000, 0x2000), (0x1000, 0x3000));
        assert_eq!(pages(u64::MAX - 5, 10).1, u64::MAX - (PAGE - 1));
    }
}
