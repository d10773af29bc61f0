//! Multi-root sharing of an SR-IOV device (S4.3): the I/O-side bridge gives each VF to a
//! different host.
//!
//! ```text
//!  host h (VLAN v) ──MWr/MRd at A (h's address space)──► I/O bridge
//!     A in VE(h).BAR0 = [B', B' + size)?  no → Unsupported Request (h reaches nothing else)
//!     yes → A - B' + B  (B = VF(h)'s BAR slice in the device address space) ──► VF(h)
//!  host h ──CfgRd/CfgWr──► VE(h)'s virtual configuration registers (never the device's)
//!  VF(h) ──DMA MRd/MWr at X (h's IOVA)──► I/O bridge: requester VF rid → VE rid, X unchanged
//!     ──VLAN v──► host h's IOMMU (RemapUnit::translate(VE rid, X)) ──► h's memory or a fault
//! ```
//!
//! A virtual endpoint (VE) is a set of configuration registers in the I/O-side bridge: a
//! type 0 header with the PF's vendor id, the VF device id and one BAR sized like the VF's
//! slice, so the host enumerates an ordinary non-IOV device and loads the VF driver. The
//! bridge (in the role of the SR-PCIM) owns the PF: it enables SR-IOV and places the VF BARs
//! in a device address space no host sees. The destination address of a VF's DMA is not
//! translated: the host's driver programmed the VF with addresses of its own space (S4.3).
//!
//! Each host owns its unit through [`HostIommu`], the hypervisor side's one owner of a
//! remapping unit (the KVM and Xen hosts use it too); here it only translates: the host's
//! own DMA layer maps its buffers.

use iommulab_base::addr::{Access, Bdf, Hpa, Iova};
use iommulab_hw::host_iommu::HostIommu;
use iommulab_hw::{Fault, RemapUnit};

use crate::config::header::{self, Bar, BarKind, COMMAND_BUS_MASTER, Ids};
use crate::config::pcie_cap::{self, PortType};
use crate::config::{ConfigError, ConfigSpace};
use crate::function::{FunctionId, PhysicalFunction, add_msi};
use crate::sriov::{CTL_VF_ENABLE, CTL_VF_MSE, SriovError, reg};
use crate::tlp::{Completion, CompletionStatus, MemRequest, Tlp, TlpError};

/// Why the I/O-side bridge refuses a configuration or a TLP.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    /// The VF does not exist (NumVFs is smaller).
    #[error("VF {0} does not exist")]
    NoSuchVf(u16),
    /// The VF is already given to a host.
    #[error("VF {vf} is already assigned to the host on VLAN {vlan}")]
    Assigned {
        /// The VF.
        vf: u16,
        /// The VLAN of the host holding it.
        vlan: u16,
    },
    /// The device's SR-IOV registers do not bring up the VFs.
    #[error(transparent)]
    Sriov(#[from] SriovError),
    /// A configuration space could not be built.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A TLP could not be re-encoded after translation.
    #[error(transparent)]
    Tlp(#[from] TlpError),
    /// A TLP from the device that no VF assigned to a host sent.
    #[error("TLP from {0}, which is not a VF assigned to a host")]
    Unassigned(Bdf),
}

/// A virtual endpoint: what host `vlan` sees of its VF.
#[derive(Clone, Debug)]
pub struct VirtualEndpoint {
    vlan: u16,
    vf: u16,
    rid: Bdf,
    config: ConfigSpace,
    bar: Bar,
    msi: u16,
}

impl VirtualEndpoint {
    /// The host's VLAN.
    pub const fn vlan(&self) -> u16 {
        self.vlan
    }

    /// The VF behind it.
    pub const fn vf(&self) -> u16 {
        self.vf
    }

    /// Its routing id in the host's tree.
    pub const fn rid(&self) -> Bdf {
        self.rid
    }

    /// Its virtual configuration registers.
    pub fn config(&self) -> &ConfigSpace {
        &self.config
    }

    /// The host address its BAR0 is programmed at.
    pub fn bar_base(&self) -> u64 {
        self.bar.address(&self.config, header::bar_offset(0))
    }
}

/// What a TLP from a host became.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FromHost {
    /// Translated and delivered to the device (`len` bytes of TLP in the output buffer),
    /// reaching `function`.
    ToDevice {
        /// Bytes written.
        len: usize,
        /// The function that claims the translated address.
        function: FunctionId,
    },
    /// Answered by the bridge (a VE's configuration completion, or Unsupported Request for
    /// an address or routing id that is not this host's): `len` bytes of completion TLP.
    Completion {
        /// Bytes written.
        len: usize,
        /// Its status.
        status: CompletionStatus,
    },
    /// A posted write to nowhere: dropped (PCIe discards it and logs Unsupported Request).
    Dropped,
}

/// The I/O-side bridge of a shared SR-IOV device.
#[derive(Clone, Debug)]
pub struct IoBridge {
    pf: PhysicalFunction,
    ves: Vec<VirtualEndpoint>,
    ids: Ids,
}

impl IoBridge {
    /// Takes the PF, enables `num_vfs` VFs with VF BAR0 at `vf_bar_base` in the device
    /// address space (the bridge is the SR-PCIM), and presents no VE yet. `ids` is the
    /// identity the VEs show (the PF's vendor and class; the device id is the VF's).
    pub fn new(
        mut pf: PhysicalFunction,
        num_vfs: u16,
        vf_bar_base: u64,
    ) -> Result<Self, ShareError> {
        let at = pf.sriov().offset();
        let mut w = |off: u16, v: u32| pf.config_write(off / 4, v.to_le_bytes(), 0xf);
        w(at + reg::VF_BAR0, vf_bar_base as u32);
        w(at + reg::VF_BAR0 + 4, (vf_bar_base >> 32) as u32);
        w(at + reg::NUM_VFS, u32::from(num_vfs));
        w(at + reg::CONTROL, u32::from(CTL_VF_ENABLE | CTL_VF_MSE));
        if let Some(e) = pf.vf_error() {
            return Err(e.clone().into());
        }
        let cfg = pf.config();
        let ids = Ids {
            vendor: cfg.read16(0),
            device: pf.sriov().vf_device_id(cfg),
            revision: cfg.read8(8),
            class: cfg.read32(8) >> 8,
            subsystem_vendor: cfg.read16(0x2c),
            subsystem: cfg.read16(0x2e),
        };
        Ok(IoBridge {
            pf,
            ves: Vec::new(),
            ids,
        })
    }

    /// The device.
    pub fn pf(&self) -> &PhysicalFunction {
        &self.pf
    }

    /// The VEs, in assignment order.
    pub fn ves(&self) -> &[VirtualEndpoint] {
        &self.ves
    }

    /// Gives VF `vf` to the host on VLAN `vlan`, as a VE at routing id `rid` in that host's
    /// tree. The host then finds it by enumeration (the keep-alive hot-plug, S4.2).
    pub fn assign(&mut self, vf: u16, vlan: u16, rid: Bdf) -> Result<(), ShareError> {
        let v = self.pf.vf(vf).ok_or(ShareError::NoSuchVf(vf))?;
        if let Some(ve) = self.ves.iter().find(|e| e.vf == vf) {
            return Err(ShareError::Assigned { vf, vlan: ve.vlan });
        }
        let (_, size) = v.bars()[0].ok_or(ShareError::NoSuchVf(vf))?;
        let bar = Bar {
            kind: BarKind::Mem64,
            size,
            prefetchable: true,
        };
        let mut config = header::type0(&self.ids, &[(0, bar)], 1)?;
        pcie_cap::add(&mut config, PortType::Endpoint, 1)?;
        let msi = add_msi(&mut config)?;
        self.ves.push(VirtualEndpoint {
            vlan,
            vf,
            rid,
            config,
            bar,
            msi,
        });
        Ok(())
    }

    /// Takes VF `vf` back from its host (hot-remove); its VE disappears.
    pub fn unassign(&mut self, vf: u16) {
        self.ves.retain(|e| e.vf != vf);
        if let Some(v) = self.pf.vf_mut(vf) {
            v.config_write(1, [0; 4], 0x1);
        }
    }

    fn ve_index(&self, vlan: u16, pred: impl Fn(&VirtualEndpoint) -> bool) -> Option<usize> {
        self.ves.iter().position(|e| e.vlan == vlan && pred(e))
    }

    /// A TLP from the host on VLAN `vlan`; the result's bytes go to `out`.
    pub fn from_host(
        &mut self,
        vlan: u16,
        tlp: &Tlp<'_>,
        out: &mut [u8],
    ) -> Result<FromHost, ShareError> {
        let ur = |requester: Bdf,
                  completer: Bdf,
                  tag: u8,
                  out: &mut [u8]|
         -> Result<FromHost, ShareError> {
            let mut c = Completion::new(completer, requester, tag, 4, 0);
            c.status = CompletionStatus::UnsupportedRequest;
            let len = Tlp::Completion(c).encode(out)?;
            Ok(FromHost::Completion {
                len,
                status: c.status,
            })
        };
        match *tlp {
            Tlp::ConfigRead(c) | Tlp::ConfigWrite(c, _) => {
                let Some(i) = self.ve_index(vlan, |e| e.rid == c.target) else {
                    return ur(c.requester, c.target, c.tag, out);
                };
                let cpl = Completion::new(c.target, c.requester, c.tag, 4, 0);
                if let Tlp::ConfigWrite(_, d) = tlp {
                    let ve = &mut self.ves[i];
                    ve.config.write_dw(c.register, *d, c.first_be);
                    // The host's Bus Master Enable on its VE is the VF's (its DMA on or off).
                    let bm = ve.config.read16(0x04) & COMMAND_BUS_MASTER;
                    let (vf, ve_msi) = (ve.vf, ve.msi);
                    if let Some(v) = self.pf.vf_mut(vf) {
                        v.config_write(1, (bm as u32).to_le_bytes(), 0x1);
                        // The host programs MSI on its VE; the VF raises it: mirror the
                        // capability's registers (same layout) into the VF's.
                        let off = c.register * 4;
                        if off >= ve_msi && off < ve_msi + 24 {
                            let at = v.msi_offset() + (off - ve_msi);
                            v.config_write(at / 4, *d, c.first_be);
                        }
                    }
                    let len = Tlp::Completion(cpl).encode(out)?;
                    return Ok(FromHost::Completion {
                        len,
                        status: cpl.status,
                    });
                }
                let data = self.ves[i].config.read_dw(c.register);
                let len = Tlp::CompletionData(cpl, &data).encode(out)?;
                Ok(FromHost::Completion {
                    len,
                    status: cpl.status,
                })
            }
            Tlp::MemRead(m) | Tlp::MemWrite(m, _) => {
                let hit = self.ve_index(vlan, |e| {
                    e.config.read16(0x04) & header::COMMAND_MEMORY != 0
                        && m.address.wrapping_sub(e.bar_base()) < e.bar.size
                });
                let Some(i) = hit else {
                    return match tlp {
                        Tlp::MemRead(_) => ur(m.requester, m.requester, m.tag, out),
                        _ => Ok(FromHost::Dropped),
                    };
                };
                let ve = &self.ves[i];
                let Some((vf_base, _)) = self.pf.vf(ve.vf).and_then(|v| v.bars()[0]) else {
                    return ur(m.requester, m.requester, m.tag, out);
                };
                // S4.3: the destination moves by the deviation between the VE's base (B')
                // and the VF's base (B); the offset inside the BAR is kept.
                let translated = MemRequest {
                    address: m.address - ve.bar_base() + vf_base,
                    ..m
                };
                let len = match tlp {
                    Tlp::MemWrite(_, p) => Tlp::MemWrite(translated, p).encode(out)?,
                    _ => Tlp::MemRead(translated).encode(out)?,
                };
                let function = self
                    .pf
                    .claim(translated.address)
                    .map_or(FunctionId::Pf, |(f, _, _)| f);
                Ok(FromHost::ToDevice { len, function })
            }
            Tlp::Completion(c) | Tlp::CompletionData(c, _) => {
                // The host completes a read its VF made (S4.3: the VF's DMA reads host
                // memory): the completion is routed by requester id, the VE's in the host's
                // tree, which becomes the VF's again. Anything else has no request behind it.
                let Some(i) = self.ve_index(vlan, |e| e.rid == c.requester) else {
                    return ur(c.requester, c.completer, c.tag, out);
                };
                let vf = self.ves[i].vf;
                let Some(rid) = self.pf.vf(vf).map(|v| v.rid()) else {
                    return ur(c.requester, c.completer, c.tag, out);
                };
                let routed = Completion {
                    requester: rid,
                    ..c
                };
                let len = match tlp {
                    Tlp::CompletionData(_, d) => Tlp::CompletionData(routed, d).encode(out)?,
                    _ => Tlp::Completion(routed).encode(out)?,
                };
                Ok(FromHost::ToDevice {
                    len,
                    function: FunctionId::Vf(vf),
                })
            }
        }
    }

    /// A TLP from the device (a VF's DMA or MSI write, or a completion to a host's read):
    /// the requester id becomes the VE's, the address stays; returns the VLAN of the host it
    /// goes to and the bytes written to `out`.
    pub fn from_device(&self, tlp: &Tlp<'_>, out: &mut [u8]) -> Result<(u16, usize), ShareError> {
        let source = match tlp {
            Tlp::Completion(c) | Tlp::CompletionData(c, _) => c.completer,
            t => t.requester(),
        };
        let Some(FunctionId::Vf(n)) = self.pf.function_at(source) else {
            return Err(ShareError::Unassigned(source));
        };
        let ve = self
            .ves
            .iter()
            .find(|e| e.vf == n)
            .ok_or(ShareError::Unassigned(source))?;
        let len = match *tlp {
            Tlp::MemRead(m) => Tlp::MemRead(MemRequest {
                requester: ve.rid,
                ..m
            })
            .encode(out)?,
            Tlp::MemWrite(m, p) => Tlp::MemWrite(
                MemRequest {
                    requester: ve.rid,
                    ..m
                },
                p,
            )
            .encode(out)?,
            Tlp::Completion(c) => Tlp::Completion(Completion {
                completer: ve.rid,
                ..c
            })
            .encode(out)?,
            Tlp::CompletionData(c, p) => Tlp::CompletionData(
                Completion {
                    completer: ve.rid,
                    ..c
                },
                p,
            )
            .encode(out)?,
            Tlp::ConfigRead(_) | Tlp::ConfigWrite(..) => {
                return Err(ShareError::Unassigned(source));
            }
        };
        Ok((ve.vlan, len))
    }
}

/// A host: its VLAN and its own IOMMU (each host keeps its own, S4.3).
#[derive(Debug)]
pub struct Host<U> {
    /// The host's VLAN (its group).
    pub vlan: u16,
    /// The host's remapping unit.
    pub iommu: HostIommu<U>,
}

/// What a device's memory request did at a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaOutcome {
    /// Translated by the host's IOMMU to this host-physical address.
    Reached(Hpa),
    /// Blocked by the host's IOMMU (recorded in its fault log).
    Faulted(Fault),
}

impl<U: RemapUnit> Host<U> {
    /// A memory request from a device arrives (bytes as the bridge delivered them): the
    /// host's IOMMU translates its address for its requester (the VE's routing id).
    pub fn dma(&mut self, bytes: &[u8]) -> Result<DmaOutcome, TlpError> {
        let (m, access) = match Tlp::decode(bytes)? {
            Tlp::MemRead(m) => (m, Access::Read),
            Tlp::MemWrite(m, _) => (m, Access::Write),
            _ => {
                return Err(TlpError::UnsupportedType {
                    fmt: bytes[0] >> 5,
                    typ: bytes[0] & 0x1f,
                });
            }
        };
        Ok(
            match self
                .iommu
                .translate(m.requester, Iova::new(m.address), access)
            {
                Ok(hpa) => DmaOutcome::Reached(hpa),
                Err(f) => DmaOutcome::Faulted(f),
            },
        )
    }
}
