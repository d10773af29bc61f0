//! From a trace's events to the IOVA allocator's calls, in the order the kernel made them.
//!
//! `iommu:` events name no device, and the `dma:` events that do come before or after them:
//!
//! - An **allocation** is a run of `iommu:map` events on one CPU (one per physically
//!   contiguous chunk: a scatter-gather list or a remapped `dma_alloc` maps several), closed
//!   by that CPU's next `dma_map_*`/`dma_alloc*` event, which names the device. Its range is
//!   the run's span, and the closing event's DMA address must lie in it. The kernel called
//!   the allocator just before the run's first `iommu:map`, so that is its place in order.
//! - A **free** is an `iommu:unmap` on its CPU. `dma_unmap_page`/`_phys`/`_resource` are
//!   traced after the unmap (`kernel/dma/mapping.c`), so the CPU's next one whose DMA address
//!   lies in the range names the device; `dma_unmap_sg` and `dma_free` are traced on entry,
//!   before it, so an `iommu:unmap` right after one of them on the same CPU is that call's.
//!   The range goes back to the allocator in between (`__iommu_dma_unmap`: `iommu:unmap`,
//!   the IOTLB sync, `iommu_dma_free_iova`), so a free claimed by a `dma_unmap_page` takes
//!   its place in order there, after anything an interrupt or another CPU did meanwhile.
//!
//! - A **direct mapping** is a run of identity `iommu:map` events (IOVA = physical address)
//!   that the CPU's next `iommu:map` does not continue (or the trace's end closes) with no
//!   `dma_*` event in between: `iommu_create_device_direct_mappings` (drivers/iommu/iommu.c)
//!   maps a device's direct regions (`IOMMU_RESV_DIRECT`, `_RELAXABLE`; on q35 the ISA
//!   bridge's first 16 MiB, the floppy workaround of intel/iommu.c) with `iommu_map` when the
//!   device joins its default domain, outside the DMA API and the IOVA allocator. It is
//!   counted, not replayed.
//!
//! - A **recorded free** is a `free_iova_fast` kprobe (docs/capture.md): the range's return
//!   to the allocator, at its own moment and CPU (in lazy mode, the flush queue's). With
//!   recorded frees a free claimed by its `dma_unmap_*` keeps the `iommu:unmap`'s place: it
//!   only marks the range unmapped, and the recorded free that follows it does the rest.
//!
//! Calls wait in a queue until their device is known and leave it in trace order, so one
//! domain's allocations and frees reach the model in the order the kernel made them even when
//! another CPU's or an interrupt's calls come in between.

use std::collections::VecDeque;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::trace::{Event, EventKind, TraceError};

/// The IOVA granule's shift.
const SHIFT: u32 = 12;

/// Calls kept waiting for their device at most (a run never closed holds the queue up).
pub const MAX_WAITING: usize = 1 << 16;

/// Whether an [`Op`] takes or returns a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OpKind {
    /// `alloc_iova_fast`.
    Alloc,
    /// `free_iova_fast` (strict) or `queue_iova` (lazy); with recorded frees, the unmap.
    Free,
    /// A recorded `free_iova_fast` (a kprobe): `iovad` names its domain.
    RecordedFree,
}

/// Whose a call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Unknown,
    Device(u16),
    /// Dropped (lenient mode): counted, not applied.
    Skipped,
    /// Moved to a later place in the queue (a free claimed by its `dma_unmap_page`).
    Moved,
}

/// One allocator call.
#[derive(Clone, Copy, Debug)]
pub(super) struct Op {
    pub kind: OpKind,
    pub cpu: u16,
    /// First page.
    pub pfn: u64,
    /// Exclusive end page.
    pub end: u64,
    /// The line of the run's first `iommu:map`, or of the `iommu:unmap`.
    pub line: u64,
    pub time_ns: u64,
    /// A recorded free's `struct iova_domain *` (0: not recorded, or another kind).
    pub iovad: u64,
    owner: Owner,
}

impl Op {
    /// The device (known once the op leaves the queue).
    pub fn device(&self) -> u16 {
        match self.owner {
            Owner::Device(d) => d,
            Owner::Unknown | Owner::Skipped | Owner::Moved => u16::MAX,
        }
    }

    /// Pages.
    pub fn pages(&self) -> u64 {
        self.end - self.pfn
    }

    fn contains(&self, dma: u64) -> bool {
        (self.pfn..self.end).contains(&(dma >> SHIFT))
    }
}

/// Events and calls left out in lenient mode (strict mode stops at the first, naming its
/// line).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// `iommu:map` runs no `dma_map_*`/`dma_alloc*` of the same CPU closed.
    pub unclosed_map_runs: u64,
    /// `iommu:unmap`s no `dma_unmap_*`/`dma_free` claimed.
    pub unclaimed_unmaps: u64,
    /// `dma_map_*`/`dma_alloc*` events whose DMA address lay outside the CPU's open run.
    pub map_outside_run: u64,
    /// Frees of ranges the trace never showed allocated (mapped before tracing began).
    pub unknown_frees: u64,
    /// Allocations overlapping a range still live in the same domain (the devices' domains
    /// are not what the options say).
    pub overlapping_allocations: u64,
    /// Malformed lines the reader skipped.
    pub malformed_lines: u64,
}

impl Skipped {
    /// Everything skipped.
    pub fn total(&self) -> u64 {
        self.unclosed_map_runs
            + self.unclaimed_unmaps
            + self.map_outside_run
            + self.unknown_frees
            + self.overlapping_allocations
            + self.malformed_lines
    }
}

#[derive(Debug, Default, Clone)]
struct CpuState {
    /// The open `iommu:map` run (a sequence number).
    run: Option<u64>,
    /// Every `iommu:map` of the open run was an identity mapping (IOVA = physical address).
    run_identity: bool,
    /// `iommu:unmap`s waiting for their `dma_unmap_*` (sequence numbers).
    waiting_frees: Vec<u64>,
    /// A `dma_unmap_sg`/`dma_free` traced on entry: (device, DMA address).
    entry_unmap: Option<(u16, Option<u64>)>,
}

/// The grouping state (see the module doc).
#[derive(Debug)]
pub(super) struct Grouper {
    queue: VecDeque<Op>,
    /// Sequence number of `queue[0]`.
    base: u64,
    cpus: Vec<CpuState>,
    lenient: bool,
    /// The trace records every free (`free_iova_fast` kprobe): see the module doc.
    recorded_frees: bool,
    pub skipped: Skipped,
    /// Direct mappings seen (see the module doc): not allocations, in either mode.
    pub direct_mappings: u64,
}

/// A parse-style error at `line`.
pub(super) fn error_at(path: &Path, line: u64, expected: &str, found: String) -> TraceError {
    TraceError::Parse {
        path: path.to_owned(),
        line,
        expected: expected.to_owned(),
        found,
    }
}

impl Grouper {
    pub fn new(lenient: bool, recorded_frees: bool) -> Self {
        Grouper {
            queue: VecDeque::with_capacity(1024),
            base: 0,
            cpus: Vec::new(),
            lenient,
            recorded_frees,
            skipped: Skipped::default(),
            direct_mappings: 0,
        }
    }

    fn cpu(&mut self, cpu: u16) -> &mut CpuState {
        let i = usize::from(cpu);
        if self.cpus.len() <= i {
            self.cpus.resize(i + 1, CpuState::default());
        }
        &mut self.cpus[i]
    }

    fn push(&mut self, op: Op) -> u64 {
        self.queue.push_back(op);
        self.base + self.queue.len() as u64 - 1
    }

    fn at(&mut self, seq: u64) -> Option<&mut Op> {
        let i = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        self.queue.get_mut(i)
    }

    /// Takes one event. `is_iommu` says it is an `iommu:` record; `line` is its line.
    pub fn event(
        &mut self,
        e: &Event,
        line: u64,
        is_iommu: bool,
        path: &Path,
    ) -> Result<(), TraceError> {
        if is_iommu {
            let Some(dma) = e.dma else {
                return Ok(());
            };
            let pfn = dma >> SHIFT;
            let end = (dma.saturating_add(e.len.max(1)) + (1 << SHIFT) - 1) >> SHIFT;
            match e.kind {
                EventKind::Map => {
                    let identity = e.phys == Some(dma);
                    let run_identity = self.cpu(e.cpu).run_identity;
                    if let Some(seq) = self.cpu(e.cpu).run
                        && let Some(op) = self.at(seq)
                    {
                        if run_identity && !(identity && pfn == op.end) {
                            // A direct mapping, which no dma_* event closes: a new run starts.
                            op.owner = Owner::Skipped;
                            self.direct_mappings += 1;
                        } else {
                            op.pfn = op.pfn.min(pfn);
                            op.end = op.end.max(end);
                            self.cpu(e.cpu).run_identity = run_identity && identity;
                            return Ok(());
                        }
                    }
                    let seq = self.push(Op {
                        kind: OpKind::Alloc,
                        cpu: e.cpu,
                        pfn,
                        end,
                        line,
                        time_ns: e.time_ns,
                        iovad: 0,
                        owner: Owner::Unknown,
                    });
                    let c = self.cpu(e.cpu);
                    c.run = Some(seq);
                    c.run_identity = identity;
                }
                EventKind::Unmap => {
                    let entry = self.cpu(e.cpu).entry_unmap.take();
                    let owner = match entry {
                        Some((d, dma))
                            if dma.is_none_or(|a| (pfn..end).contains(&(a >> SHIFT))) =>
                        {
                            Owner::Device(d)
                        }
                        _ => Owner::Unknown,
                    };
                    let seq = self.push(Op {
                        kind: OpKind::Free,
                        cpu: e.cpu,
                        pfn,
                        end,
                        line,
                        time_ns: e.time_ns,
                        iovad: 0,
                        owner,
                    });
                    if owner == Owner::Unknown {
                        self.cpu(e.cpu).waiting_frees.push(seq);
                    }
                }
                EventKind::Free if self.recorded_frees => {
                    self.push(Op {
                        kind: OpKind::RecordedFree,
                        cpu: e.cpu,
                        pfn,
                        end,
                        line,
                        time_ns: e.time_ns,
                        iovad: e.phys.unwrap_or(0),
                        owner: Owner::Device(e.device),
                    });
                }
                _ => {}
            }
            return self.bound(path);
        }
        match e.kind {
            EventKind::Map | EventKind::MapSg | EventKind::Alloc => {
                let Some(seq) = self.cpu(e.cpu).run.take() else {
                    return Ok(()); // not through the IOMMU (dma-direct, or a failed map)
                };
                let lenient = self.lenient;
                let Some(op) = self.at(seq) else {
                    return Ok(());
                };
                match e.dma {
                    Some(dma) if !op.contains(dma) => {
                        let (first, lo, hi) = (op.line, op.pfn << SHIFT, op.end << SHIFT);
                        if !lenient {
                            return Err(error_at(
                                path,
                                line,
                                "a dma_map_*/dma_alloc* whose DMA address lies in the IOVA range of the iommu:map run it closes",
                                format!(
                                    "dma_addr={dma:#x} outside [{lo:#x}, {hi:#x}) mapped from line {first} on CPU {}",
                                    e.cpu
                                ),
                            ));
                        }
                        op.owner = Owner::Skipped;
                        self.skipped.map_outside_run += 1;
                    }
                    _ => op.owner = Owner::Device(e.device),
                }
            }
            EventKind::Unmap => {
                let Some(dma) = e.dma else {
                    return Ok(());
                };
                let cpu = e.cpu;
                let waiting = std::mem::take(&mut self.cpu(cpu).waiting_frees);
                let mut rest = Vec::with_capacity(waiting.len());
                let mut claimed = None;
                let in_place = self.recorded_frees;
                for &seq in waiting.iter().rev() {
                    match self.at(seq) {
                        Some(op) if claimed.is_none() && in_place && op.contains(dma) => {
                            // The recorded free says when the range came back; the unmap
                            // stays where it was traced, before it.
                            op.owner = Owner::Device(e.device);
                            claimed = Some(*op);
                        }
                        Some(op) if claimed.is_none() && op.contains(dma) => {
                            // `__iommu_dma_unmap` traces `iommu:unmap`, then syncs the IOTLB
                            // and frees the range (`iommu_dma_free_iova`); `dma_unmap_page`
                            // is traced after it returns. The free belongs here, after
                            // whatever an interrupt or the other CPU did in between.
                            let mut moved = *op;
                            op.owner = Owner::Moved;
                            moved.owner = Owner::Device(e.device);
                            moved.time_ns = e.time_ns;
                            claimed = Some(moved);
                        }
                        Some(_) => rest.push(seq),
                        None => {}
                    }
                }
                rest.reverse();
                self.cpu(cpu).waiting_frees = rest;
                if let Some(op) = claimed
                    && !in_place
                {
                    self.push(op);
                    return self.bound(path);
                }
            }
            EventKind::UnmapSg | EventKind::Free => {
                let dev = e.device;
                let dma = e.dma;
                self.cpu(e.cpu).entry_unmap = Some((dev, dma));
            }
            _ => {}
        }
        Ok(())
    }

    /// Keeps the queue bounded: a call that waited for [`MAX_WAITING`] later ones is an error
    /// (strict) or dropped (lenient).
    fn bound(&mut self, path: &Path) -> Result<(), TraceError> {
        while self.queue.len() > MAX_WAITING {
            let head = self.queue[0];
            if head.owner == Owner::Unknown {
                if !self.lenient {
                    return Err(unresolved_error(path, &head));
                }
                self.count_unresolved(&head);
                self.queue[0].owner = Owner::Skipped;
            }
            // Resolved heads leave through `pop_ready`; a skipped one is dropped here.
            if matches!(self.queue[0].owner, Owner::Skipped | Owner::Moved) {
                self.queue.pop_front();
                self.base += 1;
            } else {
                break;
            }
        }
        Ok(())
    }

    fn count_unresolved(&mut self, op: &Op) {
        match op.kind {
            OpKind::Alloc => self.skipped.unclosed_map_runs += 1,
            OpKind::Free | OpKind::RecordedFree => self.skipped.unclaimed_unmaps += 1,
        }
    }

    /// The next call whose device is known, in trace order.
    pub fn pop_ready(&mut self) -> Option<Op> {
        loop {
            let head = *self.queue.front()?;
            match head.owner {
                Owner::Unknown => return None,
                Owner::Skipped | Owner::Moved => {
                    self.queue.pop_front();
                    self.base += 1;
                }
                Owner::Device(_) => {
                    self.queue.pop_front();
                    self.base += 1;
                    return Some(head);
                }
            }
        }
    }

    /// At the end of the trace: every call must have found its device (strict), or those
    /// that did not are counted (lenient). Calls after an unresolved one are released.
    pub fn finish(&mut self, path: &Path) -> Result<(), TraceError> {
        // A run of identity maps still open at the end: a direct mapping.
        for c in 0..self.cpus.len() {
            if let (Some(seq), true) = (self.cpus[c].run, self.cpus[c].run_identity)
                && let Some(op) = self.at(seq)
                && op.owner == Owner::Unknown
            {
                op.owner = Owner::Skipped;
                self.direct_mappings += 1;
            }
        }
        for i in 0..self.queue.len() {
            let op = self.queue[i];
            if op.owner == Owner::Unknown {
                if !self.lenient {
                    return Err(unresolved_error(path, &op));
                }
                self.count_unresolved(&op);
                self.queue[i].owner = Owner::Skipped;
            }
        }
        for c in &mut self.cpus {
            c.run = None;
            c.waiting_frees.clear();
        }
        Ok(())
    }
}

fn unresolved_error(path: &Path, op: &Op) -> TraceError {
    let range = format!(
        "[{:#x}, {:#x}) on CPU {}",
        op.pfn << SHIFT,
        op.end << SHIFT,
        op.cpu
    );
    match op.kind {
        OpKind::Alloc => error_at(
            path,
            op.line,
            "an iommu:map run closed by a dma_map_*/dma_alloc* event of the same CPU (use --lenient to skip it)",
            format!("iommu:map {range}, never closed"),
        ),
        OpKind::Free | OpKind::RecordedFree => error_at(
            path,
            op.line,
            "an iommu:unmap claimed by a dma_unmap_*/dma_unmap_sg/dma_free event of the same CPU (use --lenient to skip it)",
            format!("iommu:unmap {range}, never claimed"),
        ),
    }
}
