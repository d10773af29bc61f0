//! SR-IOV: VF routing ids and VF BARs follow from the registers for every valid value, and
//! the PF brings VFs up and down with VF Enable (S4.1).

#![allow(clippy::cast_possible_truncation)] // test fixtures pack register values

use iommulab_base::addr::Bdf;
use proptest::prelude::*;

use crate::config::header::{Bar, BarKind, Ids};
use crate::function::{FunctionId, PhysicalFunction};
use crate::sriov::{CTL_VF_ENABLE, CTL_VF_MSE, SriovError, SriovSpec, reg};
use crate::tlp::{ConfigKind, ConfigRequest, Tlp, bdf_from_id};

const IDS: Ids = Ids {
    vendor: 0x17d5,
    device: 0x5833,
    revision: 1,
    class: 0x02_00_00,
    subsystem_vendor: 0x17d5,
    subsystem: 0x6020,
};

fn spec(total: u16, offset: u16, stride: u16, bars: Vec<(usize, Bar)>) -> SriovSpec {
    SriovSpec {
        total_vfs: total,
        first_vf_offset: offset,
        vf_stride: stride,
        vf_device_id: 0x5834,
        // 4 KiB, 8 KiB, 64 KiB, 256 KiB, 1 MiB, 4 MiB (bits 0, 1, 4, 6, 8, 10).
        supported_page_sizes: 0x553,
        vf_bars: bars,
    }
}

/// Host-side enabling, by register writes only: System Page Size, VF BARs, NumVFs, then
/// VF Enable and VF MSE.
fn enable(pf: &mut PhysicalFunction, num: u16, page_bit: u32, bar_bases: &[(usize, u64)]) {
    let at = pf.sriov().offset();
    let w = |pf: &mut PhysicalFunction, off: u16, v: u32| {
        pf.config_write(off / 4, v.to_le_bytes(), 0xf)
    };
    w(pf, at + reg::SYSTEM_PAGE_SIZE, 1 << page_bit);
    for &(i, base) in bar_bases {
        let off = at + reg::VF_BAR0 + 4 * i as u16;
        w(pf, off, base as u32);
        w(pf, off + 4, (base >> 32) as u32);
    }
    w(
        pf,
        at + reg::NUM_VFS,
        u32::from(num) | (u32::from(pf.config().read16(at + 0x12)) << 16),
    );
    w(pf, at + reg::CONTROL, u32::from(CTL_VF_ENABLE | CTL_VF_MSE));
}

#[test]
fn vfs_come_up_with_their_routing_ids_and_bars() {
    let pf_rid = Bdf::new(3, 0, 0).unwrap();
    let bar = Bar {
        kind: BarKind::Mem64,
        size: 16 << 10,
        prefetchable: true,
    };
    let mut pf =
        PhysicalFunction::new(pf_rid, &IDS, &[], &spec(16, 0x80, 2, vec![(0, bar)])).unwrap();
    assert!(pf.vfs().is_empty());
    enable(&mut pf, 3, 0, &[(0, 0x1_0000_0000)]);
    let rids: Vec<_> = pf.vfs().iter().map(|v| v.rid()).collect();
    // 03:00.0 = 0x0300; + 0x80 = 0x0380 = 03:10.0; stride 2 → 03:10.2, 03:10.4.
    assert_eq!(
        rids,
        [
            Bdf::new(3, 0x10, 0).unwrap(),
            Bdf::new(3, 0x10, 2).unwrap(),
            Bdf::new(3, 0x10, 4).unwrap()
        ]
    );
    let b: Vec<_> = pf.vfs().iter().map(|v| v.bars()[0]).collect();
    assert_eq!(
        b,
        [
            Some((0x1_0000_0000, 0x4000)),
            Some((0x1_0000_4000, 0x4000)),
            Some((0x1_0000_8000, 0x4000))
        ]
    );
    assert_eq!(pf.claim(0x1_0000_4010), Some((FunctionId::Vf(2), 0, 0x10)));
    assert_eq!(pf.claim(0x1_0000_c000), None);
    // A VF's Vendor/Device ID read 0xffff; a config read by TLP reaches the VF.
    let mut buf = [0u8; 4];
    let rd = Tlp::ConfigRead(ConfigRequest {
        kind: ConfigKind::Type0,
        requester: Bdf::new(0, 0, 0).unwrap(),
        tag: 9,
        target: rids[1],
        register: 0,
        first_be: 0xf,
    });
    let Some(Tlp::CompletionData(c, d)) = pf.handle_config(&rd, &mut buf) else {
        panic!()
    };
    assert_eq!((c.completer, d), (rids[1], &[0xff, 0xff, 0xff, 0xff][..]));
    // NumVFs does not change while VF Enable is set; clearing VF Enable removes the VFs.
    let at = pf.sriov().offset();
    pf.config_write((at + reg::NUM_VFS) / 4, [5, 0, 0, 0], 0x3);
    assert_eq!(pf.sriov().num_vfs(pf.config()), 3);
    pf.config_write((at + reg::CONTROL) / 4, [0; 4], 0x3);
    assert!(pf.vfs().is_empty());
    assert_eq!(pf.claim(0x1_0000_4010), None);
}

#[test]
fn a_larger_system_page_widens_each_vf_bar() {
    let bar = Bar {
        kind: BarKind::Mem64,
        size: 16 << 10,
        prefetchable: true,
    };
    let mut pf = PhysicalFunction::new(
        Bdf::new(3, 0, 0).unwrap(),
        &IDS,
        &[],
        &spec(8, 1, 1, vec![(0, bar)]),
    )
    .unwrap();
    // System Page Size bit 4 = 64 KiB: each VF BAR is 64 KiB, aligned to 64 KiB.
    enable(&mut pf, 2, 4, &[(0, 0x2_0000_0000)]);
    assert_eq!(pf.vf(2).unwrap().bars()[0], Some((0x2_0001_0000, 0x1_0000)));
}

#[test]
fn invalid_settings_bring_up_no_vfs_and_say_why() {
    let mut pf = PhysicalFunction::new(
        Bdf::new(0xff, 31, 0).unwrap(),
        &IDS,
        &[],
        &spec(64, 0x100, 1, vec![]),
    )
    .unwrap();
    enable(&mut pf, 9, 0, &[]);
    // 0xfff8 + 0x100 passes 0xffff.
    assert!(matches!(
        pf.vf_error(),
        Some(SriovError::RoutingIdOverflow { n: 9, .. })
    ));
    assert!(pf.vfs().is_empty());
    let mut pf = PhysicalFunction::new(
        Bdf::new(1, 0, 0).unwrap(),
        &IDS,
        &[],
        &spec(4, 1, 1, vec![]),
    )
    .unwrap();
    enable(&mut pf, 5, 0, &[]);
    assert_eq!(
        pf.vf_error(),
        Some(&SriovError::NumVfs { num: 5, total: 4 })
    );
    let mut pf = PhysicalFunction::new(
        Bdf::new(1, 0, 0).unwrap(),
        &IDS,
        &[],
        &spec(4, 1, 1, vec![]),
    )
    .unwrap();
    enable(&mut pf, 2, 2, &[]);
    // Bit 2 (16 KiB) is not supported, so it is read-only zero: the register reads 0.
    assert!(matches!(
        pf.vf_error(),
        Some(SriovError::PageSize { value: 0, .. })
    ));
}

#[test]
fn vf_dma_and_interrupts_carry_the_vf_routing_id() {
    let mut pf = PhysicalFunction::new(
        Bdf::new(2, 0, 0).unwrap(),
        &IDS,
        &[],
        &spec(4, 1, 1, vec![]),
    )
    .unwrap();
    enable(&mut pf, 2, 0, &[]);
    let vf = pf.vf_mut(2).unwrap();
    assert!(
        vf.dma(0, 0x1000, 4).is_err(),
        "bus master is off after reset"
    );
    vf.config_write(1, [0x04, 0, 0, 0], 0x1);
    let m = vf.dma(7, 0x1000, 4).unwrap();
    assert_eq!(
        (m.requester, m.tag, m.address),
        (Bdf::new(2, 0, 2).unwrap(), 7, 0x1000)
    );
    // MSI: program address 0xfee0_0000 and data 0x41, then enable.
    let msi = crate::config::capability::find(vf.config(), 0x05)
        .unwrap()
        .unwrap();
    vf.config_write((msi + 4) / 4, 0xfee0_0000u32.to_le_bytes(), 0xf);
    vf.config_write((msi + 0xc) / 4, [0x41, 0, 0, 0], 0x3);
    assert!(vf.interrupt().is_err());
    vf.config_write(msi / 4, [0, 0, 1, 0], 0x4);
    let (w, d) = vf.interrupt().unwrap();
    assert_eq!(
        (w.address, w.requester, d),
        (0xfee0_0000, Bdf::new(2, 0, 2).unwrap(), [0x41, 0, 0, 0])
    );
}

proptest! {
    /// For every valid PF routing id, First VF Offset, VF Stride, NumVFs, System Page Size and
    /// VF BAR: each VF's routing id is `PF + offset + (n - 1) * stride` (no wrap), all differ
    /// from each other and from the PF, and each VF's BAR slice is `base + (n - 1) * size`,
    /// aligned, disjoint from the others, and claimed by exactly that VF.
    #[test]
    fn vf_routing_ids_and_bars_follow_the_registers(
        pf_id in any::<u16>(), offset in 1u16..=0x400, stride in 1u16..=8, total in 1u16..=64,
        num_frac in 0.0f64..=1.0, size_log in 12u32..=20, page_pick in 0usize..6, base_page in 1u64..0x1000,
    ) {
        let num = 1 + ((f64::from(total - 1)) * num_frac) as u16;
        let last = u32::from(pf_id) + u32::from(offset) + u32::from(num - 1) * u32::from(stride);
        prop_assume!(last <= 0xffff);
        let pf_rid = bdf_from_id(pf_id);
        let bar = Bar { kind: BarKind::Mem64, size: 1 << size_log, prefetchable: true };
        let mut pf = PhysicalFunction::new(pf_rid, &IDS, &[], &spec(total, offset, stride, vec![(0, bar)])).unwrap();
        let page_bit = [0u32, 1, 4, 6, 8, 10][page_pick];
        let size = (1u64 << size_log).max(4096 << page_bit);
        // The base is aligned to the region (as software places it).
        let base = base_page << 32;
        enable(&mut pf, num, page_bit, &[(0, base)]);
        prop_assert!(pf.vf_error().is_none(), "{:?}", pf.vf_error());
        prop_assert_eq!(pf.vfs().len(), usize::from(num));
        let mut seen = std::collections::HashSet::new();
        seen.insert(pf_id);
        for vf in pf.vfs() {
            let n = vf.index();
            let want = u32::from(pf_id) + u32::from(offset) + u32::from(n - 1) * u32::from(stride);
            prop_assert_eq!(u32::from(vf.rid().source_id()), want);
            prop_assert!(seen.insert(vf.rid().source_id()), "duplicate routing id");
            prop_assert_eq!(pf.function_at(vf.rid()), Some(FunctionId::Vf(n)));
            let (b, s) = vf.bars()[0].unwrap();
            prop_assert_eq!((b, s), (base + u64::from(n - 1) * size, size));
            prop_assert_eq!(b % size, 0);
            prop_assert_eq!(pf.claim(b), Some((FunctionId::Vf(n), 0, 0)));
            prop_assert_eq!(pf.claim(b + s - 4), Some((FunctionId::Vf(n), 0, s - 4)));
        }
        prop_assert_eq!(pf.claim(base + u64::from(num) * size), None);
    }
}
