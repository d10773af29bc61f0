//! The pseudo SCSI host-adapter driver of Fujita & Mori (S0.8): each I/O maps one buffer
//! (1024 bytes by default), optionally lets the device touch it once, and unmaps it; no data
//! moves otherwise. `outstanding` I/Os are in flight at once (1 in the paper): a new I/O is
//! mapped, then the oldest one completes and is unmapped. I/Os are issued round-robin by
//! `cpus` CPUs.
//!
//! A SCSI host adapter's driver maps a command's data with `scsi_dma_map`, which is
//! `dma_map_sg` of the command's scatterlist (one entry for a 1024-byte buffer), and unmaps
//! it with `scsi_dma_unmap` (`dma_unmap_sg`): `dma_path = "sg"`. `dma_path = "single"`
//! maps the buffer with `dma_map_single` instead, as a driver without a scatterlist would.
//!
//! Buffers come from the kmalloc-1024 slab in the paper's kernel: four 1024-byte objects per
//! page, so a 1024-byte buffer never crosses a page. The model draws buffer pages at random
//! (seeded) from a pool and the object index within the page at random, so the same physical
//! page is often mapped again while a stale IOTLB entry for its old IOVA may exist. As a slab
//! does, it hands out only free objects: a draw that lands on the object of an I/O still in
//! flight takes the next free one, so two live buffers never share a cacheline (dma-debug's
//! rule). With one I/O in flight (S0.8) no object is live at a draw.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::live_objects::LiveObjects;
use super::{DmaOp, OpSink, Segment, Workload, WorkloadError};
use iommulab_base::addr::{Access, CpuId, DmaDirection, Hpa, PAGE_4K};

/// Most I/Os in flight: NVMe's deepest queue (64 Ki entries). The runner keeps a slot per
/// I/O in flight, so the bound also keeps a typo from asking for gigabytes of slots.
pub const MAX_OUTSTANDING: u32 = 65_536;

/// Most CPUs issuing I/Os (the `--threads` bound).
pub const MAX_CPUS: u16 = 1024;

/// Which DMA API calls map and unmap an I/O's buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScsiDmaPath {
    /// `dma_map_single` / `dma_unmap_single`.
    #[default]
    Single,
    /// `dma_map_sg` / `dma_unmap_sg` of a one-entry scatterlist (`scsi_dma_map`).
    Sg,
}

impl ScsiDmaPath {
    /// Its name in configs.
    pub const fn name(self) -> &'static str {
        match self {
            ScsiDmaPath::Single => "single",
            ScsiDmaPath::Sg => "sg",
        }
    }
}

/// Parameters of [`PseudoScsi`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PseudoScsiConfig {
    /// I/Os to run.
    pub ios: u64,
    /// Bytes per I/O (S0.8: 1024).
    pub io_size: u64,
    /// I/Os in flight (S0.8: 1).
    pub outstanding: u32,
    /// CPUs issuing I/Os round-robin.
    pub cpus: u16,
    /// Let the device access each buffer once while mapped.
    pub touch: bool,
    /// Pages in the buffer pool; with more I/Os in flight than its objects, the pool grows
    /// to hold one for each, as a slab takes new pages ([`PseudoScsi::min_pool_pages`]).
    pub pool_pages: u64,
    /// Seed of the buffer-placement RNG.
    pub seed: u64,
    /// `dma_map_single` or a one-entry `dma_map_sg` per I/O.
    pub dma_path: ScsiDmaPath,
}

impl Default for PseudoScsiConfig {
    fn default() -> Self {
        Self {
            ios: 200_000,
            io_size: 1024,
            outstanding: 1,
            cpus: 1,
            touch: false,
            pool_pages: 4096,
            seed: 1,
            dma_path: ScsiDmaPath::Single,
        }
    }
}

/// Physical base of the buffer pool (above the first GiB, below 4 GiB).
const POOL_BASE: u64 = 0x4000_0000;

/// The generator.
#[derive(Debug, Clone)]
pub struct PseudoScsi {
    cfg: PseudoScsiConfig,
    rng: SmallRng,
    /// The kmalloc size class of a buffer and its objects per page, computed once (two
    /// divisions less per map).
    object_bytes: u64,
    per_page: u64,
    issued: IoSeq,
    completed: IoSeq,
    /// Which step of the current I/O comes next.
    step: Step,
    /// The scatterlist of the last `MapSg` (one entry: no allocation per I/O).
    sg: [Segment; 1],
    /// The objects of the I/Os in flight (with more than one I/O outstanding).
    live: LiveObjects,
    /// Per slot: the object its I/O holds.
    held: Vec<u64>,
}

/// The next I/O of a sequence (issued or completed) with its slot and CPU, advanced with
/// it (the runner's per-op path has no division for them).
#[derive(Debug, Clone, Copy, Default)]
struct IoSeq {
    io: u64,
    /// `io % outstanding`.
    slot: u32,
    /// `io % cpus`.
    cpu: u16,
}

impl IoSeq {
    fn advance(&mut self, outstanding: u32, cpus: u16) {
        self.io += 1;
        self.slot += 1;
        if self.slot == outstanding {
            self.slot = 0;
        }
        self.cpu += 1;
        if self.cpu == cpus {
            self.cpu = 0;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Map,
    Touch,
    Complete,
    Done,
}

impl PseudoScsi {
    /// Pool pages that hold an object for each of `outstanding` I/Os of `io_size` bytes.
    pub fn min_pool_pages(outstanding: u32, io_size: u64) -> u64 {
        let (_, per_page) = Self::objects(io_size);
        u64::from(outstanding.max(1)).div_ceil(per_page)
    }

    /// The kmalloc size class of an `io_size`-byte buffer and its objects per page.
    fn objects(io_size: u64) -> (u64, u64) {
        // kmalloc objects are naturally aligned to their size class (S0.8's 1024 bytes → 4
        // objects per page); larger buffers start page aligned.
        // Above 2^63 there is no power of two; such a buffer is one object per page (and
        // larger than any IOVA space, which the mapping reports).
        let object_bytes = io_size
            .max(1)
            .checked_next_power_of_two()
            .unwrap_or(u64::MAX);
        (object_bytes, (PAGE_4K.bytes() / object_bytes).max(1))
    }

    /// A generator; `outstanding` and `cpus` below 1 count as 1, and a pool too small for
    /// the I/Os in flight grows to [`PseudoScsi::min_pool_pages`] (a slab takes new pages).
    pub fn new(cfg: PseudoScsiConfig) -> Self {
        let cfg = PseudoScsiConfig {
            outstanding: cfg.outstanding.max(1),
            cpus: cfg.cpus.max(1),
            io_size: cfg.io_size.max(1),
            pool_pages: cfg.pool_pages.max(1),
            ..cfg
        };
        let (object_bytes, per_page) = Self::objects(cfg.io_size);
        let cfg = PseudoScsiConfig {
            pool_pages: cfg
                .pool_pages
                .max(Self::min_pool_pages(cfg.outstanding, cfg.io_size)),
            ..cfg
        };
        let many = cfg.outstanding > 1;
        Self {
            rng: SmallRng::seed_from_u64(cfg.seed),
            cfg,
            object_bytes,
            per_page,
            issued: IoSeq::default(),
            completed: IoSeq::default(),
            step: Step::Map,
            sg: [Segment {
                phys: Hpa::new(0),
                len: 0,
            }],
            // At a draw, the I/Os in flight are one fewer than `outstanding`.
            live: LiveObjects::new(if many {
                cfg.outstanding as usize - 1
            } else {
                0
            }),
            held: if many {
                vec![0; cfg.outstanding as usize]
            } else {
                Vec::new()
            },
        }
    }

    /// The buffer of the I/O in `slot`.
    #[inline(always)]
    fn buffer(&mut self, slot: u32) -> Hpa {
        let page = self.rng.gen_range(0..self.cfg.pool_pages);
        let object = self.rng.gen_range(0..self.per_page);
        if self.held.is_empty() {
            // With one object per page, `object` is 0: the buffer starts the page.
            return Hpa::new(POOL_BASE + page * PAGE_4K.bytes() + object * self.object_bytes);
        }
        let object = self.live.take_free(
            page * self.per_page + object,
            self.cfg.pool_pages * self.per_page,
        );
        self.held[slot as usize] = object;
        let (page, object) = (object / self.per_page, object % self.per_page);
        Hpa::new(POOL_BASE + page * PAGE_4K.bytes() + object * self.object_bytes)
    }

    fn dir_of(io: u64) -> DmaDirection {
        // Alternate reads and writes, as a disk benchmark's mix would.
        if io.is_multiple_of(2) {
            DmaDirection::FromDevice
        } else {
            DmaDirection::ToDevice
        }
    }
}

impl Workload for PseudoScsi {
    type Phys = Hpa;
    fn next_op(&mut self) -> Result<Option<DmaOp>, WorkloadError> {
        Ok(self.step())
    }

    // The ops are made in the loop that hands them over (a call per op, its
    // frame and its `Result<Option<DmaOp>>` copied out, cost a sixth of `disabled`'s I/O).
    fn for_each_op<K: OpSink<Hpa>>(&mut self, sink: &mut K) -> Result<(), WorkloadError> {
        while !sink.stopped()
            && let Some(op) = self.step()
        {
            // Only a `MapSg` reads its segments.
            sink.op(op, &self.sg);
        }
        Ok(())
    }

    fn sg_segments(&self) -> &[Segment] {
        &self.sg
    }

    fn devices(&self) -> usize {
        1
    }

    fn slots(&self) -> usize {
        self.cfg.outstanding as usize
    }

    fn total_ios(&self) -> Option<u64> {
        // `u64::MAX` means "until the runner stops it" (a duration-bound run).
        (self.cfg.ios != u64::MAX).then_some(self.cfg.ios)
    }
}

impl PseudoScsi {
    #[inline(always)]
    fn step(&mut self) -> Option<DmaOp> {
        loop {
            match self.step {
                Step::Done => return None,
                Step::Map => {
                    let i = self.issued;
                    let in_flight = i.io - self.completed.io;
                    if i.io < self.cfg.ios && in_flight < u64::from(self.cfg.outstanding) {
                        self.issued.advance(self.cfg.outstanding, self.cfg.cpus);
                        self.step = if self.cfg.touch {
                            Step::Touch
                        } else {
                            Step::Map
                        };
                        let phys = self.buffer(i.slot);
                        if self.cfg.dma_path == ScsiDmaPath::Sg {
                            self.sg[0] = Segment {
                                phys,
                                len: self.cfg.io_size,
                            };
                            return Some(DmaOp::MapSg {
                                slot: i.slot,
                                cpu: CpuId::new(i.cpu),
                                device: 0,
                                dir: Self::dir_of(i.io),
                            });
                        }
                        return Some(DmaOp::Map {
                            slot: i.slot,
                            cpu: CpuId::new(i.cpu),
                            device: 0,
                            phys,
                            len: self.cfg.io_size,
                            dir: Self::dir_of(i.io),
                            dma_alloc: false,
                        });
                    }
                    self.step = if self.completed.io < i.io {
                        Step::Complete
                    } else {
                        Step::Done
                    };
                }
                Step::Touch => {
                    self.step = Step::Map;
                    // The I/O just mapped: the one before `issued`.
                    let io = self.issued.io - 1;
                    let access = match Self::dir_of(io) {
                        DmaDirection::FromDevice => Access::Write,
                        _ => Access::Read,
                    };
                    let slot = self
                        .issued
                        .slot
                        .checked_sub(1)
                        .unwrap_or(self.cfg.outstanding - 1);
                    return Some(DmaOp::Access { slot, access });
                }
                Step::Complete => {
                    let c = self.completed;
                    self.completed.advance(self.cfg.outstanding, self.cfg.cpus);
                    if let Some(&object) = self.held.get(c.slot as usize) {
                        self.live.remove(object);
                    }
                    self.step = Step::Map;
                    return Some(DmaOp::Unmap {
                        slot: c.slot,
                        cpu: CpuId::new(c.cpu),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects ops until it holds `limit`.
    struct UpTo(Vec<DmaOp>, usize);

    impl OpSink<Hpa> for UpTo {
        fn op(&mut self, op: DmaOp, _sg: &[Segment]) {
            assert!(!self.stopped(), "an op after the sink stopped");
            self.0.push(op);
        }

        fn stopped(&self) -> bool {
            self.0.len() >= self.1
        }
    }

    /// Two I/Os in flight never hold the same slab object, even from a pool barely larger
    /// than the queue; a pool smaller than the queue grows to hold it.
    #[test]
    fn no_two_ios_in_flight_share_an_object() {
        for (outstanding, pool_pages) in [(8u32, 3u64), (8, 1), (64, 17)] {
            let cfg = PseudoScsiConfig {
                ios: 5000,
                outstanding,
                pool_pages,
                seed: 3,
                ..PseudoScsiConfig::default()
            };
            let mut w = PseudoScsi::new(cfg);
            assert_eq!(
                w.cfg.pool_pages,
                pool_pages.max(u64::from(outstanding).div_ceil(4))
            );
            let mut live = std::collections::HashMap::new();
            while let Some(op) = w.next_op().unwrap() {
                match op {
                    DmaOp::Map { slot, phys, .. } => {
                        assert!(
                            !live.values().any(|&p| p == phys),
                            "{phys:?} mapped while live ({outstanding}, {pool_pages})"
                        );
                        live.insert(slot, phys);
                    }
                    DmaOp::Unmap { slot, .. } => {
                        live.remove(&slot);
                    }
                    _ => {}
                }
            }
            assert!(live.is_empty());
        }
        assert_eq!(PseudoScsi::min_pool_pages(8, 1024), 2);
        assert_eq!(PseudoScsi::min_pool_pages(8, 5000), 8);
    }

    /// `for_each_op` makes the ops `next_op` makes, stops with the sink, and `next_op` goes
    /// on from where it stopped.
    #[test]
    fn for_each_op_makes_what_next_op_makes() {
        let cfg = PseudoScsiConfig {
            ios: 300,
            outstanding: 3,
            cpus: 2,
            touch: true,
            ..PseudoScsiConfig::default()
        };
        let mut one_at_a_time = Vec::new();
        let mut w = PseudoScsi::new(cfg);
        while let Some(op) = w.next_op().unwrap() {
            one_at_a_time.push(op);
        }
        assert_eq!(one_at_a_time.len(), 900);
        for limit in [0, 1, 2, 451, usize::MAX] {
            let mut w = PseudoScsi::new(cfg);
            let mut sink = UpTo(Vec::new(), limit);
            w.for_each_op(&mut sink).unwrap();
            let n = limit.min(one_at_a_time.len());
            assert_eq!(sink.0[..], one_at_a_time[..n], "limit {limit}");
            while let Some(op) = w.next_op().unwrap() {
                sink.0.push(op);
            }
            assert_eq!(sink.0, one_at_a_time, "limit {limit}, then next_op");
        }
    }

    /// The ops follow the definition: the k-th map and the k-th unmap use slot
    /// k % outstanding and CPU k % cpus, directions alternate, an access follows its map, and
    /// buffers are drawn from the seeded pool as kmalloc objects, a live one passed over for
    /// the next free.
    #[test]
    fn ops_follow_the_io_numbering_and_the_seeded_pool() {
        for (outstanding, cpus, touch, io_size) in [
            (1, 1, false, 1024),
            (3, 2, true, 1024),
            (4, 3, false, 5000),
            (7, 4, true, 100),
        ] {
            let cfg = PseudoScsiConfig {
                ios: 50,
                io_size,
                outstanding,
                cpus,
                touch,
                pool_pages: 64,
                seed: 9,
                dma_path: ScsiDmaPath::Single,
            };
            let mut w = PseudoScsi::new(cfg);
            let mut rng = SmallRng::seed_from_u64(9);
            let object = io_size.next_power_of_two();
            let per_page = (4096 / object).max(1);
            let (mut maps, mut unmaps, mut last_map_slot) = (0u64, 0u64, None);
            let mut held = std::collections::HashMap::new();
            while let Some(op) = w.next_op().unwrap() {
                match op {
                    DmaOp::Map {
                        slot,
                        cpu,
                        phys,
                        dir,
                        ..
                    } => {
                        assert_eq!(u64::from(slot), maps % u64::from(outstanding));
                        assert_eq!(cpu.index() as u64, maps % u64::from(cpus));
                        assert_eq!(dir == DmaDirection::FromDevice, maps % 2 == 0);
                        let page = rng.gen_range(0..64);
                        let o = rng.gen_range(0..per_page);
                        let mut n = page * per_page + o;
                        while held.values().any(|&h| h == n) {
                            n = (n + 1) % (64 * per_page);
                        }
                        held.insert(slot, n);
                        let (page, o) = (n / per_page, n % per_page);
                        let off = if per_page > 1 { o * object } else { 0 };
                        assert_eq!(phys.get(), POOL_BASE + page * 4096 + off);
                        last_map_slot = Some(slot);
                        maps += 1;
                    }
                    DmaOp::Access { slot, .. } => {
                        assert!(touch);
                        assert_eq!(Some(slot), last_map_slot.take());
                    }
                    DmaOp::Unmap { slot, cpu } => {
                        held.remove(&slot);
                        assert_eq!(u64::from(slot), unmaps % u64::from(outstanding));
                        assert_eq!(cpu.index() as u64, unmaps % u64::from(cpus));
                        unmaps += 1;
                        assert!(unmaps <= maps);
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert_eq!((maps, unmaps), (50, 50));
        }
    }

    /// `dma_path = "sg"` makes the same I/Os as `single`, each map a one-entry `MapSg` whose
    /// segment is the buffer `single` maps, handed to the sink with the op.
    #[test]
    fn the_sg_path_maps_the_same_buffers_as_one_entry_lists() {
        struct Lists(Vec<(DmaOp, Vec<Segment>)>);
        impl OpSink<Hpa> for Lists {
            fn op(&mut self, op: DmaOp, sg: &[Segment]) {
                self.0.push((op, sg.to_vec()));
            }
            fn stopped(&self) -> bool {
                false
            }
        }
        let single = PseudoScsiConfig {
            ios: 40,
            outstanding: 2,
            touch: true,
            ..PseudoScsiConfig::default()
        };
        let sg = PseudoScsiConfig {
            dma_path: ScsiDmaPath::Sg,
            ..single
        };
        let mut a = Lists(Vec::new());
        PseudoScsi::new(single).for_each_op(&mut a).unwrap();
        let mut b = Lists(Vec::new());
        PseudoScsi::new(sg).for_each_op(&mut b).unwrap();
        assert_eq!(a.0.len(), b.0.len());
        let mut lists = 0;
        for ((x, _), (y, segs)) in a.0.iter().zip(&b.0) {
            match (*x, *y) {
                (
                    DmaOp::Map {
                        slot,
                        cpu,
                        phys,
                        len,
                        dir,
                        ..
                    },
                    DmaOp::MapSg {
                        slot: s2,
                        cpu: c2,
                        dir: d2,
                        ..
                    },
                ) => {
                    assert_eq!((slot, cpu, dir), (s2, c2, d2));
                    assert_eq!(segs[..], [Segment { phys, len }]);
                    lists += 1;
                }
                (x, y) => assert_eq!(x, y),
            }
        }
        assert_eq!(lists, 40);
    }
}
