//! Property tests of the built-in workload generators: proptest draws small
//! configurations and seeds of every generator, and an independent checker replays each op
//! stream, asserting after every op that
//!
//! - a `Map`/`MapSg` names a free slot, below the `slots()` hint, and a device below
//!   `devices()`; `MapSg` comes with non-empty segments of non-zero length;
//! - `Access` and `Unmap` name a mapped slot, and an access is one the direction allows;
//! - no cacheline is in two live buffers the device may write (dma-debug's
//!   `active_cacheline_insert`: a slab never hands out an object still mapped);
//! - the workload clock (`Tick`) never goes back;
//!
//! and at the end that the stream ended with every slot unmapped after exactly
//! `total_ios()` unmaps (the runner's I/Os), stays ended, and that the same seed replays the
//! same ops and segments. A last test proves no heap allocation per op in steady state.

use std::collections::HashMap;

use iommulab::addr::{DmaDirection, Hpa};
use iommulab::workload::{
    ApacheSendfile, ApacheSendfileConfig, Block, BlockBuffers, BlockConfig, DmaOp, DuplexRxConfig,
    DuplexTx, NetRx, NetRxConfig, NetperfSend, NetperfSendConfig, NicDuplex, NicDuplexConfig,
    PageAllocConfig, Pattern, PseudoScsi, PseudoScsiConfig, Segment, TxMapping, UniformRandom,
    UniformRandomConfig, Workload, WorkloadConfig,
};
use proptest::prelude::*;

#[global_allocator]
static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();

/// One op and, for `MapSg`, its segments.
type Step = (DmaOp, Vec<Segment>);

/// The cachelines of the live buffers the device may write, and whose each is.
#[derive(Default)]
struct Writable {
    lines_of: HashMap<u32, Vec<u64>>,
    owner: HashMap<u64, u32>,
    /// Not checked.
    off: bool,
}

impl Writable {
    /// Slot `slot` maps `segs` (physical address, length) for `dir`.
    fn claim(
        &mut self,
        slot: u32,
        dir: DmaDirection,
        segs: &[(u64, u64)],
    ) -> Result<(), TestCaseError> {
        if self.off || dir == DmaDirection::ToDevice {
            return Ok(());
        }
        let lines = self.lines_of.entry(slot).or_default();
        for &(phys, len) in segs {
            for line in phys / 64..=(phys + len - 1) / 64 {
                if let Some(other) = self.owner.insert(line, slot) {
                    return Err(TestCaseError::fail(format!(
                        "cacheline {:#x} of slot {slot} is in live writable slot {other}",
                        line * 64
                    )));
                }
                lines.push(line);
            }
        }
        Ok(())
    }

    /// Slot `slot` is unmapped.
    fn release(&mut self, slot: u32) {
        for line in self.lines_of.remove(&slot).unwrap_or_default() {
            self.owner.remove(&line);
        }
    }
}

/// Replays `w` to the end under the invariants of the module doc; returns the stream.
/// `shared_pages`: buffers may share pages by design (`uniform-random`), so the cacheline
/// rule is not checked.
fn checked<W: Workload<Phys = Hpa>>(
    w: &mut W,
    shared_pages: bool,
) -> Result<Vec<Step>, TestCaseError> {
    let mut live: HashMap<u32, DmaDirection> = HashMap::new();
    let mut writable = Writable {
        off: shared_pages,
        ..Writable::default()
    };
    let mut steps = Vec::new();
    let mut now = 0;
    let mut unmaps = 0u64;
    while let Some(op) = w
        .next_op()
        .map_err(|e| TestCaseError::fail(e.to_string()))?
    {
        let mut segs = Vec::new();
        match op {
            DmaOp::Map {
                slot,
                device,
                phys,
                len,
                dir,
                ..
            } => {
                prop_assert!(len > 0);
                writable.claim(slot, dir, &[(phys.get(), len)])?;
                prop_assert!(usize::from(device) < w.devices());
                prop_assert!((slot as usize) < w.slots(), "slot {} ≥ hint", slot);
                prop_assert!(
                    live.insert(slot, dir).is_none(),
                    "slot {} mapped twice",
                    slot
                );
            }
            DmaOp::MapSg {
                slot, device, dir, ..
            } => {
                segs = w.sg_segments().to_vec();
                prop_assert!(!segs.is_empty(), "MapSg without segments");
                prop_assert!(segs.iter().all(|s| s.len > 0));
                let pieces: Vec<(u64, u64)> = segs.iter().map(|s| (s.phys.get(), s.len)).collect();
                writable.claim(slot, dir, &pieces)?;
                prop_assert!(usize::from(device) < w.devices());
                prop_assert!((slot as usize) < w.slots(), "slot {} ≥ hint", slot);
                prop_assert!(
                    live.insert(slot, dir).is_none(),
                    "slot {} mapped twice",
                    slot
                );
            }
            DmaOp::Access { slot, access } => {
                let dir = live.get(&slot);
                prop_assert!(dir.is_some(), "access of unmapped slot {}", slot);
                prop_assert!(dir.unwrap().perm().allows(access));
            }
            DmaOp::Unmap { slot, .. } => {
                prop_assert!(live.remove(&slot).is_some(), "unmap of unmapped {}", slot);
                writable.release(slot);
                unmaps += 1;
            }
            DmaOp::Tick { now_ns } => {
                prop_assert!(now_ns >= now, "clock went back");
                now = now_ns;
            }
        }
        steps.push((op, segs));
    }
    prop_assert!(live.is_empty(), "leaked slots {:?}", live);
    prop_assert_eq!(Some(unmaps), w.total_ios());
    prop_assert!(w.next_op().unwrap().is_none());
    Ok(steps)
}

/// Checks a stream twice from the same config: the ops must be identical.
fn check_twice<W: Workload<Phys = Hpa>>(
    make: impl FnMut() -> W,
) -> Result<Vec<Step>, TestCaseError> {
    check_twice_shared(make, false)
}

/// [`check_twice`] for a workload whose buffers may share pages (see [`checked`]).
fn check_twice_shared<W: Workload<Phys = Hpa>>(
    mut make: impl FnMut() -> W,
    shared_pages: bool,
) -> Result<Vec<Step>, TestCaseError> {
    let a = checked(&mut make(), shared_pages)?;
    let b = checked(&mut make(), shared_pages)?;
    prop_assert!(a == b, "same seed, different streams");
    Ok(a)
}

fn mapping() -> impl Strategy<Value = TxMapping> {
    prop_oneof![Just(TxMapping::PerFragment), Just(TxMapping::Sg)]
}

fn memory(pages: u64) -> PageAllocConfig {
    PageAllocConfig {
        pages,
        ..PageAllocConfig::default()
    }
}

prop_compose! {
    fn netperf()(
        packets in 0u64..400,
        sockets in 1u32..5,
        send_buffer in 1u64..200_000,
        message_size in 1u64..20_000,
        nodelay in any::<bool>(),
        mtu in prop_oneof![Just(576u64), Just(1500), Just(9000)],
        tso in any::<bool>(),
        mapping in mapping(),
        tx_ring in 18u32..300,
        link_mbps in prop_oneof![Just(1000u64), Just(10_000)],
        rtt_us in prop_oneof![Just(0u32), Just(100), 0u32..2000],
        cpus in 1u16..4,
        scatter in any::<bool>(),
        heads_allocated_for_dma in any::<bool>(),
        seed in any::<u64>(),
    ) -> NetperfSendConfig {
        NetperfSendConfig {
            packets, sockets, send_buffer, message_size, nodelay, mtu, tso, mapping,
            heads_allocated_for_dma, tx_ring, link_mbps, rtt_us, cpus, seed,
            memory: PageAllocConfig { scatter, ..memory(8192) },
        }
    }
}

prop_compose! {
    fn apache()(
        requests in 0u64..60,
        files in 1u32..50,
        size_median in 1u64..40_000,
        size_sigma in 0.0f64..2.0,
        zipf_s in 0.0f64..1.5,
        connections in 1u32..8,
        http_header in 0u64..512,
        tso in any::<bool>(),
        mapping in mapping(),
        tx_ring in 18u32..100,
        cpus in 1u16..4,
        seed in any::<u64>(),
    ) -> ApacheSendfileConfig {
        ApacheSendfileConfig {
            requests, files, size_median, size_sigma, zipf_s, connections, http_header, tso,
            mapping, tx_ring, cpus, seed,
            max_size: 256 << 10,
            memory: memory(16_384),
            ..ApacheSendfileConfig::default()
        }
    }
}

prop_compose! {
    fn block()(
        requests in 0u64..300,
        queue_depth in 1u32..40,
        pages in 1u64..6,
        pattern in prop_oneof![Just(Pattern::Random), Just(Pattern::Sequential)],
        read_fraction in 0.0f64..=1.0,
        cache in any::<bool>(),
        sg in any::<bool>(),
        iops in prop_oneof![Just(0u64), Just(500_000)],
        cpus in 1u16..4,
        seed in any::<u64>(),
    ) -> BlockConfig {
        let buffers = if cache { BlockBuffers::PageCache } else { BlockBuffers::Reuse };
        BlockConfig {
            requests, queue_depth, pattern, read_fraction, buffers, iops, cpus, seed,
            // Page-cache requests over a page need SG.
            sg: sg || (cache && pages > 1),
            request_size: pages * 4096 - if cache { 0 } else { seed % 100 },
            device_size: 4 << 20,
            memory: memory(4096),
        }
    }
}

prop_compose! {
    fn uniform()(
        ios in 0u64..400,
        max_pages in 1u32..8,
        outstanding in 1u32..20,
        pool_pages in 8u64..64,
        sg_fraction in 0.0f64..=1.0,
        access_fraction in 0.0f64..=1.0,
        devices in 1u16..4,
        cpus in 1u16..4,
        ns_per_io in prop_oneof![Just(0u64), 1u64..1000],
        seed in any::<u64>(),
    ) -> UniformRandomConfig {
        UniformRandomConfig {
            ios, max_pages, outstanding, pool_pages, sg_fraction, access_fraction, devices,
            cpus, ns_per_io, seed,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn netperf_streams_are_well_formed(cfg in netperf()) {
        let steps = check_twice(|| NetperfSend::new(cfg).unwrap())?;
        // Every packet is ToDevice and read by the NIC.
        for (op, segs) in &steps {
            match op {
                DmaOp::Map { dir, .. } | DmaOp::MapSg { dir, .. } => {
                    prop_assert_eq!(*dir, DmaDirection::ToDevice);
                    prop_assert!(segs.len() <= 18);
                }
                _ => {}
            }
        }
    }

    #[test]
    fn apache_streams_are_well_formed(cfg in apache()) {
        check_twice(|| ApacheSendfile::new(cfg).unwrap())?;
    }

    #[test]
    fn block_streams_are_well_formed(cfg in block()) {
        let steps = check_twice(|| Block::new(cfg).unwrap())?;
        let pages = usize::try_from(cfg.request_size.div_ceil(4096)).unwrap();
        for (op, segs) in &steps {
            if let DmaOp::MapSg { .. } = op {
                prop_assert_eq!(segs.len(), pages);
                prop_assert_eq!(segs.iter().map(|s| s.len).sum::<u64>(), cfg.request_size);
            }
        }
    }

    #[test]
    fn uniform_random_streams_are_well_formed(cfg in uniform()) {
        // "the same page mapped by several buffers at once" is what it is for.
        let steps = check_twice_shared(|| UniformRandom::new(cfg).unwrap(), true)?;
        for (op, segs) in &steps {
            if let DmaOp::MapSg { .. } = op {
                prop_assert!(segs.len() <= cfg.max_pages as usize);
            }
        }
    }

    #[test]
    fn net_rx_streams_are_well_formed(
        packets in 1u64..3000,
        ring in 1u32..300,
        budget in 1u32..80,
        buf_size in prop_oneof![Just(256u64), Just(1522), Just(2048), Just(4096), Just(9000)],
        extra_pages in 0u64..64,
        copybreak in prop_oneof![Just(0u64), Just(256)],
        frame_len in prop_oneof![Just(66u64), Just(1514)],
        seed in any::<u64>(),
    ) {
        let cfg = NetRxConfig {
            packets,
            ring,
            budget,
            buf_size,
            pool_pages: NetRx::min_pool_pages(ring, buf_size) + extra_pages,
            copybreak,
            frame_len,
            seed,
        };
        prop_assert!(WorkloadConfig::NetRx(cfg).validate().is_ok());
        check_twice(|| NetRx::new(cfg))?;
    }

    #[test]
    fn nic_duplex_streams_are_well_formed(
        net in netperf(),
        web in apache(),
        apache_tx in any::<bool>(),
        ring in 1u32..300,
        budget in 1u32..64,
        copybreak in prop_oneof![Just(0u64), Just(256)],
        per_frame in 1u64..20_000,
        seed in any::<u64>(),
    ) {
        let cfg = NicDuplexConfig {
            tx: if apache_tx { DuplexTx::ApacheSendfile(web) } else { DuplexTx::NetperfSend(net) },
            rx: DuplexRxConfig { ring, budget: budget.min(ring), copybreak, seed, ..DuplexRxConfig::default() },
            tx_bytes_per_rx_frame: per_frame,
        };
        if apache_tx {
            check_twice(|| NicDuplex::new(ApacheSendfile::new(web).unwrap(), &cfg).unwrap())?;
        } else {
            check_twice(|| NicDuplex::new(NetperfSend::new(net).unwrap(), &cfg).unwrap())?;
        }
    }

    #[test]
    fn pseudo_scsi_streams_are_well_formed(ios in 0u64..300, outstanding in 1u32..8, seed in any::<u64>()) {
        let cfg = PseudoScsiConfig { ios, outstanding, seed, touch: true, ..PseudoScsiConfig::default() };
        check_twice(|| PseudoScsi::new(cfg))?;
    }
}

/// Warm-up, then 50 000 more ops of every generator's defaults (and the SG/TSO variants)
/// must not allocate on the heap.
#[test]
fn generators_do_not_allocate_in_steady_state() {
    fn quiet<W: Workload>(name: &str, mut w: W) {
        for _ in 0..50_000 {
            w.next_op().unwrap().unwrap();
        }
        let before = alloc_counter::this_thread();
        for _ in 0..50_000 {
            std::hint::black_box(w.next_op().unwrap().unwrap());
            std::hint::black_box(w.sg_segments());
        }
        let n = alloc_counter::this_thread() - before;
        assert_eq!(n, 0, "{name}: {n} allocations in steady state");
    }
    let net = NetperfSendConfig {
        packets: u64::MAX,
        sockets: 3,
        cpus: 2,
        ..NetperfSendConfig::default()
    };
    quiet("netperf", NetperfSend::new(net).unwrap());
    let tso = NetperfSendConfig {
        tso: true,
        mapping: TxMapping::Sg,
        ..net
    };
    quiet("netperf tso sg", NetperfSend::new(tso).unwrap());
    let web = ApacheSendfileConfig {
        requests: u64::MAX,
        ..ApacheSendfileConfig::default()
    };
    quiet("apache", ApacheSendfile::new(web).unwrap());
    let disk = BlockConfig {
        requests: u64::MAX,
        ..BlockConfig::default()
    };
    quiet("block", Block::new(disk).unwrap());
    let cache = BlockConfig {
        buffers: BlockBuffers::PageCache,
        sg: true,
        request_size: 16_384,
        ..disk
    };
    quiet("block page cache", Block::new(cache).unwrap());
    let random = UniformRandomConfig {
        ios: u64::MAX,
        sg_fraction: 0.5,
        ..UniformRandomConfig::default()
    };
    quiet("uniform", UniformRandom::new(random).unwrap());
    quiet(
        "pseudo-scsi, 16 in flight",
        PseudoScsi::new(PseudoScsiConfig {
            ios: u64::MAX,
            outstanding: 16,
            pool_pages: 8,
            touch: true,
            ..PseudoScsiConfig::default()
        }),
    );
    quiet(
        "net-rx",
        NetRx::new(NetRxConfig {
            packets: u64::MAX,
            pool_pages: NetRx::min_pool_pages(256, 2048),
            ..NetRxConfig::default()
        }),
    );
    let duplex = NicDuplexConfig {
        tx: DuplexTx::NetperfSend(tso),
        ..NicDuplexConfig::default()
    };
    quiet(
        "nic-duplex",
        NicDuplex::new(NetperfSend::new(tso).unwrap(), &duplex).unwrap(),
    );
}

/// `WorkloadConfig` names and validates every kind; defaults build.
#[test]
fn every_kind_has_a_name_and_valid_defaults() {
    let names: Vec<&str> = WorkloadConfig::all_defaults()
        .iter()
        .map(WorkloadConfig::name)
        .collect();
    assert_eq!(
        names,
        [
            "pseudo-scsi",
            "netperf-send",
            "apache-sendfile",
            "block",
            "uniform-random",
            "net-rx",
            "nic-duplex"
        ]
    );
    for w in WorkloadConfig::all_defaults() {
        w.validate().unwrap();
    }
}
