//! A block device (a disk or an NVMe SSD) driven like `fio`: `queue_depth` requests of
//! `request_size` bytes in flight, at sequential or random offsets, reads with probability
//! `read_fraction`. Not from the seed papers: it is the storage counterpart of S0.8's pseudo
//! SCSI driver with real buffers, for allocator and flush experiments at disk-like rates.
//!
//! **Buffers.** With [`BlockBuffers::Reuse`] (the default, `fio --direct=1`) the application
//! owns `queue_depth` I/O buffers allocated once and reused as requests complete (most
//! recently freed first), so the same few pages are mapped again and again. With
//! [`BlockBuffers::PageCache`] (buffered I/O) a request maps the page-cache pages of the
//! offsets it covers: each device page gets a physical page from the page allocator
//! ([`super::page_alloc`]) the first time it is touched and keeps it (no eviction), so the
//! offsets decide the physical pages (requests are then whole pages): sequential I/O streams over new pages, random I/O over
//! a growing, then stable, set.
//!
//! **Mapping.** Reads are `FromDevice` (the device writes memory), writes `ToDevice`. With
//! `sg = false` a request is one `dma_map_single` of a physically contiguous buffer (reused
//! buffers are then carved from a contiguous region above the page allocator's memory, as
//! huge-page-backed buffers would be); with `sg = true` it is one `dma_map_sg` with one
//! segment per page, on pages scattered by the page allocator (what `blk_rq_map_sg` builds
//! for O_DIRECT user pages or page-cache pages). Page-cache buffers are never contiguous, so
//! a multi-page page-cache request needs `sg = true`.
//!
//! **Time and completion.** Requests complete in submission order, one every `1e9 / iops`
//! ns of the workload clock (the device's throughput); at completion the device transfers
//! the data ([`DmaOp::Access`]: a write of memory for a read, a read for a write), then the
//! driver unmaps. Request `k` is issued and completed on CPU `k % cpus`.
//!
//! **Deviations.** No merging, no out-of-order completion, no seek model (random and
//! sequential take the same time); offsets matter only to page-cache buffers. A page-cache
//! request never lands on an offset with a request in flight (Linux locks a page under I/O,
//! so a second reader waits rather than reaching the device): a draw that does moves on to
//! the next free offset. One device.

use std::collections::VecDeque;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::page_alloc::{MEMORY_BASE, PageAllocConfig, PageAllocator};
use super::{DmaOp, ParamError, Segment, Workload, WorkloadError, idx, invalid};
use iommulab_base::addr::{Access, CpuId, DmaDirection, Hpa, PAGE_4K};

/// Offsets of successive requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Uniform over the device, aligned to the request size (`fio --rw=randrw`).
    #[default]
    Random,
    /// One after the other, wrapping at the end of the device (`fio --rw=rw`).
    Sequential,
}

/// Where request buffers come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockBuffers {
    /// `queue_depth` application buffers reused LIFO (direct I/O).
    #[default]
    Reuse,
    /// The page-cache pages of the request's offsets (buffered I/O).
    PageCache,
}

/// Parameters of [`Block`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BlockConfig {
    /// Requests to complete. `u64::MAX` runs until the runner stops.
    pub requests: u64,
    /// Requests in flight (32: a common NVMe benchmark depth, `fio --iodepth=32`).
    pub queue_depth: u32,
    /// Bytes per request (4096, `fio --bs=4k`; at most 4 MiB).
    pub request_size: u64,
    /// Sequential or random offsets.
    pub pattern: Pattern,
    /// Probability a request is a read (0.5, fio's default `rwmixread=50`).
    pub read_fraction: f64,
    /// Where buffers come from.
    pub buffers: BlockBuffers,
    /// One `dma_map_sg` with a segment per page instead of one `dma_map_single`.
    pub sg: bool,
    /// Device (file) size in bytes (128 MiB: its page cache fits the default memory).
    pub device_size: u64,
    /// Requests the device completes per second, for the workload clock (500 000, an NVMe
    /// SSD at 4 KiB; 0 = no clock ticks).
    pub iops: u64,
    /// CPUs; request `k` runs on CPU `k % cpus`.
    pub cpus: u16,
    /// The page allocator scattered and page-cache buffers come from.
    pub memory: PageAllocConfig,
    /// Seed of offsets, directions and page placement.
    pub seed: u64,
}

impl Default for BlockConfig {
    fn default() -> Self {
        Self {
            requests: 200_000,
            queue_depth: 32,
            request_size: 4096,
            pattern: Pattern::Random,
            read_fraction: 0.5,
            buffers: BlockBuffers::Reuse,
            sg: false,
            device_size: 128 << 20,
            iops: 500_000,
            cpus: 1,
            memory: PageAllocConfig::default(),
            seed: 1,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Request {
    slot: u32,
    cpu: CpuId,
    dir: DmaDirection,
    /// The request's offset, in requests.
    index: u64,
}

/// The generator (see the module doc).
#[derive(Debug, Clone)]
pub struct Block {
    cfg: BlockConfig,
    rng: SmallRng,
    mem: PageAllocator,
    /// Pages per request.
    pages: u64,
    /// Reuse: buffer `b`'s pages are `buf_pages[b * pages..][..pages]` (with `sg`).
    buf_pages: Vec<Hpa>,
    /// Reuse without `sg`: contiguous buffers start here, `pages` pages apart.
    contiguous_base: u64,
    /// Free buffers (slot = buffer index), most recently freed last.
    free: Vec<u32>,
    /// Page cache: physical page of each device page (`Hpa(0)` = not cached yet).
    cache: Vec<Hpa>,
    in_flight: VecDeque<Request>,
    sg_list: Vec<Segment>,
    out: VecDeque<DmaOp>,
    next_seq: u64,
    issued: u64,
    completed: u64,
    ps_per_request: u64,
}

impl Block {
    /// A generator, or an error naming the first bad field.
    ///
    /// # Examples
    /// ```
    /// use iommulab_workload::{Block, BlockConfig, Workload};
    /// let mut w = Block::new(BlockConfig { requests: 100, ..Default::default() })?;
    /// assert_eq!(w.total_ios(), Some(100));
    /// while let Some(_op) = w.next_op()? {}
    /// # Ok::<(), iommulab_workload::WorkloadError>(())
    /// ```
    pub fn new(cfg: BlockConfig) -> Result<Self, ParamError> {
        if cfg.queue_depth == 0 {
            return Err(invalid("workload.queue_depth", 0, "at least 1"));
        }
        if !(1..=4 << 20).contains(&cfg.request_size) {
            return Err(invalid(
                "workload.request_size",
                cfg.request_size,
                "1..=4194304 bytes",
            ));
        }
        if !(0.0..=1.0).contains(&cfg.read_fraction) {
            return Err(invalid(
                "workload.read_fraction",
                cfg.read_fraction,
                "a probability in 0..=1",
            ));
        }
        if cfg.device_size < cfg.request_size {
            return Err(invalid(
                "workload.device_size",
                cfg.device_size,
                "at least one request",
            ));
        }
        if cfg.cpus == 0 {
            return Err(invalid("workload.cpus", 0, "at least 1"));
        }
        let pages = cfg.request_size.div_ceil(PAGE_4K.bytes());
        let cache_mode = cfg.buffers == BlockBuffers::PageCache;
        if cache_mode && !cfg.sg && pages > 1 {
            return Err(invalid(
                "workload.sg",
                false,
                "true for page-cache requests over one page (page-cache pages are scattered)",
            ));
        }
        if cache_mode && cfg.device_size / cfg.request_size < u64::from(cfg.queue_depth) {
            return Err(invalid(
                "workload.device_size",
                cfg.device_size,
                &format!(
                    "at least queue_depth ({}) requests of {} bytes with page-cache buffers \
                     (two requests are never in flight on one page)",
                    cfg.queue_depth, cfg.request_size
                ),
            ));
        }
        if cache_mode && !cfg.request_size.is_multiple_of(PAGE_4K.bytes()) {
            return Err(invalid(
                "workload.request_size",
                cfg.request_size,
                "a multiple of 4096 with page-cache buffers",
            ));
        }
        let device_pages = cfg.device_size.div_ceil(PAGE_4K.bytes());
        let need = if cache_mode {
            device_pages
        } else if cfg.sg {
            pages * u64::from(cfg.queue_depth)
        } else {
            0
        };
        if cfg.memory.pages < need {
            return Err(invalid(
                "workload.memory.pages",
                cfg.memory.pages,
                &format!("at least {need} pages for the buffers"),
            ));
        }
        let mut mem = PageAllocator::new(&cfg.memory, cfg.cpus, cfg.seed ^ 0xb10c);
        let mut buf_pages = Vec::new();
        if cfg.sg && !cache_mode {
            for b in 0..u64::from(cfg.queue_depth) * pages {
                let cpu = CpuId::new(u16::try_from(b % u64::from(cfg.cpus)).unwrap_or(0));
                // Checked above: memory holds every buffer.
                buf_pages.push(mem.alloc(cpu).unwrap_or_default());
            }
        }
        let free = (0..cfg.queue_depth).rev().collect();
        let iops = cfg.iops;
        Ok(Self {
            rng: SmallRng::seed_from_u64(cfg.seed),
            mem,
            pages,
            buf_pages,
            contiguous_base: MEMORY_BASE + cfg.memory.pages * PAGE_4K.bytes(),
            free,
            cache: if cache_mode {
                vec![Hpa::new(0); idx(device_pages)]
            } else {
                Vec::new()
            },
            in_flight: VecDeque::with_capacity(cfg.queue_depth as usize),
            sg_list: Vec::with_capacity(idx(pages)),
            out: VecDeque::with_capacity(4),
            next_seq: 0,
            issued: 0,
            completed: 0,
            ps_per_request: 1_000_000_000_000u64.checked_div(iops).unwrap_or(0),
            cfg,
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &BlockConfig {
        &self.cfg
    }

    fn cache_page(&mut self, page: u64, cpu: CpuId) -> Result<Hpa, WorkloadError> {
        let e = &mut self.cache[idx(page)];
        if e.get() == 0 {
            *e = self.mem.alloc(cpu).ok_or_else(|| {
                WorkloadError::from(invalid("workload.memory.pages", "too few", "more pages"))
            })?;
        }
        Ok(*e)
    }

    fn issue(&mut self) -> Result<(), WorkloadError> {
        let k = self.issued;
        self.issued += 1;
        let cpu = CpuId::new(u16::try_from(k % u64::from(self.cfg.cpus)).unwrap_or(0));
        let size = self.cfg.request_size;
        let slots = self.cfg.device_size / size;
        let mut index = match self.cfg.pattern {
            Pattern::Random => self.rng.gen_range(0..slots),
            Pattern::Sequential => {
                let i = self.next_seq;
                self.next_seq = (i + 1) % slots;
                i
            }
        };
        // A page-cache page under I/O is locked: a second request for it waits rather than
        // reaching the device, so the request in flight there is the only one; this one
        // moves on to the next offset with none (`new` checked that one is free).
        if self.cfg.buffers == BlockBuffers::PageCache {
            while self.in_flight.iter().any(|r| r.index == index) {
                index = (index + 1) % slots;
            }
        }
        let dir = if self.rng.gen_bool(self.cfg.read_fraction) {
            DmaDirection::FromDevice
        } else {
            DmaDirection::ToDevice
        };
        // At most queue_depth requests are in flight, so a buffer is free.
        let slot = self.free.pop().unwrap_or(0);
        let op = match self.cfg.buffers {
            BlockBuffers::Reuse if !self.cfg.sg => DmaOp::Map {
                slot,
                cpu,
                device: 0,
                phys: Hpa::new(
                    self.contiguous_base + u64::from(slot) * self.pages * PAGE_4K.bytes(),
                ),
                len: size,
                dir,
                dma_alloc: false,
            },
            buffers => {
                self.sg_list.clear();
                let first_page = index * size / PAGE_4K.bytes();
                for i in 0..self.pages {
                    let phys = match buffers {
                        BlockBuffers::Reuse => {
                            self.buf_pages[idx(u64::from(slot) * self.pages + i)]
                        }
                        BlockBuffers::PageCache => self.cache_page(first_page + i, cpu)?,
                    };
                    let len = (size - i * PAGE_4K.bytes()).min(PAGE_4K.bytes());
                    self.sg_list.push(Segment { phys, len });
                }
                if self.cfg.sg {
                    DmaOp::MapSg {
                        slot,
                        cpu,
                        device: 0,
                        dir,
                    }
                } else {
                    // One page-cache page (checked in `new`).
                    DmaOp::Map {
                        slot,
                        cpu,
                        device: 0,
                        phys: self.sg_list[0].phys,
                        len: size,
                        dir,
                        dma_alloc: false,
                    }
                }
            }
        };
        self.in_flight.push_back(Request {
            slot,
            cpu,
            dir,
            index,
        });
        self.out.push_back(op);
        Ok(())
    }

    fn complete(&mut self) {
        let Some(r) = self.in_flight.pop_front() else {
            return;
        };
        self.completed += 1;
        if self.ps_per_request > 0 {
            self.out.push_back(DmaOp::Tick {
                now_ns: self.completed * self.ps_per_request / 1000,
            });
        }
        let access = match r.dir {
            DmaDirection::FromDevice => Access::Write,
            _ => Access::Read,
        };
        self.out.push_back(DmaOp::Access {
            slot: r.slot,
            access,
        });
        self.out.push_back(DmaOp::Unmap {
            slot: r.slot,
            cpu: r.cpu,
        });
        self.free.push(r.slot);
    }
}

impl Workload for Block {
    type Phys = Hpa;
    fn next_op(&mut self) -> Result<Option<DmaOp>, WorkloadError> {
        loop {
            if let Some(op) = self.out.pop_front() {
                return Ok(Some(op));
            }
            if self.issued < self.cfg.requests
                && self.in_flight.len() < self.cfg.queue_depth as usize
            {
                self.issue()?;
            } else if !self.in_flight.is_empty() {
                self.complete();
            } else {
                return Ok(None);
            }
        }
    }

    fn sg_segments(&self) -> &[Segment] {
        &self.sg_list
    }

    fn slots(&self) -> usize {
        self.cfg.queue_depth as usize
    }

    fn devices(&self) -> usize {
        1
    }

    fn total_ios(&self) -> Option<u64> {
        (self.cfg.requests != u64::MAX).then_some(self.cfg.requests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::run_checked;

    fn cfg(requests: u64) -> BlockConfig {
        BlockConfig {
            requests,
            ..Default::default()
        }
    }

    #[test]
    fn rejects_bad_fields_by_name() {
        let bad = |c: BlockConfig| Block::new(c).unwrap_err().to_string();
        assert!(
            bad(BlockConfig {
                queue_depth: 0,
                ..cfg(1)
            })
            .contains("workload.queue_depth")
        );
        assert!(
            bad(BlockConfig {
                read_fraction: 1.5,
                ..cfg(1)
            })
            .contains("read_fraction")
        );
        let cache_no_sg = BlockConfig {
            buffers: BlockBuffers::PageCache,
            request_size: 65_536,
            ..cfg(1)
        };
        assert!(bad(cache_no_sg).contains("workload.sg"));
    }

    /// Reads are FromDevice and written by the device, writes ToDevice and read by it, in
    /// about the configured mix; direct I/O maps only `queue_depth` distinct buffers.
    #[test]
    fn directions_follow_the_mix_and_buffers_are_reused() {
        let c = run_checked(
            &mut Block::new(BlockConfig {
                read_fraction: 0.7,
                ..cfg(10_000)
            })
            .unwrap(),
        );
        let reads = c.maps_by_dir[DmaDirection::FromDevice as usize];
        assert!((6_700..7_300).contains(&reads), "{reads}");
        assert_eq!(c.writes, reads);
        assert_eq!(c.reads, 10_000 - reads);
        assert_eq!(c.pages.len(), 32);
        assert_eq!(c.peak_live, 32);
    }

    /// `sg = true`: one segment per page, the last one partial.
    #[test]
    fn sg_requests_have_a_segment_per_page() {
        let c = run_checked(
            &mut Block::new(BlockConfig {
                sg: true,
                request_size: 3 * 4096 + 100,
                ..cfg(500)
            })
            .unwrap(),
        );
        assert_eq!(c.sg_maps, 500);
        assert_eq!(c.max_sg_segments, 4);
        assert_eq!(c.sg_bytes, 500 * (3 * 4096 + 100));
        assert_eq!(c.pages.len(), 32 * 4);
    }

    /// Page cache: sequential I/O touches each device page once per pass; random I/O over a
    /// small device soon maps every page of it and no more.
    #[test]
    fn page_cache_pages_follow_the_offsets() {
        let seq = BlockConfig {
            buffers: BlockBuffers::PageCache,
            pattern: Pattern::Sequential,
            device_size: 1 << 20,
            ..cfg(200)
        };
        assert_eq!(run_checked(&mut Block::new(seq).unwrap()).pages.len(), 200);
        let wrapped = run_checked(
            &mut Block::new(BlockConfig {
                requests: 600,
                ..seq
            })
            .unwrap(),
        );
        assert_eq!(wrapped.pages.len(), 256);
        let random = BlockConfig {
            pattern: Pattern::Random,
            ..seq
        };
        let r = run_checked(
            &mut Block::new(BlockConfig {
                requests: 5000,
                ..random
            })
            .unwrap(),
        );
        assert_eq!(r.pages.len(), 256);
    }

    #[test]
    fn clock_runs_at_the_device_rate() {
        let c = run_checked(&mut Block::new(cfg(1000)).unwrap());
        assert_eq!(c.last_tick, 1000 * 2000);
    }

    #[test]
    fn same_seed_same_ops() {
        let ops = |seed| {
            let mut w = Block::new(BlockConfig {
                seed,
                sg: true,
                ..cfg(300)
            })
            .unwrap();
            let mut v = Vec::new();
            while let Some(op) = w.next_op().unwrap() {
                v.push(op);
            }
            v
        };
        assert_eq!(ops(9), ops(9));
        assert_ne!(ops(9), ops(10));
    }
}
