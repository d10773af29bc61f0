//! The depot: full magazines per size bin and the delayed work that trims them
//! (`iova_depot_push`/`iova_depot_pop`, `iova_depot_work_func`).

use iommulab_base::clock::{ClockRate, Cycles};

use super::cpu_caches::Mag;

/// The depots of full magazines per bin (`struct iova_rcache`'s depot and delayed work),
/// plus the spare empty magazines they recycle.
#[derive(Debug, Clone)]
pub(crate) struct Depot {
    pub(super) full: Vec<Vec<Mag>>,
    spare: Vec<Mag>,
    /// Per bin: when the trim work was scheduled (`None`: not pending).
    scheduled_at: Vec<Option<Cycles>>,
    /// The earliest of `scheduled_at` (None when nothing is scheduled), so the common tick
    /// with nothing due returns after one comparison.
    earliest: Option<Cycles>,
    /// The `now` of the last tick: depot pushes schedule the work at this time.
    last_now: Cycles,
    /// The trim work's delay in ms, and in cycles at the last tick's clock (converted
    /// once, not on every tick).
    delay_ms: u64,
    delay: Option<(ClockRate, u64)>,
    mag_size: usize,
    /// Full magazines held, over all bins.
    pub(super) held: u64,
    /// Most full magazines ever held.
    peak_held: u64,
}

impl Depot {
    pub(crate) fn new(bins: usize, mag_size: usize, delay_ms: u64) -> Self {
        Depot {
            full: (0..bins).map(|_| Vec::new()).collect(),
            spare: Vec::new(),
            scheduled_at: vec![None; bins],
            earliest: None,
            last_now: Cycles::ZERO,
            delay_ms,
            delay: None,
            mag_size,
            held: 0,
            peak_held: 0,
        }
    }

    /// `iova_depot_push` + `schedule_delayed_work`.
    pub(crate) fn push(&mut self, bin: usize, mag: Mag) {
        self.full[bin].push(mag);
        self.held += 1;
        self.peak_held = self.peak_held.max(self.held);
        if self.scheduled_at[bin].is_none() {
            self.scheduled_at[bin] = Some(self.last_now);
            self.earliest = Some(
                self.earliest
                    .map_or(self.last_now, |e| e.min(self.last_now)),
            );
        }
    }

    /// `iova_depot_pop`.
    pub(crate) fn pop(&mut self, bin: usize) -> Option<Mag> {
        let m = self.full[bin].pop()?;
        self.held -= 1;
        Some(m)
    }

    /// An empty magazine: a recycled one, else a new one (`iova_magazine_alloc`).
    pub(crate) fn empty_mag(&mut self) -> Mag {
        self.spare.pop().unwrap_or_else(|| Mag::new(self.mag_size))
    }

    /// Takes back an emptied magazine (`iova_magazine_free`).
    pub(crate) fn recycle(&mut self, mut mag: Mag) {
        mag.pfns.clear();
        self.spare.push(mag);
    }

    /// Full magazines held now.
    pub(crate) fn held(&self) -> u64 {
        self.held
    }

    /// Most full magazines held at once.
    pub(crate) fn peak_held(&self) -> u64 {
        self.peak_held
    }

    /// Ranges cached in the depot.
    pub(crate) fn cached(&self) -> usize {
        self.full.iter().flatten().map(|m| m.pfns.len()).sum()
    }

    /// Runs every trim work that has come due by `now` (`iova_depot_work_func`), the delay
    /// counted at `clock`: one magazine per run while the depot holds more than `cpus`;
    /// `f(bin, pfn)` frees a range. Returns whether any magazine was trimmed.
    ///
    /// Inline up to the check that nothing is due, as on almost every tick (the runner
    /// ticks once per I/O); the trimming is out of line.
    #[inline]
    pub(crate) fn tick(
        &mut self,
        now: Cycles,
        clock: ClockRate,
        cpus: usize,
        f: impl FnMut(usize, u64),
    ) -> bool {
        self.last_now = now;
        let delay = match self.delay {
            Some((c, d)) if c == clock => d,
            _ => self.set_delay(clock),
        };
        match self.earliest {
            Some(e) if e.get().saturating_add(delay) <= now.get() => self.trim(now, delay, cpus, f),
            _ => false,
        }
    }

    /// The trim delay in cycles at `clock`, converted once per clock.
    #[cold]
    fn set_delay(&mut self, clock: ClockRate) -> u64 {
        let d = clock.cycles_from_ms(self.delay_ms).get();
        self.delay = Some((clock, d));
        d
    }

    /// [`tick`](Self::tick) once some trim work is due.
    #[inline(never)]
    fn trim(
        &mut self,
        now: Cycles,
        delay: u64,
        cpus: usize,
        mut f: impl FnMut(usize, u64),
    ) -> bool {
        let mut trimmed = false;
        for bin in 0..self.full.len() {
            while let Some(at) = self.scheduled_at[bin] {
                let due = at.get().saturating_add(delay);
                if due > now.get() {
                    break;
                }
                if self.full[bin].len() > cpus {
                    if let Some(mut mag) = self.pop(bin) {
                        for p in mag.pfns.drain(..) {
                            f(bin, p);
                        }
                        self.spare.push(mag);
                        trimmed = true;
                    }
                    // Reschedule; a zero delay runs once per tick.
                    self.scheduled_at[bin] = Some(Cycles::new(due.max(at.get() + 1)));
                    if delay == 0 {
                        break;
                    }
                } else {
                    self.scheduled_at[bin] = None;
                }
            }
        }
        self.earliest = self.scheduled_at.iter().flatten().copied().min();
        trimmed
    }

    /// Empties every depot (`free_global_cached_iovas`), calling `f(bin, pfn)` per range.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(usize, u64)) {
        for bin in 0..self.full.len() {
            while let Some(mut mag) = self.pop(bin) {
                for p in mag.pfns.drain(..) {
                    f(bin, p);
                }
                self.spare.push(mag);
            }
        }
    }
}
