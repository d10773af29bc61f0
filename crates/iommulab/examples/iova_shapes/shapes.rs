//! The shapes of `benches/iova.rs` with a fixed RNG and a checksum of every pfn handed out,
//! written to match `scripts/linux-iova/bench.c` (Linux 6.12's `iova.c` in user space) step
//! for step, so `scripts/bench_vs_linux_iova.sh` can compare speed and the picks. Shared by
//! the `iova_shapes` example and `tests/linux_iova_picks.rs`, which pins the checksums the
//! Linux build printed.
//!
//! A run fills `live` ranges of one page, runs `ops / 8` untimed warm-up steps, then `ops`
//! timed steps (`Instant` around the loop). A FIFO step frees the oldest range and allocates
//! one in its slot; a churn step frees a random one (splitmix64 from [`SEED`], index =
//! draw mod `live`) and allocates one in its slot. Every pfn handed out (fill, warm-up,
//! timed) goes into a 64-bit FNV-1a over 64-bit words, in order.

use std::time::Instant;

use iommulab::addr::{CpuId, Iova, Pfn};
use iommulab::iova::{IovaAllocator, IovaError};

/// The exclusive top of the space `[1, END)` and the limit of every allocation (Linux's
/// inclusive `limit_pfn` is `END - 1`).
pub const END: u64 = 1 << 20;
/// The RNG seed, "iommulab" in ASCII.
pub const SEED: u64 = 0x696f_6d6d_756c_6162;
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x100_0000_01b3;

/// Which step the run repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Free the oldest live range, allocate one.
    Fifo,
    /// Free a random live range, allocate one.
    Churn,
}

/// The pfns a run was handed: count, checksum and the first four.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Picks {
    /// FNV-1a over the pfns as 64-bit words, in order.
    pub checksum: u64,
    /// Allocations.
    pub count: u64,
    /// The first four pfns.
    pub first: [u64; 4],
    /// Allocations that failed (a full space; mixed shapes only), counted as pfn 0.
    pub failed: u64,
    dump: bool,
}

impl Picks {
    fn new(dump: bool) -> Self {
        Picks {
            checksum: FNV_OFFSET,
            count: 0,
            first: [0; 4],
            failed: 0,
            dump,
        }
    }

    #[inline]
    fn note(&mut self, pfn: Pfn<Iova>) {
        self.note_raw(pfn.get());
    }

    #[inline]
    fn note_raw(&mut self, p: u64) {
        if let Some(f) = self
            .first
            .get_mut(usize::try_from(self.count).unwrap_or(usize::MAX))
        {
            *f = p;
        }
        self.count += 1;
        self.failed += u64::from(p == 0);
        self.checksum = (self.checksum ^ p).wrapping_mul(FNV_PRIME);
        if self.dump {
            println!("{p}");
        }
    }
}

/// splitmix64 (Steele, Lea & Flood), as `bench.c`.
#[inline]
pub fn splitmix64(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The next draw mod `live`: the slot a churn step frees.
#[inline]
fn pick_index(rng: &mut u64, live: usize) -> usize {
    // Below `live`, a usize, so the conversion back cannot fail.
    usize::try_from(splitmix64(rng) % live as u64).expect("an index below live fits usize")
}

/// A finished run: the picks and the timed steps' mean wall time.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// What was handed out.
    pub picks: Picks,
    /// Nanoseconds per timed step.
    pub ns_per_op: f64,
}

struct Driver<A> {
    a: A,
    ring: Vec<Pfn<Iova>>,
    next: usize,
    rng: u64,
    picks: Picks,
}

impl<A: IovaAllocator> Driver<A> {
    #[inline]
    fn alloc(&mut self) -> Result<Pfn<Iova>, IovaError> {
        let p = self.a.alloc(CpuId::new(0), 1, Pfn::new(END))?;
        self.picks.note(p);
        Ok(p)
    }

    fn steps(&mut self, step: Step, n: u64) -> Result<(), IovaError> {
        let cpu = CpuId::new(0);
        let live = self.ring.len();
        for _ in 0..n {
            let k = match step {
                Step::Fifo => {
                    let k = self.next;
                    self.next += 1;
                    if self.next == live {
                        self.next = 0;
                    }
                    k
                }
                Step::Churn => pick_index(&mut self.rng, live),
            };
            self.a.free(cpu, self.ring[k], 1)?;
            self.ring[k] = self.alloc()?;
        }
        Ok(())
    }
}

/// Fills `live` ranges on `a`, runs `ops / 8` warm-up steps and `ops` timed ones. `dump`
/// prints every pfn, one a line.
pub fn run<A: IovaAllocator>(
    a: A,
    step: Step,
    live: usize,
    ops: u64,
    dump: bool,
) -> Result<Outcome, IovaError> {
    let mut d = Driver {
        a,
        ring: Vec::with_capacity(live),
        next: 0,
        rng: SEED,
        picks: Picks::new(dump),
    };
    for _ in 0..live {
        let p = d.alloc()?;
        d.ring.push(p);
    }
    d.steps(step, ops / 8)?;
    let t0 = Instant::now();
    d.steps(step, ops)?;
    let dt = t0.elapsed();
    Ok(Outcome {
        picks: d.picks,
        ns_per_op: dt.as_secs_f64() * 1e9 / ops.max(1) as f64,
    })
}

/// The largest range of the mixed shapes, in pages (above the rcache's 32).
pub const MIXED_MAX_PAGES: u64 = 48;

/// The exclusive top of the `dma` shapes' space (64 GiB: a 36-bit DMA mask).
pub const DMA_END: u64 = 1 << 24;

/// Fills `live` ranges of random sizes, then runs `ops / 8` warm-up and `ops` timed churn
/// steps: free a random slot's range (if it holds one), allocate a random size into it.
/// With `dma`, each allocation is dma-iommu's two attempts (below [`END`], then below
/// [`DMA_END`]), and `a`'s space must reach [`DMA_END`].
pub fn run_mixed<A: IovaAllocator>(
    mut a: A,
    live: usize,
    ops: u64,
    dump: bool,
    dma: bool,
) -> Result<Outcome, IovaError> {
    let cpu = CpuId::new(0);
    let mut rng = SEED;
    let mut picks = Picks::new(dump);
    // (first page, pages); pfn 0 is an empty slot (pfn 0 is never handed out).
    let mut ring: Vec<(u64, u64)> = Vec::with_capacity(live);
    let alloc = |a: &mut A, rng: &mut u64, picks: &mut Picks| {
        let size = 1 + splitmix64(rng) % MIXED_MAX_PAGES;
        let got = if dma {
            // `iommu_dma_alloc_iova`: below 4 GiB without draining the caches, then the
            // whole mask with `flush_rcache`.
            match a.alloc_fast(cpu, size, Pfn::new(END), false) {
                Err(IovaError::Exhausted { .. }) => {
                    a.alloc_fast(cpu, size, Pfn::new(DMA_END), true)
                }
                r => r,
            }
        } else {
            a.alloc(cpu, size, Pfn::new(END))
        };
        match got {
            Ok(p) => {
                picks.note(p);
                Ok((p.get(), size))
            }
            Err(IovaError::Exhausted { .. }) => {
                picks.note_raw(0);
                Ok((0, size))
            }
            Err(e) => Err(e),
        }
    };
    for _ in 0..live {
        let slot = alloc(&mut a, &mut rng, &mut picks)?;
        ring.push(slot);
    }
    let mut steps = |a: &mut A, rng: &mut u64, picks: &mut Picks, n: u64| {
        for _ in 0..n {
            let k = pick_index(rng, live);
            let (pfn, size) = ring[k];
            if pfn != 0 {
                a.free(cpu, Pfn::new(pfn), size)?;
            }
            ring[k] = alloc(a, rng, picks)?;
        }
        Ok::<(), IovaError>(())
    };
    steps(&mut a, &mut rng, &mut picks, ops / 8)?;
    let t0 = Instant::now();
    steps(&mut a, &mut rng, &mut picks, ops)?;
    let dt = t0.elapsed();
    Ok(Outcome {
        picks,
        ns_per_op: dt.as_secs_f64() * 1e9 / ops.max(1) as f64,
    })
}
