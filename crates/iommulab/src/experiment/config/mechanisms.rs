//! The OS side of a configuration: the named configurations (Linux's modes, the historical
//! ones, S0.7's names), the kernel the mechanisms follow, and the mechanisms themselves
//! (translation, IOVA allocator, flush policy, magazine parameters).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::dma::Translation;
use crate::flush::{DeferredConfig, FlushConfig, FlushQueueConfig};
use crate::iova::domain::{ByteRange, RESERVED_2626_Q35};
use crate::iova::{AllocatorKind, MagazineConfig, MagazineConfigError};

use super::limits::{MAX_DEFERRED_ENTRIES, MAX_FLUSH_TIMEOUT_MS, MAX_FQ_ENTRIES};
use super::{ConfigError, ExperimentConfig};

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

impl ExperimentConfig {
    /// Checks the mechanisms against the kernel and returns the windows to reserve.
    pub(super) fn resolve_kernel(&self, m: &Mechanisms) -> Result<Vec<ByteRange>, ConfigError> {
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
}
