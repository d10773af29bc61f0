//! A driver change beyond S1.6's batching (which shares a hypercall among the pages of one
//! buffer), applied to any workload: a run of maps a driver issues back to back becomes one
//! scatter-gather list, mapped in one call and unmapped in one call.
//!
//! A NIC driver maps a packet's pieces one call at a time — e1000e's `e1000_tx_map` maps the
//! header and then each fragment with `dma_map_page`, and refills its receive ring a buffer
//! at a time — so a recorded trace shows each packet as consecutive maps on one CPU, for one
//! device, in one direction, with nothing between them. [`PacketSg`] turns each such run
//! (two or more maps; timer ticks between them are passed on after it) into one `MapSg`, as
//! a driver changed to map the packet as one list would issue; the list is unmapped when
//! the last of its pieces is (until then every piece stays mapped, as in a driver that
//! unmaps a packet when it completes). A lone map, a `MapSg`, and a map of memory allocated
//! for DMA (`dma_alloc`: a coherent allocation is not per packet) pass through unchanged.
//!
//! Slots: the lists get slots of their own (reused as lists complete); the inner workload's
//! slots are translated, so a device access to a piece reaches its list's slot.

use std::collections::VecDeque;

use crate::{DmaOp, Segment, Workload, WorkloadError};
use iommulab_base::addr::{DmaDirection, PhysAddr};

/// What [`PacketSg`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PacketSgStats {
    /// Maps of the inner workload.
    pub maps: u64,
    /// Lists made of two or more of them.
    pub lists: u64,
    /// Maps that went into a list.
    pub listed_maps: u64,
    /// The longest list.
    pub max_list: u64,
}

/// `W` with each run of back-to-back maps as one scatter-gather list (see the
/// [module docs](self)).
#[derive(Debug)]
pub struct PacketSg<W: Workload> {
    inner: W,
    /// Inner slot → outer slot, while the inner buffer is mapped.
    outer_of: Vec<Option<u32>>,
    /// Per outer slot: pieces still mapped.
    live: Vec<u32>,
    /// Outer slots free for reuse.
    free: Vec<u32>,
    /// Operations to return before reading the inner workload again.
    pending: VecDeque<DmaOp<W::Phys>>,
    /// The segments of the last `MapSg` returned.
    sg: Vec<Segment<W::Phys>>,
    /// The inner slots of the run being read (reused: no allocation once warm).
    members: Vec<u32>,
    /// Only runs of maps in this direction become lists (`None`: every run).
    only: Option<DmaDirection>,
    stats: PacketSgStats,
}

impl<W: Workload> PacketSg<W> {
    /// `inner` with its runs of maps as lists.
    pub fn new(inner: W) -> Self {
        PacketSg {
            inner,
            outer_of: Vec::new(),
            live: Vec::new(),
            free: Vec::new(),
            pending: VecDeque::new(),
            sg: Vec::new(),
            members: Vec::new(),
            only: None,
            stats: PacketSgStats::default(),
        }
    }

    /// `inner` with only its runs of transmit maps (to the device) as lists: a packet's
    /// head and fragments, which a NIC driver maps with several calls and uses only once all
    /// are mapped (S1.6's "large buffer"). Receive buffers stay one map each: a ring refill
    /// maps separate buffers.
    pub fn transmit_only(inner: W) -> Self {
        PacketSg {
            only: Some(DmaDirection::ToDevice),
            ..Self::new(inner)
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> PacketSgStats {
        self.stats
    }

    /// The workload it wraps.
    pub fn inner(&self) -> &W {
        &self.inner
    }

    /// A fresh outer slot holding `pieces` inner buffers.
    fn open(&mut self, pieces: u32) -> u32 {
        let s = self.free.pop().unwrap_or_else(|| {
            self.live.push(0);
            u32::try_from(self.live.len() - 1).expect("fewer than 2^32 live buffers")
        });
        self.live[s as usize] = pieces;
        s
    }

    fn bind(&mut self, inner: u32, outer: u32) {
        let i = inner as usize;
        if i >= self.outer_of.len() {
            self.outer_of.resize(i + 1, None);
        }
        self.outer_of[i] = Some(outer);
    }

    /// Reads the run of maps that `first` starts; returns the op to emit for it.
    fn run_of_maps(&mut self, first: DmaOp<W::Phys>) -> Result<DmaOp<W::Phys>, WorkloadError> {
        let DmaOp::Map {
            slot,
            cpu,
            device,
            phys,
            len,
            dir,
            dma_alloc: false,
        } = first
        else {
            unreachable!("called with a streaming map");
        };
        self.sg.clear();
        self.sg.push(Segment { phys, len });
        let mut members = std::mem::take(&mut self.members);
        members.clear();
        members.push(slot);
        // Ticks inside the run are passed on after it; the op that ends it after them.
        loop {
            match self.inner.next_op()? {
                Some(DmaOp::Map {
                    slot: s,
                    cpu: c,
                    device: d,
                    phys: p,
                    len: l,
                    dir: r,
                    dma_alloc: false,
                }) if c == cpu && d == device && r == dir => {
                    self.sg.push(Segment { phys: p, len: l });
                    members.push(s);
                }
                Some(t @ DmaOp::Tick { .. }) => self.pending.push_back(t),
                Some(other) => {
                    self.pending.push_back(other);
                    break;
                }
                None => break,
            }
        }
        self.stats.maps += members.len() as u64;
        let n = u32::try_from(members.len()).expect("a run shorter than 2^32 maps");
        let outer = self.open(n);
        for &m in &members {
            self.bind(m, outer);
        }
        let pieces = members.len() as u64;
        self.members = members;
        Ok(if pieces == 1 {
            relabel(first, outer)
        } else {
            self.stats.lists += 1;
            self.stats.listed_maps += pieces;
            self.stats.max_list = self.stats.max_list.max(pieces);
            DmaOp::MapSg {
                slot: outer,
                cpu,
                device,
                dir,
            }
        })
    }

    /// Translates an op read from the inner workload (not a streaming map); `None` to skip it.
    fn translate(&mut self, op: DmaOp<W::Phys>) -> Option<DmaOp<W::Phys>> {
        Some(match op {
            DmaOp::Map { slot, .. } => {
                self.stats.maps += 1;
                let outer = self.open(1);
                self.bind(slot, outer);
                relabel(op, outer)
            }
            DmaOp::MapSg { slot, .. } => {
                self.sg.clear();
                self.sg.extend_from_slice(self.inner.sg_segments());
                let outer = self.open(1);
                self.bind(slot, outer);
                relabel(op, outer)
            }
            DmaOp::Access { slot, access } => DmaOp::Access {
                slot: self.outer_of.get(slot as usize).copied().flatten()?,
                access,
            },
            DmaOp::Unmap { slot, cpu } => {
                let outer = self.outer_of.get_mut(slot as usize)?.take()?;
                let live = &mut self.live[outer as usize];
                *live -= 1;
                if *live > 0 {
                    return None;
                }
                self.free.push(outer);
                DmaOp::Unmap { slot: outer, cpu }
            }
            t @ DmaOp::Tick { .. } => t,
        })
    }
}

/// A map's op under another slot.
fn relabel<P: PhysAddr>(op: DmaOp<P>, outer: u32) -> DmaOp<P> {
    match op {
        DmaOp::Map { .. } | DmaOp::MapSg { .. } => op.with_slot(|_| outer),
        other => other,
    }
}

impl<W: Workload> Workload for PacketSg<W> {
    type Phys = W::Phys;

    fn next_op(&mut self) -> Result<Option<DmaOp<W::Phys>>, WorkloadError> {
        loop {
            let op = match self.pending.pop_front() {
                Some(op) => op,
                None => match self.inner.next_op()? {
                    Some(op) => op,
                    None => return Ok(None),
                },
            };
            if let DmaOp::Map {
                dma_alloc: false,
                dir,
                ..
            } = op
                && self.only.is_none_or(|d| d == dir)
            {
                return self.run_of_maps(op).map(Some);
            }
            if let Some(op) = self.translate(op) {
                return Ok(Some(op));
            }
        }
    }

    fn sg_segments(&self) -> &[Segment<W::Phys>] {
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
    use iommulab_base::addr::{Access, CpuId, DmaDirection, Hpa};

    /// A fixed list of operations (no `MapSg` among them).
    struct Ops(std::vec::IntoIter<DmaOp>);

    impl Workload for Ops {
        type Phys = Hpa;
        fn next_op(&mut self) -> Result<Option<DmaOp>, WorkloadError> {
            Ok(self.0.next())
        }
        fn sg_segments(&self) -> &[Segment] {
            &[]
        }
        fn slots(&self) -> usize {
            8
        }
        fn devices(&self) -> usize {
            1
        }
        fn total_ios(&self) -> Option<u64> {
            None
        }
    }

    fn map(slot: u32, cpu: u16, phys: u64, dir: DmaDirection) -> DmaOp {
        DmaOp::Map {
            slot,
            cpu: CpuId::new(cpu),
            device: 0,
            phys: Hpa::new(phys),
            len: 100,
            dir,
            dma_alloc: false,
        }
    }

    fn unmap(slot: u32) -> DmaOp {
        DmaOp::Unmap {
            slot,
            cpu: CpuId::new(0),
        }
    }

    /// Back-to-back maps become one list (ticks inside it follow it), unmapped with its last
    /// piece; a map on another CPU or in another direction starts a new run; a lone map
    /// passes through; list slots are reused.
    #[test]
    fn back_to_back_maps_become_one_list() {
        use DmaDirection::{FromDevice, ToDevice};
        let ops = vec![
            map(5, 0, 0x1000, ToDevice),
            map(6, 0, 0x2000, ToDevice),
            DmaOp::Tick { now_ns: 7 },
            map(7, 0, 0x3000, ToDevice),
            map(1, 0, 0x9000, FromDevice),
            unmap(5),
            DmaOp::Access {
                slot: 6,
                access: Access::Read,
            },
            unmap(6),
            unmap(7),
            map(5, 1, 0x4000, ToDevice),
            map(2, 0, 0x5000, ToDevice),
            unmap(1),
            unmap(2),
            unmap(5),
        ];
        let mut w = PacketSg::new(Ops(ops.into_iter()));
        let mut got = Vec::new();
        while let Some(op) = w.next_op().unwrap() {
            let segs: Vec<u64> = w.sg_segments().iter().map(|s| s.phys.get()).collect();
            got.push((op, matches!(op, DmaOp::MapSg { .. }).then_some(segs)));
        }
        let sg = |slot| DmaOp::MapSg {
            slot,
            cpu: CpuId::new(0),
            device: 0,
            dir: ToDevice,
        };
        let want = vec![
            (sg(0), Some(vec![0x1000, 0x2000, 0x3000])),
            (DmaOp::Tick { now_ns: 7 }, None),
            (map(1, 0, 0x9000, FromDevice), None),
            (
                DmaOp::Access {
                    slot: 0,
                    access: Access::Read,
                },
                None,
            ),
            (unmap(0), None),
            (map(0, 1, 0x4000, ToDevice), None),
            (map(2, 0, 0x5000, ToDevice), None),
            (unmap(1), None),
            (unmap(2), None),
            (unmap(0), None),
        ];
        assert_eq!(got, want);
        assert_eq!(
            w.stats(),
            PacketSgStats {
                maps: 6,
                lists: 1,
                listed_maps: 3,
                max_list: 3
            }
        );
    }

    /// With `transmit_only`, a run of receive maps (a ring refill) stays one map each; a
    /// run of transmit maps (a packet's pieces) still becomes one list.
    #[test]
    fn transmit_only_leaves_receive_runs_alone() {
        use DmaDirection::{FromDevice, ToDevice};
        let ops = vec![
            map(1, 0, 0x9000, FromDevice),
            map(2, 0, 0xa000, FromDevice),
            map(5, 0, 0x1000, ToDevice),
            map(6, 0, 0x2000, ToDevice),
            unmap(5),
            unmap(6),
            unmap(1),
            unmap(2),
        ];
        let mut w = PacketSg::transmit_only(Ops(ops.into_iter()));
        let mut got = Vec::new();
        while let Some(op) = w.next_op().unwrap() {
            got.push(op);
        }
        let want = vec![
            map(0, 0, 0x9000, FromDevice),
            map(1, 0, 0xa000, FromDevice),
            DmaOp::MapSg {
                slot: 2,
                cpu: CpuId::new(0),
                device: 0,
                dir: ToDevice,
            },
            unmap(2),
            unmap(0),
            unmap(1),
        ];
        assert_eq!(got, want);
        assert_eq!(
            w.stats(),
            PacketSgStats {
                maps: 4,
                lists: 1,
                listed_maps: 2,
                max_list: 2
            }
        );
    }

    /// On a TSO sender the runs are the packets: each list is the skb head with every
    /// fragment, the same segments the driver changed to map a packet as one list
    /// (`TxMapping::Sg`) hands over. The head is ordinary slab memory, not memory allocated
    /// for DMA, so it is a piece of its packet's list.
    #[test]
    fn a_tso_senders_runs_are_its_packets() {
        use crate::{NetperfSend, NetperfSendConfig, TxMapping};
        let cfg = NetperfSendConfig {
            sockets: 4,
            tso: true,
            packets: 300,
            ..NetperfSendConfig::default()
        };
        let lists = |w: &mut dyn FnMut() -> Option<(DmaOp, Vec<Segment>)>| {
            let mut out = Vec::new();
            while let Some((op, segs)) = w() {
                if let DmaOp::MapSg { .. } = op {
                    out.push(segs);
                }
            }
            out
        };
        let mut runs = PacketSg::new(NetperfSend::new(cfg).unwrap());
        let from_runs = lists(&mut || {
            let op = runs.next_op().unwrap()?;
            Some((op, runs.sg_segments().to_vec()))
        });
        let mut sg = NetperfSend::new(NetperfSendConfig {
            mapping: TxMapping::Sg,
            ..cfg
        })
        .unwrap();
        let from_driver = lists(&mut || {
            let op = sg.next_op().unwrap()?;
            Some((op, sg.sg_segments().to_vec()))
        });
        assert_eq!(from_runs.len(), 300);
        assert_eq!(from_runs, from_driver);
        assert!(from_runs.iter().all(|l| l.len() >= 2 && l[0].len == 66));
    }
}
