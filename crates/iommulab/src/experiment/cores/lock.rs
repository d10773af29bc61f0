//! A shared lock as a FIFO queue: Linux's x86 spinlocks are ticket locks (since 2.6.25,
//! queued spinlocks since 4.2), so CPUs get the lock in the order they asked for it, and a
//! waiting CPU spins: its wait is CPU time.
//!
//! A ticket lock's hand-off also grows with the CPUs spinning on it: the release
//! invalidates every spinner's copy of the lock word and their re-reads are served one at a
//! time (Boyd-Wickizer et al. 2012, P5.8), so under contention the lock passes more slowly
//! the more CPUs wait, and throughput falls rather than levelling off. A queued spinlock's
//! waiters spin on lines of their own: its hand-off does not grow (`per_waiter` = 0).

use serde::{Deserialize, Serialize};

/// No CPU has held the lock yet.
const NOBODY: u16 = u16::MAX;

/// One shared lock: when it is free next, who held it last, the grants still running or
/// queued (for the queue length an arriving CPU sees) and its counters.
#[derive(Debug, Clone)]
pub(crate) struct FifoLock {
    /// Cycles the hand-off adds per other CPU spinning (0: a queued spinlock).
    per_waiter: u64,
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
    pub(crate) fn new(cpus: usize, per_waiter: u64) -> Self {
        FifoLock {
            per_waiter,
            free_at: 0,
            last: NOBODY,
            ends: std::collections::VecDeque::with_capacity(cpus + 1),
            stats: LockStats::default(),
        }
    }

    /// CPU `cpu` asks at `t` for a section of `hold` cycles; the lock passed from another
    /// CPU costs `transfer` more, and a ticket lock's hand-off to a waiting CPU
    /// `per_waiter` for each other CPU spinning then. Returns when the section ends (the
    /// CPU's new clock). Callers ask in nondecreasing `t` (the model's event order), which
    /// makes it FIFO.
    #[inline]
    pub(crate) fn acquire(&mut self, cpu: u16, t: u64, hold: u64, transfer: u64) -> u64 {
        while self.ends.front().is_some_and(|&e| e <= t) {
            self.ends.pop_front();
        }
        let queued = self.ends.len() as u64;
        let start = t.max(self.free_at);
        let moved = self.last != NOBODY && self.last != cpu;
        // The CPUs spinning beside this one when the lock passes to it: as many as it found
        // ahead of it, less the holder (in a steady queue as many come behind as were
        // ahead; later arrivals are not known yet in event order).
        let spinners = if start > t {
            queued.saturating_sub(1)
        } else {
            0
        };
        let held = hold
            + if moved {
                transfer + self.per_waiter * spinners
            } else {
                0
            };
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
        let mut l = FifoLock::new(4, 0);
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

    /// A ticket lock passes more slowly the more CPUs spin on it; a queued one does not.
    #[test]
    fn a_ticket_hand_off_grows_with_the_spinners() {
        let run = |per_waiter| {
            let mut l = FifoLock::new(4, per_waiter);
            // CPU 0 holds [0, 100); CPUs 1, 2, 3 arrive while it does and queue.
            l.acquire(0, 0, 100, 10);
            let a = l.acquire(1, 10, 100, 10);
            let b = l.acquire(2, 20, 100, 10);
            let c = l.acquire(3, 30, 100, 10);
            (a, b, c)
        };
        // Queued: each hand-off costs the transfer alone.
        assert_eq!(run(0), (210, 320, 430));
        // Ticket, 5 per spinner: CPU 1 found 1 ahead (no other spinner), CPU 2 found 2
        // (one other), CPU 3 found 3 (two others).
        assert_eq!(run(5), (210, 325, 445));
    }
}
