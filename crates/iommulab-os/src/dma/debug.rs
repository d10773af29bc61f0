//! The dma-debug checker, like Linux's `CONFIG_DMA_API_DEBUG` (`kernel/dma/debug.c`): it
//! remembers every live mapping and reports driver bugs — unmap of an address never mapped,
//! double unmap, length, direction or single/scatter-gather mismatch, and mappings leaked
//! when a device detaches.
//!
//! Unlike Linux, which warns and carries on, a finding here is an error value returned
//! *before* the DMA layer changes anything, so the simulated state stays consistent and the
//! run can continue. The checker costs a hash-map operation per call, so benchmarks leave it
//! off unless asked (`--dma-debug`).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{DmaDirection, Iova};

/// How a mapping was made (an `unmap_single` of an sg mapping is a bug, and vice versa).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MapKind {
    /// `dma_map_single`.
    Single,
    /// `dma_map_sg` with this many entries.
    Sg {
        /// Number of scatterlist entries mapped.
        nents: usize,
    },
}

/// A driver bug found by the checker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DmaDebugError {
    /// Mapping with a DMA address that is already live (the DMA layer handed it out twice).
    #[error("device {device}: DMA address {addr:#x} mapped while already mapped")]
    AddressReused {
        /// Device index.
        device: u16,
        /// The DMA address.
        addr: u64,
    },
    /// Unmap with a different direction than the map.
    #[error(
        "device {device}: unmap of {addr:#x} with direction {unmapped:?}, but it was mapped {mapped:?}"
    )]
    DirectionMismatch {
        /// Device index.
        device: u16,
        /// The DMA address.
        addr: u64,
        /// Direction at map time.
        mapped: DmaDirection,
        /// Direction given to unmap.
        unmapped: DmaDirection,
    },
    /// Unmap of a mapping that was already unmapped.
    #[error("device {device}: double unmap of DMA address {addr:#x}")]
    DoubleUnmap {
        /// Device index.
        device: u16,
        /// The DMA address.
        addr: u64,
    },
    /// Unmap of a single mapping with `unmap_sg`, or the reverse, or a wrong `nents`.
    #[error("device {device}: unmap of {addr:#x} as {unmapped:?}, but it was mapped as {mapped:?}")]
    KindMismatch {
        /// Device index.
        device: u16,
        /// The DMA address.
        addr: u64,
        /// How it was mapped.
        mapped: MapKind,
        /// How the driver tried to unmap it.
        unmapped: MapKind,
    },
    /// Mappings still live when the device detached.
    #[error(
        "device {device}: {count} mapping(s) leaked at detach (first at DMA address {first:#x})"
    )]
    Leaked {
        /// Device index.
        device: u16,
        /// How many.
        count: usize,
        /// The lowest leaked DMA address.
        first: u64,
    },
    /// Unmap with a different length than the map.
    #[error(
        "device {device}: unmap of {addr:#x} with length {unmapped}, but it was mapped with {mapped}"
    )]
    LengthMismatch {
        /// Device index.
        device: u16,
        /// The DMA address.
        addr: u64,
        /// Length at map time.
        mapped: u64,
        /// Length given to unmap.
        unmapped: u64,
    },
    /// Unmap of an address that was never mapped.
    #[error("device {device}: unmap of DMA address {addr:#x}, which was never mapped")]
    NotMapped {
        /// Device index.
        device: u16,
        /// The DMA address.
        addr: u64,
    },
}

/// Counts of findings, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebugStats {
    /// Live mappings now.
    pub live: u64,
    /// Findings of any kind.
    pub errors: u64,
    /// Leaked mappings found at detach.
    pub leaked: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Record {
    len: u64,
    dir: DmaDirection,
    kind: MapKind,
}

/// The checker's memory of live and recently unmapped mappings.
#[derive(Debug, Default, Clone)]
pub struct DmaDebug {
    /// Live mappings by (device, DMA address). Several may share an address in passthrough
    /// mode, where the DMA address is the physical one and a driver may map one buffer twice
    /// (Linux's dma-debug keeps duplicate entries in its hash buckets too).
    live: HashMap<(u16, u64), Vec<Record>>,
    /// Whether every live mapping must have its own address: true behind an IOMMU, whose
    /// allocator hands out distinct IOVAs, so a repeat is a bug of the DMA layer itself.
    unique_addresses: bool,
    /// Addresses unmapped and not mapped again since: tells "double unmap" from "never mapped".
    unmapped: HashSet<(u16, u64)>,
    stats: DebugStats,
}

impl DmaDebug {
    /// An empty checker; `unique_addresses` as for an IOMMU (see the field).
    pub fn new(unique_addresses: bool) -> Self {
        Self {
            unique_addresses,
            ..Self::default()
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> DebugStats {
        DebugStats {
            live: self.live.values().map(|v| v.len() as u64).sum(),
            ..self.stats
        }
    }

    fn fail(&mut self, e: DmaDebugError) -> Result<(), DmaDebugError> {
        self.stats.errors += 1;
        Err(e)
    }

    /// Checks that `addr` may be recorded as a new mapping (before the DMA layer commits it).
    pub fn check_map(&mut self, device: u16, addr: Iova) -> Result<(), DmaDebugError> {
        if self.unique_addresses && self.live.contains_key(&(device, addr.get())) {
            return self.fail(DmaDebugError::AddressReused {
                device,
                addr: addr.get(),
            });
        }
        Ok(())
    }

    /// Records a mapping the DMA layer has made.
    pub fn record_map(
        &mut self,
        device: u16,
        addr: Iova,
        len: u64,
        dir: DmaDirection,
        kind: MapKind,
    ) {
        self.unmapped.remove(&(device, addr.get()));
        self.live
            .entry((device, addr.get()))
            .or_default()
            .push(Record { len, dir, kind });
    }

    /// Checks an unmap against the recorded mapping; on success forgets the mapping.
    /// On error nothing changes.
    pub fn check_unmap(
        &mut self,
        device: u16,
        addr: Iova,
        len: u64,
        dir: DmaDirection,
        kind: MapKind,
    ) -> Result<(), DmaDebugError> {
        let key = (device, addr.get());
        let addr = addr.get();
        let wanted = Record { len, dir, kind };
        let Some(recs) = self.live.get(&key) else {
            return if self.unmapped.contains(&key) {
                self.fail(DmaDebugError::DoubleUnmap { device, addr })
            } else {
                self.fail(DmaDebugError::NotMapped { device, addr })
            };
        };
        // An exact match among the mappings at this address, or a report against the first.
        let (index, rec) = match recs.iter().position(|r| *r == wanted) {
            Some(i) => (i, recs[i]),
            None => (usize::MAX, recs[0]),
        };
        if rec.kind != kind {
            return self.fail(DmaDebugError::KindMismatch {
                device,
                addr,
                mapped: rec.kind,
                unmapped: kind,
            });
        }
        if rec.len != len {
            return self.fail(DmaDebugError::LengthMismatch {
                device,
                addr,
                mapped: rec.len,
                unmapped: len,
            });
        }
        if rec.dir != dir {
            return self.fail(DmaDebugError::DirectionMismatch {
                device,
                addr,
                mapped: rec.dir,
                unmapped: dir,
            });
        }
        if let Some(recs) = self.live.get_mut(&key) {
            recs.swap_remove(index);
            if recs.is_empty() {
                self.live.remove(&key);
                self.unmapped.insert(key);
            }
        }
        Ok(())
    }

    /// The live mappings of `device`, lowest address first: `(addr, len, dir, kind)`.
    pub fn live_of(&self, device: u16) -> Vec<(Iova, u64, DmaDirection, MapKind)> {
        let mut v: Vec<_> = self
            .live
            .iter()
            .filter(|((d, _), _)| *d == device)
            .flat_map(|(&(_, a), rs)| rs.iter().map(move |r| (Iova::new(a), r.len, r.dir, r.kind)))
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }

    /// Forgets everything about `device` and reports its leaked mappings, if any.
    pub fn on_detach(&mut self, device: u16) -> Result<(), DmaDebugError> {
        let leaked = self.live_of(device);
        self.live.retain(|(d, _), _| *d != device);
        self.unmapped.retain(|(d, _)| *d != device);
        match leaked.first() {
            None => Ok(()),
            Some(first) => {
                self.stats.leaked += leaked.len() as u64;
                self.fail(DmaDebugError::Leaked {
                    device,
                    count: leaked.len(),
                    first: first.0.get(),
                })
            }
        }
    }
}
