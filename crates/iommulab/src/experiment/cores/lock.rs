//! A shared lock as a FIFO queue: Linux's x86 spinlocks are ticket locks (since 2.6.25,
//! queued spinlocks since 4.2), so CPUs get the lock in the order they asked for it, and a
//! waiting CPU spins: its wait is CPU time.

use serde::{Deserialize, Serialize};

/// No CPU has held the lock yet.
const NOBODY: u16 = u16::MAX;

/// One shared lock: when it is free next, who held it last, the grants still running or
/// queued (for the queue length an arriving CPU sees) and its counters.
#[derive(Debug, Clone)]
pub(crate) struct FifoLock {
    free_at: u64,
    last: u16,
    /// End times of the grants not yet over, oldest first. A CPU waits for at most one
    /// grant at a time, so this never holds more than the machine's CPUs (allocated once).
    ends: std::collections::VecDeque<u64>,
    stats: LockStats,
}

/// What one shared lock saw over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LockStats {
    /// Critical sections entered (a CPU's consecutive acquisitions within one DMA-API call
    /// count once: they are one section here).
    pub acquisitions: u64,
    /// Of those, the ones that found the lock held and waited.
    pub contended: u64,
    /// Of those, the ones taken from another CPU (paying `lock_transfer`).
    pub transfers: u64,
    /// Cycles spent waiting, summed over CPUs.
    pub wait_cycles: u64,
    /// Cycles the lock was held, summed (its busy time).
    pub hold_cycles: u64,
    /// The longest single wait, in cycles.
    pub max_wait_cycles: u64,
    /// The most CPUs holding or queued for the lock that an arriving CPU found.
    pub max_queue: u64,
    /// Sum over acquisitions of the CPUs found holding or queued (mean = / acquisitions).
    pub queue_sum: u64,
}

impl FifoLock {
    pub(crate) fn new(cpus: usize) -> Self {
        FifoLock {
            free_at: 0,
            last: NOBODY,
            ends: std::collections::VecDeque::with_capacity(cpus + 1),
            stats: LockStats::default(),
        }
    }

    /// CPU `cpu` asks at `t` for a section of `hold` cycles; the lock passed from another
    /// CPU costs `transfer` more. Returns when the section ends (the CPU's new clock).
    /// Callers ask in nondecreasing `t` (the model's event order), which makes it FIFO.
    #[inline]
    pub(crate) fn acquire(&mut self, cpu: u16, t: u64, hold: u64, transfer: u64) -> u64 {
        while self.ends.front().is_some_and(|&e| e <= t) {
            self.ends.pop_front();
        }
        let queued = self.ends.len() as u64;
        let start = t.max(self.free_at);
        let moved = self.last != NOBODY && self.last != cpu;
        let held = hold + if moved { transfer } else { 0 };
        let end = start + held;
        self.free_at = end;
        self.last = cpu;
        self.ends.push_back(end);
        let s = &mut self.stats;
        s.acquisitions += 1;
        s.queue_sum += queued;
        s.max_queue = s.max_queue.max(queued);
        if start > t {
            s.contended += 1;
            s.wait_cycles += start - t;
            s.max_wait_cycles = s.max_wait_cycles.max(start - t);
        }
        s.transfers += u64::from(moved);
        s.hold_cycles += held;
        end
    }

    /// The section just granted lasts until `end` instead (work done holding the lock that
    /// depends on another resource, as 2.6.26 invalidates holding its flush lock).
    #[inline]
    pub(crate) fn extend_last(&mut self, end: u64) {
        if end > self.free_at {
            self.stats.hold_cycles += end - self.free_at;
            self.free_at = end;
            if let Some(e) = self.ends.back_mut() {
                *e = end;
            }
        }
    }

    pub(crate) fn stats(&self) -> LockStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_in_arrival_order_and_pays_the_transfer_only_between_cpus() {
        let mut l = FifoLock::new(4);
        // CPU 0 holds [0, 100); CPU 1 arrives at 10 and waits to 100, holds 100 + 50.
        assert_eq!(l.acquire(0, 0, 100, 50), 100);
        assert_eq!(l.acquire(1, 10, 100, 50), 250);
        // CPU 2 at 20 queues behind both: finds 2 there.
        assert_eq!(l.acquire(2, 20, 10, 50), 310);
        // CPU 2 again, after it is free: no wait, no transfer.
        assert_eq!(l.acquire(2, 400, 10, 50), 410);
        let s = l.stats();
        assert_eq!(s.acquisitions, 4);
        assert_eq!(s.contended, 2);
        assert_eq!(s.wait_cycles, 90 + 230);
        assert_eq!(s.max_wait_cycles, 230);
        assert_eq!(s.transfers, 2);
        assert_eq!(s.hold_cycles, 100 + 150 + 60 + 10);
        assert_eq!((s.max_queue, s.queue_sum), (2, 1 + 2));
    }
}
