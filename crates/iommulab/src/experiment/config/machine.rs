//! `[machine]`: the CPUs of the modeled machine, for the many-core model
//! ([`crate::experiment::cores`]).

use serde::{Deserialize, Serialize};

use crate::experiment::cores::MAX_CPUS;
use crate::hw::cost::ContentionPrices;

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
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            cpus: 1,
            lock_transfer: None,
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

    /// The contention prices this machine uses.
    pub fn prices(&self) -> ContentionPrices {
        ContentionPrices {
            lock_transfer: self
                .lock_transfer
                .unwrap_or(ContentionPrices::DEFAULT.lock_transfer),
        }
    }
}
