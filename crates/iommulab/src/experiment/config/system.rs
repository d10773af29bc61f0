//! Which system runs the workload (`[system]`): bare metal, a guest with an assigned device
//! (S1.1) or a Xen PV domain (S2.5), and the checks of the keys a system with a fixed DMA
//! stack cannot honour.

use serde::{Deserialize, Serialize};

use crate::device::DeviceMode;
use crate::hw::vtd::VtdConfig;
use crate::virt::{
    Batching, CacheOnly, EvictionConfig, GuestConfig, InvalidationScope, QuotaPolicy, Strategy,
};

use super::super::pv_dma::{PvDmaKind, PvDmaSpec};
use super::limits::{MAX_GUEST_MIB, MAX_TCE_ENTRIES, MAX_XEN_BATCH};
use super::{ConfigError, ExperimentConfig, SoftwareClock};

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

impl ExperimentConfig {
    /// The keys a system with a fixed DMA stack (a guest, a Xen PV domain) cannot honour,
    /// refused by name rather than ignored.
    pub(super) fn refuse_fixed_stack(
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
    pub(super) fn resolve_guest(
        &self,
        g: &GuestSystemConfig,
        unit: &VtdConfig,
    ) -> Result<GuestConfig, ConfigError> {
        if !self.hardware.unit.is_vtd() && g.guest_mib.saturating_mul(256) > MAX_TCE_ENTRIES {
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

    /// The Xen PV domain's run; the keys such a domain cannot honour are refused by name.
    pub(super) fn resolve_xen_pv(&self, x: &XenPvSystemConfig) -> Result<PvDmaSpec, ConfigError> {
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
        Ok(PvDmaSpec {
            option: x.option,
            unit: self.hardware.unit,
            batch: x.batch,
            page_flip: x.page_flip,
            domain_pages: x.domain_mib * 256,
        })
    }
}
