//! The functional path the timing model drives (S4.2, S4.3): every DMA the NIC makes is a
//! real TLP from its VF, through the I/O-side bridge (requester id to the host's virtual
//! endpoint), in an 802.1Q frame through the VLAN-aware Ethernet to the host's bridge, and
//! through the host's own IOMMU; a read's completions come back the same way and the bridge
//! routes them to the VF. [`super::sim`] asks this path for every read and every packet's
//! writes and puts the bytes it encoded on its links, so the figures' numbers come from the
//! TLPs the functional model produced, not from a second description of them.
//!
//! ```text
//!  VF(h).dma ─MRd/MWr─► IoBridge::from_device (VF rid → VE rid, VLAN of h) ─► Frame ─► Switch
//!     ─► host h's bridge ─► Host::dma (h's IOMMU: IOVA → HPA, or a fault)
//!  host h ─CplD × (read / completion size)─► Frame ─► Switch ─► IoBridge::from_host (VE rid → VF rid)
//! ```
//!
//! Set-up goes through the same functional pieces: each host's virtual switch turns its
//! type 1 configuration writes into type 0 requests for its virtual endpoint, which the
//! bridge answers (BAR0 and Memory/Bus Master enable), and each host maps its packet
//! buffers in its IOMMU. Steady state encodes into fixed buffers: no allocation per TLP.

use iommulab_base::addr::{Bdf, DomainId, Hpa, Iova, Perm, Pfn};
use iommulab_hw::{HostIommu, Vtd, VtdConfig};

use crate::bridge::frame::{Frame, FrameKind, Mac, WIRE_OVERHEAD_BYTES, frame_bytes};
use crate::bridge::host_side::{ConfigRoute, VirtualSwitch};
use crate::bridge::mrshare::{DmaOutcome, FromHost, Host, IoBridge};
use crate::bridge::switch::{Port, Switch};
use crate::config::header::{Bar, BarKind, Ids};
use crate::function::{FunctionId, PhysicalFunction};
use crate::sriov::SriovSpec;
use crate::tlp::{
    Completion, CompletionStatus, ConfigKind, ConfigRequest, MAX_TLP_BYTES, MemRequest, Tlp,
};

/// The paper's NIC as `lspci` shows it (Figure 8: Neterion X3100, vendor 0x17d5).
pub(crate) const NIC: Ids = Ids {
    vendor: 0x17d5,
    device: 0x5833,
    revision: 1,
    class: 0x02_00_00,
    subsystem_vendor: 0x17d5,
    subsystem: 0x6020,
};
/// Where the bridge (as SR-PCIM) places the VF BARs in the device's address space.
const VF_BAR_BASE: u64 = 0x40_0000_0000;
/// Where each host programs its VE's BAR0 (every host may pick the same address).
const VE_BAR: u64 = 0xe000_0000;
/// First IOVA of the packet buffers each host maps for its VF.
pub const BUFFER_IOVA: u64 = 0x10_0000;
/// Bytes of packet buffers each host maps (a ring of 16 jumbo buffers of 16 KiB).
pub const BUFFER_BYTES: u64 = 16 * 16 * 1024;
const IO_PORT: usize = 0;
const DOMAIN: DomainId = DomainId::new(1);

/// Something the functional path refused: a bug in the set-up or a DMA the model's own
/// mappings do not allow. Either is a model error, reported, never a panic.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PathError {
    /// A step of the path failed.
    #[error("functional path, {step}: {detail}")]
    Step {
        /// Which step.
        step: &'static str,
        /// What went wrong.
        detail: String,
    },
}

fn fail(step: &'static str, e: impl std::fmt::Display) -> PathError {
    PathError::Step {
        step,
        detail: e.to_string(),
    }
}

/// The sizes one DMA read put on the links, as encoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadTlps {
    /// The MRd's TLP bytes on PCIe (before link framing).
    pub mrd_tlp: u64,
    /// The MRd's frame on the Ethernet, with preamble and gap.
    pub mrd_wire: u64,
    /// Completions the host returned.
    pub cpl_frames: u64,
    /// TLP bytes of the largest completion (all are equal for aligned reads).
    pub cpl_tlp: u64,
    /// Wire bytes of the largest completion's frame.
    pub cpl_wire: u64,
}

/// The sizes one packet's DMA writes put on the links.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteTlps {
    /// MWr TLPs.
    pub tlps: u64,
    /// TLP bytes of the largest.
    pub tlp: u64,
    /// Wire bytes of the largest one's frame.
    pub wire: u64,
}

/// Counts of what crossed the path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PathStats {
    /// TLPs encoded and decoded end to end.
    pub tlps: u64,
    /// Frames the switch forwarded.
    pub frames: u64,
    /// IOMMU translations at the hosts.
    pub translations: u64,
}

/// The functional model of 1-16 hosts, each given one VF of the NIC.
#[derive(Debug)]
pub struct TlpPath {
    io: IoBridge,
    eth: Switch,
    hosts: Vec<Host<Vtd>>,
    vf_rids: Vec<Bdf>,
    tlp: Box<[u8; MAX_TLP_BYTES]>,
    out: Box<[u8; MAX_TLP_BYTES]>,
    frame: Box<[u8; frame_bytes(MAX_TLP_BYTES)]>,
    payload: Box<[u8; 4096]>,
    tag: u8,
    seq: u32,
    stats: PathStats,
}

fn vlan(h: usize) -> u16 {
    10 * (h as u16 + 1)
}

fn ve_rid() -> Bdf {
    Bdf::new(3, 0, 0).expect("03:00.0 is a valid routing id")
}

fn root() -> Bdf {
    Bdf::new(0, 0, 0).expect("00:00.0 is a valid routing id")
}

/// The NIC's SR-IOV capability: 16 VFs after the PF, each with one 64 KiB 64-bit BAR.
pub(crate) fn nic_sriov_spec() -> SriovSpec {
    SriovSpec {
        total_vfs: 16,
        first_vf_offset: 1,
        vf_stride: 1,
        vf_device_id: 0x5834,
        supported_page_sizes: 0x553,
        vf_bars: vec![(
            0,
            Bar {
                kind: BarKind::Mem64,
                size: 64 << 10,
                prefetchable: true,
            },
        )],
    }
}

impl TlpPath {
    /// Builds the NIC (PF with SR-IOV), the I/O-side bridge with one VF per host, the
    /// Ethernet (one VLAN per host), and `hosts` hosts that enumerate and program their VE
    /// through their virtual switch and map their packet buffers in their IOMMU.
    pub fn new(hosts: usize) -> Result<Self, PathError> {
        if !(1..=16).contains(&hosts) {
            return Err(fail("set-up", format!("{hosts} hosts: expected 1..=16")));
        }
        let spec = nic_sriov_spec();
        let pf_rid = Bdf::new(1, 0, 0).ok_or_else(|| fail("set-up", "PF routing id"))?;
        let pf = PhysicalFunction::new(pf_rid, &NIC, &[], &spec).map_err(|e| fail("PF", e))?;
        let n = hosts as u16;
        let mut io = IoBridge::new(pf, n, VF_BAR_BASE).map_err(|e| fail("I/O bridge", e))?;
        let mut ports = vec![Port {
            mac: Mac::local(100),
            vlans: (0..hosts).map(vlan).collect(),
        }];
        let mut hs = Vec::with_capacity(hosts);
        let mut vf_rids = Vec::with_capacity(hosts);
        for h in 0..hosts {
            io.assign(h as u16 + 1, vlan(h), ve_rid())
                .map_err(|e| fail("assign", e))?;
            vf_rids.push(
                io.pf()
                    .vf(h as u16 + 1)
                    .map(|v| v.rid())
                    .ok_or_else(|| fail("assign", "no VF"))?,
            );
            ports.push(Port {
                mac: Mac::local(h as u16 + 1),
                vlans: vec![vlan(h)],
            });
            let vtd = Vtd::new(VtdConfig::default()).map_err(|e| fail("IOMMU", e))?;
            let mut iommu = HostIommu::new(vtd);
            iommu
                .add_domain(DOMAIN, &[ve_rid()])
                .map_err(|e| fail("IOMMU", e))?;
            // Each host's buffers at its own frames (host h: 0x1000 * (h + 1) onwards).
            iommu
                .set(
                    DOMAIN,
                    Pfn::<Iova>::new(BUFFER_IOVA >> 12),
                    Pfn::<Hpa>::new(0x1000 * (h as u64 + 1)),
                    BUFFER_BYTES >> 12,
                    Perm::ReadWrite,
                )
                .map_err(|e| fail("IOMMU", e))?;
            hs.push(Host {
                vlan: vlan(h),
                iommu,
            });
        }
        let mut path = TlpPath {
            io,
            eth: Switch::new(ports),
            hosts: hs,
            vf_rids,
            tlp: Box::new([0; MAX_TLP_BYTES]),
            out: Box::new([0; MAX_TLP_BYTES]),
            frame: Box::new([0; frame_bytes(MAX_TLP_BYTES)]),
            payload: Box::new([0; 4096]),
            tag: 0,
            seq: 0,
            stats: PathStats::default(),
        };
        for h in 0..hosts {
            path.enumerate(h)?;
        }
        Ok(path)
    }

    /// Host `h` configures its VE as software configures any device behind a switch: type 1
    /// requests its virtual switch turns into type 0 ones for the endpoint across the
    /// Ethernet.
    fn enumerate(&mut self, h: usize) -> Result<(), PathError> {
        let up = Bdf::new(1, 0, 0).ok_or_else(|| fail("virtual switch", "routing id"))?;
        let mut sw = VirtualSwitch::new(up).map_err(|e| fail("virtual switch", e))?;
        // Upstream port: primary 1, secondary 2, subordinate 3; downstream: 2, 3, 3.
        sw.upstream()
            .write(0x18, 4, 0x00_03_02_01)
            .map_err(|e| fail("virtual switch", e))?;
        sw.downstream()
            .write(0x18, 4, 0x00_03_03_02)
            .map_err(|e| fail("virtual switch", e))?;
        for (register, value) in [
            (4u16, VE_BAR as u32),
            (5, (VE_BAR >> 32) as u32),
            (1, 0x0006), // Memory Space and Bus Master Enable
        ] {
            let req = ConfigRequest {
                kind: ConfigKind::Type1,
                requester: root(),
                tag: 0,
                target: ve_rid(),
                register,
                first_be: 0xf,
            };
            let ConfigRoute::Remote(c) = sw.route(&req) else {
                return Err(fail("virtual switch", "the VE is not behind the switch"));
            };
            let t = Tlp::ConfigWrite(c, value.to_le_bytes());
            let n = t.encode(&mut self.tlp[..]).map_err(|e| fail("CfgWr", e))?;
            let t = Tlp::decode(&self.tlp[..n]).map_err(|e| fail("CfgWr", e))?;
            match self
                .io
                .from_host(vlan(h), &t, &mut self.out[..])
                .map_err(|e| fail("CfgWr", e))?
            {
                FromHost::Completion {
                    status: CompletionStatus::Successful,
                    ..
                } => {}
                r => return Err(fail("CfgWr", format!("{r:?}"))),
            }
        }
        Ok(())
    }

    /// The counts so far.
    pub const fn stats(&self) -> PathStats {
        self.stats
    }

    /// Frames `len` bytes of `self.out` on host `h`'s VLAN, from `from` to `to`, through
    /// the switch; checks it reaches the port `to` and returns its wire bytes.
    fn carry(&mut self, h: usize, from: usize, to: usize, len: usize) -> Result<u64, PathError> {
        let mac = |p: usize| {
            if p == IO_PORT {
                Mac::local(100)
            } else {
                Mac::local(p as u16)
            }
        };
        self.seq = self.seq.wrapping_add(1);
        let f = Frame {
            dst: mac(to),
            src: mac(from),
            vlan: vlan(h),
            kind: FrameKind::Data,
            seq: self.seq,
            ack: 0,
            tlp: &self.out[..len],
        };
        let n = f
            .encode(&mut self.frame[..])
            .map_err(|e| fail("frame", e))?;
        let f = Frame::decode(&self.frame[..n]).map_err(|e| fail("frame", e))?;
        let mut reached = self.eth.forward(from, &f);
        if reached.next() != Some(to) || reached.next().is_some() {
            return Err(fail(
                "switch",
                format!("frame on VLAN {} misdelivered", f.vlan),
            ));
        }
        self.stats.frames += 1;
        self.tlp[..f.tlp.len()].copy_from_slice(f.tlp);
        Ok((n + WIRE_OVERHEAD_BYTES) as u64)
    }

    /// The device's TLP (`len` bytes in `self.tlp`) through the bridge to its host:
    /// returns the TLP's bytes on PCIe and its frame's wire bytes.
    fn up(&mut self, h: usize, len: usize) -> Result<(u64, u64), PathError> {
        let t = Tlp::decode(&self.tlp[..len]).map_err(|e| fail("device TLP", e))?;
        let (v, n) = self
            .io
            .from_device(&t, &mut self.out[..])
            .map_err(|e| fail("bridge, from device", e))?;
        if v != vlan(h) {
            return Err(fail("bridge, from device", format!("VLAN {v}")));
        }
        let wire = self.carry(h, IO_PORT, h + 1, n)?;
        self.stats.translations += 1;
        match self.hosts[h]
            .dma(&self.tlp[..n])
            .map_err(|e| fail("host", e))?
        {
            DmaOutcome::Reached(_) => {}
            DmaOutcome::Faulted(f) => return Err(fail("host IOMMU", format!("{f:?}"))),
        }
        self.stats.tlps += 1;
        Ok((len as u64, wire))
    }

    fn next_tag(&mut self) -> u8 {
        self.tag = self.tag.wrapping_add(1);
        self.tag
    }

    /// VF `h + 1` reads `bytes` at `iova` of host `h` (`bytes` a multiple of 4, at most
    /// 4096); the host completes it in completions of `completion_bytes` (its read
    /// completion boundary). Returns the sizes every TLP had on the links.
    pub fn read(
        &mut self,
        h: usize,
        iova: u64,
        bytes: u32,
        completion_bytes: u32,
    ) -> Result<ReadTlps, PathError> {
        let tag = self.next_tag();
        let vf = self
            .io
            .pf()
            .vf(h as u16 + 1)
            .ok_or_else(|| fail("VF", h + 1))?;
        let m = vf
            .dma(tag, iova, (bytes / 4) as u16)
            .map_err(|e| fail("VF DMA", e))?;
        let n = Tlp::MemRead(m)
            .encode(&mut self.tlp[..])
            .map_err(|e| fail("MRd", e))?;
        let (mrd_tlp, mrd_wire) = self.up(h, n)?;
        let mut r = ReadTlps {
            mrd_tlp,
            mrd_wire,
            ..ReadTlps::default()
        };
        // The root complex returns the data in completions that end at multiples of the
        // completion size (PCIe 2.1 §2.3.1.1's read completion boundary).
        let mut at = iova;
        let end = iova + u64::from(bytes);
        while at < end {
            let chunk = (completion_bytes as u64 - at % completion_bytes as u64).min(end - at);
            let c = Completion::new(root(), ve_rid(), tag, (end - at) as u16, (at & 0x7f) as u8);
            let n = Tlp::CompletionData(c, &self.payload[..chunk as usize])
                .encode(&mut self.out[..])
                .map_err(|e| fail("CplD", e))?;
            let wire = self.carry(h, h + 1, IO_PORT, n)?;
            let t = Tlp::decode(&self.tlp[..n]).map_err(|e| fail("CplD", e))?;
            match self
                .io
                .from_host(vlan(h), &t, &mut self.out[..])
                .map_err(|e| fail("bridge, from host", e))?
            {
                FromHost::ToDevice {
                    len,
                    function: FunctionId::Vf(v),
                } if usize::from(v) == h + 1 => {
                    // The VF matches it to its read by requester id and tag.
                    match Tlp::decode(&self.out[..len]).map_err(|e| fail("CplD", e))? {
                        Tlp::CompletionData(c, _)
                            if c.requester == self.vf_rids[h] && c.tag == tag => {}
                        t => return Err(fail("CplD", format!("misrouted: {t:?}"))),
                    }
                    r.cpl_tlp = r.cpl_tlp.max(len as u64);
                }
                o => return Err(fail("bridge, from host", format!("{o:?}"))),
            }
            r.cpl_wire = r.cpl_wire.max(wire);
            r.cpl_frames += 1;
            self.stats.tlps += 1;
            at += chunk;
        }
        Ok(r)
    }

    /// VF `h + 1` writes `bytes` at `iova` of host `h` in MWr TLPs of at most `max_payload`
    /// bytes. Returns their count and sizes.
    pub fn write(
        &mut self,
        h: usize,
        iova: u64,
        bytes: u32,
        max_payload: u32,
    ) -> Result<WriteTlps, PathError> {
        let mut w = WriteTlps::default();
        let mut at = iova;
        let end = iova + u64::from(bytes.div_ceil(4) * 4);
        while at < end {
            let chunk = (u64::from(max_payload)).min(end - at);
            let tag = self.next_tag();
            let vf = self
                .io
                .pf()
                .vf(h as u16 + 1)
                .ok_or_else(|| fail("VF", h + 1))?;
            let m: MemRequest = vf
                .dma(tag, at, (chunk / 4) as u16)
                .map_err(|e| fail("VF DMA", e))?;
            let n = Tlp::MemWrite(m, &self.payload[..chunk as usize])
                .encode(&mut self.tlp[..])
                .map_err(|e| fail("MWr", e))?;
            let (tlp, wire) = self.up(h, n)?;
            w.tlps += 1;
            w.tlp = w.tlp.max(tlp);
            w.wire = w.wire.max(wire);
            at += chunk;
        }
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_and_a_write_cross_every_piece_with_the_encoded_sizes() {
        let mut p = TlpPath::new(3).unwrap();
        // 512-byte read at a 64-byte boundary: 8 completions of 64 bytes; MRd 3 DW header.
        let r = p.read(2, BUFFER_IOVA + 0x1000, 512, 64).unwrap();
        assert_eq!(r.mrd_tlp, 12);
        assert_eq!(r.cpl_frames, 8);
        assert_eq!(r.cpl_tlp, 12 + 64);
        // Frame: 30 header + TLP + 4 FCS, at least 64, plus 20 of preamble and gap.
        assert_eq!(r.mrd_wire, 64 + 20);
        assert_eq!(r.cpl_wire, 30 + 76 + 4 + 20);
        // A read not on a boundary: the first completion is shorter, one more of them.
        let r = p.read(0, BUFFER_IOVA + 0x20, 512, 64).unwrap();
        assert_eq!(r.cpl_frames, 9);
        let w = p.write(1, BUFFER_IOVA, 9014, 128).unwrap();
        assert_eq!((w.tlps, w.tlp, w.wire), (71, 12 + 128, 30 + 140 + 4 + 20));
        let s = p.stats();
        assert_eq!(s.tlps, 8 + 1 + 9 + 1 + 71);
        assert_eq!(s.translations, 1 + 1 + 71);
    }

    #[test]
    fn a_dma_outside_the_hosts_mappings_is_an_error_naming_the_iommu() {
        let mut p = TlpPath::new(1).unwrap();
        let e = p
            .read(0, BUFFER_IOVA + BUFFER_BYTES, 512, 64)
            .unwrap_err()
            .to_string();
        assert!(e.contains("host IOMMU"), "{e}");
        assert!(TlpPath::new(0).is_err());
    }
}
