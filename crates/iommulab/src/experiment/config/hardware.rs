//! The modeled machine (`[hardware]`): the cost preset and its overrides, the VT-d unit's
//! geometry, and which remapping unit runs (VT-d or a TCE unit).

use serde::{Deserialize, Serialize};

use crate::hw::cost::{CostModel, CostPreset};
use crate::hw::cpu_cache::CpuCacheConfig;
use crate::hw::invalidate::InvalidationInterface;
use crate::hw::iotlb::IotlbConfig;
use crate::hw::vtd::VtdConfig;

use super::ConfigError;
use super::limits::{GHZ_RANGE, MAX_IOTLB_ENTRIES, MAX_PRICE_CYCLES};

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
    /// Which remapping unit (default VT-d). Left out of serialised configs when VT-d, so
    /// existing outputs stay as they were.
    #[serde(skip_serializing_if = "UnitKind::is_vtd")]
    pub unit: UnitKind,
    /// Price the allocator's metadata accesses by the level of a modeled L1D/L2 that serves
    /// them (`[hardware.cpu_cache]`, Core 2 E6850 geometry by default) instead of the flat
    /// `tree_visit`/`bitmap_word` prices. Off when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_cache: Option<CpuCacheConfig>,
}

/// The remapping unit an experiment runs on: every experiment runs on any of them
/// (`[hardware] unit = "vtd" | "calgary" | "dart"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnitKind {
    /// Intel VT-d: multi-level tables (S3.2).
    #[default]
    Vtd,
    /// IBM Calgary: a flat TCE table, 8-byte entries, whole-cache flush only (S2.1, S2.2).
    Calgary,
    /// PowerPC 970 DART: a flat TCE table, 4-byte entries, 36-bit reach (S2.1, S2.3).
    Dart,
}

impl UnitKind {
    /// Every unit, for help texts and sweeps.
    pub const ALL: [UnitKind; 3] = [UnitKind::Vtd, UnitKind::Calgary, UnitKind::Dart];

    /// The name used in configs (`RemapUnit::KIND`).
    pub const fn name(self) -> &'static str {
        match self {
            UnitKind::Vtd => "vtd",
            UnitKind::Calgary => "calgary",
            UnitKind::Dart => "dart",
        }
    }

    /// Whether this is the default unit (VT-d).
    pub fn is_vtd(&self) -> bool {
        *self == UnitKind::Vtd
    }
}

impl Default for HardwareConfig {
    /// `modern`, for every entry point (flags, files, Python): a user's trace comes from a
    /// current machine; a reproduction names its paper's preset itself.
    fn default() -> Self {
        Self {
            cost: CostPreset::Modern,
            levels: None,
            iotlb: None,
            invalidation: None,
            write_buffer_flush: None,
            cost_overrides: toml::Table::new(),
            unit: UnitKind::Vtd,
            cpu_cache: None,
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
            let bounded = if k == "ghz" {
                v.as_float()
                    .or_else(|| v.as_integer().map(|i| i as f64))
                    .is_none_or(|g| GHZ_RANGE.contains(&g))
            } else {
                v.as_integer().is_none_or(|c| c <= MAX_PRICE_CYCLES as i64)
            };
            if !bounded {
                return Err(ConfigError::Invalid {
                    key: format!("hardware.cost_overrides.{k}"),
                    value: v.to_string(),
                    expected: if k == "ghz" {
                        format!("{}..={} GHz", GHZ_RANGE.start(), GHZ_RANGE.end())
                    } else {
                        format!("0..={MAX_PRICE_CYCLES} cycles")
                    },
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
        if let Some(c) = self.cpu_cache {
            crate::hw::CpuCache::new(c).map_err(|e| ConfigError::Invalid {
                key: "hardware.cpu_cache".into(),
                value: format!("{c:?}"),
                expected: e.to_string(),
            })?;
        }
        let iotlb = self.iotlb.unwrap_or_default();
        let entries = iotlb.sets.checked_mul(iotlb.ways);
        if iotlb.sets == 0
            || !iotlb.sets.is_power_of_two()
            || iotlb.ways == 0
            || entries.is_none_or(|n| n > MAX_IOTLB_ENTRIES)
        {
            return Err(ConfigError::Invalid {
                key: "hardware.iotlb".into(),
                value: format!("{} sets × {} ways", iotlb.sets, iotlb.ways),
                expected: format!(
                    "a power-of-two number of sets and at least one way, at most \
                     {MAX_IOTLB_ENTRIES} entries in all"
                ),
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

    /// A TCE unit's configuration for a device with a `dma_bits` mask: one table covering
    /// the device's whole DMA space (`2^(dma_bits - 12)` entries, what the IOVA allocators
    /// hand out), the same IOTLB geometry and costs as `vtd` would have (`vtd` is
    /// [`HardwareConfig::resolve`]'s result). `levels`, `invalidation` and
    /// `write_buffer_flush` are VT-d's and do not apply (a TCE unit invalidates through a
    /// register and needs no write-buffer flush).
    pub fn tce(vtd: &VtdConfig, dma_bits: u8) -> crate::hw::TceConfig {
        let end = crate::experiment::build::iova_space_end(dma_bits).get();
        crate::hw::TceConfig {
            table_entries: end,
            iotlb: vtd.iotlb,
            cost: vtd.cost,
            ..crate::hw::TceConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(m.pte_set, CostModel::MODERN.pte_set);
    }

    /// The clock rate is `ghz` in TOML, a float; one outside 0.1–100 GHz (0, NaN) is refused.
    #[test]
    fn cost_override_of_the_clock_rate() {
        let mut hw = HardwareConfig::default();
        hw.cost_overrides
            .insert("ghz".into(), toml::Value::Float(2.0));
        assert_eq!(hw.cost_model().unwrap().clock.as_ghz(), 2.0);
        for bad in [0.0, f64::NAN, 100.5] {
            hw.cost_overrides
                .insert("ghz".into(), toml::Value::Float(bad));
            let msg = hw.cost_model().unwrap_err().to_string();
            assert!(msg.contains("hardware.cost_overrides.ghz"), "{msg}");
            assert!(msg.contains("0.1..=100 GHz"), "{msg}");
        }
    }
}
