//! A workload run inside a guest: the generators and traces give the physical addresses of
//! the machine they run on, and a guest's machine is its guest-physical memory (S1.1). This
//! adapter is the one place a workload's address becomes a guest address, so the guest's DMA
//! layer takes `Workload<Phys = Gpa>` and bare metal's `Workload<Phys = Hpa>`: one cannot be
//! handed the other's buffers.

use crate::{DmaOp, OpSink, Segment, Workload, WorkloadError};
use iommulab_base::addr::{Gpa, Hpa};

/// `W`'s operations with their buffers in guest-physical memory.
#[derive(Debug)]
pub struct InGuest<W> {
    inner: W,
    /// The last `MapSg`'s segments, relabelled (reused: no allocation once warm).
    sg: Vec<Segment<Gpa>>,
}

impl<W: Workload<Phys = Hpa>> InGuest<W> {
    /// Runs `inner` inside a guest.
    pub fn new(inner: W) -> Self {
        InGuest {
            inner,
            sg: Vec::new(),
        }
    }

    /// The workload it wraps (a trace's replay report, say).
    pub fn inner(&self) -> &W {
        &self.inner
    }

    /// The workload it wraps, back.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

/// The guest-physical address of a buffer at `phys` in the workload's machine.
const fn in_guest(phys: Hpa) -> Gpa {
    Gpa::new(phys.get())
}

/// `op` with its buffer in guest-physical memory; a `MapSg`'s segments (`inner_sg`) are
/// relabelled into `sg`.
#[inline(always)]
fn to_guest(op: DmaOp<Hpa>, inner_sg: &[Segment<Hpa>], sg: &mut Vec<Segment<Gpa>>) -> DmaOp<Gpa> {
    match op {
        DmaOp::Map {
            slot,
            cpu,
            device,
            phys,
            len,
            dir,
            dma_alloc,
        } => DmaOp::Map {
            slot,
            cpu,
            device,
            phys: in_guest(phys),
            len,
            dir,
            dma_alloc,
        },
        DmaOp::MapSg {
            slot,
            cpu,
            device,
            dir,
        } => {
            sg.clear();
            sg.extend(inner_sg.iter().map(|s| Segment {
                phys: in_guest(s.phys),
                len: s.len,
            }));
            DmaOp::MapSg {
                slot,
                cpu,
                device,
                dir,
            }
        }
        DmaOp::Access { slot, access } => DmaOp::Access { slot, access },
        DmaOp::Unmap { slot, cpu } => DmaOp::Unmap { slot, cpu },
        DmaOp::Tick { now_ns } => DmaOp::Tick { now_ns },
    }
}

/// A sink of guest ops fed a workload's: each op relabelled on its way.
struct ToGuest<'a, K> {
    sink: &'a mut K,
    sg: &'a mut Vec<Segment<Gpa>>,
}

impl<K: OpSink<Gpa>> OpSink<Hpa> for ToGuest<'_, K> {
    #[inline(always)]
    fn op(&mut self, op: DmaOp<Hpa>, sg: &[Segment<Hpa>]) {
        let op = to_guest(op, sg, self.sg);
        self.sink.op(op, self.sg);
    }

    #[inline(always)]
    fn stopped(&self) -> bool {
        self.sink.stopped()
    }
}

impl<W: Workload<Phys = Hpa>> Workload for InGuest<W> {
    type Phys = Gpa;

    // Inlined into the run loop: as a call of its own the conversion cost as much as a
    // guest's map-cache hit (a frame around the inner generator's call, its result copied).
    #[inline(always)]
    fn next_op(&mut self) -> Result<Option<DmaOp<Gpa>>, WorkloadError> {
        Ok(self
            .inner
            .next_op()?
            .map(|op| to_guest(op, self.inner.sg_segments(), &mut self.sg)))
    }

    fn for_each_op<K: OpSink<Gpa>>(&mut self, sink: &mut K) -> Result<(), WorkloadError> {
        let mut to_guest = ToGuest {
            sink,
            sg: &mut self.sg,
        };
        self.inner.for_each_op(&mut to_guest)
    }

    fn sg_segments(&self) -> &[Segment<Gpa>] {
        &self.sg
    }

    fn slots(&self) -> usize {
        self.inner.slots()
    }

    fn devices(&self) -> usize {
        self.inner.devices()
    }

    fn total_ios(&self) -> Option<u64> {
        self.inner.total_ios()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NetperfSend, NetperfSendConfig, TxMapping};

    /// The same operations at the same addresses, each now a guest-physical one; the
    /// segments of every `MapSg` relabelled likewise.
    #[test]
    fn a_guest_sees_the_same_stream_in_its_own_memory() {
        let cfg = NetperfSendConfig {
            packets: 500,
            mapping: TxMapping::Sg,
            ..NetperfSendConfig::default()
        };
        let mut host = NetperfSend::new(cfg).unwrap();
        let mut guest = InGuest::new(NetperfSend::new(cfg).unwrap());
        let (mut ops, mut sgs) = (0, 0);
        while let Some(h) = host.next_op().unwrap() {
            let g = guest.next_op().unwrap().unwrap();
            match (h, g) {
                (
                    DmaOp::Map {
                        phys: a, len: l, ..
                    },
                    DmaOp::Map {
                        phys: b, len: m, ..
                    },
                ) => {
                    assert_eq!((a.get(), l), (b.get(), m));
                }
                (DmaOp::MapSg { .. }, DmaOp::MapSg { .. }) => {
                    let (hs, gs) = (host.sg_segments(), guest.sg_segments());
                    assert_eq!(hs.len(), gs.len());
                    assert!(
                        hs.iter()
                            .zip(gs)
                            .all(|(a, b)| a.phys.get() == b.phys.get() && a.len == b.len)
                    );
                    sgs += 1;
                }
                (h, g) => assert_eq!(format!("{h:?}"), format!("{g:?}")),
            }
            ops += 1;
        }
        assert!(guest.next_op().unwrap().is_none());
        assert!(ops > 1000 && sgs > 100, "{ops} ops, {sgs} sg lists");
        assert_eq!(guest.total_ios(), host.total_ios());
    }

    /// Each op with the segments of a `MapSg`, as (address, length).
    #[derive(Default)]
    struct Seen(Vec<(DmaOp<Gpa>, Segments)>);
    type Segments = Vec<(u64, u64)>;

    impl OpSink<Gpa> for Seen {
        fn op(&mut self, op: DmaOp<Gpa>, sg: &[Segment<Gpa>]) {
            let sg = match op {
                DmaOp::MapSg { .. } => sg.iter().map(|s| (s.phys.get(), s.len)).collect(),
                _ => Vec::new(),
            };
            self.0.push((op, sg));
        }
    }

    /// The guest's ops handed to a sink are those `next_op` returns, segments relabelled.
    #[test]
    fn for_each_op_relabels_what_next_op_returns() {
        let cfg = NetperfSendConfig {
            packets: 500,
            mapping: TxMapping::Sg,
            ..NetperfSendConfig::default()
        };
        let mut guest = InGuest::new(NetperfSend::new(cfg).unwrap());
        let mut one_at_a_time = Seen::default();
        while let Some(op) = guest.next_op().unwrap() {
            one_at_a_time.op(op, guest.sg_segments());
        }
        let mut seen = Seen::default();
        InGuest::new(NetperfSend::new(cfg).unwrap())
            .for_each_op(&mut seen)
            .unwrap();
        assert!(
            one_at_a_time
                .0
                .iter()
                .filter(|(_, sg)| sg.len() > 1)
                .count()
                > 100
        );
        assert_eq!(seen.0, one_at_a_time.0);
    }
}
