//! One small hand-written ftrace trace per check: the bug is found (positive), and the
//! same trace without the bug is clean (negative).

use super::*;
use crate::ftrace::FtraceOptions;

const D: &str = "0000:00:01.0";

/// A trace line by task `drv-7` on CPU 1.
fn l(event: &str, body: &str) -> String {
    format!("           drv-7     [001] ..... 100.000001: {event}: {body}\n")
}

fn map(dma: u64, size: u64, dir: &str, phys: u64) -> String {
    l(
        "dma_map_page",
        &format!("{D} dir={dir} dma_addr={dma:x} size={size} phys_addr={phys:x} attrs="),
    )
}

fn unmap(dma: u64, size: u64, dir: &str) -> String {
    l(
        "dma_unmap_page",
        &format!("{D} dir={dir} dma_addr={dma:x} size={size} attrs="),
    )
}

fn sync(cpu: bool, dma: u64, size: u64, dir: &str) -> String {
    let ev = if cpu {
        "dma_sync_single_for_cpu"
    } else {
        "dma_sync_single_for_device"
    };
    l(ev, &format!("{D} dir={dir} dma_addr={dma:x} size={size}"))
}

/// The hand-written traces below hold every call of their devices, as a capture from
/// boot does, and end with the driver unbound: `from_boot` and `leaks` (the misuse the
/// defaults do not report on a capture that starts or ends mid-run).
fn boot() -> CheckOptions {
    CheckOptions {
        from_boot: true,
        leaks: true,
        ..CheckOptions::default()
    }
}

fn check_text(text: &str) -> CheckReport {
    check_text_with(text, &boot())
}

fn check_text_with(text: &str, opts: &CheckOptions) -> CheckReport {
    let mut r = FtraceReader::new(text.as_bytes(), "t.txt".into(), FtraceOptions::default());
    check_ftrace(&mut r, "t.txt", opts).unwrap()
}

/// The kinds found, in order.
fn kinds(text: &str) -> Vec<FindingKind> {
    check_text(text).findings.iter().map(|f| f.kind).collect()
}

use FindingKind as K;

/// The issue's six-line trace: a double unmap, an unmap whose size and direction differ
/// from its map, and a mapping never unmapped.
#[test]
fn the_issue_trace() {
    let text = [
        "# tracer: nop\n".to_owned(),
        map(0x1000, 4096, "TO_DEVICE", 0x10_0000),
        unmap(0x1000, 4096, "TO_DEVICE"),
        unmap(0x1000, 4096, "TO_DEVICE"),
        map(0x2000, 4096, "TO_DEVICE", 0x20_0000),
        unmap(0x2000, 2048, "FROM_DEVICE"),
        map(0x3000, 4096, "TO_DEVICE", 0x30_0000),
    ]
    .concat();
    let r = check_text(&text);
    let k: Vec<_> = r.findings.iter().map(|f| f.kind).collect();
    assert_eq!(
        k,
        [
            K::DoubleUnmap,
            K::UnmapSizeMismatch,
            K::UnmapDirectionMismatch,
            K::Leak
        ]
    );
    let double = &r.findings[0];
    assert_eq!(double.at.line, 4);
    assert_eq!(double.map.as_ref().unwrap().line, 2);
    assert_eq!(double.device, D);
    assert_eq!(double.at.task.as_deref(), Some("drv-7"));
    assert_eq!(double.at.cpu, 1);
    assert_eq!(double.at.event, "dma_unmap_page");
    assert!(
        double.detail.contains("already unmapped at line 3"),
        "{}",
        double.detail
    );
    assert!(double.linux_check.contains("has not allocated"));
    assert_eq!(r.findings[1].map.as_ref().unwrap().line, 5);
    assert!(
        r.findings[1]
            .detail
            .contains("[map size=4096 bytes] [unmap size=2048 bytes]")
    );
    assert!(
        r.findings[2]
            .detail
            .contains("[mapped with DMA_TO_DEVICE] [unmapped with DMA_FROM_DEVICE]")
    );
    assert_eq!(r.findings[3].at.line, 7);
    assert_eq!(r.by_kind[&K::Leak], 1);
    assert_eq!(r.findings_total, 4);
    assert!(!r.is_clean());
    let text = r.to_text(10);
    assert!(
        text.contains("t.txt:4: double_unmap dma_unmap_page 0000:00:01.0 (drv-7, cpu 1)"),
        "{text}"
    );
}

#[test]
fn clean_map_unmap_is_clean() {
    let text = [
        map(0x1000, 4096, "TO_DEVICE", 0x10_0000),
        sync(false, 0x1000, 100, "TO_DEVICE"),
        unmap(0x1000, 4096, "TO_DEVICE"),
        map(0x1000, 512, "FROM_DEVICE", 0x10_0000),
        sync(true, 0x1100, 16, "FROM_DEVICE"),
        unmap(0x1000, 512, "FROM_DEVICE"),
    ]
    .concat();
    let r = check_text(&text);
    assert!(r.is_clean(), "{:?}", r.findings);
    assert_eq!(r.events, 6);
    assert_eq!(r.outstanding_at_end, 0);
    assert_eq!(r.max_live, 1);
}

#[test]
fn unmap_never_mapped_and_invalid() {
    assert_eq!(
        kinds(&unmap(0x5000, 4096, "TO_DEVICE")),
        [K::UnmapNotMapped]
    );
    // Another device's mapping does not count.
    let other = map(0x5000, 4096, "TO_DEVICE", 0x1000).replace(D, "0000:00:09.0");
    let k = kinds(&[other, unmap(0x5000, 4096, "TO_DEVICE")].concat());
    assert_eq!(k, [K::UnmapNotMapped, K::Leak]);
    assert_eq!(
        kinds(&unmap(u64::MAX, 4096, "TO_DEVICE")),
        [K::UnmapInvalidAddress]
    );
}

#[test]
fn wrong_function() {
    let free = l(
        "dma_free",
        &format!("{D} dir=BIDIRECTIONAL dma_addr=1000 size=4096 virt_addr=00000000deadbeef attrs="),
    );
    let k = kinds(&[map(0x1000, 4096, "BIDIRECTIONAL", 0x9000), free.clone()].concat());
    assert_eq!(k, [K::UnmapWrongFunction]);
    let alloc = l(
        "dma_alloc",
        &format!(
            "{D} dir=BIDIRECTIONAL dma_addr=1000 size=4096 virt_addr=00000000deadbeef flags=GFP_KERNEL attrs="
        ),
    );
    assert!(kinds(&[alloc.clone(), free.clone()].concat()).is_empty());
    let k = kinds(&[alloc.clone(), unmap(0x1000, 4096, "BIDIRECTIONAL")].concat());
    assert_eq!(k, [K::UnmapWrongFunction]);
    // dma_map_resource / dma_unmap_page.
    let res = l(
        "dma_map_resource",
        &format!("{D} dir=TO_DEVICE dma_addr=1000 size=4096 phys_addr=fe000000 attrs="),
    );
    let k = kinds(&[res, unmap(0x1000, 4096, "TO_DEVICE")].concat());
    assert_eq!(k, [K::UnmapWrongFunction]);
}

#[test]
fn free_with_other_cpu_address() {
    let alloc = l(
        "dma_alloc",
        &format!(
            "{D} dir=BIDIRECTIONAL dma_addr=1000 size=4096 virt_addr=00000000deadbeef flags=GFP_KERNEL attrs="
        ),
    );
    let free = |virt: &str| {
        l(
            "dma_free",
            &format!("{D} dir=BIDIRECTIONAL dma_addr=1000 size=4096 virt_addr={virt} attrs="),
        )
    };
    let r = check_text(&[alloc.clone(), free("00000000cafef00d")].concat());
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].kind, K::FreeCpuAddressMismatch);
    assert!(
        r.findings[0].detail.contains(
            "[cpu alloc address=0x00000000deadbeef] [cpu free address=0x00000000cafef00d]"
        )
    );
    assert!(kinds(&[alloc, free("00000000deadbeef")].concat()).is_empty());
    // The v6.12 format: phys_addr, no dir.
    let alloc612 = l(
        "dma_alloc",
        &format!("{D} dma_addr=2000 size=4096 phys_addr=7000 flags=GFP_KERNEL attrs="),
    );
    let free612 = |p: &str| {
        l(
            "dma_free",
            &format!("{D} dma_addr=2000 size=4096 phys_addr={p} attrs="),
        )
    };
    assert_eq!(
        kinds(&[alloc612.clone(), free612("8000")].concat()),
        [K::FreeCpuAddressMismatch]
    );
    assert!(kinds(&[alloc612, free612("7000")].concat()).is_empty());
}

fn map_sg(phys: &[u64], dma: u64, size: u64, dir: &str) -> String {
    let p: Vec<String> = phys.iter().map(|p| format!("0x{p:x}")).collect();
    l(
        "dma_map_sg",
        &format!(
            "{D} dir={dir} nents={n}/{n} ents=1/1 dma_addrs={{0x{dma:x}}} sizes={{0x{size:x}}} phys_addrs={{{}}} attrs=",
            p.join(","),
            n = phys.len()
        ),
    )
}

fn unmap_sg(phys: &[u64], dir: &str) -> String {
    let p: Vec<String> = phys.iter().map(|p| format!("0x{p:x}")).collect();
    l(
        "dma_unmap_sg",
        &format!("{D} dir={dir} phys_addrs={{{}}} attrs=", p.join(",")),
    )
}

#[test]
fn unmap_sg_checks() {
    let m = map_sg(&[0x1000, 0x5000, 0x9000], 0xf000, 0x3000, "TO_DEVICE");
    assert!(
        kinds(&[m.clone(), unmap_sg(&[0x1000, 0x5000, 0x9000], "TO_DEVICE")].concat()).is_empty()
    );
    // Fewer entries.
    let r = check_text(&[m.clone(), unmap_sg(&[0x1000, 0x5000], "TO_DEVICE")].concat());
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    assert_eq!(r.findings[0].kind, K::UnmapSgCountMismatch);
    assert!(
        r.findings[0]
            .detail
            .contains("[map count=3] [unmap count=2]")
    );
    assert_eq!(r.findings[0].map.as_ref().unwrap().line, 1);
    // Another list with the same first entry.
    let k = kinds(&[m.clone(), unmap_sg(&[0x1000, 0x6000, 0x9000], "TO_DEVICE")].concat());
    assert_eq!(k, [K::UnmapSgListMismatch]);
    // Direction.
    let k = kinds(
        &[
            m.clone(),
            unmap_sg(&[0x1000, 0x5000, 0x9000], "FROM_DEVICE"),
        ]
        .concat(),
    );
    assert_eq!(k, [K::UnmapDirectionMismatch]);
    // Twice; and a list never mapped.
    let u = unmap_sg(&[0x1000, 0x5000, 0x9000], "TO_DEVICE");
    assert_eq!(
        kinds(&[m.clone(), u.clone(), u.clone()].concat()),
        [K::DoubleUnmap]
    );
    assert_eq!(kinds(&u), [K::UnmapNotMapped]);
    // dma_unmap_page of an sg entry.
    // (Linux deletes the entry all the same: nothing leaks.)
    let k = kinds(&[m, unmap(0xf000, 0x3000, "TO_DEVICE")].concat());
    assert_eq!(k, [K::UnmapWrongFunction]);
}

#[test]
fn sync_checks() {
    let m = map(0x1000, 4096, "TO_DEVICE", 0x10_0000);
    assert_eq!(
        kinds(&sync(true, 0x1000, 64, "TO_DEVICE")),
        [K::SyncNotMapped]
    );
    let r = check_text(
        &[
            m.clone(),
            sync(false, 0x1800, 4096, "TO_DEVICE"),
            unmap(0x1000, 4096, "TO_DEVICE"),
        ]
        .concat(),
    );
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].kind, K::SyncOutsideMapping);
    assert_eq!(r.findings[0].map.as_ref().unwrap().line, 1);
    // After the unmap the range is no longer mapped.
    let k = kinds(
        &[
            m.clone(),
            unmap(0x1000, 4096, "TO_DEVICE"),
            sync(false, 0x1000, 64, "TO_DEVICE"),
        ]
        .concat(),
    );
    assert_eq!(k, [K::SyncNotMapped]);
    // Direction: a TO_DEVICE mapping synced FROM_DEVICE for the device.
    let k = kinds(
        &[
            m.clone(),
            sync(false, 0x1000, 64, "FROM_DEVICE"),
            unmap(0x1000, 4096, "TO_DEVICE"),
        ]
        .concat(),
    );
    assert_eq!(k, [K::SyncDirectionMismatch]);
    // A TO_DEVICE mapping synced for the CPU with BIDIRECTIONAL: both of debug.c's messages.
    let k = kinds(
        &[
            m.clone(),
            sync(true, 0x1000, 64, "BIDIRECTIONAL"),
            unmap(0x1000, 4096, "TO_DEVICE"),
        ]
        .concat(),
    );
    assert_eq!(k, [K::SyncDirectionMismatch, K::SyncReadOnlyForCpu]);
    // A FROM_DEVICE mapping synced to the device with BIDIRECTIONAL.
    let f = map(0x1000, 4096, "FROM_DEVICE", 0x10_0000);
    let k = kinds(
        &[
            f,
            sync(false, 0x1000, 64, "BIDIRECTIONAL"),
            unmap(0x1000, 4096, "FROM_DEVICE"),
        ]
        .concat(),
    );
    assert_eq!(k, [K::SyncDirectionMismatch, K::SyncWriteOnlyForDevice]);
    // BIDIRECTIONAL mappings may be synced any way.
    let b = map(0x1000, 4096, "BIDIRECTIONAL", 0x10_0000);
    assert!(
        kinds(
            &[
                b,
                sync(true, 0x1000, 64, "TO_DEVICE"),
                unmap(0x1000, 4096, "BIDIRECTIONAL")
            ]
            .concat()
        )
        .is_empty()
    );
    // dma_sync_sg: the start of the list must be mapped.
    let ssg = l(
        "dma_sync_sg_for_cpu",
        &format!("{D} dir=TO_DEVICE dma_addrs={{0x1000,0x8000}} sizes={{0x100,0x100}}"),
    );
    assert!(
        kinds(&[m.clone(), ssg.clone(), unmap(0x1000, 4096, "TO_DEVICE")].concat())
            .iter()
            .all(|k| *k == K::SyncReadOnlyForCpu)
    );
    assert_eq!(kinds(&ssg), [K::SyncNotMapped]);
}

#[test]
fn overlapping_mappings_follow_linux_rule() {
    // Same buffer mapped twice for the device to write: EEXIST.
    let a = map(0x1000, 4096, "FROM_DEVICE", 0x10_0000);
    let b = map(0x2000, 4096, "FROM_DEVICE", 0x10_0020);
    let r = check_text(
        &[
            a.clone(),
            b.clone(),
            unmap(0x1000, 4096, "FROM_DEVICE"),
            unmap(0x2000, 4096, "FROM_DEVICE"),
        ]
        .concat(),
    );
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].kind, K::OverlappingMapping);
    assert_eq!(
        (
            r.findings[0].at.line,
            r.findings[0].map.as_ref().unwrap().line
        ),
        (2, 1)
    );
    // TO_DEVICE mappings are not tracked.
    let c = map(0x1000, 4096, "TO_DEVICE", 0x10_0000);
    let d = map(0x2000, 4096, "TO_DEVICE", 0x10_0000);
    assert!(
        kinds(
            &[
                c,
                d,
                unmap(0x1000, 4096, "TO_DEVICE"),
                unmap(0x2000, 4096, "TO_DEVICE")
            ]
            .concat()
        )
        .is_empty()
    );
    // Another cacheline of the same page is fine; so is a map after the unmap.
    let e = map(0x2000, 4096, "FROM_DEVICE", 0x10_0040);
    assert!(
        kinds(
            &[
                a.clone(),
                e,
                unmap(0x1000, 4096, "FROM_DEVICE"),
                unmap(0x2000, 4096, "FROM_DEVICE")
            ]
            .concat()
        )
        .is_empty()
    );
    assert!(
        kinds(
            &[
                a.clone(),
                unmap(0x1000, 4096, "FROM_DEVICE"),
                b.clone(),
                unmap(0x2000, 4096, "FROM_DEVICE")
            ]
            .concat()
        )
        .is_empty()
    );
    // DMA_ATTR_SKIP_CPU_SYNC silences it.
    let skip = b.replace("attrs=", "attrs=SKIP_CPU_SYNC");
    assert!(
        kinds(
            &[
                a.clone(),
                skip,
                unmap(0x1000, 4096, "FROM_DEVICE"),
                unmap(0x2000, 4096, "FROM_DEVICE")
            ]
            .concat()
        )
        .is_empty()
    );
    // Nine live mappings of one line: 8 EEXISTs, the last overflowing the counter.
    let mut t = String::new();
    for i in 0..9u64 {
        t.push_str(&map(0x1000 * (i + 1), 64, "BIDIRECTIONAL", 0x10_0000));
    }
    for i in 0..9u64 {
        t.push_str(&unmap(0x1000 * (i + 1), 64, "BIDIRECTIONAL"));
    }
    let r = check_text(&t);
    assert_eq!(r.by_kind[&K::OverlappingMapping], 8);
    assert_eq!(r.by_kind[&K::OverlapCounterOverflow], 1);
    assert_eq!(r.findings_total, 9);
}

#[test]
fn leaks_per_device() {
    let other = map(0x1000, 4096, "TO_DEVICE", 0x1000).replace(D, "0000:00:09.0");
    let t = [
        map(0x1000, 4096, "TO_DEVICE", 0x1000),
        map(0x2000, 4096, "TO_DEVICE", 0x2000),
        other,
    ]
    .concat();
    let r = check_text(&t);
    assert_eq!(r.by_kind[&K::Leak], 2);
    assert_eq!(r.outstanding_at_end, 3);
    assert!(r.findings[0].detail.starts_with("[count=2]"));
    assert_eq!(r.findings[0].at.line, 1);
    assert_eq!(r.findings[1].device, "0000:00:09.0");
}

#[test]
fn dma_mask_from_option_and_trace() {
    let high = map(0x1_0000_0000, 4096, "TO_DEVICE", 0x1000);
    let low = map(0xffff_f000, 4096, "TO_DEVICE", 0x2000);
    let t = [
        high.clone(),
        unmap(0x1_0000_0000, 4096, "TO_DEVICE"),
        low.clone(),
        unmap(0xffff_f000, 4096, "TO_DEVICE"),
    ]
    .concat();
    assert!(check_text(&t).is_clean());
    let opts = CheckOptions {
        dma_masks: vec![(D.to_owned(), 0xffff_ffff)],
        ..boot()
    };
    let r = check_text_with(&t, &opts);
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].kind, K::BeyondDmaMask);
    assert_eq!(r.findings[0].at.line, 1);
    let bounced = l(
        "swiotlb_bounced",
        &format!("dev_name: {D} dma_mask=ffffffff dev_addr=1000 size=4096 NORMAL"),
    );
    let r = check_text(&[bounced, t].concat());
    assert_eq!(
        r.findings.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [K::BeyondDmaMask]
    );
    assert_eq!(r.findings[0].at.line, 2);
}

fn iommu_map(iova: u64, size: u64) -> String {
    l(
        "map",
        &format!(
            "IOMMU: iova=0x{iova:016x} - 0x{:016x} paddr=0x{:016x} size={size}",
            iova + size,
            0x5000
        ),
    )
}

fn iommu_unmap(iova: u64, size: u64) -> String {
    l(
        "unmap",
        &format!(
            "IOMMU: iova=0x{iova:016x} - 0x{:016x} size={size} unmapped_size={size}",
            iova + size
        ),
    )
}

#[test]
fn iommu_layer_against_dma_layer() {
    // Kernel order: iommu:map before dma_map_page, iommu:unmap before dma_unmap_page.
    let good = [
        iommu_map(0xffff_e000, 8192),
        map(0xffff_e000, 6000, "TO_DEVICE", 0x1000),
        iommu_unmap(0xffff_e000, 8192),
        unmap(0xffff_e000, 6000, "TO_DEVICE"),
    ];
    let r = check_text(&good.concat());
    assert!(r.is_clean(), "{:?}", r.findings);
    assert!(r.iommu_checked);
    // A second, properly backed map makes the device known to be translated.
    let second = [
        iommu_map(0xffff_a000, 4096),
        map(0xffff_a000, 4096, "TO_DEVICE", 0x9000),
    ]
    .concat();
    // Lost iommu:map of the first: the finding names the DMA map.
    let r = check_text(
        &[
            second.clone(),
            good[1].clone(),
            good[2].clone(),
            good[3].clone(),
        ]
        .concat(),
    );
    let k: Vec<_> = r.findings.iter().map(|f| f.kind).collect();
    assert_eq!(
        k,
        [K::IommuMapMissing, K::IommuUnmapOrphan, K::Leak],
        "{:?}",
        r.findings
    );
    assert_eq!(r.findings[0].at.line, 3);
    // Lost iommu:unmap: the finding names the unmap and its map.
    let r = check_text(
        &[
            second.clone(),
            good[0].clone(),
            good[1].clone(),
            good[3].clone(),
        ]
        .concat(),
    );
    let k: Vec<_> = r.findings.iter().map(|f| f.kind).collect();
    assert_eq!(k, [K::IommuUnmapMissing, K::Leak]);
    assert_eq!(
        (
            r.findings[0].at.line,
            r.findings[0].map.as_ref().unwrap().line
        ),
        (5, 4)
    );
    // Lost dma_map_page: the iommu:map is an orphan (and the unmap was never mapped).
    let r = check_text(&[second, good[0].clone(), good[2].clone(), good[3].clone()].concat());
    let k: Vec<_> = r.findings.iter().map(|f| f.kind).collect();
    assert!(
        k.contains(&K::IommuMapOrphan) && k.contains(&K::UnmapNotMapped),
        "{k:?}"
    );
    // dma_unmap_sg comes before its iommu:unmap; one iommu:unmap covers the merged range.
    let sg = [
        iommu_map(0xf000, 4096),
        iommu_map(0x10000, 4096),
        map_sg(&[0x1000, 0x5000], 0xf000, 0x2000, "FROM_DEVICE"),
        unmap_sg(&[0x1000, 0x5000], "FROM_DEVICE"),
        iommu_unmap(0xf000, 0x2000),
    ];
    let r = check_text(&sg.concat());
    assert!(r.is_clean(), "{:?}", r.findings);
}

#[test]
fn passthrough_devices_are_not_iommu_checked() {
    let t = [
        map(0x1000, 4096, "TO_DEVICE", 0x1000),
        unmap(0x1000, 4096, "TO_DEVICE"),
    ]
    .concat();
    let r = check_text(&t);
    assert!(r.is_clean());
    assert!(!r.iommu_checked);
    assert!(
        r.notes[0].contains("no iommu:map/iommu:unmap events"),
        "{:?}",
        r.notes
    );
    // With iommu events for another device, this one is noted as not translated.
    let t2 = [
        iommu_map(0x9000, 4096),
        map(0x9000, 4096, "TO_DEVICE", 0x1000).replace(D, "x"),
        t,
    ]
    .concat();
    let r = check_text(&t2);
    assert_eq!(
        r.findings.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [K::Leak]
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains(D) && n.contains("passthrough")),
        "{:?}",
        r.notes
    );
}

/// Native/CSV sources: positions are record numbers, kinds are the event names.
#[test]
fn records_of_any_source() {
    use crate::{Event, MemorySource, TraceDir};
    let header = TraceHeader {
        devices: vec!["dev".into()],
        source: String::new(),
    };
    let ev = |kind, dma| Event {
        dir: TraceDir::ToDevice,
        dma: Some(dma),
        phys: Some(dma),
        len: 4096,
        ..Event::new(kind)
    };
    let mut src = MemorySource::new(
        header,
        vec![
            ev(EventKind::Map, 0x1000),
            ev(EventKind::Unmap, 0x1000),
            ev(EventKind::Unmap, 0x1000),
        ],
    );
    let r = check_source(&mut src, "m.iot", &boot()).unwrap();
    assert_eq!(r.position, Position::Record);
    assert_eq!(r.findings.len(), 1);
    let f = &r.findings[0];
    assert_eq!(
        (f.kind, f.at.line, f.at.event.as_str()),
        (K::DoubleUnmap, 3, "unmap")
    );
    assert_eq!(f.at.task, None);
    assert_eq!(f.map.as_ref().unwrap().line, 1);
}

/// Findings beyond `max_findings` are counted, not listed; the JSON names kinds in snake
/// case.
#[test]
fn max_findings_and_json() {
    let mut t = String::new();
    for i in 0..20u64 {
        t.push_str(&unmap(0x1000 * (i + 1), 4096, "TO_DEVICE"));
    }
    let opts = CheckOptions {
        max_findings: 5,
        ..boot()
    };
    let r = check_text_with(&t, &opts);
    assert_eq!(
        (r.findings.len(), r.findings_total, r.findings_not_listed),
        (5, 20, 15)
    );
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["by_kind"]["unmap_not_mapped"], 20);
    assert_eq!(j["findings"][0]["kind"], "unmap_not_mapped");
    assert!(r.to_text(2).contains("... 18 more findings"));
}

/// `line` with another flags column and CPU.
fn in_ctx(line: &str, cpu: u16, flags: &str) -> String {
    line.replacen("[001] .....", &format!("[{cpu:03}] {flags}"), 1)
}

/// A task's dma_map_sg whose iommu:maps are interleaved with more than a window of a hard
/// interrupt's calls on the same CPU: clean when paired by context, findings when the
/// flags column is gone (per CPU only, as before).
#[test]
fn pairing_by_context() {
    let mut t = String::new();
    for p in 0..4u64 {
        t.push_str(&iommu_map(0x10_0000 + p * 0x1000, 4096));
        // The interrupt: a complete map/unmap with its own page-table events.
        for k in 0..(iommu::WINDOW / 4 + 1) {
            let iova = 0x80_0000 + (p * 100 + k) * 0x1000;
            for l in [
                iommu_map(iova, 4096),
                map(iova, 4096, "FROM_DEVICE", 0x4000_0000 + iova),
                iommu_unmap(iova, 4096),
                unmap(iova, 4096, "FROM_DEVICE"),
            ] {
                t.push_str(&in_ctx(&l, 1, "d.h1."));
            }
        }
    }
    t.push_str(&map_sg(
        &[0x1000, 0x2000, 0x3000, 0x4000],
        0x10_0000,
        0x4000,
        "TO_DEVICE",
    ));
    t.push_str(&unmap_sg(&[0x1000, 0x2000, 0x3000, 0x4000], "TO_DEVICE"));
    t.push_str(&iommu_unmap(0x10_0000, 0x4000));
    let r = check_text(&t);
    assert!(r.is_clean(), "{}", r.to_text(5));
    assert_eq!(r.iommu_pairing, Pairing::Context);
    // The same lines without the flags column.
    let flat = t.replace("d.h1. ", "").replace("..... ", "");
    let r = check_text(&flat);
    assert_eq!(r.iommu_pairing, Pairing::Cpu);
    assert!(
        r.by_kind.get(&K::IommuMapOrphan).copied() > Some(0),
        "{}",
        r.to_text(5)
    );
    assert!(r.notes.iter().any(|n| n.contains("no flags column")));
    // A finding names the interrupt context.
    let lost = in_ctx(&iommu_unmap(0x9000, 4096), 1, "d.h1.");
    let next = in_ctx(&map(0x2_0000, 1, "TO_DEVICE", 1), 1, "d.h1.");
    let r = check_text(&[t.clone(), lost, next].concat());
    let f = r
        .findings
        .iter()
        .find(|f| f.kind == K::IommuUnmapOrphan)
        .unwrap();
    assert_eq!(f.at.context.as_deref(), Some("hardirq"));
    assert!(
        r.to_text(5).contains("(drv-7, cpu 1, hardirq)"),
        "{}",
        r.to_text(5)
    );
}

/// The IOMMU core's identity map of a reserved region (iova == paddr, no DMA call) is
/// counted; an unclaimed iommu:map elsewhere is still an orphan.
#[test]
fn identity_maps_of_reserved_regions() {
    let isa = "            init-1       [000] .....     2.435616: map: IOMMU: iova=0x0000000000000000 - 0x0000000001000000 paddr=0x0000000000000000 size=16777216\n";
    let good = [
        iommu_map(0xffff_e000, 4096),
        map(0xffff_e000, 4096, "TO_DEVICE", 0x1000),
        iommu_unmap(0xffff_e000, 4096),
        unmap(0xffff_e000, 4096, "TO_DEVICE"),
    ]
    .concat();
    let r = check_text(&[isa, &good].concat());
    assert!(r.is_clean(), "{}", r.to_text(5));
    assert_eq!((r.identity_maps, r.identity_bytes), (1, 16 << 20));
    // Not identity (paddr differs), or in an interrupt: an orphan (once a later DMA call
    // of its lane shows that its own call is not merely cut by the end of the trace).
    let other = isa.replace("paddr=0x0000000000000000", "paddr=0x0000000000100000");
    let later = in_ctx(&map(0x2000_0000, 1, "TO_DEVICE", 1), 0, ".....");
    let r = check_text(&[other.as_str(), &good, &later].concat());
    assert_eq!(
        r.by_kind.get(&K::IommuMapOrphan),
        Some(&1),
        "{}",
        r.to_text(5)
    );
    let irq = isa.replace(".....", "d.h1.");
    let later = in_ctx(&map(0x2000_0000, 1, "TO_DEVICE", 1), 0, "d.h1.");
    let r = check_text(&[irq.as_str(), &good, &later].concat());
    assert_eq!(
        r.by_kind.get(&K::IommuMapOrphan),
        Some(&1),
        "{}",
        r.to_text(5)
    );
}

/// A capture that starts and stops mid-run: unmaps and syncs of mappings made before it
/// began are counted, mappings live at its end are outstanding; a double unmap of a
/// pre-trace mapping is still found; `from_boot` and `leaks` turn them into findings.
#[test]
fn mid_run_defaults() {
    let t = [
        sync(true, 0x7000, 64, "FROM_DEVICE"),
        unmap(0x7000, 4096, "FROM_DEVICE"),
        unmap_sg(&[0x8000, 0x9000], "TO_DEVICE"),
        map(0x1000, 4096, "TO_DEVICE", 0x10_0000),
    ]
    .concat();
    let r = check_text_with(&t, &CheckOptions::default());
    assert!(r.is_clean(), "{}", r.to_text(5));
    assert_eq!((r.mapped_before_tracing, r.outstanding_at_end), (3, 1));
    assert!(r.to_text(5).contains("--leaks to list them"));
    let r = check_text(&t);
    let k: Vec<_> = r.findings.iter().map(|f| f.kind).collect();
    assert_eq!(
        k,
        [
            K::SyncNotMapped,
            K::UnmapNotMapped,
            K::UnmapNotMapped,
            K::Leak
        ]
    );
    // Unmapped again: the first unmap is remembered.
    let twice = [t.clone(), unmap(0x7000, 4096, "FROM_DEVICE")].concat();
    let r = check_text_with(&twice, &CheckOptions::default());
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].kind, K::DoubleUnmap);
    assert!(r.findings[0].map.is_none(), "the map is before the trace");
    // A sync of an address the trace saw unmapped is still a finding.
    let after = [
        map(0x1000, 4096, "TO_DEVICE", 0x10_0000),
        unmap(0x1000, 4096, "TO_DEVICE"),
        sync(false, 0x1000, 64, "TO_DEVICE"),
    ]
    .concat();
    let r = check_text_with(&after, &CheckOptions::default());
    assert_eq!(kinds_of(&r), [K::SyncNotMapped]);
}

fn kinds_of(r: &CheckReport) -> Vec<FindingKind> {
    r.findings.iter().map(|f| f.kind).collect()
}

/// The IOMMU halves of calls cut by the trace's edges: a dma_unmap_sg whose iommu:unmap
/// came after tracing stopped, an iommu:unmap whose dma_unmap_sg came before it began, a
/// dma_map_page whose iommu:map came before (and its unmap, which then claims its
/// iommu:unmap), and a dma_unmap_sg of a pre-trace list claiming the next iommu:unmap.
#[test]
fn calls_cut_by_the_edges_of_the_trace() {
    let t = [
        iommu_unmap(0x50_0000, 0x2000),
        map(0xa000, 4096, "TO_DEVICE", 0x1000),
        iommu_map(0xf000, 4096),
        map(0xf000, 4096, "TO_DEVICE", 0x2000),
        unmap_sg(&[0x8000, 0x9000], "TO_DEVICE"),
        iommu_unmap(0x60_0000, 0x2000),
        iommu_unmap(0xa000, 4096),
        unmap(0xa000, 4096, "TO_DEVICE"),
        iommu_map(0x2_0000, 4096),
        map_sg(&[0x3000], 0x2_0000, 0x1000, "TO_DEVICE"),
        unmap_sg(&[0x3000], "TO_DEVICE"),
    ]
    .concat();
    let r = check_text_with(&t, &CheckOptions::default());
    assert!(r.is_clean(), "{}", r.to_text(9));
    assert_eq!((r.cut_at_start, r.cut_at_end), (2, 1), "{}", r.to_text(9));
    // A dma_unmap_page whose iommu:unmap is missing is not excused at the end.
    let t2 = [
        iommu_map(0xf000, 4096),
        map(0xf000, 4096, "TO_DEVICE", 0x2000),
        iommu_map(0xe000, 4096),
        map(0xe000, 4096, "TO_DEVICE", 0x3000),
        unmap(0xe000, 4096, "TO_DEVICE"),
    ]
    .concat();
    let r = check_text_with(&t2, &CheckOptions::default());
    assert_eq!(kinds_of(&r), [K::IommuUnmapMissing]);
}

/// Streaming passes the same findings, in the order found, and keeps none.
#[test]
fn streaming_passes_every_finding() {
    let mut t = String::new();
    for i in 0..50u64 {
        t.push_str(&unmap(0x1000 * (i + 1), 4096, "TO_DEVICE"));
        t.push_str(&map(0x10_0000 + 0x1000 * i, 4096, "FROM_DEVICE", 0x8000));
    }
    let kept = check_text(&t);
    let mut seen = Vec::new();
    let mut r = FtraceReader::new(t.as_bytes(), "t.txt".into(), FtraceOptions::default());
    let streamed = check_ftrace_streaming(&mut r, "t.txt", &boot(), &mut |f: &Finding| {
        seen.push(f.clone());
        Ok(())
    })
    .unwrap();
    assert!(streamed.findings.is_empty());
    assert_eq!(streamed.findings_total, kept.findings_total);
    assert_eq!(streamed.by_kind, kept.by_kind);
    assert_eq!(seen.len() as u64, kept.findings_total);
    let mut sorted = seen.clone();
    sorted.sort_by_key(|f| (f.kind == K::Leak, f.at.line));
    assert_eq!(sorted, kept.findings);
    // A consumer's error stops the check.
    let mut r = FtraceReader::new(t.as_bytes(), "t.txt".into(), FtraceOptions::default());
    let e = check_ftrace_streaming(&mut r, "t.txt", &boot(), &mut |_: &Finding| {
        Err(std::io::Error::other("disk full"))
    })
    .unwrap_err();
    assert!(matches!(e, CheckError::Write(_)), "{e}");
}
