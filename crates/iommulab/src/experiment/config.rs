//! The configuration schema (TOML/JSON through serde): one schema for the CLI, configs on
//! disk and, later, Python. `resolve` validates everything up front.
//!
//! ```toml
//! # a bench configuration; every key is optional
//! configuration = "default"          # disabled | default | strict | bitmap | strict-bitmap | modern
//! seed = 1
//! software_clock = "modeled"         # modeled | measured
//! dma_debug = false
//! [hardware]
//! cost = "vtd-2008"                  # vtd-2008 | kvm-2010 | modern
//! levels = 3                         # 3 | 4 | 5 (default: the preset's)
//! invalidation = "register"          # register | queued (default: the preset's)
//! iotlb = { sets = 32, ways = 8 }
//! [hardware.cost_overrides]          # any CostModel field
//! inv_page = 2500
//! [workload]
//! ios = 100000
//! io_size = 1024
//! outstanding = 1
//! cpus = 1
//! touch = false
//! [device]
//! kind = "malicious"
//! neighbours = 1
//! ```

use serde::{Deserialize, Serialize};

use crate::device::DeviceMode;
use crate::dma::Translation;
use crate::flush::{DeferredConfig, FlushConfig, FlushQueueConfig};
use crate::hw::cost::{CostModel, CostPreset};
use crate::hw::invalidate::InvalidationInterface;
use crate::hw::iotlb::IotlbConfig;
use crate::hw::vtd::VtdConfig;
use crate::iova::{AllocatorKind, MagazineConfig};
use crate::workload::{ParamError, PseudoScsiConfig};

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

/// S0.7's five configurations, plus Linux's current default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamedConfig {
    /// `intel_iommu=off`: DMA addresses are physical (S0.7).
    Disabled,
    /// Red-black tree + deferred flush, 250 entries / 10 ms (2.6.26's default, S0.7).
    Default,
    /// Red-black tree + invalidation at every unmap (S0.7).
    Strict,
    /// Bitmap + flush once per lap of the IOVA space (S0.7).
    Bitmap,
    /// Bitmap + invalidation at every unmap (S0.7).
    StrictBitmap,
    /// Per-CPU magazines over the red-black tree + per-CPU flush queues (Linux ≥ 4.14/5.17).
    Modern,
}

impl NamedConfig {
    /// All of them, in the order the paper's Figure 4 (then modern) lists them.
    pub const ALL: [NamedConfig; 6] = [
        NamedConfig::Disabled,
        NamedConfig::Default,
        NamedConfig::Strict,
        NamedConfig::Bitmap,
        NamedConfig::StrictBitmap,
        NamedConfig::Modern,
    ];

    /// Its name in configs and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            NamedConfig::Disabled => "disabled",
            NamedConfig::Default => "default",
            NamedConfig::Strict => "strict",
            NamedConfig::Bitmap => "bitmap",
            NamedConfig::StrictBitmap => "strict-bitmap",
            NamedConfig::Modern => "modern",
        }
    }

    /// Parses a name, or says which names exist.
    pub fn parse(name: &str) -> Result<Self, ConfigError> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| ConfigError::Invalid {
                key: "configuration".into(),
                value: name.into(),
                expected: format!("one of {}", Self::ALL.map(NamedConfig::name).join(", ")),
            })
    }

    /// The mechanisms this configuration stands for.
    pub fn mechanisms(self) -> Mechanisms {
        let (translation, allocator, flush) = match self {
            NamedConfig::Disabled => (
                Translation::Passthrough,
                AllocatorKind::Rbtree,
                FlushConfig::Strict,
            ),
            NamedConfig::Default => (
                Translation::Iommu,
                AllocatorKind::Rbtree,
                FlushConfig::Deferred(DeferredConfig::default()),
            ),
            NamedConfig::Strict => (
                Translation::Iommu,
                AllocatorKind::Rbtree,
                FlushConfig::Strict,
            ),
            NamedConfig::Bitmap => (
                Translation::Iommu,
                AllocatorKind::Bitmap,
                FlushConfig::PerLap,
            ),
            NamedConfig::StrictBitmap => (
                Translation::Iommu,
                AllocatorKind::Bitmap,
                FlushConfig::Strict,
            ),
            NamedConfig::Modern => (
                Translation::Iommu,
                AllocatorKind::Magazine,
                FlushConfig::FlushQueue(FlushQueueConfig::default()),
            ),
        };
        Mechanisms {
            translation,
            allocator,
            flush,
            magazine: MagazineConfig::default(),
        }
    }
}

/// The software mechanisms of a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mechanisms {
    /// IOMMU or passthrough.
    pub translation: Translation,
    /// The IOVA allocator (for `magazine`, the backing allocator is the red-black tree).
    pub allocator: AllocatorKind,
    /// The flush policy and its parameters.
    pub flush: FlushConfig,
    /// Magazine parameters (used when `allocator = "magazine"`).
    #[serde(default)]
    pub magazine: MagazineConfig,
}

impl Mechanisms {
    /// Rejects combinations that would break the flush invariant.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if matches!(self.flush, FlushConfig::PerLap) && self.allocator != AllocatorKind::Bitmap {
            return Err(ConfigError::Invalid {
                key: "flush.kind".into(),
                value: "per_lap".into(),
                expected: format!(
                    "a flush policy other than per_lap with allocator `{}`: per-lap flushing is only safe over the bitmap, \
                     which never reuses a range freed in the current lap",
                    self.allocator.name()
                ),
            });
        }
        Ok(())
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

/// The modeled machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HardwareConfig {
    /// The cost preset.
    pub cost: CostPreset,
    /// Page-table levels (3, 4, 5); default: 3 for `vtd-2008`/`kvm-2010` (39-bit AGAW of early
    /// VT-d), 4 for `modern`.
    pub levels: Option<u8>,
    /// IOTLB geometry; default 32 sets × 8 ways.
    pub iotlb: Option<IotlbConfig>,
    /// Invalidation interface; default: `register` for the 2008/2010 presets (no queued
    /// invalidation on those chipsets, S1.10), `queued` for `modern`.
    pub invalidation: Option<InvalidationInterface>,
    /// Whether the hardware needs write-buffer flushes (`CAP.RWBF`); default: true for the
    /// 2008/2010 presets, false for `modern`.
    pub write_buffer_flush: Option<bool>,
    /// Per-field overrides of the preset's [`CostModel`].
    pub cost_overrides: toml::Table,
}

impl Default for HardwareConfig {
    fn default() -> Self {
        Self {
            cost: CostPreset::Vtd2008,
            levels: None,
            iotlb: None,
            invalidation: None,
            write_buffer_flush: None,
            cost_overrides: toml::Table::new(),
        }
    }
}

impl HardwareConfig {
    /// The cost model: the preset with the overrides applied.
    pub fn cost_model(&self) -> Result<CostModel, ConfigError> {
        let base = self.cost.model();
        if self.cost_overrides.is_empty() {
            return Ok(base);
        }
        let mut table =
            toml::Table::try_from(base).map_err(|e| ConfigError::Parse(e.to_string()))?;
        for (k, v) in &self.cost_overrides {
            if !table.contains_key(k) {
                return Err(ConfigError::Invalid {
                    key: format!("hardware.cost_overrides.{k}"),
                    value: v.to_string(),
                    expected: format!(
                        "a cost model field: one of {}",
                        table.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                });
            }
            table.insert(k.clone(), v.clone());
        }
        table
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid {
                key: "hardware.cost_overrides".into(),
                value: format!("{:?}", self.cost_overrides),
                expected: format!("non-negative integers (ghz: a number): {}", e.message()),
            })
    }

    /// The IOMMU configuration this hardware stands for.
    pub fn resolve(&self) -> Result<VtdConfig, ConfigError> {
        let old = self.cost != CostPreset::Modern;
        let levels = self.levels.unwrap_or(if old { 3 } else { 4 });
        if !(3..=5).contains(&levels) {
            return Err(ConfigError::Invalid {
                key: "hardware.levels".into(),
                value: levels.to_string(),
                expected: "3, 4 or 5 (39-, 48- or 57-bit address width)".into(),
            });
        }
        let iotlb = self.iotlb.unwrap_or_default();
        if iotlb.sets == 0 || !iotlb.sets.is_power_of_two() || iotlb.ways == 0 {
            return Err(ConfigError::Invalid {
                key: "hardware.iotlb".into(),
                value: format!("{} sets × {} ways", iotlb.sets, iotlb.ways),
                expected: "a power-of-two number of sets and at least one way".into(),
            });
        }
        Ok(VtdConfig {
            levels,
            iotlb,
            invalidation: self.invalidation.unwrap_or(if old {
                InvalidationInterface::Register
            } else {
                InvalidationInterface::Queued
            }),
            write_buffer_flush: self.write_buffer_flush.unwrap_or(old),
            cost: self.cost_model()?,
            ..VtdConfig::default()
        })
    }
}

/// Everything one run of the pseudo-driver benchmark needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BenchConfig {
    /// A named configuration (S0.7); ignored when `mechanisms` is given.
    pub configuration: NamedConfig,
    /// Explicit mechanisms, overriding `configuration`.
    pub mechanisms: Option<Mechanisms>,
    /// The modeled machine.
    pub hardware: HardwareConfig,
    /// The workload.
    pub workload: PseudoScsiConfig,
    /// How the device behaves.
    pub device: DeviceMode,
    /// Run the dma-debug checker.
    pub dma_debug: bool,
    /// The device's DMA mask in bits.
    pub dma_bits: u8,
    /// Which clock the software part of the I/O time uses for `iops`.
    pub software_clock: SoftwareClock,
    /// Stop after this many seconds of modeled time (the paper ran 30 s, S0.8) instead of
    /// after `workload.ios` I/Os.
    pub duration_s: Option<f64>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            configuration: NamedConfig::Default,
            mechanisms: None,
            hardware: HardwareConfig::default(),
            workload: PseudoScsiConfig::default(),
            device: DeviceMode::Benign,
            dma_debug: false,
            dma_bits: 32,
            software_clock: SoftwareClock::Modeled,
            duration_s: None,
        }
    }
}

impl BenchConfig {
    /// Parses a TOML document.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        from_toml_with_path(text)
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

    /// A label for tables: the named configuration, or `custom`.
    pub fn label(&self) -> String {
        match self.mechanisms {
            None => self.configuration.name().to_string(),
            Some(_) => "custom".to_string(),
        }
    }

    /// Validates everything that can be checked before running.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.resolve().map(drop)
    }

    /// Validates the configuration and resolves what a run needs from it, once (parse,
    /// don't validate twice): the mechanisms in force and the remapping unit's configuration.
    pub fn resolve(&self) -> Result<Resolved, ConfigError> {
        let mechanisms = self.mechanisms();
        mechanisms.validate()?;
        let unit = self.hardware.resolve()?;
        if !(13..=64).contains(&self.dma_bits) {
            return Err(ConfigError::Invalid {
                key: "dma_bits".into(),
                value: self.dma_bits.to_string(),
                expected: "13..=64".into(),
            });
        }
        if let Some(d) = self.duration_s
            && !(d.is_finite() && d > 0.0)
        {
            return Err(ConfigError::Invalid {
                key: "duration_s".into(),
                value: d.to_string(),
                expected: "a positive number of seconds".into(),
            });
        }
        if self.workload.io_size == 0 {
            return Err(ConfigError::Invalid {
                key: "workload.io_size".into(),
                value: "0".into(),
                expected: "at least 1 byte".into(),
            });
        }
        Ok(Resolved { mechanisms, unit })
    }
}

/// A [`BenchConfig`] checked and resolved for a run ([`BenchConfig::resolve`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Resolved {
    /// The mechanisms in force.
    pub mechanisms: Mechanisms,
    /// The VT-d unit's configuration (levels, IOTLB, invalidation, costs).
    pub unit: VtdConfig,
}

/// Parses TOML into `T`, naming the dotted path of a bad key or value (`hardware.cost`) before
/// TOML's own message (line, column, what was expected).
pub fn from_toml_with_path<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            ConfigError::Parse(inner.to_string())
        } else {
            ConfigError::Parse(format!("key `{path}`: {inner}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_configuration_names_the_allowed_ones() {
        let e = NamedConfig::parse("fast").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("`configuration`"), "{msg}");
        assert!(msg.contains("strict-bitmap"), "{msg}");
    }

    #[test]
    fn per_lap_over_rbtree_is_refused() {
        let m = Mechanisms {
            flush: FlushConfig::PerLap,
            ..NamedConfig::Strict.mechanisms()
        };
        assert!(
            matches!(m.validate(), Err(ConfigError::Invalid { key, .. }) if key == "flush.kind")
        );
    }

    #[test]
    fn cost_override_of_unknown_field_names_it() {
        let mut hw = HardwareConfig::default();
        hw.cost_overrides
            .insert("inv_pgae".into(), toml::Value::Integer(1));
        let msg = hw.cost_model().unwrap_err().to_string();
        assert!(msg.contains("hardware.cost_overrides.inv_pgae"), "{msg}");
        assert!(msg.contains("inv_page"), "{msg}");
    }

    #[test]
    fn cost_override_changes_one_field() {
        let mut hw = HardwareConfig::default();
        hw.cost_overrides
            .insert("inv_page".into(), toml::Value::Integer(2500));
        let m = hw.cost_model().unwrap();
        assert_eq!(m.inv_page, 2500);
        assert_eq!(m.pte_set, CostModel::VTD_2008.pte_set);
    }

    /// The clock rate is `ghz` in TOML, a float; one that is not positive is refused.
    #[test]
    fn cost_override_of_the_clock_rate() {
        let mut hw = HardwareConfig::default();
        hw.cost_overrides
            .insert("ghz".into(), toml::Value::Float(2.0));
        assert_eq!(hw.cost_model().unwrap().clock.as_ghz(), 2.0);
        hw.cost_overrides
            .insert("ghz".into(), toml::Value::Float(0.0));
        let msg = hw.cost_model().unwrap_err().to_string();
        assert!(msg.contains("hardware.cost_overrides"), "{msg}");
        assert!(msg.contains("positive, finite"), "{msg}");
    }

    #[test]
    fn bench_config_round_trips_through_toml() {
        let mut c = BenchConfig {
            configuration: NamedConfig::Modern,
            device: DeviceMode::Malicious { neighbours: 2 },
            ..BenchConfig::default()
        };
        c.hardware.levels = Some(5);
        let text = c.to_toml().unwrap();
        assert_eq!(BenchConfig::from_toml(&text).unwrap(), c);
    }

    #[test]
    fn bad_nested_value_names_its_dotted_key_and_the_allowed_values() {
        let e = BenchConfig::from_toml("[hardware]\ncost = \"vtd-2009\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`hardware.cost`"), "{e}");
        assert!(e.contains("vtd-2008") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn unknown_toml_key_is_an_error() {
        let e = BenchConfig::from_toml("configuraton = \"strict\"").unwrap_err();
        assert!(e.to_string().contains("configuraton"), "{e}");
    }
}
