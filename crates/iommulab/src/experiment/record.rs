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
use crate::dma::{MapAttrs, SgEntry};
use crate::driver::{Slot, SlotTable};
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

/// Records `workload` into `sink` until it ends or `max_events` events were written.
/// Mappings still live at the cut are unmapped, so the trace is closed.
///
/// The buffers live in the driver's [`SlotTable`], as in a run: the recorder is a run whose
/// DMA API is the IOVA allocator alone and whose output is the events.
pub fn record<W: Workload, K: EventSink + ?Sized>(
    workload: &mut W,
    sink: &mut K,
    max_events: u64,
    op_ns: u64,
) -> Result<RecordSummary, Error> {
    let mut iova = RbTree::new(Pfn::new(1), Pfn::new(1 << 20))?;
    let mut slots: SlotTable<W::Phys> = SlotTable::default();
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
                let dma = Iova::new(pfn.base(PAGE_4K).get() | offset);
                let attrs = MapAttrs { dir, dma_alloc };
                slots
                    .get_mut(slot)
                    .set_single(true, device, dma, phys, len, attrs);
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
                        dma: Some(dma.get()),
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
                let pages = sg_pages(segs.iter().map(|s| (s.phys, s.len)));
                let pfn = iova.alloc(cpu0, pages, limit)?;
                let s = slots.get_mut(slot);
                let list = s.start_sg(device, dir);
                let mut next = pfn;
                for g in segs {
                    let off = g.phys.page_offset(PAGE_4K);
                    list.push(SgEntry {
                        phys: g.phys,
                        len: g.len,
                        dma: Iova::new(next.base(PAGE_4K).get() | off),
                    });
                    next = next.add(PAGE_4K.pages_spanned(off, g.len));
                }
                s.finish_sg(true);
                let list = s.sg().unwrap_or(&[]);
                let head = Event {
                    time_ns: now_ns,
                    cpu: cpu_u16(cpu),
                    device,
                    kind: EventKind::MapSg,
                    dir: dir.into(),
                    dma: None,
                    phys: None,
                    len: list.iter().map(|e| e.len).sum(),
                    nents: u32::try_from(list.len()).unwrap_or(u32::MAX),
                };
                emit(head, &mut sum)?;
                for e in list {
                    let seg = Event {
                        kind: EventKind::SgSeg,
                        dma: Some(e.dma.get()),
                        phys: Some(e.phys.get()),
                        len: e.len,
                        nents: 0,
                        ..head
                    };
                    emit(seg, &mut sum)?;
                }
            }
            DmaOp::Access { slot, access } => {
                let Some(s) = slots.live(slot) else {
                    continue;
                };
                let kind = match access {
                    Access::Read => EventKind::DeviceRead,
                    Access::Write => EventKind::DeviceWrite,
                };
                for (dma, len) in s.extents() {
                    emit(
                        Event {
                            time_ns: now_ns,
                            cpu: 0,
                            device: s.device(),
                            kind,
                            dir: s.dir().into(),
                            dma: Some(dma.get()),
                            phys: None,
                            len,
                            nents: 0,
                        },
                        &mut sum,
                    )?;
                }
            }
            DmaOp::Unmap { slot, cpu } => {
                let Some(s) = slots.live_mut(slot) else {
                    continue;
                };
                close(s, now_ns, cpu_u16(cpu), &mut iova, &mut |e| {
                    emit(e, &mut sum)
                })?;
            }
        }
    }
    for s in slots.live_iter_mut() {
        close(s, now_ns, 0, &mut iova, &mut |e| emit(e, &mut sum))?;
    }
    Ok(sum)
}

/// The IOVA pages a list of `(phys, len)` segments takes, each from its page offset (at
/// least one).
fn sg_pages<P: PhysAddr>(segs: impl Iterator<Item = (P, u64)>) -> u64 {
    let pages: u64 = segs
        .map(|(phys, len)| PAGE_4K.pages_spanned(phys.page_offset(PAGE_4K), len))
        .sum();
    pages.max(1)
}

/// Emits the unmap (or `unmap_sg` and its segments) of `s`, frees its IOVA and retires it.
fn close<P: PhysAddr>(
    s: &mut Slot<P>,
    now_ns: u64,
    cpu: u16,
    iova: &mut RbTree,
    emit: &mut dyn FnMut(Event) -> Result<(), TraceError>,
) -> Result<(), Error> {
    let dir: TraceDir = s.dir().into();
    let head = Event {
        time_ns: now_ns,
        cpu,
        device: s.device(),
        kind: EventKind::Unmap,
        dir,
        dma: None,
        phys: None,
        len: 0,
        nents: 0,
    };
    let (pfn, pages) = if let Some(list) = s.sg() {
        emit(Event {
            kind: EventKind::UnmapSg,
            len: list.iter().map(|e| e.len).sum(),
            nents: u32::try_from(list.len()).unwrap_or(u32::MAX),
            ..head
        })?;
        for e in list {
            // Like Linux's `dma_unmap_sg` event: physical addresses only.
            emit(Event {
                kind: EventKind::SgSeg,
                phys: Some(e.phys.get()),
                len: e.len,
                ..head
            })?;
        }
        let pages = sg_pages(list.iter().map(|e| (e.phys, e.len)));
        (s.addr().pfn(PAGE_4K), pages)
    } else {
        emit(Event {
            kind: if s.attrs().dma_alloc {
                EventKind::Free
            } else {
                EventKind::Unmap
            },
            dma: Some(s.addr().get()),
            len: s.bytes(),
            ..head
        })?;
        let pages = PAGE_4K.pages_spanned(s.phys().page_offset(PAGE_4K), s.bytes());
        (s.addr().pfn(PAGE_4K), pages)
    };
    iova.free(CpuId::new(0), pfn, pages)?;
    s.retire();
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
