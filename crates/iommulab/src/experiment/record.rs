//! Writing a built-in workload out as a trace (`iommulab trace generate`), so generated and
//! recorded inputs are interchangeable.
//!
//! The workload's operations become trace events with **realistic DMA addresses**: each map
//! takes an IOVA from Linux's top-down red-black-tree allocator (the same [`RbTree`] the
//! `default` configuration uses), like a trace taken on a 2.6.2x VT-d kernel. A replay
//! allocates its own IOVAs anyway; the recorded ones only identify mappings. Timestamps come
//! from the workload's own clock (`Tick`) when it has one, otherwise advance by `op_ns` per
//! operation.

use super::{WorkloadVisitor, with_workload};
use crate::addr::{Access, CpuId, Iova, PAGE_4K, Pfn, PhysAddr};
use crate::error::Error;
use crate::iova::{IovaAllocator, RbTree};
use crate::trace::{Event, EventKind, EventSink, TraceDir, TraceError};
use crate::workload::{DmaOp, Workload, WorkloadConfig};

/// What [`record`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordSummary {
    /// Events written (segments included).
    pub events: u64,
    /// Workload operations consumed.
    pub ops: u64,
}

#[derive(Clone, Debug, Default)]
struct Live {
    device: u16,
    dir: TraceDir,
    /// (dma, phys, len) per segment; one entry for a single map.
    segs: Vec<(u64, u64, u64)>,
    sg: bool,
    /// Recorded as `alloc`/`free` (a DMA-allocated buffer, S1.11).
    alloc: bool,
    /// First IOVA page and page count, to free.
    pfn: u64,
    pages: u64,
}

/// Records `workload` into `sink` until it ends or `max_events` events were written.
/// Mappings still live at the cut are unmapped, so the trace is closed.
pub fn record<W: Workload, K: EventSink + ?Sized>(
    workload: &mut W,
    sink: &mut K,
    max_events: u64,
    op_ns: u64,
) -> Result<RecordSummary, Error> {
    let mut iova = RbTree::new(Pfn::new(1), Pfn::new(1 << 20))?;
    let mut live: Vec<Live> = Vec::new();
    let mut sum = RecordSummary::default();
    let mut now_ns: u64 = 0;
    let mut ticked = false;
    let cpu0 = CpuId::new(0);
    let limit = iova.space_end();
    let mut emit = |e: Event, sum: &mut RecordSummary| -> Result<(), TraceError> {
        sum.events += 1;
        sink.write(&e)
    };
    // Leave room for closing the live mappings after the cut.
    while sum.events < max_events {
        let Some(op) = workload.next_op()? else {
            break;
        };
        sum.ops += 1;
        if !ticked {
            now_ns += op_ns;
        }
        match op {
            DmaOp::Tick { now_ns: t } => {
                ticked = true;
                now_ns = now_ns.max(t);
            }
            DmaOp::Map {
                slot,
                cpu,
                device,
                phys,
                len,
                dir,
                dma_alloc,
            } => {
                let offset = phys.page_offset(PAGE_4K);
                let pages = PAGE_4K.pages_spanned(offset, len);
                let pfn = iova.alloc(cpu0, pages, limit)?;
                let dma = pfn.base(PAGE_4K).get() | offset;
                let slot = slot as usize;
                if slot >= live.len() {
                    live.resize_with(slot + 1, Live::default);
                }
                let l = &mut live[slot];
                l.device = device;
                l.dir = dir.into();
                l.segs.clear();
                l.segs.push((dma, phys.get(), len));
                l.sg = false;
                l.alloc = dma_alloc;
                l.pfn = pfn.get();
                l.pages = pages;
                emit(
                    Event {
                        time_ns: now_ns,
                        cpu: cpu_u16(cpu),
                        device,
                        kind: if dma_alloc {
                            EventKind::Alloc
                        } else {
                            EventKind::Map
                        },
                        dir: dir.into(),
                        dma: Some(dma),
                        phys: Some(phys.get()),
                        len,
                        nents: 0,
                    },
                    &mut sum,
                )?;
            }
            DmaOp::MapSg {
                slot,
                cpu,
                device,
                dir,
            } => {
                let segs = workload.sg_segments();
                let pages: u64 = segs
                    .iter()
                    .map(|s| PAGE_4K.pages_spanned(s.phys.page_offset(PAGE_4K), s.len))
                    .sum();
                let pfn = iova.alloc(cpu0, pages.max(1), limit)?;
                let slot = slot as usize;
                if slot >= live.len() {
                    live.resize_with(slot + 1, Live::default);
                }
                let l = &mut live[slot];
                l.device = device;
                l.dir = dir.into();
                l.segs.clear();
                let mut next = pfn;
                for s in segs {
                    let off = s.phys.page_offset(PAGE_4K);
                    l.segs
                        .push((next.base(PAGE_4K).get() | off, s.phys.get(), s.len));
                    next = next.add(PAGE_4K.pages_spanned(off, s.len));
                }
                l.sg = true;
                l.alloc = false;
                l.pfn = pfn.get();
                l.pages = pages.max(1);
                let nents = u32::try_from(l.segs.len()).unwrap_or(u32::MAX);
                let head = Event {
                    time_ns: now_ns,
                    cpu: cpu_u16(cpu),
                    device,
                    kind: EventKind::MapSg,
                    dir: dir.into(),
                    dma: None,
                    phys: None,
                    len: l.segs.iter().map(|s| s.2).sum(),
                    nents,
                };
                emit(head, &mut sum)?;
                for &(dma, phys, len) in &live[slot].segs {
                    let seg = Event {
                        kind: EventKind::SgSeg,
                        dma: Some(dma),
                        phys: Some(phys),
                        len,
                        nents: 0,
                        ..head
                    };
                    emit(seg, &mut sum)?;
                }
            }
            DmaOp::Access { slot, access } => {
                let Some(l) = live.get(slot as usize).filter(|l| !l.segs.is_empty()) else {
                    continue;
                };
                let kind = match access {
                    Access::Read => EventKind::DeviceRead,
                    Access::Write => EventKind::DeviceWrite,
                };
                for &(dma, _, len) in &l.segs {
                    emit(
                        Event {
                            time_ns: now_ns,
                            cpu: 0,
                            device: l.device,
                            kind,
                            dir: l.dir,
                            dma: Some(dma),
                            phys: None,
                            len,
                            nents: 0,
                        },
                        &mut sum,
                    )?;
                }
            }
            DmaOp::Unmap { slot, cpu } => {
                let Some(l) = live.get_mut(slot as usize).filter(|l| !l.segs.is_empty()) else {
                    continue;
                };
                close(l, now_ns, cpu_u16(cpu), &mut iova, &mut |e| {
                    emit(e, &mut sum)
                })?;
            }
        }
    }
    for l in live.iter_mut().filter(|l| !l.segs.is_empty()) {
        close(l, now_ns, 0, &mut iova, &mut |e| emit(e, &mut sum))?;
    }
    Ok(sum)
}

/// Emits the unmap (or `unmap_sg` and its segments) of `l` and frees its IOVA.
fn close(
    l: &mut Live,
    now_ns: u64,
    cpu: u16,
    iova: &mut RbTree,
    emit: &mut dyn FnMut(Event) -> Result<(), TraceError>,
) -> Result<(), Error> {
    let head = Event {
        time_ns: now_ns,
        cpu,
        device: l.device,
        kind: if l.sg {
            EventKind::UnmapSg
        } else if l.alloc {
            EventKind::Free
        } else {
            EventKind::Unmap
        },
        dir: l.dir,
        dma: None,
        phys: None,
        len: l.segs.iter().map(|s| s.2).sum(),
        nents: 0,
    };
    if l.sg {
        emit(Event {
            nents: u32::try_from(l.segs.len()).unwrap_or(u32::MAX),
            ..head
        })?;
        for &(_, phys, len) in &l.segs {
            // Like Linux's `dma_unmap_sg` event: physical addresses only.
            emit(Event {
                kind: EventKind::SgSeg,
                phys: Some(phys),
                len,
                ..head
            })?;
        }
    } else {
        let (dma, _, len) = l.segs[0];
        emit(Event {
            dma: Some(dma),
            len,
            ..head
        })?;
    }
    iova.free(CpuId::new(0), Pfn::<Iova>::new(l.pfn), l.pages)?;
    l.segs.clear();
    Ok(())
}

fn cpu_u16(cpu: CpuId) -> u16 {
    u16::try_from(cpu.index()).unwrap_or(u16::MAX)
}

/// Records `max_events` events of the built-in workload `cfg` into `sink` (the workload runs
/// as long as needed; its devices are named `sim0`, `sim1`, ...). The one implementation behind
/// `iommulab trace generate` and Python's `iommulab.trace.generate`.
pub fn generate<K: EventSink + ?Sized>(
    cfg: &WorkloadConfig,
    sink: &mut K,
    max_events: u64,
) -> Result<RecordSummary, Error> {
    struct Recorder<'a, K: ?Sized> {
        sink: &'a mut K,
        events: u64,
    }
    impl<K: EventSink + ?Sized> WorkloadVisitor for Recorder<'_, K> {
        type Output = RecordSummary;
        fn visit<W: Workload>(self, mut w: W) -> Result<Self::Output, Error> {
            let names: Vec<String> = (0..w.devices().max(1)).map(|i| format!("sim{i}")).collect();
            self.sink.set_devices(&names)?;
            record(&mut w, self.sink, self.events, 1000)
        }
    }

    // `u64::MAX` I/Os: run until the recorder has its events.
    let mut cfg = *cfg;
    match &mut cfg {
        WorkloadConfig::PseudoScsi(c) => c.ios = u64::MAX,
        WorkloadConfig::NetperfSend(c) => c.packets = u64::MAX,
        WorkloadConfig::ApacheSendfile(c) => c.requests = u64::MAX,
        WorkloadConfig::Block(c) => c.requests = u64::MAX,
        WorkloadConfig::UniformRandom(c) => c.ios = u64::MAX,
        WorkloadConfig::NetRx(c) => c.packets = u64::MAX,
        WorkloadConfig::NicDuplex(c) => match &mut c.tx {
            crate::workload::DuplexTx::NetperfSend(t) => t.packets = u64::MAX,
            crate::workload::DuplexTx::ApacheSendfile(t) => t.requests = u64::MAX,
        },
    }
    with_workload(
        &cfg,
        Recorder {
            sink,
            events: max_events,
        },
    )
}
