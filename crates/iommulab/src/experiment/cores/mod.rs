//! Many cores in the modeled clock: a discrete-event model of C CPUs issuing DMA
//! operations at once, with what they share as FIFO queues.
//!
//! The one-CPU model runs unchanged and says what each operation does (which counters it
//! moves); [`demand`] prices that, as today, and splits it into the CPU's own work and the
//! parts other CPUs can queue behind: the IOVA tree lock (`iova_rbtree_lock`: 2.6.26's and
//! 6.x's one lock per domain, S0.x's §5 question), the magazines' depot lock, 2.6.26's
//! global flush lock and the invalidation unit (`invalidation.rs`: the register interface one
//! request at a time, queued invalidation with its wait descriptor). The per-CPU magazines
//! and flush-queue rings are the CPU's own work: no other CPU takes their locks.
//!
//! Each CPU runs its own stream (the op's `cpu`, folded modulo the machine's CPUs: a
//! generator's `cpus`, a trace's CPU column), one operation after another, as a closed
//! loop. The model steps the CPU whose next request is earliest, so every shared resource
//! sees its requests in time order and serves them first come, first served (`lock.rs`); a
//! waiting CPU spins (its wait is CPU time). Passing a lock between CPUs costs
//! [`ContentionPrices::lock_transfer`].
//!
//! The deferred flush of Linux before 4.7 (2.6.26 to 4.6, `add_unmap`/`flush_unmaps`, P5.7)
//! holds its global `async_umap_flush_lock` through the whole flush: the global invalidation
//! and then `__free_iova` of every queued IOVA, each taking the tree lock on its own. The
//! model holds the flush lock the same way (`Phase::FlushFree`): CPUs coming to append
//! meanwhile wait for the whole flush, while other CPUs' allocations still slip in between
//! two frees, as the tree lock's FIFO order lets them.
//!
//! The flush timers (2.6.26's one global timer, the flush queue's per-domain `fq_timer`)
//! run by the machine's clock, [`CoreModel::now`], not by the one-CPU clock, which sums
//! every CPU's work (the runner ticks the DMA layer with it).
//!
//! Simplifications, stated: one operation's sections run in a fixed order (its own work,
//! then the flush lock, the invalidation, the tree lock, the depot lock), each section
//! once per operation however many acquisitions it counts, except a flush's frees; the
//! lookup an unmap does before it queues (`find_iova`) is counted with the flush's frees
//! when that unmap flushes; a CPU whose stream has run dry while others' are long waits
//! (idles) rather than letting the model buffer without bound; the machine's clock the
//! timers see is the time of the latest event stepped, which trails the streams by at most
//! an operation per CPU.
//! With one CPU no lock ever waits or moves, and the model's clock is the one-CPU clock.

pub mod demand;
mod invalidation;
mod lock;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::clock::{ClockRate, Cycles};
use crate::hw::cost::ContentionPrices;

pub use super::config::MachineConfig;
pub use demand::{Demand, InvWork, Scopes};
pub use invalidation::InvalidationStats;
pub use lock::LockStats;

use invalidation::InvalidationUnit;
use lock::FifoLock;

/// Most CPUs the model takes (a [`crate::addr::CpuId`] is 16 bits; beyond this the scan
/// for the next event would dominate).
pub const MAX_CPUS: u16 = 1024;

/// A CPU's stream may run this far ahead of an idle one before the idle one is let go.
const BACKLOG: usize = 1 << 14;

/// One CPU: its clock, where it is in its current operation and its stream.
#[derive(Debug, Clone)]
struct Cpu {
    /// When its next step starts.
    t: u64,
    /// The step of the head operation it is at.
    phase: Phase,
    /// When the head operation started.
    op_start: u64,
    queue: VecDeque<(Demand, bool)>,
    active: bool,
    /// Waiting for the global flush lock while another CPU flushes holding it.
    blocked: bool,
    /// Tree-lock sections of a flush still to run (the IOVAs it frees).
    left: u32,
    ops: u64,
    ios: u64,
    busy: u64,
    idle: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Own,
    Flush,
    /// Freeing the flushed IOVAs one by one, holding the global flush lock.
    FlushFree,
    Invalidate,
    Tree,
    Depot,
}

/// The many-core model of one run.
#[derive(Debug, Clone)]
pub struct CoreModel {
    cpus: Vec<Cpu>,
    tree: FifoLock,
    depot: FifoLock,
    flush: FifoLock,
    /// The CPU holding the global flush lock through a flush (its end is not known until
    /// its last IOVA is freed), and the CPUs that came for the lock meanwhile, in order.
    flush_holder: Option<usize>,
    flush_waiters: VecDeque<usize>,
    inv: InvalidationUnit,
    scopes: Scopes,
    transfer: u64,
    clock: ClockRate,
    ops: u64,
    ios: u64,
    /// The one-CPU cycles of everything pushed.
    work: u64,
    /// The latest event time stepped: the machine's clock so far.
    now: u64,
}

/// What the many-core model measured: `cores` of a run's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoreStats {
    /// CPUs.
    pub cpus: u16,
    /// DMA operations run (maps, unmaps, device accesses, ticks).
    pub ops: u64,
    /// I/Os completed (unmaps).
    pub ios: u64,
    /// Modeled time from the first operation to the last CPU's last, in cycles.
    pub makespan_cycles: u64,
    /// The same work's cycles on one CPU, without waits or transfers (the one-CPU clock's
    /// sum over the operations; speedup = `work_cycles / makespan_cycles`).
    pub work_cycles: u64,
    /// Modeled seconds.
    pub modeled_seconds: f64,
    /// I/Os per second of the modeled machine (all CPUs).
    pub throughput: f64,
    /// CPU cycles per I/O, waiting and polling included (all CPUs' busy time / I/Os).
    pub cpu_cycles_per_io: f64,
    /// Of those, cycles spent waiting for a shared lock or the invalidation unit.
    pub wait_cycles_per_io: f64,
    /// I/Os per CPU, the least and the most (how even the streams were).
    pub ios_per_cpu_min: u64,
    /// See `ios_per_cpu_min`.
    pub ios_per_cpu_max: u64,
    /// Cycles CPUs sat idle with nothing to run, summed.
    pub idle_cycles: u64,
    /// The IOVA tree lock.
    pub tree_lock: LockStats,
    /// The magazine depot lock.
    pub depot_lock: LockStats,
    /// The global flush lock (2.6.26's deferred array).
    pub flush_lock: LockStats,
    /// The invalidation unit.
    pub invalidation: InvalidationStats,
}

impl CoreModel {
    /// A machine of `cpus` CPUs (at least 1) with the scopes and prices given.
    pub fn new(cpus: u16, scopes: Scopes, prices: ContentionPrices, clock: ClockRate) -> Self {
        let n = usize::from(cpus.max(1));
        // Every shared lock here is a spinlock of one kind (the machine's kernel's).
        let per_waiter = prices.ticket_handoff_per_waiter;
        CoreModel {
            cpus: (0..n)
                .map(|_| Cpu {
                    t: 0,
                    phase: Phase::Own,
                    op_start: 0,
                    queue: VecDeque::with_capacity(64),
                    active: false,
                    blocked: false,
                    left: 0,
                    ops: 0,
                    ios: 0,
                    busy: 0,
                    idle: 0,
                })
                .collect(),
            tree: FifoLock::new(n, per_waiter),
            depot: FifoLock::new(n, per_waiter),
            flush: FifoLock::new(n, per_waiter),
            flush_holder: None,
            flush_waiters: VecDeque::with_capacity(n),
            inv: InvalidationUnit::new(scopes.interface, n, per_waiter),
            scopes,
            transfer: prices.lock_transfer,
            clock,
            ops: 0,
            ios: 0,
            work: 0,
            now: 0,
        }
    }

    /// The machine's clock: the time of the latest event stepped (events are stepped in
    /// time order, so it never goes back).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// CPU `cpu` (folded modulo the CPUs) runs an operation with demand `d`; `io`: it
    /// completes an I/O.
    #[inline]
    pub fn push(&mut self, cpu: u16, d: Demand, io: bool) {
        let n = self.cpus.len();
        let c = usize::from(cpu) % n;
        let slot = &mut self.cpus[c];
        slot.active = true;
        slot.queue.push_back((d, io));
        self.ops += 1;
        self.ios += u64::from(io);
        self.work += d.total();
        self.advance(false);
    }

    /// Steps the model as far as it can without knowing the streams' future (`end`: there
    /// is no future; run everything).
    fn advance(&mut self, end: bool) {
        loop {
            // The earliest CPU that may still do something.
            let mut next: Option<usize> = None;
            let mut backlog = 0;
            for (i, c) in self.cpus.iter().enumerate() {
                if !c.active || c.blocked || (end && c.queue.is_empty()) {
                    continue;
                }
                backlog = backlog.max(c.queue.len());
                if next.is_none_or(|n| c.t < self.cpus[n].t) {
                    next = Some(i);
                }
            }
            let Some(i) = next else { return };
            if self.cpus[i].queue.is_empty() {
                if backlog < BACKLOG {
                    // Its next operation may still come: wait for the stream.
                    return;
                }
                // Others are far ahead in their streams: this CPU idles until the earliest
                // of them moves.
                let t = self
                    .cpus
                    .iter()
                    .filter(|c| !c.queue.is_empty())
                    .map(|c| c.t)
                    .min()
                    .unwrap_or(self.cpus[i].t);
                let c = &mut self.cpus[i];
                c.idle += t.saturating_sub(c.t);
                c.t = c.t.max(t);
                c.active = false;
                continue;
            }
            self.step(i);
        }
    }

    /// One step of CPU `i`'s head operation.
    #[inline]
    fn step(&mut self, i: usize) {
        let cpu = u16::try_from(i).unwrap_or(u16::MAX);
        let transfer = self.transfer;
        let c = &mut self.cpus[i];
        let Some(&(d, io)) = c.queue.front() else {
            return;
        };
        let t = c.t;
        self.now = self.now.max(t);
        match c.phase {
            Phase::Own => {
                c.op_start = t;
                c.t = t + d.private;
                c.phase = Phase::Flush;
            }
            Phase::Flush => {
                if self.scopes.global_flush_lock && (d.flush > 0 || d.inv.hw > 0) {
                    if self.flush_holder.is_some() {
                        // Another CPU is flushing holding the lock: wait (spinning) until it
                        // lets go; the wait is counted when the lock is granted.
                        c.blocked = true;
                        self.flush_waiters.push_back(i);
                        return;
                    }
                    // `add_unmap` holds `async_umap_flush_lock` while it appends and, at the
                    // high-water mark, through `flush_unmaps`: the global invalidation...
                    let held = self.flush.acquire(cpu, t, d.flush, transfer);
                    let done = if d.inv.hw > 0 || d.inv.cpu > 0 {
                        self.inv.submit(cpu, held, d.inv, transfer)
                    } else {
                        held
                    };
                    self.flush.extend_last(done);
                    c.t = done;
                    if done > held && d.tree > 0 {
                        // ...and `__free_iova` of every queued IOVA, each taking the tree
                        // lock on its own (S0.6, P5.7: `flush_unmaps`).
                        c.left = d.tree_sections.max(1);
                        c.phase = Phase::FlushFree;
                        self.flush_holder = Some(i);
                    } else {
                        c.phase = Phase::Tree;
                    }
                } else {
                    c.phase = Phase::Invalidate;
                }
            }
            Phase::FlushFree => {
                let n = u64::from(d.tree_sections.max(1));
                let first = c.left == d.tree_sections.max(1);
                let part = d.tree / n + if first { d.tree % n } else { 0 };
                c.t = self.tree.acquire(cpu, t, part, transfer);
                c.left -= 1;
                if c.left == 0 {
                    self.flush.extend_last(c.t);
                    self.flush_holder = None;
                    // The waiters ask again at the times they came (the earliest CPUs, so
                    // they are stepped next, in order) and queue behind the flush.
                    while let Some(w) = self.flush_waiters.pop_front() {
                        self.cpus[w].blocked = false;
                    }
                    self.cpus[i].phase = Phase::Depot;
                }
            }
            Phase::Invalidate => {
                if d.inv.hw > 0 || d.inv.cpu > 0 || d.inv.wait > 0 {
                    c.t = self.inv.submit(cpu, t, d.inv, transfer);
                }
                c.phase = Phase::Tree;
            }
            Phase::Tree => {
                if d.tree > 0 {
                    c.t = self.tree.acquire(cpu, t, d.tree, transfer);
                }
                c.phase = Phase::Depot;
            }
            Phase::Depot => {
                if d.depot > 0 {
                    c.t = self.depot.acquire(cpu, t, d.depot, transfer);
                }
                c.busy += c.t - c.op_start;
                c.ops += 1;
                c.ios += u64::from(io);
                c.queue.pop_front();
                c.phase = Phase::Own;
            }
        }
    }

    /// Runs what is left and returns the measurements.
    pub fn finish(mut self) -> CoreStats {
        self.advance(true);
        let makespan = self.cpus.iter().map(|c| c.t).max().unwrap_or(0);
        let ios = self.ios.max(1) as f64;
        let busy: u64 = self.cpus.iter().map(|c| c.busy).sum();
        let tree = self.tree.stats();
        let depot = self.depot.stats();
        let flush = self.flush.stats();
        let inv = self.inv.stats();
        // Polling beyond the hardware's work on the CPU's own batch is waiting for others'.
        let waits = tree.wait_cycles
            + depot.wait_cycles
            + flush.wait_cycles
            + inv.lock.wait_cycles
            + inv.poll_cycles.saturating_sub(inv.hw_busy_cycles);
        let seconds = self.clock.ns(Cycles::new(makespan)) / 1e9;
        let used = self.cpus.iter().filter(|c| c.ops > 0);
        let ios_min = used.clone().map(|c| c.ios).min().unwrap_or(0);
        let ios_max = used.map(|c| c.ios).max().unwrap_or(0);
        CoreStats {
            cpus: u16::try_from(self.cpus.len()).unwrap_or(u16::MAX),
            ops: self.ops,
            ios: self.ios,
            makespan_cycles: makespan,
            work_cycles: self.work,
            modeled_seconds: seconds,
            throughput: if seconds > 0.0 {
                self.ios as f64 / seconds
            } else {
                0.0
            },
            cpu_cycles_per_io: busy as f64 / ios,
            wait_cycles_per_io: waits as f64 / ios,
            ios_per_cpu_min: ios_min,
            ios_per_cpu_max: ios_max,
            idle_cycles: self.cpus.iter().map(|c| c.idle).sum(),
            tree_lock: tree,
            depot_lock: depot,
            flush_lock: flush,
            invalidation: inv,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::invalidate::InvalidationInterface;

    const SCOPES: Scopes = Scopes {
        interface: InvalidationInterface::Queued,
        global_flush_lock: false,
    };

    fn model(cpus: u16) -> CoreModel {
        CoreModel::new(
            cpus,
            SCOPES,
            ContentionPrices {
                lock_transfer: 0,
                ticket_handoff_per_waiter: 0,
            },
            ClockRate::ghz(1.0),
        )
    }

    fn op(private: u64, tree: u64) -> Demand {
        Demand {
            private,
            tree,
            ..Demand::default()
        }
    }

    #[test]
    fn a_saturated_lock_bounds_throughput_by_its_hold() {
        // Each op: 100 cycles alone, then 100 under the lock. One CPU: 200 per op; four
        // CPUs: the lock is busy all the time, so 100 per op, not 50.
        let mut m = model(4);
        for i in 0..4000u16 {
            m.push(i % 4, op(100, 100), true);
        }
        let s = m.finish();
        assert_eq!(s.work_cycles, 4000 * 200);
        let per_op = s.makespan_cycles as f64 / 4000.0;
        assert!((per_op - 100.0).abs() < 1.0, "{per_op}");
        assert!(s.tree_lock.contended > 3000, "{:?}", s.tree_lock);
        assert_eq!(s.tree_lock.max_queue, 3);
        assert_eq!((s.ios_per_cpu_min, s.ios_per_cpu_max), (1000, 1000));
    }

    #[test]
    fn private_work_scales_linearly() {
        let mut m = model(8);
        for i in 0..8000u16 {
            m.push(i % 8, op(300, 0), false);
        }
        let s = m.finish();
        assert_eq!(s.makespan_cycles, 1000 * 300);
        assert_eq!(s.wait_cycles_per_io, 0.0);
    }

    #[test]
    fn a_deferred_flush_holds_the_flush_lock_through_its_frees() {
        // 3.x `add_unmap` at the high-water mark: CPU 0 takes the flush lock, invalidates
        // (100 cycles of hardware) and frees five IOVAs, each under the tree lock (100
        // cycles each), before letting go. CPU 1's append (at 50) waits for all of it;
        // CPU 2's allocation (at 200) slips in between two frees, as a ticket lock lets it.
        let mut m = CoreModel::new(
            3,
            Scopes {
                interface: InvalidationInterface::Queued,
                global_flush_lock: true,
            },
            ContentionPrices {
                lock_transfer: 0,
                ticket_handoff_per_waiter: 0,
            },
            ClockRate::ghz(1.0),
        );
        // Every CPU on the clock at 0 before the ops come.
        m.push(1, Demand::default(), false);
        m.push(2, Demand::default(), false);
        let flush = Demand {
            flush: 10,
            tree: 500,
            tree_sections: 5,
            inv: InvWork {
                cpu: 0,
                hw: 100,
                wait: 0,
            },
            ..Demand::default()
        };
        m.push(0, flush, true);
        m.push(
            1,
            Demand {
                private: 50,
                flush: 10,
                ..Demand::default()
            },
            true,
        );
        m.push(
            2,
            Demand {
                private: 200,
                tree: 50,
                tree_sections: 1,
                ..Demand::default()
            },
            false,
        );
        let s = m.finish();
        // CPU 0: lock [0, 10), invalidation to 110, frees [110, 210), CPU 2's allocation
        // [210, 260), frees [260, 660). CPU 1 waits from 50 to 660, appends to 670.
        assert_eq!(s.makespan_cycles, 670);
        assert_eq!(s.flush_lock.wait_cycles, 610);
        assert_eq!(s.flush_lock.hold_cycles, 660 + 10);
        assert_eq!(s.tree_lock.acquisitions, 6);
        assert_eq!(s.tree_lock.wait_cycles, 10 + 50);
    }

    #[test]
    fn a_balanced_stream_does_not_grow_the_buffers() {
        // The only heap the model uses are the per-CPU queues and the locks' grant rings:
        // after a warm-up their capacities stay put (no allocation per operation).
        let mut m = model(16);
        let caps =
            |m: &CoreModel| -> Vec<usize> { m.cpus.iter().map(|c| c.queue.capacity()).collect() };
        for i in 0..10_000u32 {
            m.push(
                u16::try_from(i % 16).unwrap(),
                op(50 + u64::from(i % 7), 20),
                true,
            );
        }
        let warm = caps(&m);
        for i in 0..100_000u32 {
            m.push(
                u16::try_from(i % 16).unwrap(),
                op(50 + u64::from(i % 7), 20),
                true,
            );
        }
        assert_eq!(caps(&m), warm);
    }
}
