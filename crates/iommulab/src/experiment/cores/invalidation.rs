//! The one invalidation unit all CPUs share, as a queue.
//!
//! - Register-based (VT-d without queued invalidation): a CPU takes the unit's register
//!   lock (`iommu->register_lock`), writes the request and polls until the hardware clears
//!   it; the unit does one request at a time, so the lock *is* the hardware's queue.
//! - Queued invalidation: a CPU takes the queue's lock (`qi->q_lock`) only to write its
//!   descriptors and the wait descriptor; the hardware works the queue in order, and the
//!   CPU polls its wait descriptor's status until its batch is done (`qi_submit_sync`).

use serde::{Deserialize, Serialize};

use crate::hw::invalidate::InvalidationInterface;

use super::lock::{FifoLock, LockStats};

/// One batch of invalidation work a CPU brings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InvWork {
    /// The CPU's own part: the register interface's programming and polling overhead, or
    /// the descriptors it writes to the queue.
    pub cpu: u64,
    /// The hardware's part: the invalidations themselves.
    pub hw: u64,
    /// Queued only: the wait descriptor's submission and status poll.
    pub wait: u64,
}

/// The shared invalidation unit.
#[derive(Debug, Clone)]
pub(crate) struct InvalidationUnit {
    interface: InvalidationInterface,
    /// The register lock, or the queue's lock.
    lock: FifoLock,
    /// Queued: when the hardware has worked off everything submitted so far.
    hw_free_at: u64,
    /// Queued: end times of the batches the hardware has not finished, oldest first (at
    /// most one per CPU).
    pending: std::collections::VecDeque<u64>,
    stats: InvalidationStats,
}

/// What the invalidation unit saw.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InvalidationStats {
    /// `register` or `queued`.
    pub interface: InvalidationInterface,
    /// Batches submitted (a strict unmap's one request, or a flush's batch).
    pub batches: u64,
    /// The register lock or the queue's lock.
    pub lock: LockStats,
    /// Cycles the hardware was busy invalidating.
    pub hw_busy_cycles: u64,
    /// Batches the hardware had not finished when a new one arrived, summed (mean = / batches):
    /// the queue depth a submitter sees. Register-based: the lock's queue.
    pub depth_sum: u64,
    /// The deepest queue a batch found.
    pub max_depth: u64,
    /// Cycles CPUs spent polling for completion beyond their own work, summed.
    pub poll_cycles: u64,
}

impl InvalidationUnit {
    /// `per_waiter`: the ticket lock's hand-off per other spinner ([`FifoLock`]).
    pub(crate) fn new(interface: InvalidationInterface, cpus: usize, per_waiter: u64) -> Self {
        InvalidationUnit {
            interface,
            lock: FifoLock::new(cpus, per_waiter),
            hw_free_at: 0,
            pending: std::collections::VecDeque::with_capacity(cpus + 1),
            stats: InvalidationStats {
                interface,
                batches: 0,
                lock: LockStats::default(),
                hw_busy_cycles: 0,
                depth_sum: 0,
                max_depth: 0,
                poll_cycles: 0,
            },
        }
    }

    /// CPU `cpu` brings `w` at `t`; returns when its invalidation is complete.
    #[inline]
    pub(crate) fn submit(&mut self, cpu: u16, t: u64, w: InvWork, transfer: u64) -> u64 {
        self.stats.batches += 1;
        self.stats.hw_busy_cycles += w.hw;
        match self.interface {
            InvalidationInterface::Register => {
                // The CPU holds the register lock while the hardware works and it polls.
                let before = self.lock.stats();
                let end = self.lock.acquire(cpu, t, w.cpu + w.hw, transfer);
                let after = self.lock.stats();
                let queued = after.queue_sum - before.queue_sum;
                self.stats.depth_sum += queued;
                self.stats.max_depth = self.stats.max_depth.max(queued);
                self.stats.poll_cycles += w.hw;
                end
            }
            InvalidationInterface::Queued => {
                let submitted = self.lock.acquire(cpu, t, w.cpu, transfer);
                while self.pending.front().is_some_and(|&e| e <= submitted) {
                    self.pending.pop_front();
                }
                let depth = self.pending.len() as u64;
                self.stats.depth_sum += depth;
                self.stats.max_depth = self.stats.max_depth.max(depth);
                let done = submitted.max(self.hw_free_at) + w.hw;
                self.hw_free_at = done;
                self.pending.push_back(done);
                self.stats.poll_cycles += done - submitted;
                done + w.wait
            }
        }
    }

    pub(crate) fn stats(&self) -> InvalidationStats {
        InvalidationStats {
            lock: self.lock.stats(),
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: InvWork = InvWork {
        cpu: 100,
        hw: 1000,
        wait: 50,
    };

    #[test]
    fn register_interface_serialises_cpus_for_the_whole_invalidation() {
        let mut u = InvalidationUnit::new(InvalidationInterface::Register, 2, 0);
        assert_eq!(u.submit(0, 0, W, 0), 1100);
        // CPU 1 arrives at 10 and waits for CPU 0's whole request.
        assert_eq!(u.submit(1, 10, W, 0), 2200);
        let s = u.stats();
        assert_eq!((s.batches, s.max_depth, s.depth_sum), (2, 1, 1));
        assert_eq!(s.lock.wait_cycles, 1090);
    }

    #[test]
    fn queued_interface_frees_the_lock_while_the_hardware_works() {
        let mut u = InvalidationUnit::new(InvalidationInterface::Queued, 2, 0);
        // CPU 0: descriptors [0, 100), hardware [100, 1100), wait poll to 1150.
        assert_eq!(u.submit(0, 0, W, 0), 1150);
        // CPU 1 writes its descriptors at [100, 200) without waiting for the hardware,
        // which takes its batch after CPU 0's: [1100, 2100), poll to 2150.
        assert_eq!(u.submit(1, 100, W, 0), 2150);
        let s = u.stats();
        assert_eq!((s.max_depth, s.depth_sum), (1, 1));
        assert_eq!(s.lock.wait_cycles, 0);
        assert_eq!(s.poll_cycles, 1000 + 1900);
    }
}
