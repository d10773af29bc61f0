//! [`ExperimentConfig::resolve`]: every section checked, together with the others where
//! they meet (a unit's reach against the DMA mask, a time limit against the workload), and
//! the typed [`Resolved`] configuration a run needs.

use crate::device::DeviceMode;
use crate::hw::vtd::VtdConfig;
use crate::iova::domain::ByteRange;

use super::super::pv_dma::PvDmaSpec;
use super::limits::{MAX_DURATION_S, MAX_TCE_ENTRIES};
use crate::virt::GuestConfig;

use super::{ConfigError, ExperimentConfig, Kernel, Mechanisms, SystemConfig, WorkloadSpec};

impl ExperimentConfig {
    /// Validates everything that can be checked before running.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.resolve().map(drop)
    }

    /// Validates the configuration and resolves what a run needs from it, once (parse,
    /// don't validate twice): the mechanisms in force and the remapping unit's configuration.
    pub fn resolve(&self) -> Result<Resolved, ConfigError> {
        let mechanisms = self.mechanisms();
        mechanisms.validate()?;
        if let Some(m) = &self.machine {
            m.validate(&self.system)?;
        }
        let unit = self.hardware.resolve()?;
        let reserved = self.resolve_kernel(&mechanisms)?;
        if !(13..=64).contains(&self.dma_bits) {
            return Err(ConfigError::Invalid {
                key: "dma_bits".into(),
                value: self.dma_bits.to_string(),
                expected: "13..=64".into(),
            });
        }
        if !self.hardware.unit.is_vtd()
            && crate::experiment::build::iova_space_end(self.dma_bits).get() > MAX_TCE_ENTRIES
        {
            // A TCE table covers the device's whole DMA space, one entry per page.
            return Err(ConfigError::Invalid {
                key: "dma_bits".into(),
                value: self.dma_bits.to_string(),
                expected: format!(
                    "13..=35 with unit = \"{}\": its flat TCE table has an entry per page of \
                     the DMA space, at most {MAX_TCE_ENTRIES} (Calgary's largest table)",
                    self.hardware.unit.name()
                ),
            });
        }
        if let Some(d) = self.duration_s
            && !(d > 0.0 && d <= MAX_DURATION_S)
        {
            return Err(ConfigError::Invalid {
                key: "duration_s".into(),
                value: d.to_string(),
                expected: format!(
                    "a positive number of seconds of modeled time, at most {MAX_DURATION_S} \
                     (an hour; for longer runs give `workload.ios`)"
                ),
            });
        }
        if let DeviceMode::Malicious { neighbours } = self.device
            && neighbours > crate::device::MAX_NEIGHBOURS
        {
            return Err(ConfigError::Invalid {
                key: "device.neighbours".into(),
                value: neighbours.to_string(),
                expected: format!(
                    "at most {} pages on each side (each unmap probes 2 × neighbours + 1 pages)",
                    crate::device::MAX_NEIGHBOURS
                ),
            });
        }
        if let Some(d) = self.duration_s
            && matches!(self.system, SystemConfig::BareMetal)
            && self.pseudo_scsi().is_none()
        {
            // Only the pseudo driver runs for a time; the others run to their end, and a
            // trace replays whole.
            return Err(ConfigError::Invalid {
                key: "duration_s".into(),
                value: d.to_string(),
                expected: "no `duration_s` with this workload: only the pseudo SCSI benchmark \
                           runs for modeled time; a generator runs to the length its own keys \
                           give (packets, ios, ...) and a trace replays whole"
                    .into(),
            });
        }
        if self.duration_s.is_none() && self.pseudo_scsi().is_some_and(|w| w.ios == 0) {
            // No I/O to run: the result would price the setup alone as one I/O.
            return Err(ConfigError::Invalid {
                key: "workload.ios".into(),
                value: "0".into(),
                expected: "at least 1 I/O (or `duration_s` to run for modeled time)".into(),
            });
        }
        if let WorkloadSpec::Generator(w) = &self.workload {
            w.validate()?;
        }
        let system = match &self.system {
            SystemConfig::BareMetal => ResolvedSystem::BareMetal,
            SystemConfig::Guest(g) => {
                ResolvedSystem::Guest(Box::new(self.resolve_guest(g, &unit)?))
            }
            SystemConfig::XenPv(x) => ResolvedSystem::XenPv(self.resolve_xen_pv(x)?),
        };
        Ok(Resolved {
            mechanisms,
            unit,
            system,
            kernel: self.kernel,
            reserved,
        })
    }
}

/// An [`ExperimentConfig`] checked and resolved for a run ([`ExperimentConfig::resolve`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// The mechanisms in force (bare metal).
    pub mechanisms: Mechanisms,
    /// The VT-d unit's configuration (levels, IOTLB, invalidation, costs).
    pub unit: VtdConfig,
    /// The system the workload runs on.
    pub system: ResolvedSystem,
    /// The kernel the mechanisms follow.
    pub kernel: Kernel,
    /// The windows every domain reserves.
    pub reserved: Vec<ByteRange>,
}

/// The system of a resolved experiment.
#[derive(Clone, Debug, PartialEq)]
pub enum ResolvedSystem {
    /// The OS drives the remapping unit itself.
    BareMetal,
    /// A guest maps through hypercalls to its host (the cost model is `[hardware]`'s; boxed:
    /// it is large and resolved once per run).
    Guest(Box<GuestConfig>),
    /// A Xen PV domain (the unit and prices are `[hardware]`'s).
    XenPv(PvDmaSpec),
}
