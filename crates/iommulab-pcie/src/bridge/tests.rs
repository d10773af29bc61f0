//! End to end across the bridges: three hosts share one SR-IOV NIC, each through its own
//! VLAN, virtual endpoint and IOMMU (S4.2, S4.3).

use iommulab_base::addr::{Bdf, DomainId, Hpa, Iova, Perm, Pfn};
use iommulab_hw::{FaultReason, HostIommu, Vtd, VtdConfig};
use proptest::prelude::*;

use super::frame::{Frame, FrameKind, Mac};
use super::host_side::{ConfigRoute, VirtualSwitch};
use super::mrshare::{DmaOutcome, FromHost, Host, IoBridge, ShareError};
use super::switch::{Port, Switch};
use crate::function::{FunctionId, PhysicalFunction};
use crate::timing::tlp_path::{NIC, nic_sriov_spec};
use crate::tlp::{CompletionStatus, ConfigKind, ConfigRequest, MAX_TLP_BYTES, MemRequest, Tlp};

const VF_BAR_BASE: u64 = 0x40_0000_0000;

fn io_bridge(vfs: u16) -> IoBridge {
    let spec = nic_sriov_spec();
    let pf = PhysicalFunction::new(Bdf::new(1, 0, 0).unwrap(), &NIC, &[], &spec).unwrap();
    IoBridge::new(pf, vfs, VF_BAR_BASE).unwrap()
}

fn ve_rid() -> Bdf {
    // Every host puts its VE at 03:00.0 in its own tree: the same id in different hosts.
    Bdf::new(3, 0, 0).unwrap()
}

fn cfg(target: Bdf, register: u16, kind: ConfigKind) -> ConfigRequest {
    ConfigRequest {
        kind,
        requester: Bdf::new(0, 0, 0).unwrap(),
        tag: 1,
        target,
        register,
        first_be: 0xf,
    }
}

/// Host `vlan` enumerates and programs its VE: BAR0 at `bar`, memory and bus master on.
fn program_ve(io: &mut IoBridge, vlan: u16, bar: u64) {
    let mut out = [0u8; MAX_TLP_BYTES];
    let w = |io: &mut IoBridge, reg: u16, v: u32, out: &mut [u8]| {
        let t = Tlp::ConfigWrite(cfg(ve_rid(), reg, ConfigKind::Type0), v.to_le_bytes());
        assert!(matches!(
            io.from_host(vlan, &t, out).unwrap(),
            FromHost::Completion {
                status: CompletionStatus::Successful,
                ..
            }
        ));
    };
    w(io, 4, bar as u32, &mut out);
    w(io, 5, (bar >> 32) as u32, &mut out);
    w(io, 1, 0x0006, &mut out);
}

#[test]
fn each_host_enumerates_an_ordinary_device_through_its_virtual_switch() {
    let mut io = io_bridge(3);
    for (vf, vlan) in [(1, 10), (2, 20), (3, 30)] {
        io.assign(vf, vlan, ve_rid()).unwrap();
    }
    assert_eq!(
        io.assign(1, 40, ve_rid()),
        Err(ShareError::Assigned { vf: 1, vlan: 10 })
    );
    // Host 20's virtual switch: upstream port 01:00.0 bus 2..=3, downstream port bus 3.
    let mut sw = VirtualSwitch::new(Bdf::new(1, 0, 0).unwrap()).unwrap();
    sw.upstream().write(0x18, 4, 0x00_03_02_01).unwrap();
    sw.downstream().write(0x18, 4, 0x00_03_03_02).unwrap();
    assert_eq!(
        sw.route(&cfg(Bdf::new(2, 0, 0).unwrap(), 0, ConfigKind::Type1)),
        ConfigRoute::Downstream
    );
    assert_eq!(
        sw.route(&cfg(Bdf::new(9, 0, 0).unwrap(), 0, ConfigKind::Type1)),
        ConfigRoute::Unsupported
    );
    let ConfigRoute::Remote(c) = sw.route(&cfg(ve_rid(), 0, ConfigKind::Type1)) else {
        panic!()
    };
    assert_eq!(c.kind, ConfigKind::Type0);
    // The type 0 read crosses the Ethernet in a frame on VLAN 20 and reaches VE 2, which
    // reads like a non-IOV NIC: the PF's vendor id and the VF's device id (not 0xffff).
    let mut tlp = [0u8; MAX_TLP_BYTES];
    let n = Tlp::ConfigRead(c).encode(&mut tlp).unwrap();
    let mut wire = [0u8; 2 * MAX_TLP_BYTES];
    let f = Frame {
        dst: Mac::local(100),
        src: Mac::local(20),
        vlan: 20,
        kind: FrameKind::Data,
        seq: 0,
        ack: 0,
        tlp: &tlp[..n],
    };
    let flen = f.encode(&mut wire).unwrap();
    let got = Frame::decode(&wire[..flen]).unwrap();
    let mut out = [0u8; MAX_TLP_BYTES];
    let FromHost::Completion { len, status } = io
        .from_host(got.vlan, &Tlp::decode(got.tlp).unwrap(), &mut out)
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(status, CompletionStatus::Successful);
    let Tlp::CompletionData(_, d) = Tlp::decode(&out[..len]).unwrap() else {
        panic!()
    };
    assert_eq!(d, [0xd5, 0x17, 0x34, 0x58]);
    // Its BAR sizes like the VF slice (64 KiB, 64-bit prefetchable).
    let t = Tlp::ConfigWrite(cfg(ve_rid(), 4, ConfigKind::Type0), [0xff; 4]);
    io.from_host(20, &t, &mut out).unwrap();
    assert_eq!(io.ves()[1].config().read32(0x10), 0xffff_000c);
    // A corrupted frame is refused by its FCS.
    wire[40] ^= 1;
    assert!(
        Frame::decode(&wire[..flen])
            .unwrap_err()
            .to_string()
            .contains("FCS")
    );
}

#[test]
fn the_switch_keeps_each_group_to_itself() {
    let sw = Switch::new(vec![
        Port {
            mac: Mac::local(1),
            vlans: vec![10],
        },
        Port {
            mac: Mac::local(2),
            vlans: vec![20],
        },
        Port {
            mac: Mac::local(100),
            vlans: vec![10, 20],
        },
    ]);
    let f = |vlan, dst| Frame {
        dst,
        src: Mac::local(0),
        vlan,
        kind: FrameKind::KeepAlive,
        seq: 0,
        ack: 0,
        tlp: &[],
    };
    assert_eq!(
        sw.forward(2, &f(10, Mac::BROADCAST)).collect::<Vec<_>>(),
        [0]
    );
    assert_eq!(
        sw.forward(2, &f(20, Mac::BROADCAST)).collect::<Vec<_>>(),
        [1]
    );
    // Host 1 addressing host 2's bridge, or sending on VLAN 20, reaches nobody.
    assert_eq!(sw.forward(0, &f(10, Mac::local(2))).count(), 0);
    assert_eq!(sw.forward(0, &f(20, Mac::local(100))).count(), 0);
    assert_eq!(
        sw.forward(0, &f(10, Mac::local(100))).collect::<Vec<_>>(),
        [2]
    );
}

fn vtd_host(vlan: u16) -> Host<Vtd> {
    let mut iommu = HostIommu::new(Vtd::new(VtdConfig::default()).unwrap());
    iommu.add_domain(DomainId::new(1), &[ve_rid()]).unwrap();
    Host { vlan, iommu }
}

#[test]
fn vf_dma_goes_through_its_own_hosts_iommu() {
    let mut io = io_bridge(3);
    let mut hosts: Vec<_> = [10, 20, 30].map(vtd_host).into();
    for (i, h) in hosts.iter().enumerate() {
        io.assign(i as u16 + 1, h.vlan, ve_rid()).unwrap();
        program_ve(&mut io, h.vlan, 0xe000_0000);
    }
    // Host 20 maps IOVA page 0x100 to its frame 0x5000, for device reads and writes.
    hosts[1]
        .iommu
        .set(
            DomainId::new(1),
            Pfn::<Iova>::new(0x100),
            Pfn::<Hpa>::new(0x5000),
            1,
            Perm::ReadWrite,
        )
        .unwrap();
    let mut out = [0u8; MAX_TLP_BYTES];
    let payload = [0u8; 64];
    let send = |io: &IoBridge, hosts: &mut Vec<Host<Vtd>>, m: MemRequest, out: &mut [u8]| {
        let (vlan, len) = io.from_device(&Tlp::MemWrite(m, &payload), out).unwrap();
        let h = hosts.iter_mut().find(|h| h.vlan == vlan).unwrap();
        (vlan, h.dma(&out[..len]).unwrap())
    };
    let vf2 = io.pf().vf(2).unwrap();
    let m = vf2.dma(5, 0x10_0040, 16).unwrap();
    // Reaches host 20 (VLAN of VF 2), translated by its IOMMU.
    assert_eq!(
        send(&io, &mut hosts, m, &mut out),
        (20, DmaOutcome::Reached(Hpa::new(0x500_0040)))
    );
    // Outside host 20's mappings: a fault in host 20's IOMMU, nowhere else.
    let m = vf2.dma(6, 0x20_0000, 16).unwrap();
    let (vlan, o) = send(&io, &mut hosts, m, &mut out);
    assert_eq!(vlan, 20);
    let DmaOutcome::Faulted(f) = o else {
        panic!("{o:?}")
    };
    assert_eq!((f.bdf, f.reason), (ve_rid(), FaultReason::NotPresent));
    assert_eq!(
        hosts
            .iter()
            .map(|h| h.iommu.unit().faults().len())
            .collect::<Vec<_>>(),
        [0, 1, 0]
    );
    // The same IOVA from VF 1 goes to host 10, where it is not mapped.
    let m = io.pf().vf(1).unwrap().dma(7, 0x10_0040, 16).unwrap();
    assert!(matches!(
        send(&io, &mut hosts, m, &mut out),
        (10, DmaOutcome::Faulted(_))
    ));
    // Host 20 programs MSI on its VE (address 0xfee0_0000, data 0x31, enable); VF 2's
    // interrupt is a write of that data, delivered to host 20 with the VE's requester id.
    let msi = crate::config::capability::find(io.ves()[1].config(), 0x05)
        .unwrap()
        .unwrap();
    let mut cout = [0u8; MAX_TLP_BYTES];
    for (reg, v, be) in [
        (msi + 4, 0xfee0_0000u32, 0xf),
        (msi + 0xc, 0x31, 0x3),
        (msi, 1 << 16, 0x4),
    ] {
        let t = Tlp::ConfigWrite(cfg(ve_rid(), reg / 4, ConfigKind::Type0), v.to_le_bytes());
        let t = match t {
            Tlp::ConfigWrite(mut c, d) => {
                c.first_be = be;
                Tlp::ConfigWrite(c, d)
            }
            t => t,
        };
        io.from_host(20, &t, &mut cout).unwrap();
    }
    let (w, d) = io.pf().vf(2).unwrap().interrupt().unwrap();
    let (vlan, len) = io.from_device(&Tlp::MemWrite(w, &d), &mut out).unwrap();
    let Tlp::MemWrite(m, data) = Tlp::decode(&out[..len]).unwrap() else {
        panic!()
    };
    assert_eq!(
        (vlan, m.requester, m.address, data),
        (20, ve_rid(), 0xfee0_0000, &[0x31, 0, 0, 0][..])
    );
    // After host 20 hot-removes its VE, VF 2's DMA has no host to go to.
    io.unassign(2);
    assert!(
        io.pf().vf(2).unwrap().dma(8, 0x10_0040, 16).is_err(),
        "bus master cleared"
    );
}

#[test]
fn host_writes_reach_its_vf_at_the_translated_address() {
    let mut io = io_bridge(3);
    io.assign(1, 10, ve_rid()).unwrap();
    io.assign(3, 30, ve_rid()).unwrap();
    program_ve(&mut io, 10, 0xe000_0000);
    program_ve(&mut io, 30, 0x2_0000_0000);
    let mut out = [0u8; MAX_TLP_BYTES];
    let req = MemRequest::new(Bdf::new(0, 0, 0).unwrap(), 0, 0x2_0000_0100, 1);
    let r = io
        .from_host(30, &Tlp::MemWrite(req, &[1, 2, 3, 4]), &mut out)
        .unwrap();
    assert_eq!(
        r,
        FromHost::ToDevice {
            len: 20,
            function: FunctionId::Vf(3)
        }
    );
    let Tlp::MemWrite(m, _) = Tlp::decode(&out[..20]).unwrap() else {
        panic!()
    };
    // VF 3's slice is the third 64 KiB one: B = base + 2 * 64 KiB; offset 0x100 kept.
    assert_eq!(m.address, VF_BAR_BASE + 2 * 0x1_0000 + 0x100);
    // Host 10 using host 30's address: not its VE, so a read completes with UR.
    let r = io.from_host(10, &Tlp::MemRead(req), &mut out).unwrap();
    assert!(matches!(
        r,
        FromHost::Completion {
            status: CompletionStatus::UnsupportedRequest,
            ..
        }
    ));
}

proptest! {
    /// A host never reaches another host's VF: whatever BAR addresses the hosts program
    /// (overlapping ones included) and whatever addresses and routing ids a host sends to,
    /// its memory requests reach its own VF or nothing, and its configuration requests its
    /// own VE or nothing.
    #[test]
    fn a_host_never_reaches_another_hosts_vf(
        bars in proptest::collection::vec(0u64..4, 3),
        reqs in proptest::collection::vec((0usize..3, 0u64..4, 0u64..0x2_0000, any::<u16>()), 1..100),
    ) {
        let mut io = io_bridge(3);
        let vlans = [10u16, 20, 30];
        let bases: Vec<u64> = bars.iter().map(|b| 0xe000_0000 + b * 0x1_0000).collect();
        for i in 0..3 {
            io.assign(i as u16 + 1, vlans[i], ve_rid()).unwrap();
            program_ve(&mut io, vlans[i], bases[i]);
        }
        let mut out = [0u8; MAX_TLP_BYTES];
        for (h, slot, off, rid) in reqs {
            let addr = (0xe000_0000 + slot * 0x1_0000 + off) & !3;
            let addr = addr.min((addr & !0xfff) | 0xffc);
            let req = MemRequest::new(Bdf::new(0, 0, 0).unwrap(), 0, addr, 1);
            match io.from_host(vlans[h], &Tlp::MemRead(req), &mut out).unwrap() {
                FromHost::ToDevice { function, len } => {
                    prop_assert_eq!(function, FunctionId::Vf(h as u16 + 1));
                    let Tlp::MemRead(m) = Tlp::decode(&out[..len]).unwrap() else { panic!() };
                    let (b, s) = io.pf().vf(h as u16 + 1).unwrap().bars()[0].unwrap();
                    prop_assert!(m.address >= b && m.address < b + s);
                    prop_assert_eq!(m.address - b, addr - bases[h]);
                }
                FromHost::Completion { status, .. } => {
                    prop_assert_eq!(status, CompletionStatus::UnsupportedRequest);
                    prop_assert!(addr.wrapping_sub(bases[h]) >= 0x1_0000);
                }
                FromHost::Dropped => prop_assert!(false, "a read is never dropped"),
            }
            let target = crate::tlp::bdf_from_id(rid);
            let c = Tlp::ConfigRead(cfg(target, 0, ConfigKind::Type0));
            let FromHost::Completion { status, .. } = io.from_host(vlans[h], &c, &mut out).unwrap() else {
                panic!("configuration never reaches the device")
            };
            let ok = if target == ve_rid() { CompletionStatus::Successful } else { CompletionStatus::UnsupportedRequest };
            prop_assert_eq!(status, ok);
        }
    }
}
