//! `[machine]`: the CPUs of the modeled machine, for the many-core model
//! ([`crate::experiment::cores`]).

use serde::{Deserialize, Serialize};

use crate::experiment::cores::MAX_CPUS;
use crate::hw::cost::ContentionPrices;
use crate::iova::AllocatorKind;

use super::{ConfigError, SystemConfig};

/// The machine: `[machine]` in a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MachineConfig {
    /// CPUs issuing DMA operations at once (default 1: the many-core model's clock is then
    /// the one-CPU clock, without the end-of-run drain). Without a `[machine]` section the
    /// many-core model does not run at all.
    pub cpus: u16,
    /// Overrides [`ContentionPrices::lock_transfer`] (cycles).
    pub lock_transfer: Option<u64>,
    /// The kernel's spinlocks. Default: `ticket` unless the allocator is `magazine` (the
    /// kernels without per-CPU IOVA caches that the papers ran, 2.6.26 and 3.x, had ticket
    /// spinlocks; the magazines came in 4.7, after queued spinlocks in 4.2).
    pub spinlock: Option<Spinlock>,
    /// Overrides [`ContentionPrices::ticket_handoff_per_waiter`] (cycles; used with
    /// `spinlock = "ticket"`).
    pub ticket_handoff_per_waiter: Option<u64>,
}

/// A kernel's spinlock, as the many-core model prices its hand-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Spinlock {
    /// x86 Linux 2.6.25 to 4.1: the hand-off grows with the CPUs spinning.
    Ticket,
    /// x86 Linux since 4.2 (`qspinlock`): each waiter spins on its own line.
    Queued,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            cpus: 1,
            lock_transfer: None,
            spinlock: None,
            ticket_handoff_per_waiter: None,
        }
    }
}

impl MachineConfig {
    /// `cpus` within 1..=[`MAX_CPUS`]; bare metal only (a guest's and a Xen domain's DMA
    /// layers have no many-core model yet).
    pub fn validate(&self, system: &SystemConfig) -> Result<(), ConfigError> {
        if !(1..=MAX_CPUS).contains(&self.cpus) {
            return Err(ConfigError::Invalid {
                key: "machine.cpus".into(),
                value: self.cpus.to_string(),
                expected: format!("1..={MAX_CPUS}"),
            });
        }
        if let (Some(Spinlock::Queued), Some(v)) = (self.spinlock, self.ticket_handoff_per_waiter) {
            return Err(ConfigError::Invalid {
                key: "machine.ticket_handoff_per_waiter".into(),
                value: v.to_string(),
                expected: "no ticket hand-off price with spinlock = \"queued\" (a queued \
                           spinlock's hand-off does not grow with its waiters)"
                    .into(),
            });
        }
        if !matches!(system, SystemConfig::BareMetal) {
            return Err(ConfigError::Invalid {
                key: "machine".into(),
                value: format!("cpus = {}", self.cpus),
                expected: "no [machine] section with a guest or Xen PV system (the many-core \
                           model is bare metal's)"
                    .into(),
            });
        }
        Ok(())
    }

    /// The spinlock of the kernel that runs `allocator` (see [`MachineConfig::spinlock`]).
    pub fn spinlock_for(&self, allocator: AllocatorKind) -> Spinlock {
        self.spinlock.unwrap_or(match allocator {
            AllocatorKind::Magazine => Spinlock::Queued,
            _ => Spinlock::Ticket,
        })
    }

    /// The contention prices this machine uses with `allocator`.
    pub fn prices(&self, allocator: AllocatorKind) -> ContentionPrices {
        let d = ContentionPrices::DEFAULT;
        ContentionPrices {
            lock_transfer: self.lock_transfer.unwrap_or(d.lock_transfer),
            ticket_handoff_per_waiter: match self.spinlock_for(allocator) {
                Spinlock::Ticket => self
                    .ticket_handoff_per_waiter
                    .unwrap_or(d.ticket_handoff_per_waiter),
                Spinlock::Queued => 0,
            },
        }
    }
}
