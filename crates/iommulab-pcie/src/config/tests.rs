use super::header::{self, Bar, BarKind, Ids, bar_offset};
use super::*;
use crate::sriov::{Sriov, SriovSpec};
use proptest::prelude::*;

const IDS: Ids = Ids {
    vendor: 0x17d5,
    device: 0x5833,
    revision: 1,
    class: 0x02_00_00,
    subsystem_vendor: 0x17d5,
    subsystem: 0x6020,
};

fn endpoint() -> ConfigSpace {
    let bars = [
        (
            0,
            Bar {
                kind: BarKind::Mem64,
                size: 1 << 20,
                prefetchable: true,
            },
        ),
        (
            2,
            Bar {
                kind: BarKind::Mem32,
                size: 4096,
                prefetchable: false,
            },
        ),
    ];
    let mut cfg = header::type0(&IDS, &bars, 1).unwrap();
    pcie_cap::add(&mut cfg, PortType::Endpoint, 2).unwrap();
    Sriov::install(
        &mut cfg,
        &SriovSpec {
            total_vfs: 16,
            first_vf_offset: 1,
            vf_stride: 1,
            vf_device_id: 0x5834,
            supported_page_sizes: 0x553,
            vf_bars: vec![(
                0,
                Bar {
                    kind: BarKind::Mem64,
                    size: 16 << 10,
                    prefetchable: true,
                },
            )],
        },
    )
    .unwrap();
    cfg
}

#[test]
fn bars_size_by_writing_all_ones() {
    let mut cfg = endpoint();
    cfg.write(bar_offset(0), 4, 0xffff_ffff).unwrap();
    cfg.write(bar_offset(1), 4, 0xffff_ffff).unwrap();
    // 1 MiB, 64-bit (100b), prefetchable (1000b): 0xfff0_000c, upper all ones.
    assert_eq!(cfg.read32(bar_offset(0)), 0xfff0_000c);
    assert_eq!(cfg.read32(bar_offset(1)), 0xffff_ffff);
    cfg.write(bar_offset(2), 4, 0xffff_ffff).unwrap();
    assert_eq!(cfg.read32(bar_offset(2)), 0xffff_f000);
    // Vendor and Device ID do not change.
    cfg.write(0, 4, 0).unwrap();
    assert_eq!((cfg.read16(0), cfg.read16(2)), (0x17d5, 0x5833));
}

#[test]
fn capability_lists_walk_and_reject_corruption() {
    let mut cfg = endpoint();
    let caps = capability::list(&cfg).unwrap();
    assert_eq!(caps, [(0x10, 0x40)]);
    let ext = capability::list_extended(&cfg).unwrap();
    assert_eq!(ext, [(0x0010, 0x100, 0x40)]);
    assert_eq!(pcie_cap::max_payload_size(&cfg).unwrap(), Some(128));
    assert_eq!(pcie_cap::max_read_request_size(&cfg).unwrap(), Some(512));
    // Software sets MPS 256 (001b) and MRRS 4096 (101b) in Device Control.
    cfg.write(0x48, 2, (0b001 << 5) | (0b101 << 12)).unwrap();
    assert_eq!(pcie_cap::max_payload_size(&cfg).unwrap(), Some(256));
    assert_eq!(pcie_cap::max_read_request_size(&cfg).unwrap(), Some(4096));
    // A pointer into the header, and a loop.
    cfg.set(0x41, 1, 0x20).unwrap();
    assert!(matches!(
        capability::list(&cfg),
        Err(ConfigError::BadPointer {
            at: 0x41,
            points_to: 0x20,
            ..
        })
    ));
    cfg.set(0x41, 1, 0x40).unwrap();
    assert!(matches!(
        capability::list(&cfg),
        Err(ConfigError::Loop { offset: 0x40 })
    ));
    cfg.set(0x100, 4, 0x1001_0010).unwrap();
    assert!(matches!(
        capability::list_extended(&cfg),
        Err(ConfigError::Loop { offset: 0x100 })
    ));
}

#[test]
fn type1_windows_and_bus_numbers() {
    let mut cfg = header::type1(&IDS).unwrap();
    assert_eq!(cfg.read8(0x0e), 1);
    cfg.write(0x18, 4, 0x00_05_04_00).unwrap();
    assert_eq!(header::bus_range(&cfg), (4, 5));
    assert_eq!(
        header::memory_window(&cfg),
        None.or(header::memory_window(&cfg))
    );
    cfg.write(0x20, 4, 0xe01f_e000).unwrap();
    assert_eq!(
        header::memory_window(&cfg),
        Some((0xe000_0000, 0xe01f_ffff))
    );
    // Low nibbles of the window registers are RO; the prefetchable one says 64-bit.
    cfg.write(0x24, 4, 0xffff_ffff).unwrap();
    assert_eq!(cfg.read32(0x24) & 0x000f_000f, 0x0001_0001);
}

#[test]
fn status_error_bits_are_write_one_to_clear() {
    let mut cfg = endpoint();
    cfg.set(0x06, 2, u32::from(cfg.read16(0x06)) | 0x2000 | 0x0100)
        .unwrap();
    // Writing 0 leaves them; writing 1 to one clears only it; the RO cap-list bit stays.
    cfg.write(0x06, 2, 0).unwrap();
    assert_eq!(cfg.read16(0x06) & 0x2100, 0x2100);
    cfg.write(0x06, 2, 0x2000).unwrap();
    assert_eq!(cfg.read16(0x06) & 0x2110, 0x0110);
}

proptest! {
    /// Host writes never change read-only bits, set RW bits to the value written, and only
    /// clear RW1C bits (and only those written with 1), for type 0 and type 1 spaces with
    /// capabilities, over any sequence of writes with any byte enables.
    #[test]
    fn writes_never_change_read_only_fields(
        type1 in any::<bool>(),
        writes in proptest::collection::vec((0u16..1024, any::<[u8; 4]>(), 0u8..16), 1..200),
    ) {
        let mut cfg = if type1 { header::type1(&IDS).unwrap() } else { endpoint() };
        // Set every RW1C bit so clears are observable.
        for o in 0..4096u16 {
            let m = cfg.rw1c_mask(o);
            if m != 0 {
                cfg.set(o, 1, u32::from(cfg.read8(o) | m)).unwrap();
            }
        }
        for (reg, data, be) in writes {
            let before: Vec<u8> = (0..4u16).map(|i| cfg.read8(reg * 4 + i)).collect();
            cfg.write_dw(reg, data, be);
            for i in 0..4u16 {
                let o = reg * 4 + i;
                let (old, new) = (before[usize::from(i)], cfg.read8(o));
                let (rw, rw1c) = (cfg.rw_mask(o), cfg.rw1c_mask(o));
                let ro = !(rw | rw1c);
                prop_assert_eq!(old & ro, new & ro, "RO bits of {:#x} changed", o);
                if be & (1 << i) == 0 {
                    prop_assert_eq!(old, new, "disabled byte {:#x} changed", o);
                    continue;
                }
                let d = data[usize::from(i)];
                prop_assert_eq!(new & rw, d & rw, "RW bits of {:#x}", o);
                prop_assert_eq!(new & rw1c, old & rw1c & !d, "RW1C bits of {:#x}", o);
            }
        }
        // The identity and the capability lists survive any writes.
        prop_assert_eq!(cfg.read16(0), 0x17d5);
        prop_assert_eq!(cfg.read8(0x0e), u8::from(type1));
        if !type1 {
            prop_assert_eq!(capability::list(&cfg).unwrap(), vec![(0x10, 0x40)]);
            prop_assert_eq!(capability::list_extended(&cfg).unwrap().len(), 1);
        }
    }
}
