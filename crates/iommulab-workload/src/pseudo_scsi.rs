//! The pseudo SCSI host-adapter driver of Fujita & Mori (S0.8): each I/O maps one buffer
//! (1024 bytes by default), optionally lets the device touch it once, and unmaps it; no data
//! moves otherwise. `outstanding` I/Os are in flight at once (1 in the paper): a new I/O is
//! mapped, then the oldest one completes and is unmapped. I/Os are issued round-robin by
//! `cpus` CPUs.
//!
//! Buffers come from the kmalloc-1024 slab in the paper's kernel: four 1024-byte objects per
//! page, so a 1024-byte buffer never crosses a page. The model draws buffer pages at random
//! (seeded) from a pool and the object index within the page at random, so the same physical
//! page is often mapped again while a stale IOTLB entry for its old IOVA may exist.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{DmaOp, Segment, Workload, WorkloadError};
use crate::addr::{Access, CpuId, DmaDirection, Hpa, PAGE_4K};

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
    /// Pages in the buffer pool.
    pub pool_pages: u64,
    /// Seed of the buffer-placement RNG.
    pub seed: u64,
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
    issued: u64,
    completed: u64,
    /// Which step of the current I/O comes next.
    step: Step,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Map,
    Touch,
    Complete,
    Done,
}

impl PseudoScsi {
    /// A generator; `outstanding` and `cpus` below 1 count as 1.
    pub fn new(cfg: PseudoScsiConfig) -> Self {
        let cfg = PseudoScsiConfig {
            outstanding: cfg.outstanding.max(1),
            cpus: cfg.cpus.max(1),
            io_size: cfg.io_size.max(1),
            pool_pages: cfg.pool_pages.max(1),
            ..cfg
        };
        Self {
            rng: SmallRng::seed_from_u64(cfg.seed),
            cfg,
            issued: 0,
            completed: 0,
            step: Step::Map,
        }
    }

    fn slot_of(&self, io: u64) -> u32 {
        // io % outstanding < outstanding ≤ u32::MAX.
        u32::try_from(io % u64::from(self.cfg.outstanding)).unwrap_or(0)
    }

    fn cpu_of(&self, io: u64) -> CpuId {
        CpuId::new(u16::try_from(io % u64::from(self.cfg.cpus)).unwrap_or(0))
    }

    fn buffer(&mut self) -> Hpa {
        let page = self.rng.gen_range(0..self.cfg.pool_pages);
        // kmalloc objects are naturally aligned to their size class (S0.8's 1024 bytes → 4
        // objects per page); larger buffers start page aligned.
        let per_page = (PAGE_4K.bytes() / self.cfg.io_size.next_power_of_two()).max(1);
        let object = self.rng.gen_range(0..per_page);
        let offset = if per_page > 1 {
            object * self.cfg.io_size.next_power_of_two()
        } else {
            0
        };
        Hpa::new(POOL_BASE + page * PAGE_4K.bytes() + offset)
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

    fn sg_segments(&self) -> &[Segment] {
        &[]
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
    fn step(&mut self) -> Option<DmaOp> {
        loop {
            match self.step {
                Step::Done => return None,
                Step::Map => {
                    let in_flight = self.issued - self.completed;
                    if self.issued < self.cfg.ios && in_flight < u64::from(self.cfg.outstanding) {
                        let io = self.issued;
                        self.issued += 1;
                        self.step = if self.cfg.touch {
                            Step::Touch
                        } else {
                            Step::Map
                        };
                        let phys = self.buffer();
                        return Some(DmaOp::Map {
                            slot: self.slot_of(io),
                            cpu: self.cpu_of(io),
                            device: 0,
                            phys,
                            len: self.cfg.io_size,
                            dir: Self::dir_of(io),
                            dma_alloc: false,
                        });
                    }
                    self.step = if self.completed < self.issued {
                        Step::Complete
                    } else {
                        Step::Done
                    };
                }
                Step::Touch => {
                    self.step = Step::Map;
                    let io = self.issued - 1;
                    let access = match Self::dir_of(io) {
                        DmaDirection::FromDevice => Access::Write,
                        _ => Access::Read,
                    };
                    return Some(DmaOp::Access {
                        slot: self.slot_of(io),
                        access,
                    });
                }
                Step::Complete => {
                    let io = self.completed;
                    self.completed += 1;
                    self.step = Step::Map;
                    return Some(DmaOp::Unmap {
                        slot: self.slot_of(io),
                        cpu: self.cpu_of(io),
                    });
                }
            }
        }
    }
}
