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

use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::device::DeviceMode;
use crate::dma::Translation;
use crate::flush::{DeferredConfig, FlushConfig, FlushQueueConfig};
use crate::hw::cost::{CostModel, CostPreset};
use crate::hw::cpu_cache::CpuCacheConfig;
use crate::hw::invalidate::InvalidationInterface;
use crate::hw::iotlb::IotlbConfig;
use crate::hw::vtd::VtdConfig;
use crate::iova::domain::{ByteRange, RESERVED_2626_Q35};
use crate::iova::{AllocatorKind, MagazineConfig, MagazineConfigError};
use crate::trace::TraceFormat;
use crate::virt::{
    Batching, CacheOnly, EvictionConfig, GuestConfig, InvalidationScope, QuotaPolicy, Strategy,
};
use crate::workload::{ParamError, PseudoScsiConfig, WorkloadConfig};

use super::pv_dma::{PvDmaKind, PvDmaSpec};

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

/// A named configuration: Linux's modes by the names a kernel gives them, the historical
/// ones by the kernel they come from, and S0.7's names (Fujita & Mori's, which the
/// reproduction and `bench` print) kept as aliases of those.
///
/// | name | what a kernel does | alias of the same mechanisms |
/// |---|---|---|
/// | `linux-lazy` (also `lazy`) | 6.x default, `iommu.strict=0`: magazines + flush queue | `modern` |
/// | `linux-strict` | 6.x `iommu.strict=1`: magazines + invalidation at every unmap | — |
/// | `passthrough` | `iommu.passthrough=1`: identity, no translation | `disabled` |
/// | `2.6.26-deferred` | 2.6.26's default: rbtree + deferred flush | `default` |
/// | `pre-4.7-strict` | rbtree + strict, no per-CPU caches (before 4.7) | `strict` |
/// | `2.6.26-bitmap` | S0.7's bitmap + per-lap flush | `bitmap` |
/// | `2.6.26-strict-bitmap` | S0.7's bitmap + strict | `strict-bitmap` |
///
/// An alias and its name run the same mechanisms; each is labelled as it was named, so
/// results of the old names read as they always did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
    /// Linux 6.x `iommu.strict=0` (its default): per-CPU magazines + flush queue.
    LinuxLazy,
    /// Linux 6.x `iommu.strict=1`: per-CPU magazines + invalidation at every unmap.
    LinuxStrict,
    /// `iommu.passthrough=1`: the identity domain, DMA addresses are physical.
    Passthrough,
    /// 2.6.26's default: red-black tree + deferred flush (250 entries / 10 ms).
    Deferred2626,
    /// Red-black tree + invalidation at every unmap, no per-CPU IOVA caches (Linux < 4.7).
    StrictPre47,
    /// S0.7's bitmap allocator + per-lap flush, on 2.6.26.
    Bitmap2626,
    /// S0.7's bitmap allocator + invalidation at every unmap, on 2.6.26.
    StrictBitmap2626,
}

impl NamedConfig {
    /// S0.7's six, in the order the paper's Figure 4 (then modern) lists them: what `bench`
    /// runs by default and what the reproduction prints.
    pub const ALL: [NamedConfig; 6] = [
        NamedConfig::Disabled,
        NamedConfig::Default,
        NamedConfig::Strict,
        NamedConfig::Bitmap,
        NamedConfig::StrictBitmap,
        NamedConfig::Modern,
    ];

    /// Linux's modes and the historical ones by their kernel names.
    pub const LINUX: [NamedConfig; 7] = [
        NamedConfig::LinuxStrict,
        NamedConfig::LinuxLazy,
        NamedConfig::Passthrough,
        NamedConfig::Deferred2626,
        NamedConfig::StrictPre47,
        NamedConfig::Bitmap2626,
        NamedConfig::StrictBitmap2626,
    ];

    /// Every name, the kernel names first.
    pub const EVERY: [NamedConfig; 13] = [
        NamedConfig::LinuxStrict,
        NamedConfig::LinuxLazy,
        NamedConfig::Passthrough,
        NamedConfig::Deferred2626,
        NamedConfig::StrictPre47,
        NamedConfig::Bitmap2626,
        NamedConfig::StrictBitmap2626,
        NamedConfig::Disabled,
        NamedConfig::Default,
        NamedConfig::Strict,
        NamedConfig::Bitmap,
        NamedConfig::StrictBitmap,
        NamedConfig::Modern,
    ];

    /// Its name in configs, on the command line and in tables.
    pub const fn name(self) -> &'static str {
        match self {
            NamedConfig::Disabled => "disabled",
            NamedConfig::Default => "default",
            NamedConfig::Strict => "strict",
            NamedConfig::Bitmap => "bitmap",
            NamedConfig::StrictBitmap => "strict-bitmap",
            NamedConfig::Modern => "modern",
            NamedConfig::LinuxLazy => "linux-lazy",
            NamedConfig::LinuxStrict => "linux-strict",
            NamedConfig::Passthrough => "passthrough",
            NamedConfig::Deferred2626 => "2.6.26-deferred",
            NamedConfig::StrictPre47 => "pre-4.7-strict",
            NamedConfig::Bitmap2626 => "2.6.26-bitmap",
            NamedConfig::StrictBitmap2626 => "2.6.26-strict-bitmap",
        }
    }

    /// The kernel name of an S0.7 alias (`default` → `2.6.26-deferred`); itself otherwise.
    pub const fn canonical(self) -> NamedConfig {
        match self {
            NamedConfig::Disabled => NamedConfig::Passthrough,
            NamedConfig::Default => NamedConfig::Deferred2626,
            NamedConfig::Strict => NamedConfig::StrictPre47,
            NamedConfig::Bitmap => NamedConfig::Bitmap2626,
            NamedConfig::StrictBitmap => NamedConfig::StrictBitmap2626,
            NamedConfig::Modern => NamedConfig::LinuxLazy,
            c => c,
        }
    }

    /// Whether DMA addresses are physical (no translation): `disabled`, `passthrough`.
    pub const fn is_untranslated(self) -> bool {
        matches!(self, NamedConfig::Disabled | NamedConfig::Passthrough)
    }

    /// Parses a name or an alias (`lazy`, Linux's word for `iommu.strict=0`), or says which
    /// names exist.
    pub fn parse(name: &str) -> Result<Self, ConfigError> {
        if name == "lazy" {
            return Ok(NamedConfig::LinuxLazy);
        }
        Self::EVERY
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| ConfigError::Invalid {
                key: "configuration".into(),
                value: name.into(),
                expected: format!(
                    "one of {}, lazy (aliases: {})",
                    Self::LINUX.map(NamedConfig::name).join(", "),
                    Self::ALL.map(NamedConfig::name).join(", ")
                ),
            })
    }

    /// The mechanisms this configuration stands for.
    pub fn mechanisms(self) -> Mechanisms {
        let (translation, allocator, flush) = match self.canonical() {
            NamedConfig::Passthrough => (
                Translation::Passthrough,
                AllocatorKind::Rbtree,
                FlushConfig::Strict,
            ),
            NamedConfig::Deferred2626 => (
                Translation::Iommu,
                AllocatorKind::Rbtree,
                FlushConfig::Deferred(DeferredConfig::default()),
            ),
            NamedConfig::StrictPre47 => (
                Translation::Iommu,
                AllocatorKind::Rbtree,
                FlushConfig::Strict,
            ),
            NamedConfig::Bitmap2626 => (
                Translation::Iommu,
                AllocatorKind::Bitmap,
                FlushConfig::PerLap,
            ),
            NamedConfig::StrictBitmap2626 => (
                Translation::Iommu,
                AllocatorKind::Bitmap,
                FlushConfig::Strict,
            ),
            NamedConfig::LinuxStrict => (
                Translation::Iommu,
                AllocatorKind::Magazine,
                FlushConfig::Strict,
            ),
            _ => (
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

impl Serialize for NamedConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for NamedConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        NamedConfig::parse(&name).map_err(|e| match e {
            ConfigError::Invalid { expected, .. } => serde::de::Error::custom(format!(
                "unknown configuration {name:?}: expected {expected}"
            )),
            e => serde::de::Error::custom(e.to_string()),
        })
    }
}

/// Which Linux the OS-side mechanisms follow (`kernel = "6.12" | "2.6.26"`).
///
/// `6.12` (the default) is today's `iova.c` walk ([`crate::iova::RbTree`]) and flush policies,
/// with no reserved windows unless `reserved` names some. `2.6.26` is the kernel Fujita & Mori
/// measured (S0.8): `rbtree` is 2.6.26's `alloc_iova`/`find_iova`/`__free_iova`
/// ([`crate::iova::RbTree2626`]), `deferred` is its `add_unmap`/`flush_unmaps` (250 entries,
/// 10 ms; the same [`crate::flush::Deferred`]), and every domain holds what
/// `dmar_init_reserved_ranges` reserved (the IOAPIC window and every device's memory BARs,
/// q35's by default: [`crate::iova::domain::RESERVED_2626_Q35`]). 2.6.26 had no per-CPU
/// IOVA caches and no flush queues: `magazine`, `gap-tree` and `flush_queue` are refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Kernel {
    /// Linux 6.12.
    #[default]
    #[serde(rename = "6.12")]
    V6_12,
    /// Linux 2.6.26 (-rc6, the paper's).
    #[serde(rename = "2.6.26")]
    V2_6_26,
}

impl Kernel {
    /// Its name in configs.
    pub const fn name(self) -> &'static str {
        match self {
            Kernel::V6_12 => "6.12",
            Kernel::V2_6_26 => "2.6.26",
        }
    }

    /// Whether this is the default (left out of serialised configs).
    pub fn is_default(&self) -> bool {
        *self == Kernel::V6_12
    }

    /// The windows every domain reserves when `reserved` is not given.
    pub fn default_reserved(self) -> Vec<ByteRange> {
        match self {
            Kernel::V6_12 => Vec::new(),
            Kernel::V2_6_26 => RESERVED_2626_Q35.to_vec(),
        }
    }
}

/// The software mechanisms of a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mechanisms {
    /// IOMMU or passthrough (default: IOMMU).
    #[serde(default = "iommu_translation")]
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
    /// Rejects parameters no run can hold (or that mean nothing) and combinations that would
    /// break the flush invariant.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, value: u64, expected: &str| ConfigError::Invalid {
            key: format!("mechanisms.flush.{key}"),
            value: value.to_string(),
            expected: expected.into(),
        };
        // An array or ring of `entries`, pre-sized, and a timer of `timeout_ms`.
        let sized = |entries: usize, max: usize, timeout_ms: u64, linux: &str| {
            if !(1..=max).contains(&entries) {
                return Err(bad(
                    "entries",
                    entries as u64,
                    &format!("1..={max} ({linux})"),
                ));
            }
            if !(1..=MAX_FLUSH_TIMEOUT_MS).contains(&timeout_ms) {
                let expected = format!("1..={MAX_FLUSH_TIMEOUT_MS} (Linux: 10)");
                return Err(bad("timeout_ms", timeout_ms, &expected));
            }
            Ok(())
        };
        match self.flush {
            // S0.8: the paper's thought experiment, an array as large as a bitmap lap (2^20
            // entries), is the most anyone asks of it.
            FlushConfig::Deferred(d) => {
                sized(d.entries, MAX_DEFERRED_ENTRIES, d.timeout_ms, "2.6.26: 250")?;
            }
            // Linux's largest queue is the single one of IOVA_SINGLE_FQ_SIZE (32768 entries).
            FlushConfig::FlushQueue(q) => {
                sized(
                    q.entries,
                    MAX_FQ_ENTRIES,
                    q.timeout_ms,
                    "Linux: 256 per CPU",
                )?;
                if q.hz > 10_000 {
                    return Err(bad(
                        "hz",
                        u64::from(q.hz),
                        "0..=10000 (Linux: 100, 250, 300 or 1000; 0: exactly timeout_ms)",
                    ));
                }
            }
            FlushConfig::Strict | FlushConfig::PerLap => {}
        }
        // The run's own CPUs replace it (a generator's `cpus`, a trace's `#P:N`); it counts
        // only for a trace that records none, but a value no run could use is still refused.
        if !(1..=65_536).contains(&self.magazine.cpus) {
            return Err(ConfigError::Invalid {
                key: "mechanisms.magazine.cpus".into(),
                value: self.magazine.cpus.to_string(),
                expected: "1..=65536 (used for a trace that does not record its CPUs; a \
                           generator runs on its own `cpus`)"
                    .into(),
            });
        }
        // The other knobs too, whichever allocator runs: a value no run could use is refused
        // before any run, not at the start of one with the magazine allocator.
        match self.magazine.validate() {
            Err(MagazineConfigError::MagSize(n)) => {
                return Err(ConfigError::Invalid {
                    key: "mechanisms.magazine.mag_size".into(),
                    value: n.to_string(),
                    expected: "1..=65536 (Linux: 127)".into(),
                });
            }
            Err(MagazineConfigError::MaxCached(n)) => {
                return Err(ConfigError::Invalid {
                    key: "mechanisms.magazine.max_cached_pages_log2".into(),
                    value: n.to_string(),
                    expected: "0..=20 (Linux: 5)".into(),
                });
            }
            Err(MagazineConfigError::Cpus(_)) | Ok(()) => {}
        }
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

fn iommu_translation() -> Translation {
    Translation::Iommu
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
        let end = super::build::iova_space_end(dma_bits).get();
        crate::hw::TceConfig {
            table_entries: end,
            iotlb: vtd.iotlb,
            cost: vtd.cost,
            ..crate::hw::TceConfig::default()
        }
    }
}

/// The longest `duration_s`: an hour of modeled time, 120 times S0.8's 30 s run. A run that
/// long takes minutes of wall time already; past it a slip such as `1e300` would run for
/// ever (the clock saturates before the run's end), so it is refused.
pub const MAX_DURATION_S: f64 = 3600.0;

/// The largest deferred-flush array (`mechanisms.flush.entries` of `deferred`): 2^20, S0.8's
/// "as rarely as the bitmap" array.
pub const MAX_DEFERRED_ENTRIES: usize = 1 << 20;

/// The largest flush queue per CPU: Linux's `IOVA_SINGLE_FQ_SIZE`.
pub const MAX_FQ_ENTRIES: usize = 32_768;

/// The longest flush timer: a minute (Linux: 10 ms).
pub const MAX_FLUSH_TIMEOUT_MS: u64 = 60_000;

/// The most IOTLB entries (`sets × ways`): 2^20, thousands of times any published IOTLB;
/// the model keeps every entry in memory.
pub const MAX_IOTLB_ENTRIES: usize = 1 << 20;

/// The largest TCE table: 8 Mi entries, Calgary's largest (`TCE_TABLE_SIZE_8M` in Linux's
/// `pci-calgary_64.c`), so a TCE unit covers `dma_bits` up to 35.
pub const MAX_TCE_ENTRIES: u64 = 1 << 23;

/// The largest guest: 1 TiB. The host keeps 5 bytes per guest page (pin count and
/// permissions), 1.3 GB at this size.
pub const MAX_GUEST_MIB: u64 = 1 << 20;

/// The most requests per Xen multicall (`system.batch`).
pub const MAX_XEN_BATCH: u32 = 65_536;

/// The highest price a `hardware.cost_overrides` field may name: 10^8 cycles, a thirtieth of
/// a second at 3 GHz, about 10^4 times the dearest measured price (a hypercall). The model
/// multiplies prices by counts without overflow checks on its hot paths; this keeps
/// `price × count` in 64 bits for runs of up to 10^11 operations.
pub const MAX_PRICE_CYCLES: u64 = 100_000_000;

/// The clock rates a `hardware.cost_overrides.ghz` may name: 0.1–100 GHz.
pub const GHZ_RANGE: std::ops::RangeInclusive<f64> = 0.1..=100.0;

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
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path.is_empty() || path == "." {
                ConfigError::Parse(inner.to_string())
            } else {
                ConfigError::Parse(format!("key `{path}`: {inner}"))
            }
        })
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
        let reserved = self.resolve_kernel(&mechanisms)?;
        if !(13..=64).contains(&self.dma_bits) {
            return Err(ConfigError::Invalid {
                key: "dma_bits".into(),
                value: self.dma_bits.to_string(),
                expected: "13..=64".into(),
            });
        }
        if !self.hardware.unit.is_vtd()
            && super::build::iova_space_end(self.dma_bits).get() > MAX_TCE_ENTRIES
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
            SystemConfig::Guest(g)
                if !self.hardware.unit.is_vtd()
                    && g.guest_mib.saturating_mul(256) > MAX_TCE_ENTRIES =>
            {
                // The host maps guest page n at I/O page n: the flat table covers the guest.
                return Err(ConfigError::Invalid {
                    key: "system.guest_mib".into(),
                    value: g.guest_mib.to_string(),
                    expected: format!(
                        "at most {} MiB with unit = \"{}\": the host maps each guest page at \
                         its own I/O page, and a TCE table has at most {MAX_TCE_ENTRIES} entries",
                        MAX_TCE_ENTRIES / 256,
                        self.hardware.unit.name()
                    ),
                });
            }
            SystemConfig::Guest(g) => {
                ResolvedSystem::Guest(Box::new(self.resolve_guest(g, &unit)?))
            }
            SystemConfig::XenPv(x) => {
                self.refuse_fixed_stack(
                    "xen-pv",
                    "no mechanisms: the domain's DMA layer is the bitmap allocator with the \
                     roll-around flush (S2.4)",
                    "the domain's device retries every buffer it lost",
                )?;
                if !(1..=MAX_XEN_BATCH).contains(&x.batch) {
                    return Err(ConfigError::Invalid {
                        key: "system.batch".into(),
                        value: x.batch.to_string(),
                        expected: format!("1..={MAX_XEN_BATCH} requests per multicall"),
                    });
                }
                if x.domain_mib == 0 || x.domain_mib > 1 << 24 {
                    return Err(ConfigError::Invalid {
                        key: "system.domain_mib".into(),
                        value: x.domain_mib.to_string(),
                        expected: "1..=16777216 (16 TiB)".into(),
                    });
                }
                ResolvedSystem::XenPv(PvDmaSpec {
                    option: x.option,
                    unit: self.hardware.unit,
                    batch: x.batch,
                    page_flip: x.page_flip,
                    domain_pages: x.domain_mib * 256,
                })
            }
        };
        Ok(Resolved {
            mechanisms,
            unit,
            system,
            kernel: self.kernel,
            reserved,
        })
    }

    /// Checks the mechanisms against the kernel and returns the windows to reserve.
    fn resolve_kernel(&self, m: &Mechanisms) -> Result<Vec<ByteRange>, ConfigError> {
        if self.kernel == Kernel::V2_6_26 {
            let refuse = |key: &str, value: &str, why: &str| ConfigError::Invalid {
                key: key.into(),
                value: value.into(),
                expected: format!("{why} with `kernel = \"2.6.26\"`"),
            };
            match m.allocator {
                AllocatorKind::Rbtree | AllocatorKind::Bitmap => {}
                a => {
                    return Err(refuse(
                        "mechanisms.allocator",
                        a.name(),
                        "`rbtree` or `bitmap` (per-CPU IOVA caches came in 4.7; the gap tree \
                         is this project's)",
                    ));
                }
            }
            if let FlushConfig::FlushQueue(_) = m.flush {
                return Err(refuse(
                    "mechanisms.flush.kind",
                    "flush_queue",
                    "`strict`, `deferred` or `per_lap` (flush queues came in 4.14)",
                ));
            }
        }
        let reserved = self
            .reserved
            .clone()
            .unwrap_or_else(|| self.kernel.default_reserved());
        for (i, w) in reserved.iter().enumerate() {
            if w.end < w.start {
                return Err(ConfigError::Invalid {
                    key: format!("reserved[{i}]"),
                    value: format!("{:#x}..={:#x}", w.start, w.end),
                    expected: "start <= end (an inclusive byte range)".into(),
                });
            }
        }
        if !reserved.is_empty() && m.allocator == AllocatorKind::GapTree {
            return Err(ConfigError::Invalid {
                key: "reserved".into(),
                value: format!("{} window(s)", reserved.len()),
                expected: "no reserved windows with allocator `gap-tree` (it has no reserve)"
                    .into(),
            });
        }
        Ok(reserved)
    }

    /// The keys a system with a fixed DMA stack (a guest, a Xen PV domain) cannot honour,
    /// refused by name rather than ignored.
    fn refuse_fixed_stack(
        &self,
        kind: &str,
        mechanisms: &str,
        probes: &str,
    ) -> Result<(), ConfigError> {
        let refuse = |key: &str, value: String, why: &str| ConfigError::Invalid {
            key: key.into(),
            value,
            expected: format!("{why} with `system.kind = \"{kind}\"`"),
        };
        if self.mechanisms.is_some() {
            return Err(refuse("mechanisms", "set".into(), mechanisms));
        }
        if self.device != DeviceMode::Benign {
            return Err(refuse(
                "device",
                format!("{:?}", self.device),
                &format!("a benign device ({probes})"),
            ));
        }
        if self.duration_s.is_some() || self.dma_debug {
            return Err(refuse(
                if self.dma_debug {
                    "dma_debug"
                } else {
                    "duration_s"
                },
                "set".into(),
                "neither `duration_s` nor `dma_debug` (the run ends with its workload)",
            ));
        }
        if self.software_clock != SoftwareClock::Modeled {
            return Err(refuse(
                "software_clock",
                "measured".into(),
                "the modeled clock (the model prices hypercalls and hypervisor work)",
            ));
        }
        // The bare-metal kernel's allocator settings and the cache model of its metadata.
        if !self.kernel.is_default() {
            return Err(refuse(
                "kernel",
                self.kernel.name().into(),
                "the default kernel (its allocator rules are bare metal's)",
            ));
        }
        if self.reserved.is_some() {
            return Err(refuse(
                "reserved",
                "set".into(),
                "no `reserved` windows (they are a bare-metal kernel's IOVA domains')",
            ));
        }
        if self.hardware.cpu_cache.is_some() {
            return Err(refuse(
                "hardware.cpu_cache",
                "set".into(),
                "no CPU cache model (it prices a bare-metal allocator's metadata)",
            ));
        }
        Ok(())
    }

    /// The guest model's configuration; the keys a guest cannot honour are refused by name
    /// rather than ignored.
    fn resolve_guest(
        &self,
        g: &GuestSystemConfig,
        unit: &VtdConfig,
    ) -> Result<GuestConfig, ConfigError> {
        self.refuse_fixed_stack(
            "guest",
            "no mechanisms: the guest's DMA layer uses identity addressing and the host \
             invalidates at every unmap (S1.1)",
            "the guest model's oracle probes every unmapped page, `system.protection_oracle`",
        )?;
        // The host's unit is Yassour's (S1.10): `[hardware]` gives it only its prices, and
        // its invalidation interface is `system.host_invalidation`.
        let h = &self.hardware;
        for (key, set) in [
            ("hardware.levels", h.levels.is_some()),
            ("hardware.iotlb", h.iotlb.is_some()),
            ("hardware.invalidation", h.invalidation.is_some()),
            (
                "hardware.write_buffer_flush",
                h.write_buffer_flush.is_some(),
            ),
        ] {
            if set {
                return Err(ConfigError::Invalid {
                    key: key.into(),
                    value: "set".into(),
                    expected: "not set with `system.kind = \"guest\"`: the host's unit is \
                               Yassour's (S1.10), `[hardware]` sets only its prices (`cost`, \
                               `cost_overrides`); its invalidation is `system.host_invalidation`"
                        .into(),
                });
            }
        }
        if g.guest_mib == 0 || g.link_mbps == 0 || g.cpus == 0 {
            return Err(ConfigError::Invalid {
                key: if g.guest_mib == 0 {
                    "system.guest_mib"
                } else if g.link_mbps == 0 {
                    "system.link_mbps"
                } else {
                    "system.cpus"
                }
                .into(),
                value: "0".into(),
                expected: "a positive number".into(),
            });
        }
        if g.guest_mib > MAX_GUEST_MIB {
            return Err(ConfigError::Invalid {
                key: "system.guest_mib".into(),
                value: g.guest_mib.to_string(),
                expected: format!("1..={MAX_GUEST_MIB} (1 TiB)"),
            });
        }
        let guest_key = |key: &str, value: String, expected: &str| ConfigError::Invalid {
            key: key.into(),
            value,
            expected: expected.into(),
        };
        // The guest's DMA layer uses identity addressing (S1.1): no device mask applies.
        if self.dma_bits != Self::default().dma_bits {
            return Err(guest_key(
                "dma_bits",
                self.dma_bits.to_string(),
                "not set with `system.kind = \"guest\"`: the guest's DMA layer maps \
                 guest-physical addresses one to one (S1.1), no device DMA mask applies",
            ));
        }
        // Only `on-demand` has a map cache with a quota; the other strategies would run as if
        // the key were not there.
        if g.strategy != Strategy::OnDemand {
            if g.quota != GuestConfig::default().quota {
                return Err(guest_key(
                    "system.quota",
                    g.quota.to_string(),
                    &format!(
                        "not set with `strategy = \"{}\"`: only `on-demand` has a quota (its \
                         map cache); `persistent` keeps every page it maps",
                        g.strategy.name()
                    ),
                ));
            }
            if g.quota_policy.is_some() {
                return Err(guest_key(
                    "system.quota_policy",
                    "set".into(),
                    &format!(
                        "not set with `strategy = \"{}\"`: only `on-demand` has a quota",
                        g.strategy.name()
                    ),
                ));
            }
        } else if g.quota == 0 {
            // Every buffer would be refused: a run that moved nothing.
            return Err(guest_key(
                "system.quota",
                "0".into(),
                "at least 1 page: with no map cache the guest refuses every buffer",
            ));
        }
        Ok(GuestConfig {
            strategy: g.strategy,
            quota: g.quota,
            eviction: g.eviction.clone(),
            batching: g.batching,
            cache_only: g.cache_only,
            cost: unit.cost,
            guest_pages: g.guest_mib.saturating_mul(256),
            link_mbps: g.link_mbps,
            cpus: g.cpus,
            protection_oracle: g.protection_oracle,
            quota_policy: g.quota_policy.clone(),
            host_invalidation: g.host_invalidation,
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

/// Which system runs the workload: bare metal, or a guest with a directly assigned device
/// (S1.1; room for Xen scenarios).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SystemConfig {
    /// The OS drives the remapping unit itself: allocator, flush policy, `[hardware]`.
    #[default]
    BareMetal,
    /// A guest whose DMA layer maps through hypercalls to its host (S1.1–S1.11).
    Guest(GuestSystemConfig),
    /// A Xen PV domain driving its device through a hypervisor-owned unit (S2.5, S2.6).
    XenPv(XenPvSystemConfig),
}

impl SystemConfig {
    /// Its `kind` as a config names it.
    pub const fn kind_name(&self) -> &'static str {
        match self {
            SystemConfig::BareMetal => "bare-metal",
            SystemConfig::Guest(_) => "guest",
            SystemConfig::XenPv(_) => "xen-pv",
        }
    }
}

/// A Xen PV domain's side of an experiment (`system.kind = "xen-pv"`): its DMA API keeps the
/// next-fit bitmap and roll-around flush (S2.4) and maps through hypercalls, as the option
/// says (`crate::virt::xen::pv_dma`). `[hardware] unit` is the unit the hypervisor owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct XenPvSystemConfig {
    /// `streaming` (the paper's), `map-multi`, `never-free`, `pre-allocate`, `in-advance` or
    /// `grant-premap` (S2.6).
    pub option: PvDmaKind,
    /// Requests per `map_multi`/`unmap_multi` (`map-multi`).
    pub batch: u32,
    /// Flip each received buffer's pages to another domain after its unmap.
    pub page_flip: bool,
    /// The domain's memory in MiB (its pseudo-physical frames; `pre-allocate` maps them all).
    pub domain_mib: u64,
}

impl Default for XenPvSystemConfig {
    fn default() -> Self {
        let s = PvDmaSpec::default();
        Self {
            option: s.option,
            batch: s.batch,
            page_flip: s.page_flip,
            domain_mib: s.domain_pages / 256,
        }
    }
}

/// The guest's side of an experiment: what `iommulab replay --strategy` takes as flags.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuestSystemConfig {
    /// The DMA-mapping strategy (S1.1).
    pub strategy: Strategy,
    /// Map-cache quota in pages (`on-demand` only; refused with another strategy).
    pub quota: u64,
    /// Eviction policy of the map cache (S1.3, S1.4).
    pub eviction: EvictionConfig,
    /// Hypercall batching (S1.6).
    pub batching: Batching,
    /// Which pages the map cache may keep (S1.11).
    pub cache_only: CacheOnly,
    /// Guest memory in MiB.
    pub guest_mib: u64,
    /// Link rate in Mb/s: a run's time is its bytes on the link unless its CPUs cannot
    /// keep up.
    pub link_mbps: u64,
    /// The guest's CPUs (vCPUs), for CPU utilisation and throughput.
    pub cpus: u32,
    /// Probe every page the driver unmapped for stale access (S1.11).
    pub protection_oracle: bool,
    /// Quota over time (`on-demand`), applied at the workload's ticks (S1.7).
    pub quota_policy: Option<QuotaPolicy>,
    /// How the host invalidates the PTEs one hypercall clears: `call` (one request
    /// covering them) or `page` (one per page).
    pub host_invalidation: InvalidationScope,
}

impl Default for GuestSystemConfig {
    fn default() -> Self {
        let g = GuestConfig::default();
        Self {
            strategy: g.strategy,
            quota: g.quota,
            eviction: g.eviction,
            batching: g.batching,
            cache_only: g.cache_only,
            guest_mib: g.guest_pages / 256,
            link_mbps: g.link_mbps,
            cpus: g.cpus,
            protection_oracle: g.protection_oracle,
            quota_policy: g.quota_policy,
            host_invalidation: g.host_invalidation,
        }
    }
}

/// What runs: a built-in generator, or a trace replayed open-loop.
///
/// In TOML/JSON: a table with `trace` is a [`TraceSpec`]; one with `kind` is a
/// [`WorkloadConfig`]; one with neither is the pseudo driver's parameters (the schema before
/// generators had kinds, kept so every existing config still reads).
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadSpec {
    /// A built-in generator.
    Generator(WorkloadConfig),
    /// A trace file.
    Trace(TraceSpec),
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec::Generator(WorkloadConfig::default())
    }
}

/// A trace as an experiment's workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// The trace file (native, CSV or Linux ftrace text; `.gz`/`.zst`).
    pub trace: PathBuf,
    /// Its format (`auto` detects it).
    #[serde(default)]
    pub format: TraceFormat,
    /// Skip malformed ftrace lines instead of failing.
    #[serde(default)]
    pub lenient: bool,
}

impl Serialize for WorkloadSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            WorkloadSpec::Generator(w) => w.serialize(s),
            WorkloadSpec::Trace(t) => t.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for WorkloadSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let v = toml::Value::deserialize(d)?;
        let Some(t) = v.as_table() else {
            return Err(D::Error::custom(format!(
                "expected a table (generator parameters, `kind = ...` or `trace = ...`), found {}",
                v.type_str()
            )));
        };
        let r = if t.contains_key("trace") {
            TraceSpec::deserialize(v).map(WorkloadSpec::Trace)
        } else if t.contains_key("kind") {
            WorkloadConfig::deserialize(v).map(WorkloadSpec::Generator)
        } else {
            PseudoScsiConfig::deserialize(v)
                .map(|c| WorkloadSpec::Generator(WorkloadConfig::PseudoScsi(c)))
        };
        r.map_err(|e| D::Error::custom(e.message()))
    }
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
