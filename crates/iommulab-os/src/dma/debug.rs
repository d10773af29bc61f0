//! The dma-debug checker, like Linux's `CONFIG_DMA_API_DEBUG` (`kernel/dma/debug.c`): it
//! remembers every live mapping and reports driver bugs — unmap of an address never mapped,
//! double unmap, length, direction or single/scatter-gather mismatch, and mappings leaked
//! when a device detaches.
//!
//! Unlike Linux, which warns and carries on, a finding here is an error value returned
//! *before* the DMA layer changes anything, so the simulated state stays consistent and the
//! run can continue: of several findings against one call, the first in Linux's order. The
//! rules themselves (which live entry an unmap means, what it must repeat, double unmap vs
//! never mapped, leaks) are the trace checker's too, written once in
//! [`iommulab_base::dma_debug`]; this file keeps the live mappings and turns a rule's
//! finding into a [`DmaDebugError`]. The checker costs a hash-map operation per call, so
//! benchmarks leave it off unless asked (`--dma-debug`).

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{DmaDirection, Iova};
use iommulab_base::dma_debug::{
    self as rules, Claim, MapType, Mismatch, NotLive, RecentlyUnmapped,
};
use iommulab_base::hash::AddrHashMap;

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

impl MapKind {
    /// The rules' view of a mapping of this kind: Linux's entry type and `sg_call_ents`.
    fn claim(self, len: u64, dir: DmaDirection) -> Claim<DmaDirection> {
        let (ty, sg_nents) = match self {
            MapKind::Single => (MapType::Single, 0),
            MapKind::Sg { nents } => (MapType::Sg, u32::try_from(nents).unwrap_or(u32::MAX)),
        };
        Claim {
            size: len,
            ty,
            dir,
            sg_nents,
        }
    }

    /// The kind a recorded claim was mapped as (the DMA API maps singles and lists only).
    fn of(c: &Claim<DmaDirection>) -> MapKind {
        match c.ty {
            MapType::Sg => MapKind::Sg {
                nents: c.sg_nents as usize,
            },
            _ => MapKind::Single,
        }
    }
}

/// The checker's memory of live and recently unmapped mappings.
#[derive(Debug, Default, Clone)]
pub struct DmaDebug {
    /// Live mappings by (device, DMA address). Several may share an address in passthrough
    /// mode, where the DMA address is the physical one and a driver may map one buffer twice
    /// (Linux's dma-debug keeps duplicate entries in its hash buckets too).
    live: AddrHashMap<(u16, u64), Vec<Claim<DmaDirection>>>,
    /// Whether every live mapping must have its own address: true behind an IOMMU, whose
    /// allocator hands out distinct IOVAs, so a repeat is a bug of the DMA layer itself.
    unique_addresses: bool,
    /// Addresses unmapped and not mapped again since: tells "double unmap" from "never mapped".
    unmapped: RecentlyUnmapped<()>,
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
        self.unmapped.remove((device, addr.get()));
        self.live
            .entry((device, addr.get()))
            .or_default()
            .push(kind.claim(len, dir));
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
        let wanted = kind.claim(len, dir);
        let found = self.live.get(&key).and_then(|recs| {
            rules::best_fit(recs.iter().copied().enumerate(), &wanted).map(|i| (i, recs[i]))
        });
        let Some((index, rec)) = found else {
            // The checker sees every mapping from the start: from boot.
            return match NotLive::classify(self.unmapped.contains(key), true) {
                NotLive::DoubleUnmap => self.fail(DmaDebugError::DoubleUnmap { device, addr }),
                NotLive::NeverMapped | NotLive::BeforeTracing => {
                    self.fail(DmaDebugError::NotMapped { device, addr })
                }
            };
        };
        if let Some(m) = rules::mismatches(&rec, &wanted).next() {
            return self.fail(match m {
                Mismatch::Size => DmaDebugError::LengthMismatch {
                    device,
                    addr,
                    mapped: rec.size,
                    unmapped: len,
                },
                Mismatch::Type | Mismatch::SgCount => DmaDebugError::KindMismatch {
                    device,
                    addr,
                    mapped: MapKind::of(&rec),
                    unmapped: kind,
                },
                Mismatch::Direction => DmaDebugError::DirectionMismatch {
                    device,
                    addr,
                    mapped: rec.dir,
                    unmapped: dir,
                },
            });
        }
        if let Some(recs) = self.live.get_mut(&key) {
            recs.swap_remove(index);
            if recs.is_empty() {
                self.live.remove(&key);
                self.unmapped.insert(key, ());
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
            .flat_map(|(&(_, a), rs)| {
                rs.iter()
                    .map(move |r| (Iova::new(a), r.size, r.dir, MapKind::of(r)))
            })
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }

    /// Forgets everything about `device` and reports its leaked mappings, if any (named by
    /// the lowest address).
    pub fn on_detach(&mut self, device: u16) -> Result<(), DmaDebugError> {
        let leaks = rules::leaks_per_device(
            self.live
                .iter()
                .filter(|((d, _), _)| *d == device)
                .flat_map(|(&(d, a), rs)| rs.iter().map(move |_| (d, a, a))),
        );
        self.live.retain(|(d, _), _| *d != device);
        self.unmapped.forget_device(device);
        match leaks.get(&device) {
            None => Ok(()),
            Some(leak) => {
                self.stats.leaked += leak.count;
                self.fail(DmaDebugError::Leaked {
                    device,
                    count: usize::try_from(leak.count).unwrap_or(usize::MAX),
                    first: leak.first,
                })
            }
        }
    }
}
