//! A physical function and its virtual functions (S4.1): the PF configures the device; each
//! VF has its own configuration registers, memory BARs, DMA and interrupts.
//!
//! ```text
//!  CfgRd/CfgWr to PF RID ──► PF config space ──(SR-IOV: VF Enable 0→1)──► VFs 1..=NumVFs
//!  CfgRd/CfgWr to VF RID ──► that VF's config space (Vendor/Device ID read 0xffff, BARs 0)
//!  MRd/MWr at an address ──► the function whose BAR (or VF BAR slice) holds it
//!  VF DMA  ──► MRd/MWr with the VF's routing id as requester (the IOMMU picks the domain by it)
//!  VF MSI  ──► MWr of the message data to the message address
//! ```
//!
//! A VF's Vendor ID and Device ID read 0xffff and its BARs read 0 (SR-IOV 1.1 §3.4): its
//! identity and BARs live in the PF's SR-IOV capability; its Memory Space Enable is the
//! PF's VF MSE. That is why a host given a bare VF cannot use it as an ordinary device, and
//! why S4.3 puts a virtual endpoint in front of it.

// Bit-exact field packing: each narrowing cast keeps a field's low bits on purpose, and
// every value is range-checked before it is packed.
#![allow(clippy::cast_possible_truncation)]

use iommulab_base::addr::Bdf;

use crate::config::capability::{self, CapabilityId};
use crate::config::header::{self, Bar, COMMAND_BUS_MASTER, COMMAND_MEMORY, Ids};
use crate::config::pcie_cap::{self, PortType};
use crate::config::{ConfigError, ConfigSpace};
use crate::sriov::{CTL_VF_MSE, Sriov, SriovError, SriovSpec, reg};
use crate::tlp::{Completion, CompletionStatus, ConfigRequest, MemRequest, Tlp};

/// Which function of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FunctionId {
    /// The physical function.
    Pf,
    /// Virtual function `n` (1-based).
    Vf(u16),
}

/// Why a function cannot issue a DMA or interrupt.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FunctionError {
    /// Bus Master Enable is clear in the function's Command register.
    #[error("{0}: Bus Master Enable is clear, the function may not issue memory requests")]
    BusMasterDisabled(Bdf),
    /// MSI is not enabled.
    #[error("{0}: MSI is not enabled")]
    MsiDisabled(Bdf),
    /// A DMA request that is not a well-formed TLP.
    #[error("{0}: {1}")]
    Tlp(Bdf, crate::tlp::TlpError),
}

/// MSI capability layout (64-bit address, 24 bytes): +2 Message Control (Enable [0]),
/// +4 Message Address, +8 Message Upper Address, +0xc Message Data.
const MSI_LEN: u16 = 24;

/// Adds an MSI capability (64-bit address) to `cfg`; returns its offset.
pub(crate) fn add_msi(cfg: &mut ConfigSpace) -> Result<u16, ConfigError> {
    let at = capability::add(cfg, CapabilityId::Msi as u8, MSI_LEN)?;
    // 64-bit address capable [7]; Enable [0] is RW.
    cfg.set(at + 2, 2, 1 << 7)?;
    cfg.set_masks(at + 2, 2, 0x0001, 0)?;
    cfg.set_masks(at + 4, 4, 0xffff_fffc, 0)?;
    cfg.set_masks(at + 8, 4, 0xffff_ffff, 0)?;
    cfg.set_masks(at + 0xc, 2, 0xffff, 0)?;
    Ok(at)
}

fn msi_message(
    cfg: &ConfigSpace,
    at: u16,
    rid: Bdf,
) -> Result<(MemRequest, [u8; 4]), FunctionError> {
    if cfg.read16(at + 2) & 1 == 0 {
        return Err(FunctionError::MsiDisabled(rid));
    }
    let addr = u64::from(cfg.read32(at + 4)) | (u64::from(cfg.read32(at + 8)) << 32);
    let data = u32::from(cfg.read16(at + 0xc)).to_le_bytes();
    Ok((MemRequest::new(rid, 0, addr, 1), data))
}

/// Each VF BAR slice `(base, size)` of one VF, by BAR register.
pub type VfBars = [Option<(u64, u64)>; 6];

/// A virtual function.
#[derive(Clone, Debug)]
pub struct VirtualFunction {
    n: u16,
    rid: Bdf,
    config: ConfigSpace,
    msi: u16,
    /// `(base, size)` of each VF BAR slice; `None` where the PF declares no such VF BAR.
    bars: [Option<(u64, u64)>; 6],
}

impl VirtualFunction {
    fn new(n: u16, rid: Bdf, bars: [Option<(u64, u64)>; 6]) -> Result<Self, ConfigError> {
        let ids = Ids {
            vendor: 0xffff,
            device: 0xffff,
            revision: 0,
            class: 0x02_00_00,
            subsystem_vendor: 0,
            subsystem: 0,
        };
        let mut config = header::type0(&ids, &[], 0)?;
        // Memory Space Enable is RO 0 in a VF (the PF's VF MSE governs); Bus Master is RW.
        config.set_masks(0x04, 2, u32::from(COMMAND_BUS_MASTER), 0)?;
        pcie_cap::add(&mut config, PortType::Endpoint, 1)?;
        let msi = add_msi(&mut config)?;
        Ok(VirtualFunction {
            n,
            rid,
            config,
            msi,
            bars,
        })
    }

    /// The VF's index (1-based).
    pub const fn index(&self) -> u16 {
        self.n
    }

    /// Its routing id.
    pub const fn rid(&self) -> Bdf {
        self.rid
    }

    /// Its configuration space.
    pub fn config(&self) -> &ConfigSpace {
        &self.config
    }

    /// A host write to its configuration space.
    pub fn config_write(&mut self, register: u16, data: [u8; 4], be: u8) {
        self.config.write_dw(register, data, be);
    }

    /// Offset of its MSI capability.
    pub const fn msi_offset(&self) -> u16 {
        self.msi
    }

    /// Its BAR slices `(base, size)`.
    pub fn bars(&self) -> &[Option<(u64, u64)>; 6] {
        &self.bars
    }

    /// A DMA the VF issues (S4.1: each VF has its own DMA): a memory request with the VF's
    /// routing id, `address` in the address space of whoever drives the VF (S4.3: its host).
    pub fn dma(&self, tag: u8, address: u64, length_dw: u16) -> Result<MemRequest, FunctionError> {
        if self.config.read16(0x04) & COMMAND_BUS_MASTER == 0 {
            return Err(FunctionError::BusMasterDisabled(self.rid));
        }
        let m = MemRequest::new(self.rid, tag, address, length_dw);
        m.validate().map_err(|e| FunctionError::Tlp(self.rid, e))?;
        Ok(m)
    }

    /// The VF's interrupt: its MSI message, a memory write of the message data.
    pub fn interrupt(&self) -> Result<(MemRequest, [u8; 4]), FunctionError> {
        msi_message(&self.config, self.msi, self.rid)
    }
}

/// A physical function with the SR-IOV capability, and its VFs while VF Enable is set.
#[derive(Clone, Debug)]
pub struct PhysicalFunction {
    rid: Bdf,
    config: ConfigSpace,
    bars: Vec<(usize, Bar)>,
    sriov: Sriov,
    vfs: Vec<VirtualFunction>,
    /// Why the last VF Enable did not bring up VFs (a host-visible misconfiguration).
    vf_error: Option<SriovError>,
}

impl PhysicalFunction {
    /// A PF at `rid` with identity `ids`, BARs `bars` and the SR-IOV capability `sriov`.
    pub fn new(
        rid: Bdf,
        ids: &Ids,
        bars: &[(usize, Bar)],
        sriov: &SriovSpec,
    ) -> Result<Self, SriovError> {
        let mut config = header::type0(ids, bars, 1)?;
        pcie_cap::add(&mut config, PortType::Endpoint, 1)?;
        add_msi(&mut config)?;
        let sriov = Sriov::install(&mut config, sriov)?;
        Ok(PhysicalFunction {
            rid,
            config,
            bars: bars.to_vec(),
            sriov,
            vfs: Vec::new(),
            vf_error: None,
        })
    }

    /// Its routing id.
    pub const fn rid(&self) -> Bdf {
        self.rid
    }

    /// Its configuration space.
    pub fn config(&self) -> &ConfigSpace {
        &self.config
    }

    /// Its SR-IOV capability.
    pub fn sriov(&self) -> &Sriov {
        &self.sriov
    }

    /// The enabled VFs, VF 1 first.
    pub fn vfs(&self) -> &[VirtualFunction] {
        &self.vfs
    }

    /// VF `n` (1-based).
    pub fn vf(&self, n: u16) -> Option<&VirtualFunction> {
        self.vfs.get(usize::from(n).checked_sub(1)?)
    }

    /// VF `n`, mutably.
    pub fn vf_mut(&mut self, n: u16) -> Option<&mut VirtualFunction> {
        self.vfs.get_mut(usize::from(n).checked_sub(1)?)
    }

    /// Why the last VF Enable brought up no VFs, if it did not.
    pub fn vf_error(&self) -> Option<&SriovError> {
        self.vf_error.as_ref()
    }

    /// A host write to the PF's configuration space. VF Enable 0 → 1 brings up NumVFs VFs
    /// (each with a fresh configuration space); 1 → 0 removes them.
    pub fn config_write(&mut self, register: u16, data: [u8; 4], be: u8) {
        let at = self.sriov.offset();
        let old_control = self.sriov.control(&self.config);
        let old_num = self.sriov.num_vfs(&self.config);
        self.config.write_dw(register, data, be);
        self.sriov
            .after_host_write(&mut self.config, old_control, old_num);
        let enabled = self.sriov.vf_enabled(&self.config);
        let was = old_control & crate::sriov::CTL_VF_ENABLE != 0;
        if enabled && !was {
            match self.bring_up_vfs() {
                Ok(vfs) => {
                    self.vfs = vfs;
                    self.vf_error = None;
                }
                Err(e) => {
                    self.vfs.clear();
                    self.vf_error = Some(e);
                }
            }
        } else if !enabled && was {
            self.vfs.clear();
        } else if enabled
            && (register * 4 >= at + reg::VF_BAR0 && register * 4 < at + reg::VF_BAR0 + 24)
        {
            // VF BARs moved while enabled: the slices follow.
            if let Ok(vfs) = self.bar_slices() {
                for (vf, bars) in self.vfs.iter_mut().zip(vfs) {
                    vf.bars = bars;
                }
            }
        }
    }

    fn bar_slices(&self) -> Result<Vec<VfBars>, SriovError> {
        let num = self.sriov.checked_num_vfs(&self.config, self.rid)?;
        (1..=num)
            .map(|n| {
                let mut bars = [None; 6];
                for (i, b) in bars.iter_mut().enumerate() {
                    *b = self.sriov.vf_bar(&self.config, self.rid, i, n)?;
                }
                Ok(bars)
            })
            .collect()
    }

    fn bring_up_vfs(&self) -> Result<Vec<VirtualFunction>, SriovError> {
        let slices = self.bar_slices()?;
        slices
            .into_iter()
            .enumerate()
            .map(|(k, bars)| {
                let n = k as u16 + 1;
                let rid = self.sriov.vf_routing_id(&self.config, self.rid, n)?;
                Ok(VirtualFunction::new(n, rid, bars)?)
            })
            .collect()
    }

    /// The function a configuration request for `rid` reaches.
    pub fn function_at(&self, rid: Bdf) -> Option<FunctionId> {
        if rid == self.rid {
            return Some(FunctionId::Pf);
        }
        self.vfs
            .iter()
            .find(|v| v.rid == rid)
            .map(|v| FunctionId::Vf(v.n))
    }

    /// Which function (and BAR, and offset in it) a memory request at `address` reaches:
    /// the PF's BARs when its Memory Space Enable is set, a VF's BAR slice when VF MSE is.
    pub fn claim(&self, address: u64) -> Option<(FunctionId, usize, u64)> {
        if self.config.read16(0x04) & COMMAND_MEMORY != 0 {
            for &(i, bar) in &self.bars {
                let base = bar.address(&self.config, header::bar_offset(i));
                if address.wrapping_sub(base) < bar.size {
                    return Some((FunctionId::Pf, i, address - base));
                }
            }
        }
        if self.sriov.control(&self.config) & CTL_VF_MSE != 0 {
            for vf in &self.vfs {
                for (i, b) in vf.bars.iter().enumerate() {
                    if let Some((base, size)) = *b
                        && address.wrapping_sub(base) < size
                    {
                        return Some((FunctionId::Vf(vf.n), i, address - base));
                    }
                }
            }
        }
        None
    }

    /// Completes a configuration request to the PF or one of its VFs: the read's data or a
    /// write's completion; Unsupported Request for a routing id no function has.
    pub fn config_request(
        &mut self,
        c: &ConfigRequest,
        data: Option<[u8; 4]>,
    ) -> (Completion, Option<[u8; 4]>) {
        let mut cpl = Completion::new(c.target, c.requester, c.tag, 4, 0);
        let Some(f) = self.function_at(c.target) else {
            cpl.status = CompletionStatus::UnsupportedRequest;
            return (cpl, None);
        };
        match (f, data) {
            (FunctionId::Pf, Some(d)) => {
                self.config_write(c.register, d, c.first_be);
                (cpl, None)
            }
            (FunctionId::Pf, None) => (cpl, Some(self.config.read_dw(c.register))),
            (FunctionId::Vf(n), Some(d)) => {
                if let Some(vf) = self.vf_mut(n) {
                    vf.config_write(c.register, d, c.first_be);
                }
                (cpl, None)
            }
            (FunctionId::Vf(n), None) => (cpl, self.vf(n).map(|v| v.config.read_dw(c.register))),
        }
    }

    /// Handles a configuration TLP, returning the completion as a TLP (borrowing `buf` for
    /// read data); `None` for a TLP that is not a configuration request.
    pub fn handle_config<'b>(&mut self, tlp: &Tlp<'_>, buf: &'b mut [u8; 4]) -> Option<Tlp<'b>> {
        let (c, d) = match tlp {
            Tlp::ConfigRead(c) => (c, None),
            Tlp::ConfigWrite(c, d) => (c, Some(*d)),
            _ => return None,
        };
        match self.config_request(c, d) {
            (cpl, Some(read)) => {
                *buf = read;
                Some(Tlp::CompletionData(cpl, &buf[..]))
            }
            (cpl, None) => Some(Tlp::Completion(cpl)),
        }
    }
}
