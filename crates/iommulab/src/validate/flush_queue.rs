//! The validator's model of dma-iommu's per-CPU flush queue (lazy mode): frees wait here
//! until a full ring or the timer flushes them, as `struct iova_fq` does.

use super::*;

/// A per-CPU flush queue of one domain in one model (`struct iova_fq`, dma-iommu.c).
#[derive(Clone, Debug, Default)]
pub(super) struct FlushQueue {
    /// Per CPU: (first page, pages, the flush count it waits for).
    cpus: Vec<std::collections::VecDeque<(u64, u64, u64)>>,
    start_cnt: u64,
    finish_cnt: u64,
    /// (deadline ns, the CPU that armed it).
    timer: Option<(u64, u16)>,
    pub(super) full_flushes: u64,
    pub(super) timer_flushes: u64,
    /// Entries per CPU (the ring holds one fewer).
    size: usize,
    timeout_ns: u64,
    /// The jiffies base (trace time in ns, jiffies counted from time 0), if `hz` > 0.
    jiffies: Option<Jiffies>,
}

impl FlushQueue {
    pub(super) fn new(size: usize, timeout_ms: u64, hz: u32) -> Self {
        FlushQueue {
            size,
            timeout_ns: timeout_ms.saturating_mul(1_000_000),
            // Trace time is in ns: a 1 GHz clock makes cycles nanoseconds.
            jiffies: Jiffies::new(timeout_ms, hz, ClockRate::GHZ_1),
            ..FlushQueue::default()
        }
    }

    /// `queue_iova` on `cpu` at `now`: reap what earlier flushes covered, flush if full,
    /// queue, arm the timer.
    pub(super) fn queue(&mut self, d: &mut IovaDomain, cpu: u16, pfn: u64, pages: u64, now: u64) {
        let c = usize::from(cpu);
        if self.cpus.len() <= c {
            self.cpus.resize_with(c + 1, Default::default);
        }
        self.reap(d, c, cpu);
        if self.cpus[c].len() + 1 >= self.size {
            // `fq_flush_iotlb`, then this CPU's queue is reaped.
            self.start_cnt += 1;
            self.finish_cnt += 1;
            self.full_flushes += 1;
            self.reap(d, c, cpu);
        }
        self.cpus[c].push_back((pfn, pages, self.start_cnt));
        if self.timer.is_none() {
            // `mod_timer(&cookie->fq_timer, jiffies + msecs_to_jiffies(IOVA_FQ_TIMEOUT))`.
            let at = match self.jiffies {
                Some(j) => j.deadline(Cycles::new(now)).get(),
                None => now.saturating_add(self.timeout_ns),
            };
            self.timer = Some((at, cpu));
        }
    }

    /// `fq_ring_free_locked`: frees queue `c`'s entries older than the last finished flush
    /// into CPU `on`'s caches.
    pub(super) fn reap(&mut self, d: &mut IovaDomain, c: usize, on: u16) {
        while let Some(&(pfn, pages, cnt)) = self.cpus[c].front() {
            if cnt >= self.finish_cnt {
                break;
            }
            self.cpus[c].pop_front();
            let _ = d.free_iova(CpuId::new(on), Pfn::new(pfn), pages);
        }
    }

    /// `fq_flush_timeout` if due by `now`: one flush, then every CPU's queue is reaped on
    /// the CPU that runs the timer (the one that armed it): Linux frees every queued range
    /// into the timer CPU's caches.
    pub(super) fn tick(&mut self, d: &mut IovaDomain, now: u64) {
        let Some((deadline, tcpu)) = self.timer else {
            return;
        };
        if now < deadline {
            return;
        }
        self.timer = None;
        self.start_cnt += 1;
        self.finish_cnt += 1;
        self.timer_flushes += 1;
        for c in 0..self.cpus.len() {
            self.reap(d, c, tcpu);
        }
    }

    /// Takes `pfn` out of the queue (one step adopting a range the kernel reused).
    pub(super) fn remove(&mut self, pfn: u64) -> bool {
        for q in &mut self.cpus {
            if let Some(i) = q.iter().position(|e| e.0 == pfn) {
                q.remove(i);
                return true;
            }
        }
        false
    }

    pub(super) fn holds(&self, pfn: u64, pages: u64) -> bool {
        self.cpus
            .iter()
            .flatten()
            .any(|&(p, n, _)| p < pfn + pages && pfn < p + n)
    }
}
