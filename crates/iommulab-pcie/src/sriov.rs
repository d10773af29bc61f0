//! The SR-IOV extended capability (id 0x0010; Single Root I/O Virtualization and Sharing
//! Specification 1.1 §3.3; S4.1): how a physical function (PF) declares, and software
//! enables, its virtual functions (VFs).
//!
//! ```text
//!  +0x00 header                 +0x04 SR-IOV Capabilities (RO)
//!  +0x08 SR-IOV Control (RW): VF Enable [0], VF Migration Enable [1], VF Migration
//!        Interrupt Enable [2], VF MSE [3], ARI Capable Hierarchy [4]
//!  +0x0a SR-IOV Status (RW1C [0])
//!  +0x0c InitialVFs (RO)        +0x0e TotalVFs (RO)
//!  +0x10 NumVFs (RW)            +0x12 Function Dependency Link (RO)
//!  +0x14 First VF Offset (RO)   +0x16 VF Stride (RO)       +0x1a VF Device ID (RO)
//!  +0x1c Supported Page Sizes (RO)   +0x20 System Page Size (RW)
//!  +0x24..+0x3b VF BAR0-5 (like BARs; one size per VF)   +0x3c VF Migration State (RO)
//! ```
//!
//! What follows from the registers, as §2.1.3 and §3.3.14 define it:
//! - VF `n` (1-based, `1 <= n <= NumVFs`) has routing id
//!   `PF RID + First VF Offset + (n - 1) * VF Stride` in 16-bit arithmetic that must not wrap;
//! - VF BAR `i` of VF `n` starts at `VF BARi + (n - 1) * size`, where `size` is the per-VF
//!   aperture read back by sizing, at least the System Page Size (the device widens its
//!   read-only low bits when software picks a larger page, §3.3.13).
//!
//! First VF Offset and VF Stride are read-only here and do not change with NumVFs or ARI
//! (the specification lets a device change them; this model's devices do not).

// Bit-exact field packing: each narrowing cast keeps a field's low bits on purpose, and
// every value is range-checked before it is packed.
#![allow(clippy::cast_possible_truncation)]

use iommulab_base::addr::Bdf;
use serde::{Deserialize, Serialize};

use crate::config::capability::{self, ExtCapabilityId};
use crate::config::header::{Bar, BarKind};
use crate::config::{ConfigError, ConfigSpace};
use crate::tlp::bdf_from_id;

/// SR-IOV Control: VF Enable.
pub const CTL_VF_ENABLE: u16 = 1 << 0;
/// SR-IOV Control: VF Memory Space Enable.
pub const CTL_VF_MSE: u16 = 1 << 3;
/// SR-IOV Control: ARI Capable Hierarchy.
pub const CTL_ARI: u16 = 1 << 4;

/// Register offsets inside the capability.
pub mod reg {
    /// SR-IOV Control.
    pub const CONTROL: u16 = 0x08;
    /// SR-IOV Status.
    pub const STATUS: u16 = 0x0a;
    /// InitialVFs.
    pub const INITIAL_VFS: u16 = 0x0c;
    /// TotalVFs.
    pub const TOTAL_VFS: u16 = 0x0e;
    /// NumVFs.
    pub const NUM_VFS: u16 = 0x10;
    /// First VF Offset.
    pub const FIRST_VF_OFFSET: u16 = 0x14;
    /// VF Stride.
    pub const VF_STRIDE: u16 = 0x16;
    /// VF Device ID.
    pub const VF_DEVICE_ID: u16 = 0x1a;
    /// Supported Page Sizes.
    pub const SUPPORTED_PAGE_SIZES: u16 = 0x1c;
    /// System Page Size.
    pub const SYSTEM_PAGE_SIZE: u16 = 0x20;
    /// VF BAR0.
    pub const VF_BAR0: u16 = 0x24;
}

/// What a device declares in its SR-IOV capability.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SriovSpec {
    /// TotalVFs (and InitialVFs).
    pub total_vfs: u16,
    /// First VF Offset.
    pub first_vf_offset: u16,
    /// VF Stride.
    pub vf_stride: u16,
    /// VF Device ID.
    pub vf_device_id: u16,
    /// Supported Page Sizes: bit `k` set means `4 KiB << k` is supported (bit 0 must be).
    pub supported_page_sizes: u32,
    /// The VF BARs: `(register index, BAR)` with the per-VF size at a 4 KiB system page.
    pub vf_bars: Vec<(usize, Bar)>,
}

/// Why the SR-IOV registers do not describe a usable set of VFs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SriovError {
    /// NumVFs is above TotalVFs.
    #[error("NumVFs is {num}, above TotalVFs {total}")]
    NumVfs {
        /// NumVFs.
        num: u16,
        /// TotalVFs.
        total: u16,
    },
    /// A VF's routing id would pass 0xffff.
    #[error(
        "VF {n}: PF routing id {pf:#06x} + First VF Offset {offset} + ({n} - 1) * VF Stride {stride} passes 0xffff"
    )]
    RoutingIdOverflow {
        /// The VF.
        n: u16,
        /// PF routing id.
        pf: u16,
        /// First VF Offset.
        offset: u16,
        /// VF Stride.
        stride: u16,
    },
    /// A VF Stride of 0 with more than one VF gives two VFs one routing id.
    #[error("VF Stride 0 with NumVFs {num}: VFs would share a routing id")]
    ZeroStride {
        /// NumVFs.
        num: u16,
    },
    /// A First VF Offset of 0 gives VF 1 the PF's routing id.
    #[error("First VF Offset 0: VF 1 would have the PF's routing id")]
    ZeroOffset,
    /// System Page Size is not exactly one supported page size.
    #[error("System Page Size {value:#x} is not one of the Supported Page Sizes {supported:#x}")]
    PageSize {
        /// System Page Size.
        value: u32,
        /// Supported Page Sizes.
        supported: u32,
    },
    /// A VF index outside `1..=NumVFs`.
    #[error("VF {n} does not exist (NumVFs {num})")]
    NoSuchVf {
        /// The index asked for.
        n: u16,
        /// NumVFs.
        num: u16,
    },
    /// A VF BAR region would pass the top of its address space.
    #[error(
        "VF BAR{index}: {num} VFs of {size:#x} bytes from {base:#x} pass the top of the address space"
    )]
    BarOverflow {
        /// BAR register.
        index: usize,
        /// Base.
        base: u64,
        /// Per-VF size.
        size: u64,
        /// NumVFs.
        num: u16,
    },
    /// The capability could not be built.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// The SR-IOV capability of one PF: where it is and the VF BARs it declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sriov {
    at: u16,
    bars: [Option<Bar>; 6],
    supported_page_sizes: u32,
}

impl Sriov {
    /// Adds the capability to `cfg` (the PF's space) as `spec` declares it.
    pub fn install(cfg: &mut ConfigSpace, spec: &SriovSpec) -> Result<Sriov, SriovError> {
        if spec.supported_page_sizes & 1 == 0 {
            return Err(SriovError::PageSize {
                value: 1,
                supported: spec.supported_page_sizes,
            });
        }
        let at = capability::add_extended(cfg, ExtCapabilityId::SrIov as u16, 1, 0x40)?;
        cfg.set_masks(at + reg::CONTROL, 2, 0x001f, 0)?;
        cfg.set_masks(at + reg::STATUS, 2, 0, 0x0001)?;
        cfg.set(at + reg::INITIAL_VFS, 2, u32::from(spec.total_vfs))?;
        cfg.set(at + reg::TOTAL_VFS, 2, u32::from(spec.total_vfs))?;
        cfg.set_masks(at + reg::NUM_VFS, 2, 0xffff, 0)?;
        cfg.set(
            at + reg::FIRST_VF_OFFSET,
            2,
            u32::from(spec.first_vf_offset),
        )?;
        cfg.set(at + reg::VF_STRIDE, 2, u32::from(spec.vf_stride))?;
        cfg.set(at + reg::VF_DEVICE_ID, 2, u32::from(spec.vf_device_id))?;
        cfg.set(at + reg::SUPPORTED_PAGE_SIZES, 4, spec.supported_page_sizes)?;
        cfg.set(at + reg::SYSTEM_PAGE_SIZE, 4, 1)?;
        cfg.set_masks(at + reg::SYSTEM_PAGE_SIZE, 4, spec.supported_page_sizes, 0)?;
        let mut bars = [None; 6];
        for &(i, bar) in &spec.vf_bars {
            bar.validate(i, 6)?;
            let n = if bar.kind == BarKind::Mem64 { 2 } else { 1 };
            if bars[i..i + n].iter().any(Option::is_some)
                || (i > 0 && bars[i - 1].is_some_and(|b: Bar| b.kind == BarKind::Mem64))
            {
                return Err(ConfigError::Bar {
                    index: i,
                    why: "overlaps another VF BAR",
                }
                .into());
            }
            bars[i] = Some(bar);
            bar.install(cfg, at + reg::VF_BAR0 + 4 * i as u16)?;
        }
        Ok(Sriov {
            at,
            bars,
            supported_page_sizes: spec.supported_page_sizes,
        })
    }

    /// Offset of the capability in the PF's space.
    pub const fn offset(&self) -> u16 {
        self.at
    }

    /// SR-IOV Control.
    pub fn control(&self, cfg: &ConfigSpace) -> u16 {
        cfg.read16(self.at + reg::CONTROL)
    }

    /// Whether VF Enable is set.
    pub fn vf_enabled(&self, cfg: &ConfigSpace) -> bool {
        self.control(cfg) & CTL_VF_ENABLE != 0
    }

    /// NumVFs.
    pub fn num_vfs(&self, cfg: &ConfigSpace) -> u16 {
        cfg.read16(self.at + reg::NUM_VFS)
    }

    /// TotalVFs.
    pub fn total_vfs(&self, cfg: &ConfigSpace) -> u16 {
        cfg.read16(self.at + reg::TOTAL_VFS)
    }

    /// First VF Offset.
    pub fn first_vf_offset(&self, cfg: &ConfigSpace) -> u16 {
        cfg.read16(self.at + reg::FIRST_VF_OFFSET)
    }

    /// VF Stride.
    pub fn vf_stride(&self, cfg: &ConfigSpace) -> u16 {
        cfg.read16(self.at + reg::VF_STRIDE)
    }

    /// VF Device ID.
    pub fn vf_device_id(&self, cfg: &ConfigSpace) -> u16 {
        cfg.read16(self.at + reg::VF_DEVICE_ID)
    }

    /// The System Page Size in bytes.
    pub fn system_page_size(&self, cfg: &ConfigSpace) -> Result<u64, SriovError> {
        let v = cfg.read32(self.at + reg::SYSTEM_PAGE_SIZE);
        if v.count_ones() != 1 || v & self.supported_page_sizes == 0 {
            return Err(SriovError::PageSize {
                value: v,
                supported: self.supported_page_sizes,
            });
        }
        Ok(4096u64 << v.trailing_zeros())
    }

    /// Applies what a host write just did to the capability: NumVFs may only change while
    /// VF Enable is clear (the old value is kept otherwise: the specification leaves that
    /// write undefined), and the VF BARs' read-only low bits follow the System Page Size.
    pub fn after_host_write(&self, cfg: &mut ConfigSpace, old_control: u16, old_num_vfs: u16) {
        if old_control & CTL_VF_ENABLE != 0 && self.num_vfs(cfg) != old_num_vfs {
            // Offsets are in range: `install` placed the capability.
            let _ = cfg.set(self.at + reg::NUM_VFS, 2, u32::from(old_num_vfs));
        }
        let page = self.system_page_size(cfg).unwrap_or(4096);
        for (i, bar) in self.bars.iter().enumerate() {
            let Some(bar) = bar else { continue };
            let wide = Bar {
                size: bar.size.max(page),
                ..*bar
            };
            let at = self.at + reg::VF_BAR0 + 4 * i as u16;
            let addr = wide.address(cfg, at) & !(wide.size - 1);
            let _ = wide.install(cfg, at);
            let _ = cfg.set(at, 4, (addr as u32 & !0xf) | wide.type_bits());
            if wide.kind == BarKind::Mem64 {
                let _ = cfg.set(at + 4, 4, (addr >> 32) as u32);
            }
        }
    }

    /// NumVFs, checked against TotalVFs and the routing-id rules for a PF at `pf`.
    pub fn checked_num_vfs(&self, cfg: &ConfigSpace, pf: Bdf) -> Result<u16, SriovError> {
        let num = self.num_vfs(cfg);
        let total = self.total_vfs(cfg);
        if num > total {
            return Err(SriovError::NumVfs { num, total });
        }
        if num == 0 {
            return Ok(0);
        }
        if self.first_vf_offset(cfg) == 0 {
            return Err(SriovError::ZeroOffset);
        }
        if num > 1 && self.vf_stride(cfg) == 0 {
            return Err(SriovError::ZeroStride { num });
        }
        // The last VF's id is the largest; if it fits, all do.
        self.vf_routing_id_unchecked(cfg, pf, num)?;
        Ok(num)
    }

    fn vf_routing_id_unchecked(
        &self,
        cfg: &ConfigSpace,
        pf: Bdf,
        n: u16,
    ) -> Result<Bdf, SriovError> {
        let offset = self.first_vf_offset(cfg);
        let stride = self.vf_stride(cfg);
        let rid =
            u32::from(pf.source_id()) + u32::from(offset) + u32::from(n - 1) * u32::from(stride);
        u16::try_from(rid)
            .map(bdf_from_id)
            .map_err(|_| SriovError::RoutingIdOverflow {
                n,
                pf: pf.source_id(),
                offset,
                stride,
            })
    }

    /// VF `n`'s routing id (1-based), for a PF at `pf`.
    pub fn vf_routing_id(&self, cfg: &ConfigSpace, pf: Bdf, n: u16) -> Result<Bdf, SriovError> {
        let num = self.checked_num_vfs(cfg, pf)?;
        if n == 0 || n > num {
            return Err(SriovError::NoSuchVf { n, num });
        }
        self.vf_routing_id_unchecked(cfg, pf, n)
    }

    /// The per-VF size of VF BAR `i` at the current System Page Size, if the BAR exists.
    pub fn vf_bar_size(&self, cfg: &ConfigSpace, i: usize) -> Result<Option<u64>, SriovError> {
        let page = self.system_page_size(cfg)?;
        Ok(self
            .bars
            .get(i)
            .copied()
            .flatten()
            .map(|b| b.size.max(page)))
    }

    /// VF `n`'s BAR `i` as `(base, size)`: `VF BARi + (n - 1) * size`.
    pub fn vf_bar(
        &self,
        cfg: &ConfigSpace,
        pf: Bdf,
        i: usize,
        n: u16,
    ) -> Result<Option<(u64, u64)>, SriovError> {
        let num = self.checked_num_vfs(cfg, pf)?;
        if n == 0 || n > num {
            return Err(SriovError::NoSuchVf { n, num });
        }
        let Some(size) = self.vf_bar_size(cfg, i)? else {
            return Ok(None);
        };
        let Some(bar) = self.bars[i] else {
            return Ok(None);
        };
        let base = bar.address(cfg, self.at + reg::VF_BAR0 + 4 * i as u16);
        let top = u64::from(num)
            .checked_mul(size)
            .and_then(|len| base.checked_add(len - 1));
        let fits = match (bar.kind, top) {
            (_, None) => false,
            (BarKind::Mem32, Some(t)) => t <= u64::from(u32::MAX),
            (BarKind::Mem64, Some(_)) => true,
        };
        if !fits {
            return Err(SriovError::BarOverflow {
                index: i,
                base,
                size,
                num,
            });
        }
        Ok(Some((base + u64::from(n - 1) * size, size)))
    }

    /// The VF BAR registers declared (index → BAR at a 4 KiB page).
    pub fn bars(&self) -> &[Option<Bar>; 6] {
        &self.bars
    }
}
