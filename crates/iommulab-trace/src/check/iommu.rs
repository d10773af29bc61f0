//! The IOMMU layer against the DMA layer: every DMA map must be backed by `iommu:map`
//! records covering its IOVA pages, and every unmap of a backed mapping must be followed or
//! preceded by `iommu:unmap` records tearing them down. A mismatch names the lines, and
//! also catches events the trace lost.
//!
//! `iommu:` events name no device (each device has its own IOVA space, so one IOVA can be
//! mapped by several at once) but come from the same call on the same CPU as the `dma:`
//! event they belong to: `iommu:map` before `dma_map_page`/`dma_map_sg`/`dma_alloc`,
//! `iommu:unmap` before `dma_unmap_page` but after `dma_unmap_sg` (6.12 traces the latter on
//! entry; traces/README.md). So page-table events wait, per CPU, to be claimed by the DMA
//! call whose IOVA range they overlap, and a DMA unmap not yet torn down waits for the
//! `iommu:unmap`s that follow. What is still unclaimed [`WINDOW`] DMA-layer calls later on
//! that CPU (an interrupt can slip a call of its own in between), or at the end, is a
//! finding. Pages are 4 KiB (x86's IOVA granule).
//!
//! A device none of whose maps is backed (a trace without `iommu:` events, or a device in
//! an identity or passthrough domain) is not checked: its `iommu_map_missing` findings are
//! held (at most [`HELD`] listed) until one of its maps turns out backed, and dropped with a
//! note at the end if none does.

use std::collections::VecDeque;

use super::{At, FindingKind, Raw, Sink};
use crate::{Event, EventKind, TraceHeader};

/// DMA-layer calls on a CPU after which an unclaimed page-table event, or an unmap not
/// torn down, is reported.
pub const WINDOW: u64 = 64;

/// Unclaimed events kept per CPU and queue; beyond, the oldest is reported at once.
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
}

/// A DMA unmap whose pages are not all torn down yet.
#[derive(Debug, Clone)]
struct Awaiting {
    dev: u16,
    left: Vec<(u64, u64)>,
    at: At,
    map_at: At,
    born: u64,
}

#[derive(Debug, Default)]
struct Cpu {
    /// DMA-layer calls seen on this CPU.
    clock: u64,
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
}

#[derive(Debug, Default)]
pub(super) struct IommuState {
    cpus: Vec<Cpu>,
    devices: Vec<Device>,
    page_table_events: u64,
    /// Scratch page ranges of the DMA call being checked (kept: no allocation per call).
    want: Vec<(u64, u64)>,
    left: Vec<(u64, u64)>,
}

impl IommuState {
    fn cpu(&mut self, cpu: u16) -> &mut Cpu {
        let i = usize::from(cpu);
        if self.cpus.len() <= i {
            self.cpus.resize_with(i + 1, Cpu::default);
        }
        &mut self.cpus[i]
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
        let range = pages(iova, e.len);
        match e.kind {
            EventKind::Map => {
                let c = self.cpu(at.cpu);
                let born = c.clock;
                c.maps.push_back(Pending { range, at, born });
                if c.maps.len() > QUEUE_CAP
                    && let Some(p) = c.maps.pop_front()
                {
                    orphan(FindingKind::IommuMapOrphan, p, sink);
                }
            }
            EventKind::Unmap => {
                // Tear down waiting DMA unmaps: this CPU's first, then any.
                let n = self.cpus.len();
                let first = usize::from(at.cpu);
                let mut used = false;
                for i in std::iter::once(first).chain((0..n).filter(|&i| i != first)) {
                    let Some(c) = self.cpus.get_mut(i) else {
                        continue;
                    };
                    for a in c.awaiting.iter_mut() {
                        if a.left.iter().any(|&r| overlaps(r, range)) {
                            subtract(&mut a.left, range);
                            used = true;
                        }
                    }
                    c.awaiting.retain(|a| !a.left.is_empty());
                    if used {
                        break;
                    }
                }
                if !used {
                    let c = self.cpu(at.cpu);
                    let born = c.clock;
                    c.unmaps.push_back(Pending { range, at, born });
                    if c.unmaps.len() > QUEUE_CAP
                        && let Some(p) = c.unmaps.pop_front()
                    {
                        orphan(FindingKind::IommuUnmapOrphan, p, sink);
                    }
                }
            }
            _ => {}
        }
    }

    /// A DMA-layer call on `cpu`: ages that CPU's waiting events.
    pub(super) fn tick(&mut self, cpu: u16, sink: &mut Sink) {
        let c = self.cpu(cpu);
        c.clock += 1;
        let now = c.clock;
        let old = |born: u64| born + WINDOW < now;
        while c.maps.front().is_some_and(|p| old(p.born)) {
            if let Some(p) = c.maps.pop_front() {
                orphan(FindingKind::IommuMapOrphan, p, sink);
            }
        }
        while c.unmaps.front().is_some_and(|p| old(p.born)) {
            if let Some(p) = c.unmaps.pop_front() {
                orphan(FindingKind::IommuUnmapOrphan, p, sink);
            }
        }
        while c.awaiting.front().is_some_and(|a| old(a.born)) {
            if let Some(a) = c.awaiting.pop_front() {
                not_torn_down(a, sink);
            }
        }
    }

    /// Claims waiting `queue` entries of `cpu` overlapping what is left of `left`.
    fn claim(&mut self, cpu: u16, maps: bool, left: &mut Vec<(u64, u64)>) {
        let n = self.cpus.len();
        let first = usize::from(cpu);
        for i in std::iter::once(first).chain((0..n).filter(|&i| i != first)) {
            if left.is_empty() {
                return;
            }
            let Some(c) = self.cpus.get_mut(i) else {
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
    ) -> bool {
        let (mut want, mut left) = (
            std::mem::take(&mut self.want),
            std::mem::take(&mut self.left),
        );
        want.clear();
        want.extend(ranges.iter().map(|&(a, l)| pages(a, l)));
        left.clear();
        left.extend_from_slice(&want);
        self.claim(at.cpu, true, &mut left);
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
    ) -> bool {
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
            return true;
        }
        if backed {
            d.backed += 1;
        } else {
            d.unbacked += 1;
        }
        if d.backed == 0 && d.held.len() >= HELD {
            // Only counted: the finding's text is not built (a trace without `iommu:`
            // events gets here on every map).
            d.held_more += 1;
            return backed;
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
        backed
    }

    /// The DMA unmap at `at` of a backed mapping made at `map_at`.
    pub(super) fn dma_unmap(
        &mut self,
        dev: u16,
        ranges: &[(u64, u64)],
        at: At,
        map_at: At,
        sink: &mut Sink,
    ) {
        let mut left = std::mem::take(&mut self.left);
        left.clear();
        left.extend(ranges.iter().map(|&(a, l)| pages(a, l)));
        self.claim(at.cpu, false, &mut left);
        if left.is_empty() {
            // Kept as the scratch of the next call.
            self.left = left;
            return;
        }
        let c = self.cpu(at.cpu);
        let born = c.clock;
        c.awaiting.push_back(Awaiting {
            dev,
            left,
            at,
            map_at,
            born,
        });
        if c.awaiting.len() > QUEUE_CAP
            && let Some(a) = c.awaiting.pop_front()
        {
            not_torn_down(a, sink);
        }
    }

    /// Reports what is still waiting; returns whether the IOMMU layer was checked.
    pub(super) fn finish(
        mut self,
        header: &TraceHeader,
        sink: &mut Sink,
        notes: &mut Vec<String>,
    ) -> bool {
        for c in &mut self.cpus {
            for p in c.maps.drain(..) {
                orphan(FindingKind::IommuMapOrphan, p, sink);
            }
            for p in c.unmaps.drain(..) {
                orphan(FindingKind::IommuUnmapOrphan, p, sink);
            }
            for a in c.awaiting.drain(..) {
                not_torn_down(a, sink);
            }
        }
        if self.page_table_events == 0 {
            notes.push(
                "IOMMU layer not checked: the trace has no iommu:map/iommu:unmap events".to_owned(),
            );
            return false;
        }
        let mut checked = false;
        for (i, d) in self.devices.iter().enumerate() {
            if d.backed > 0 {
                checked = true;
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
