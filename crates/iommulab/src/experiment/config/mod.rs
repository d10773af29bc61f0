//! The experiment description (TOML/JSON through serde): one schema for the CLI (`iommulab
//! run FILE`, `bench --config-file`, `replay --config-file`), configs on disk and Python.
//! Hardware × system × workload × device; [`ExperimentConfig::resolve`] checks everything
//! once and returns the typed [`Resolved`] configuration a run needs (parse, don't validate
//! twice).
//!
//! ```toml
//! # every key is optional; this is the pseudo-driver benchmark on bare metal
//! configuration = "default"          # linux-strict | linux-lazy (lazy) | passthrough | 2.6.26-deferred
//!                                    # | pre-4.7-strict | 2.6.26-bitmap | 2.6.26-strict-bitmap, or
//!                                    # S0.7's aliases: disabled | default | strict | bitmap | strict-bitmap | modern
//! software_clock = "modeled"         # modeled | measured
//! dma_debug = false
//! [hardware]
//! cost = "modern"                    # modern (default) | vtd-2008 | kvm-2010
//! levels = 3                         # 3 | 4 | 5 (default: the preset's)
//! invalidation = "register"          # register | queued (default: the preset's)
//! iotlb = { sets = 32, ways = 8 }
//! unit = "vtd"                       # vtd | calgary | dart (any system)
//! [hardware.cost_overrides]          # any CostModel field
//! inv_page = 2500
//! [workload]
//! ios = 100000
//! io_size = 1024
//! outstanding = 1
//! cpus = 1
//! touch = false
//! seed = 1                           # the generator's seed
//! [device]
//! kind = "malicious"
//! neighbours = 1
//! ```
//!
//! The system is bare metal unless `[system]` says otherwise; the workload is the pseudo
//! driver's (its keys directly under `[workload]`, as above), any built-in generator by
//! `kind`, or a trace:
//!
//! ```toml
//! [system]                           # a guest with an assigned device (S1.1)
//! kind = "guest"
//! strategy = "on-demand"             # direct | single-use | shared | persistent | on-demand
//! quota = 4096                       # map-cache pages
//! eviction = { kind = "lru" }        # fifo | lru | opt | opt_batch | prefetch
//! batching = "none"                  # none | map | unmap | piggyback | map-unmap
//! [hardware]
//! cost = "kvm-2010"                  # Yassour's machine (default: modern)
//! [workload]
//! kind = "netperf-send"              # pseudo-scsi | netperf-send | apache-sendfile | block | uniform-random
//! packets = 20000
//! # or: trace = "traces/nvme.txt.zst"   (format = "auto", lenient = false)
//! ```
//!
//! One file per section: [`mechanisms`] (named configurations, the kernel, the OS-side
//! mechanisms), [`hardware`] (the modeled machine and its unit), [`system`] (bare metal, a
//! guest, a Xen PV domain), [`workload`] (a generator or a trace), [`limits`] (the largest
//! values a run accepts) and [`resolve`] (the checks of every section together, once).

pub mod hardware;
pub mod limits;
pub mod machine;
pub mod mechanisms;
pub mod resolve;
pub mod system;
pub mod workload;

pub use hardware::{HardwareConfig, UnitKind};
pub use limits::{
    GHZ_RANGE, MAX_DEFERRED_ENTRIES, MAX_DURATION_S, MAX_FLUSH_TIMEOUT_MS, MAX_FQ_ENTRIES,
    MAX_GUEST_MIB, MAX_IOTLB_ENTRIES, MAX_PRICE_CYCLES, MAX_TCE_ENTRIES, MAX_XEN_BATCH,
};
pub use machine::{MachineConfig, Spinlock};
pub use mechanisms::{Kernel, Mechanisms, NamedConfig};
pub use resolve::{Resolved, ResolvedSystem};
pub use system::{GuestSystemConfig, SystemConfig, XenPvSystemConfig};
pub use workload::{TraceSpec, WorkloadSpec};

use serde::{Deserialize, Serialize};

use crate::device::DeviceMode;
use crate::iova::domain::ByteRange;
use crate::workload::{ParamError, PseudoScsiConfig, WorkloadConfig};

/// A configuration problem, naming the key and what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A value outside its allowed set or range.
    #[error("invalid value {value:?} for `{key}`: expected {expected}")]
    Invalid {
        /// The offending key.
        key: String,
        /// The value given.
        value: String,
        /// What is allowed.
        expected: String,
    },
    /// A TOML document that does not parse or does not fit the schema.
    #[error("bad configuration: {0}")]
    Parse(String),
    /// An IOVA domain setup that cannot work; the message names the field and its range.
    /// (Not a `source`: the message already holds it, and a chain would print it twice.)
    #[error("bad IOVA domain: {0}")]
    Domain(crate::iova::DomainError),
}

impl From<crate::iova::DomainError> for ConfigError {
    fn from(e: crate::iova::DomainError) -> Self {
        ConfigError::Domain(e)
    }
}

impl From<ParamError> for ConfigError {
    /// A workload parameter is a configuration key like any other.
    fn from(e: ParamError) -> Self {
        ConfigError::Invalid {
            key: e.key,
            value: e.value,
            expected: e.expected,
        }
    }
}

/// Whether the software part of the per-I/O time is modeled or measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SoftwareClock {
    /// Counted kernel-software primitives × the preset's costs: deterministic, and what a
    /// reproduction of an old machine needs.
    #[default]
    Modeled,
    /// The real wall time of iommulab's own software on this machine.
    Measured,
}

/// Everything one run needs: hardware × system × workload × device (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExperimentConfig {
    /// A named configuration (S0.7); ignored when `mechanisms` is given. Bare metal only: a
    /// guest's DMA layer is fixed (identity addressing, the host invalidates).
    pub configuration: NamedConfig,
    /// Explicit mechanisms, overriding `configuration` (bare metal only).
    pub mechanisms: Option<Mechanisms>,
    /// Bare metal (default) or a guest.
    pub system: SystemConfig,
    /// The modeled machine.
    pub hardware: HardwareConfig,
    /// The workload: a generator or a trace.
    pub workload: WorkloadSpec,
    /// How the device behaves.
    pub device: DeviceMode,
    /// Run the dma-debug checker.
    pub dma_debug: bool,
    /// The device's DMA mask in bits.
    pub dma_bits: u8,
    /// Which clock the software part of the I/O time uses for `iops`.
    pub software_clock: SoftwareClock,
    /// Stop after this many seconds of modeled time (the paper ran 30 s, S0.8) instead of
    /// after `workload.ios` I/Os; at most [`MAX_DURATION_S`].
    pub duration_s: Option<f64>,
    /// Which Linux the mechanisms follow ([`Kernel`]; bare metal).
    #[serde(skip_serializing_if = "Kernel::is_default")]
    pub kernel: Kernel,
    /// Byte windows every domain reserves (`reserve_iova`); default: the kernel's
    /// ([`Kernel::default_reserved`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved: Option<Vec<ByteRange>>,
    /// The machine's CPUs (`[machine]`, [`MachineConfig`]; bare metal): when given, the
    /// many-core model runs beside the one-CPU model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineConfig>,
}

impl Default for ExperimentConfig {
    fn default() -> Self {
        Self {
            configuration: NamedConfig::Default,
            mechanisms: None,
            system: SystemConfig::BareMetal,
            hardware: HardwareConfig::default(),
            workload: WorkloadSpec::default(),
            device: DeviceMode::Benign,
            dma_debug: false,
            dma_bits: 32,
            software_clock: SoftwareClock::Modeled,
            duration_s: None,
            kernel: Kernel::V6_12,
            reserved: None,
            machine: None,
        }
    }
}

impl ExperimentConfig {
    /// Parses a TOML document.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        from_toml_with_path(text)
    }

    /// Parses a JSON document (the same schema; Python passes dicts this way).
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(key_path_error)
    }

    /// Parses a file's text by its name: `.json` is JSON, anything else TOML. A relative
    /// `workload.trace` is taken relative to the file's folder (as an `#include` is), so a
    /// config runs the same from any working directory.
    pub fn from_file_text(path: &std::path::Path, text: &str) -> Result<Self, ConfigError> {
        let mut c = if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            Self::from_json(text)?
        } else {
            Self::from_toml(text)?
        };
        if let WorkloadSpec::Trace(t) = &mut c.workload
            && t.trace.is_relative()
            && let Some(dir) = path.parent()
        {
            t.trace = dir.join(&t.trace);
        }
        Ok(c)
    }

    /// The configuration as TOML.
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        toml::to_string(self).map_err(|e| ConfigError::Parse(e.to_string()))
    }

    /// The mechanisms in force.
    pub fn mechanisms(&self) -> Mechanisms {
        self.mechanisms
            .unwrap_or_else(|| self.configuration.mechanisms())
    }

    /// A label for tables: the named configuration, `custom`, or for a guest
    /// `guest-<strategy>`.
    pub fn label(&self) -> String {
        let label = match (&self.system, self.mechanisms) {
            (SystemConfig::Guest(g), _) => format!("guest-{}", g.strategy.name()),
            (SystemConfig::XenPv(x), _) => format!("xen-pv-{}", x.option.name()),
            (SystemConfig::BareMetal, None) => self.configuration.name().to_string(),
            (SystemConfig::BareMetal, Some(_)) => "custom".to_string(),
        };
        // VT-d's labels stay as they were; another unit is named after an `@`.
        match self.hardware.unit {
            UnitKind::Vtd => label,
            u => format!("{label}@{}", u.name()),
        }
    }

    /// The pseudo driver's parameters, when that is the workload.
    pub fn pseudo_scsi(&self) -> Option<&PseudoScsiConfig> {
        match &self.workload {
            WorkloadSpec::Generator(WorkloadConfig::PseudoScsi(c)) => Some(c),
            _ => None,
        }
    }

    /// The generator's seed (`None` for a trace).
    pub fn seed(&self) -> Option<u64> {
        match &self.workload {
            WorkloadSpec::Generator(w) => Some(w.seed()),
            WorkloadSpec::Trace(_) => None,
        }
    }

    /// The same experiment with the generator's seed advanced by `by` (repeats with seeds
    /// `seed..seed+n`); a trace has no seed and is unchanged.
    pub fn with_seed_offset(&self, by: u64) -> ExperimentConfig {
        let mut c = self.clone();
        if let WorkloadSpec::Generator(w) = &mut c.workload {
            // Past u64::MAX the seeds go on from 0 (the release build's `+`; a debug build
            // panicked on `--seed 18446744073709551615 --repeats 2`).
            w.set_seed(w.seed().wrapping_add(by));
        }
        c
    }

    /// The workload's name: a generator's `kind`, or `trace`.
    pub fn workload_name(&self) -> &'static str {
        match &self.workload {
            WorkloadSpec::Generator(w) => w.name(),
            WorkloadSpec::Trace(_) => "trace",
        }
    }

    /// The pseudo driver's parameters to change, when that is the workload.
    pub fn pseudo_scsi_mut(&mut self) -> Option<&mut PseudoScsiConfig> {
        match &mut self.workload {
            WorkloadSpec::Generator(WorkloadConfig::PseudoScsi(c)) => Some(c),
            _ => None,
        }
    }
}

/// Parses TOML into `T`, naming the dotted path of a bad key or value (`hardware.cost`) before
/// TOML's own message (line, column, what was expected).
pub fn from_toml_with_path<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(key_path_error)
}

/// A schema error named by the path of its key (`key `workload.ios`: ...`).
pub(crate) fn key_path_error<E: std::fmt::Display>(
    e: serde_path_to_error::Error<E>,
) -> ConfigError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    if path.is_empty() || path == "." {
        ConfigError::Parse(inner.to_string())
    } else {
        ConfigError::Parse(format!("key `{path}`: {inner}"))
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::iova::domain::RESERVED_2626_Q35;

    #[test]
    fn bench_config_round_trips_through_toml() {
        let mut c = ExperimentConfig {
            configuration: NamedConfig::Modern,
            device: DeviceMode::Malicious { neighbours: 2 },
            ..ExperimentConfig::default()
        };
        c.hardware.levels = Some(5);
        let text = c.to_toml().unwrap();
        assert_eq!(ExperimentConfig::from_toml(&text).unwrap(), c);
    }

    #[test]
    fn bad_nested_value_names_its_dotted_key_and_the_allowed_values() {
        let e = ExperimentConfig::from_toml("[hardware]\ncost = \"vtd-2009\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`hardware.cost`"), "{e}");
        assert!(e.contains("vtd-2008") && e.contains("line 2"), "{e}");
    }

    /// `kernel` takes "6.12" or "2.6.26"; anything else is named with the allowed values.
    #[test]
    fn kernel_knob_parses_and_names_bad_values() {
        let c = ExperimentConfig::from_toml("kernel = \"2.6.26\"").unwrap();
        assert_eq!(c.kernel, Kernel::V2_6_26);
        let r = c.resolve().unwrap();
        assert_eq!(r.reserved, RESERVED_2626_Q35.to_vec());
        assert!(
            ExperimentConfig::default()
                .resolve()
                .unwrap()
                .reserved
                .is_empty()
        );
        let e = ExperimentConfig::from_toml("kernel = \"2.6.25\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`kernel`") && e.contains("2.6.26") && e.contains("6.12"),
            "{e}"
        );
        let text = c.to_toml().unwrap();
        assert!(text.contains("kernel = \"2.6.26\""), "{text}");
        assert!(
            !ExperimentConfig::default()
                .to_toml()
                .unwrap()
                .contains("kernel")
        );
    }

    /// 2.6.26 had no magazines and no flush queues: `modern` is refused by key.
    #[test]
    fn kernel_2626_refuses_later_mechanisms() {
        let c = ExperimentConfig {
            kernel: Kernel::V2_6_26,
            configuration: NamedConfig::Modern,
            ..ExperimentConfig::default()
        };
        let e = c.resolve().unwrap_err().to_string();
        assert!(
            e.contains("mechanisms.allocator") && e.contains("4.7"),
            "{e}"
        );
    }

    /// A reserved window with its ends swapped is named by index.
    #[test]
    fn bad_reserved_window_is_named() {
        let e = ExperimentConfig::from_toml("[[reserved]]\nstart = 0x2000\nend = 0x1000\n")
            .unwrap()
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(e.contains("reserved[0]"), "{e}");
    }

    #[test]
    fn unknown_toml_key_is_an_error() {
        let e = ExperimentConfig::from_toml("configuraton = \"strict\"").unwrap_err();
        assert!(e.to_string().contains("configuraton"), "{e}");
    }
}
