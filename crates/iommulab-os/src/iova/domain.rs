//! One IOMMU domain's IOVA space as Linux 6.x's dma-iommu sets it up and allocates from it
//! (`drivers/iommu/dma-iommu.c`: `iommu_dma_init_domain`, `iova_reserve_iommu_regions`,
//! `iommu_dma_alloc_iova`, `iommu_dma_free_iova`), over the `iova.c` model
//! ([`Magazine`]`<`[`RbTree`]`>`).
//!
//! - The space starts at `start_pfn` (1: pfn 0 is never handed out) and ends at the domain's
//!   aperture, `2^aperture_bits` (`domain->geometry.aperture_end`; VT-d: the domain's
//!   address width, 48 bits with a 4-level table, 39 with a 3-level one).
//! - Reserved windows are `reserve_iova`d when the domain is made: the host bridge's memory
//!   windows (`iova_reserve_pci_windows`) and the IOMMU's reserved regions, on VT-d the
//!   IOAPIC/MSI range `0xfee00000..=0xfeefffff` (`intel_iommu_get_resv_regions`).
//! - An allocation's limit is the device's DMA mask capped at the aperture. A PCI device
//!   whose limit is above 4 GiB first tries below 4 GiB with `flush_rcache = false`; the
//!   first time that fails, the device stops trying (`dev->iommu->pci_32bit_workaround =
//!   false`, sticky, Linux 6.4+) and every allocation goes to the full limit with
//!   `flush_rcache = true`. `iommu.forcedac=1` skips the 32-bit attempt from the start.
//!
//! Only a 4 KiB granule is modelled (x86, and every trace the project has).

use serde::{Deserialize, Serialize};

use super::magazine::{Magazine, MagazineConfig, MagazineConfigError};
use super::rbtree::{DMA_32BIT_PFN, MAX_PFN, RbTree, SpaceError};
use super::{IovaAllocator, IovaError};
use iommulab_base::addr::{CpuId, Iova, Pfn};
use iommulab_base::clock::{ClockRate, Cycles};

/// The IOVA granule's shift (4 KiB).
pub const IOVA_SHIFT: u32 = 12;

/// VT-d's IOAPIC/MSI window (`IOAPIC_RANGE_START`..=`IOAPIC_RANGE_END`), an
/// `IOMMU_RESV_MSI` region every VT-d domain reserves.
pub const VTD_IOAPIC_WINDOW: ByteRange = ByteRange {
    start: 0xfee0_0000,
    end: 0xfeef_ffff,
};

/// The memory windows of QEMU q35's PCI host bridge as Linux 6.12 listed them
/// (`pci_bus 0000:00: root bus resource [mem ...]`) for a 512 MiB guest: the VGA hole, RAM
/// top to MMCONFIG (`0x20000000..=0xafffffff`: its start is the guest's RAM size below
/// 4 GiB), the 32-bit PCI hole `0xc0000000..=0xfebfffff`, and the 64-bit hole. Read from
/// the console log committed with the real trace (`traces/`); another RAM size moves the
/// second window's start.
pub const Q35_PCI_WINDOWS_512M: [ByteRange; 4] = [
    ByteRange {
        start: 0x000a_0000,
        end: 0x000b_ffff,
    },
    ByteRange {
        start: 0x2000_0000,
        end: 0xafff_ffff,
    },
    ByteRange {
        start: 0xc000_0000,
        end: 0xfebf_ffff,
    },
    ByteRange {
        start: 0x1_0000_0000,
        end: 0x8_ffff_ffff,
    },
];

/// The memory BARs of QEMU q35's default devices as the committed real trace's console log
/// lists them (`pci 0000:00:01.0: BAR 1 [mem 0xfebc4000-0xfebc4fff]` ...): the ranges
/// Linux 2.6.26's `dmar_init_reserved_ranges` reserves in every domain ("Reserve all PCI MMIO
/// to avoid peer-to-peer access": each device's `IORESOURCE_MEM` resources, not the host
/// bridge's windows as 6.x does). Placement is the firmware's, so the same for any kernel.
pub const Q35_DEVICE_BARS: [ByteRange; 8] = [
    ByteRange {
        start: 0xfebc_4000,
        end: 0xfebc_4fff,
    },
    ByteRange {
        start: 0xfebf_4000,
        end: 0xfebf_7fff,
    },
    ByteRange {
        start: 0xfebc_5000,
        end: 0xfebc_5fff,
    },
    ByteRange {
        start: 0xfebf_8000,
        end: 0xfebf_bfff,
    },
    ByteRange {
        start: 0xfebc_0000,
        end: 0xfebc_3fff,
    },
    ByteRange {
        start: 0xfebc_6000,
        end: 0xfebc_6fff,
    },
    ByteRange {
        start: 0xfebf_c000,
        end: 0xfebf_ffff,
    },
    ByteRange {
        start: 0xfebc_7000,
        end: 0xfebc_7fff,
    },
];

/// What Linux 2.6.26's `dmar_init_reserved_ranges` reserves on q35: the IOAPIC range
/// (`IOAPIC_RANGE_START..=IOAPIC_RANGE_END`, the same window as today) and every device's
/// memory BARs ([`Q35_DEVICE_BARS`]); `domain_reserve_special_ranges` copies them into every
/// domain.
pub const RESERVED_2626_Q35: [ByteRange; 9] = [
    VTD_IOAPIC_WINDOW,
    Q35_DEVICE_BARS[0],
    Q35_DEVICE_BARS[1],
    Q35_DEVICE_BARS[2],
    Q35_DEVICE_BARS[3],
    Q35_DEVICE_BARS[4],
    Q35_DEVICE_BARS[5],
    Q35_DEVICE_BARS[6],
    Q35_DEVICE_BARS[7],
];

/// An inclusive byte range `[start, end]`, as Linux prints resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByteRange {
    /// First byte.
    pub start: u64,
    /// Last byte (inclusive).
    pub end: u64,
}

impl ByteRange {
    /// The pages it touches, as `(first pfn, pages)` (`iova_pfn` of both ends).
    pub fn pages(self) -> (Pfn<Iova>, u64) {
        let lo = self.start >> IOVA_SHIFT;
        let hi = self.end >> IOVA_SHIFT;
        (Pfn::new(lo), hi.saturating_sub(lo) + 1)
    }
}

/// How a domain is set up (defaults: QEMU q35 with VT-d, as the committed real trace).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DomainConfig {
    /// First page handed out (`start_pfn`, 1).
    pub start_pfn: u64,
    /// The domain's address width: the space ends at `2^aperture_bits` (48).
    pub aperture_bits: u32,
    /// Windows reserved at setup (q35's PCI windows and VT-d's IOAPIC/MSI window).
    pub reserved: Vec<ByteRange>,
    /// `iommu.forcedac=1`: no below-4 GiB first attempt.
    pub forcedac: bool,
    /// The per-CPU caches (`cpus` is the number of CPUs).
    pub magazine: MagazineConfig,
}

impl Default for DomainConfig {
    fn default() -> Self {
        let mut reserved = Q35_PCI_WINDOWS_512M.to_vec();
        reserved.push(VTD_IOAPIC_WINDOW);
        DomainConfig {
            start_pfn: 1,
            aperture_bits: 48,
            reserved,
            forcedac: false,
            magazine: MagazineConfig::default(),
        }
    }
}

/// A [`DomainConfig`] that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// `aperture_bits` outside 13..=64.
    #[error("aperture_bits = {0}: expected 13..=64")]
    Aperture(u32),
    /// The space is not valid.
    #[error(transparent)]
    Space(#[from] SpaceError),
    /// The caches' knobs are not valid.
    #[error(transparent)]
    Magazine(#[from] MagazineConfigError),
    /// A reserved window could not be reserved.
    #[error("reserved window {start:#x}..={end:#x}: {source}")]
    Reserve {
        /// First byte.
        start: u64,
        /// Last byte.
        end: u64,
        /// Why.
        source: IovaError,
    },
}

/// What dma-iommu keeps per device for IOVA allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceIova {
    /// The streaming (or coherent) DMA mask, an inclusive byte limit (`DMA_BIT_MASK(n)`).
    pub dma_mask: u64,
    /// A PCI device (the 32-bit first attempt applies to PCI devices only).
    pub pci: bool,
    /// `dev->iommu->pci_32bit_workaround`: still trying below 4 GiB first.
    pub pci_32bit_workaround: bool,
}

impl DeviceIova {
    /// A device with `dma_mask`; `forcedac` turns the 32-bit first attempt off.
    pub fn new(dma_mask: u64, pci: bool, forcedac: bool) -> Self {
        DeviceIova {
            dma_mask,
            pci,
            pci_32bit_workaround: pci && !forcedac,
        }
    }
}

/// `DMA_BIT_MASK(32)` as an exclusive page limit.
const LIMIT_32: u64 = DMA_32BIT_PFN;

/// One domain's IOVA allocator, set up and called as dma-iommu does (see the module doc).
#[derive(Clone, Debug)]
pub struct IovaDomain {
    alloc: Magazine<RbTree>,
    /// The aperture's last byte.
    aperture_end: u64,
}

impl IovaDomain {
    /// A domain with `config`'s space, caches and reserved windows.
    pub fn new(config: &DomainConfig) -> Result<Self, DomainError> {
        if !(13..=64).contains(&config.aperture_bits) {
            return Err(DomainError::Aperture(config.aperture_bits));
        }
        let aperture_end = if config.aperture_bits == 64 {
            u64::MAX
        } else {
            (1u64 << config.aperture_bits) - 1
        };
        let end = ((aperture_end >> IOVA_SHIFT) + 1).min(MAX_PFN);
        let tree = RbTree::new(Pfn::new(config.start_pfn), Pfn::new(end))?;
        let mut alloc = Magazine::new(tree, config.magazine)?;
        for w in &config.reserved {
            let (pfn, pages) = w.pages();
            alloc
                .reserve(pfn, pages)
                .map_err(|source| DomainError::Reserve {
                    start: w.start,
                    end: w.end,
                    source,
                })?;
        }
        Ok(IovaDomain {
            alloc,
            aperture_end,
        })
    }

    /// The allocator (to inspect, or to drive with its own operations).
    pub fn allocator(&self) -> &Magazine<RbTree> {
        &self.alloc
    }

    /// The allocator, mutably (`take_cached`, `place`, `move_magazine`, ...).
    pub fn allocator_mut(&mut self) -> &mut Magazine<RbTree> {
        &mut self.alloc
    }

    /// The exclusive page limit of `dev`'s allocations: its mask capped at the aperture.
    pub fn limit(&self, dev: &DeviceIova) -> Pfn<Iova> {
        Pfn::new((dev.dma_mask.min(self.aperture_end) >> IOVA_SHIFT) + 1)
    }

    /// Whether `dev`'s next allocation tries below 4 GiB first.
    fn tries_32bit_first(&self, dev: &DeviceIova) -> bool {
        dev.pci_32bit_workaround && self.limit(dev).get() > LIMIT_32
    }

    /// `iommu_dma_alloc_iova`: `pages` for `dev` on `cpu` (see the module doc).
    pub fn alloc_iova(
        &mut self,
        dev: &mut DeviceIova,
        cpu: CpuId,
        pages: u64,
    ) -> Result<Pfn<Iova>, IovaError> {
        if self.tries_32bit_first(dev) {
            if let Ok(p) = self.alloc.alloc_fast(cpu, pages, Pfn::new(LIMIT_32), false) {
                return Ok(p);
            }
            dev.pci_32bit_workaround = false;
        }
        let limit = self.limit(dev);
        self.alloc.alloc_fast(cpu, pages, limit, true)
    }

    /// What [`IovaDomain::alloc_iova`] would return, changing nothing (`dev` included).
    pub fn peek_iova(&self, dev: &DeviceIova, cpu: CpuId, pages: u64) -> Option<Pfn<Iova>> {
        if self.tries_32bit_first(dev) {
            if let Some(p) = self.alloc.peek_alloc(cpu, pages, Pfn::new(LIMIT_32), false) {
                return Some(p);
            }
            // The failed first attempt may have swapped magazines and set
            // `max32_alloc_size`: run both attempts on a copy.
            let mut copy = self.clone();
            let mut d = *dev;
            return copy.alloc_iova(&mut d, cpu, pages).ok();
        }
        self.alloc.peek_alloc(cpu, pages, self.limit(dev), true)
    }

    /// `iommu_dma_free_iova` in strict mode: `free_iova_fast`.
    pub fn free_iova(&mut self, cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        self.alloc.free(cpu, pfn, pages)
    }

    /// Lets the depot trim run (`iova_depot_work_func`).
    pub fn on_tick(&mut self, now: Cycles, clock: ClockRate) {
        self.alloc.on_tick(now, clock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C0: CpuId = CpuId::new(0);

    fn domain(reserved: Vec<ByteRange>, aperture_bits: u32) -> IovaDomain {
        IovaDomain::new(&DomainConfig {
            reserved,
            aperture_bits,
            ..DomainConfig::default()
        })
        .unwrap()
    }

    /// `iova_reserve_iommu_regions`: once the space above a reserved window is used, the
    /// next range comes from below it, never from inside it (here a 16-page window just
    /// below 4 GiB; VT-d's IOAPIC/MSI window is the 256 pages at 0xfee00).
    #[test]
    fn allocations_skip_reserved_windows() {
        assert_eq!(VTD_IOAPIC_WINDOW.pages(), (Pfn::new(0xfee00), 256));
        let window = ByteRange {
            start: 0xfffe_0000,
            end: 0xfffe_ffff,
        };
        let mut d = domain(vec![window, VTD_IOAPIC_WINDOW], 48);
        let mut dev = DeviceIova::new(u64::MAX, true, false);
        assert_eq!(d.alloc_iova(&mut dev, C0, 16).unwrap().get(), 0xffff0);
        assert_eq!(d.alloc_iova(&mut dev, C0, 16).unwrap().get(), 0xfffd0);
        let mut bare = domain(vec![], 48);
        bare.alloc_iova(&mut dev, C0, 16).unwrap();
        assert_eq!(bare.alloc_iova(&mut dev, C0, 16).unwrap().get(), 0xfffe0);
        // Walking down to the IOAPIC window: 0xff000.. and 0xfef00.. are taken, then the
        // next range lands below 0xfee00.
        let mut d = domain(vec![VTD_IOAPIC_WINDOW], 48);
        assert_eq!(d.alloc_iova(&mut dev, C0, 0x1000).unwrap().get(), 0xff000);
        assert_eq!(d.alloc_iova(&mut dev, C0, 0x100).unwrap().get(), 0xfef00);
        assert_eq!(d.alloc_iova(&mut dev, C0, 16).unwrap().get(), 0xfedf0);
    }

    /// `iommu_dma_alloc_iova`: a 64-bit PCI device gets addresses below 4 GiB first; when
    /// that space is exhausted it goes above, and stays above (`pci_32bit_workaround =
    /// false`) even once space below is free again. `forcedac` and non-PCI devices go to
    /// the full limit from the start.
    #[test]
    fn wide_mask_pci_devices_try_below_4gib_first_then_stop() {
        let mut d = domain(
            vec![ByteRange {
                start: 0x1000,
                end: 0xffff_ffff - 0x4000,
            }],
            48,
        );
        let mut dev = DeviceIova::new(u64::MAX, true, false);
        let a = d.alloc_iova(&mut dev, C0, 2).unwrap().get();
        assert_eq!(a, 0xffffe);
        let b = d.alloc_iova(&mut dev, C0, 2).unwrap().get();
        assert_eq!(b, 0xffffc);
        assert!(dev.pci_32bit_workaround);
        let c = d.alloc_iova(&mut dev, C0, 4).unwrap().get();
        assert_eq!(
            c,
            (1 << 36) - 4,
            "above 4 GiB, from the top of the 48-bit aperture"
        );
        assert!(!dev.pci_32bit_workaround, "sticky");
        d.free_iova(C0, Pfn::new(a), 2).unwrap();
        d.free_iova(C0, Pfn::new(b), 2).unwrap();
        let e = d.alloc_iova(&mut dev, C0, 8).unwrap().get();
        assert!(e > 1 << 20, "no 32-bit attempt any more: {e:#x}");
        let mut forced = DeviceIova::new(u64::MAX, true, true);
        let mut d2 = domain(vec![], 48);
        assert_eq!(
            d2.alloc_iova(&mut forced, C0, 1).unwrap().get(),
            (1 << 36) - 1
        );
        let mut platform = DeviceIova::new(u64::MAX, false, false);
        assert_eq!(
            d2.alloc_iova(&mut platform, C0, 1).unwrap().get(),
            (1 << 36) - 2
        );
    }

    /// The limit is the DMA mask capped at the domain's aperture (`force_aperture`): a
    /// 3-level (39-bit) VT-d domain never hands out an address its table cannot map.
    #[test]
    fn limit_is_capped_at_the_aperture() {
        let mut d = domain(vec![], 39);
        let mut dev = DeviceIova::new(u64::MAX, false, false);
        assert_eq!(d.limit(&dev).get(), 1 << 27);
        assert_eq!(d.alloc_iova(&mut dev, C0, 1).unwrap().get(), (1 << 27) - 1);
        let narrow = DeviceIova::new(0xffff_ffff, true, false);
        assert_eq!(d.limit(&narrow).get(), 1 << 20);
    }

    /// `peek_iova` predicts `alloc_iova`, including the failing 32-bit attempt, and changes
    /// nothing.
    #[test]
    fn peek_iova_predicts_alloc_iova() {
        let mut d = domain(
            vec![ByteRange {
                start: 0x1000,
                end: 0xffff_ffff - 0x10000,
            }],
            40,
        );
        let mut dev = DeviceIova::new(u64::MAX, true, false);
        let mut live = Vec::new();
        for i in 0..200u64 {
            let pages = 1 + i % 5;
            let before = (d.allocator().snapshot(), dev);
            let peek = d.peek_iova(&dev, C0, pages);
            assert_eq!((d.allocator().snapshot(), dev), before);
            let got = d.alloc_iova(&mut dev, C0, pages).ok();
            assert_eq!(peek, got, "allocation {i}");
            live.push((got.unwrap(), pages));
            if i % 3 == 0 {
                let (p, n) = live.remove(0);
                d.free_iova(C0, p, n).unwrap();
            }
        }
        assert!(!dev.pci_32bit_workaround);
    }

    #[test]
    fn rejects_bad_configs() {
        let bad = |c: DomainConfig| IovaDomain::new(&c).unwrap_err();
        assert_eq!(
            bad(DomainConfig {
                aperture_bits: 70,
                ..DomainConfig::default()
            }),
            DomainError::Aperture(70)
        );
        assert!(matches!(
            bad(DomainConfig {
                start_pfn: 0,
                ..DomainConfig::default()
            }),
            DomainError::Space(SpaceError::HoldsPfnZero)
        ));
    }
}
