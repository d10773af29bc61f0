//! The magazine caches' knobs (`[mechanisms.magazine]`) and the sizes they imply.

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use iommulab_base::addr::CpuId;

/// Bytes of one magazine in Linux (`struct iova_magazine`, 127 pfns + size, a power of two).
pub const MAGAZINE_BYTES: u64 = 1024;

/// Knobs of the per-CPU range caches (the TOML table under `[magazine]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MagazineConfig {
    /// Simulated CPUs, each with its own magazines (`num_online_cpus`; also the depot trim
    /// floor). Default 1.
    pub cpus: usize,
    /// Pfns per magazine (`IOVA_MAG_SIZE`: 127 in mainline, 128 in 4.7).
    pub mag_size: usize,
    /// Depot trim period in ms (`IOVA_DEPOT_DELAY`, 100 ms).
    pub depot_delay_ms: u64,
    /// log2 of the largest cached size in pages (`IOVA_RANGE_CACHE_MAX_SIZE - 1` = 5:
    /// 32 pages, 128 KiB).
    pub max_cached_pages_log2: u32,
}

impl Default for MagazineConfig {
    fn default() -> Self {
        MagazineConfig {
            cpus: 1,
            mag_size: 127,
            depot_delay_ms: 100,
            max_cached_pages_log2: 5,
        }
    }
}

/// A [`MagazineConfig`] that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MagazineConfigError {
    /// `cpus` is 0 or above 65536 (a [`CpuId`] is 16 bits).
    #[error("magazine.cpus = {0}: expected 1..=65536")]
    Cpus(usize),
    /// `mag_size` is 0 or above 65536.
    #[error("magazine.mag_size = {0}: expected 1..=65536 (Linux: 127)")]
    MagSize(usize),
    /// `max_cached_pages_log2` is above 20.
    #[error("magazine.max_cached_pages_log2 = {0}: expected 0..=20 (Linux: 5)")]
    MaxCached(u32),
}

impl MagazineConfig {
    /// Checks the knobs.
    pub fn validate(&self) -> Result<(), MagazineConfigError> {
        if self.cpus == 0 || self.cpus > 1 << 16 {
            return Err(MagazineConfigError::Cpus(self.cpus));
        }
        if self.mag_size == 0 || self.mag_size > 1 << 16 {
            return Err(MagazineConfigError::MagSize(self.mag_size));
        }
        if self.max_cached_pages_log2 > 20 {
            return Err(MagazineConfigError::MaxCached(self.max_cached_pages_log2));
        }
        Ok(())
    }

    /// Number of size bins (6 by default).
    pub fn bins(&self) -> usize {
        self.max_cached_pages_log2 as usize + 1
    }

    /// The size a request of `pages` takes: rounded up to a power of two below the largest
    /// cached size (`alloc_iova_fast`), unchanged otherwise.
    #[inline]
    pub fn rounded_pages(&self, pages: u64) -> u64 {
        if pages < 1 << self.max_cached_pages_log2 {
            pages.next_power_of_two()
        } else {
            pages
        }
    }

    /// The bin of a rounded size, `None` when it bypasses the caches.
    #[inline]
    pub fn bin(&self, rounded: u64) -> Option<usize> {
        if rounded.is_power_of_two() && rounded <= 1 << self.max_cached_pages_log2 {
            Some(rounded.trailing_zeros() as usize)
        } else {
            None
        }
    }
}
