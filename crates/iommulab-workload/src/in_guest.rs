//! A workload run inside a guest: the generators and traces give the physical addresses of
//! the machine they run on, and a guest's machine is its guest-physical memory (S1.1). This
//! adapter is the one place a workload's address becomes a guest address, so the guest's DMA
//! layer takes `Workload<Phys = Gpa>` and bare metal's `Workload<Phys = Hpa>`: one cannot be
//! handed the other's buffers.

use crate::addr::{Gpa, Hpa};
use crate::{DmaOp, Segment, Workload, WorkloadError};

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

impl<W: Workload<Phys = Hpa>> Workload for InGuest<W> {
    type Phys = Gpa;

    // Inlined into the run loop: as a call of its own the conversion cost as much as a
    // guest's map-cache hit (a frame around the inner generator's call, its result copied).
    #[inline(always)]
    fn next_op(&mut self) -> Result<Option<DmaOp<Gpa>>, WorkloadError> {
        Ok(self.inner.next_op()?.map(|op| match op {
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
                self.sg.clear();
                self.sg
                    .extend(self.inner.sg_segments().iter().map(|s| Segment {
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
        }))
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
}
