//! One experiment description, one runner: every system × workload pair
//! parses from the same TOML/JSON and runs through `experiment::run_experiment`, giving the
//! same numbers as the specialised entry points it replaced.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use iommulab::experiment::{
    ConfigError, ExperimentConfig, SystemConfig, WorkloadSpec, no_progress, replay_trace,
    run_experiment, run_workload,
};
use iommulab::hw::{CostModel, CostPreset};
use iommulab::trace::{TraceFormat, open};
use iommulab::virt::{
    EvictionConfig, GuestConfig, Lookahead, OptConfig, Strategy, guest_page_refs, run_guest,
};
use iommulab::workload::{
    InGuest, NetperfSend, NetperfSendConfig, PseudoScsiConfig, WorkloadConfig,
};

fn trace_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst")
}

fn parse(toml: &str) -> ExperimentConfig {
    ExperimentConfig::from_toml(toml).unwrap()
}

#[test]
fn the_workload_table_takes_three_forms() {
    // Pseudo-driver keys directly (every config written before generators had kinds).
    let c = parse("[workload]\nios = 7\nio_size = 512\n");
    assert_eq!(
        c.workload,
        WorkloadSpec::Generator(WorkloadConfig::PseudoScsi(PseudoScsiConfig {
            ios: 7,
            io_size: 512,
            ..PseudoScsiConfig::default()
        }))
    );
    // Any generator by kind.
    let c = parse("[workload]\nkind = \"netperf-send\"\npackets = 9\n");
    assert_eq!(c.workload_name(), "netperf-send");
    // A trace.
    let c = parse("[workload]\ntrace = \"x.txt\"\nformat = \"ftrace\"\n");
    match &c.workload {
        WorkloadSpec::Trace(t) => {
            assert_eq!(t.trace, PathBuf::from("x.txt"));
            assert_eq!(t.format, TraceFormat::Ftrace);
        }
        other => panic!("{other:?}"),
    }
    // Each form round-trips through TOML and JSON.
    for text in [
        "[workload]\nios = 7\n",
        "[workload]\nkind = \"block\"\n",
        "[workload]\ntrace = \"x.txt\"\n",
        "[system]\nkind = \"guest\"\nquota = 12\n[workload]\nkind = \"apache-sendfile\"\n",
    ] {
        let c = parse(text);
        assert_eq!(
            ExperimentConfig::from_toml(&c.to_toml().unwrap()).unwrap(),
            c
        );
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(ExperimentConfig::from_json(&json).unwrap(), c);
    }
}

#[test]
fn bad_keys_name_their_path() {
    let e = ExperimentConfig::from_toml("[workload]\nkind = \"netperf-send\"\npackts = 9\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("workload") && e.contains("packts"), "{e}");
    let e = ExperimentConfig::from_toml("[system]\nkind = \"guest\"\nquotaa = 1\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("system") && e.contains("quotaa"), "{e}");
    let e = ExperimentConfig::from_toml("[system]\nkind = \"xen\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("guest") && e.contains("bare-metal"), "{e}");
    let e = ExperimentConfig::from_toml("[workload]\ntrace = \"x\"\nformt = \"csv\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("formt"), "{e}");
}

#[test]
fn a_guest_refuses_the_keys_it_cannot_honour() {
    for (extra, key) in [
        (
            "configuration = \"strict\"\n[mechanisms]\ntranslation = \"iommu\"\nallocator = \"rbtree\"\nflush = { kind = \"strict\" }\n",
            "mechanisms",
        ),
        ("dma_debug = true\n", "dma_debug"),
        ("[device]\nkind = \"malicious\"\nneighbours = 1\n", "device"),
        // Bare metal's kernel and cache model, and the host unit's structure: a guest used
        // to run without them under the same label.
        ("kernel = \"2.6.26\"\n", "kernel"),
        ("reserved = [{ start = 0, end = 0xfff }]\n", "reserved"),
        ("[hardware.cpu_cache]\n", "hardware.cpu_cache"),
        ("[hardware]\nlevels = 4\n", "hardware.levels"),
        (
            "[hardware]\niotlb = { sets = 64, ways = 8 }\n",
            "hardware.iotlb",
        ),
        (
            "[hardware]\ninvalidation = \"queued\"\n",
            "hardware.invalidation",
        ),
        (
            "[hardware]\nwrite_buffer_flush = false\n",
            "hardware.write_buffer_flush",
        ),
    ] {
        let c = parse(&format!("{extra}[system]\nkind = \"guest\"\n"));
        match c.resolve() {
            Err(ConfigError::Invalid {
                key: k, expected, ..
            }) => {
                assert_eq!(k, key);
                assert!(expected.contains("guest"), "{expected}");
            }
            other => panic!("{key}: {other:?}"),
        }
    }
}

/// A guest experiment is `virt::run_guest` with the hardware's cost model: same counters.
#[test]
fn a_guest_experiment_is_the_guest_model() {
    let c = parse(
        "[system]\nkind = \"guest\"\nstrategy = \"on-demand\"\nquota = 64\n\
         eviction = { kind = \"opt\" }\nbatching = \"map-unmap\"\n\
         [hardware]\ncost = \"kvm-2010\"\n\
         [workload]\nkind = \"netperf-send\"\npackets = 3000\n",
    );
    let run = run_experiment(&c, &mut no_progress).unwrap();
    let g = run.guest.clone().expect("a guest run has the guest part");
    assert!(run.replay.is_none());
    let SystemConfig::Guest(s) = &c.system else {
        unreachable!()
    };
    let cfg = GuestConfig {
        strategy: Strategy::OnDemand,
        quota: 64,
        eviction: EvictionConfig::Opt(OptConfig::default()),
        batching: s.batching,
        cost: CostModel::KVM_2010,
        ..GuestConfig::default()
    };
    let w = || {
        InGuest::new(
            NetperfSend::new(NetperfSendConfig {
                packets: 3000,
                ..NetperfSendConfig::default()
            })
            .unwrap(),
        )
    };
    let la = Arc::new(Lookahead::from_refs(
        &guest_page_refs(&mut w(), cfg.cache_only).unwrap(),
    ));
    let direct = run_guest(&mut w(), &cfg, Some(la)).unwrap();
    assert_eq!(g, direct);
    assert!(g.hits > 0 && g.misses > 0, "{g:?}");
    // The common fields come from the guest's counters.
    assert_eq!(run.config, "guest-on-demand");
    assert_eq!(run.ops, g.buffers);
    assert_eq!(run.iotlb_invalidations, g.iotlb_invalidations);
    assert_eq!(run.stale_accesses, g.stale_accesses);
    // The run lasts its link payload at the throughput its limits allow (the link or the
    // CPUs, `virt::link`), so IOPS follows the same limit as the throughput.
    assert!(
        g.throughput_mbps > 0.0 && g.throughput_mbps <= 1000.0,
        "{g:?}"
    );
    let run_s = g.sent_bytes() as f64 * 8.0 / (g.throughput_mbps * 1e6);
    assert!((run.modeled_seconds - run_s).abs() < 1e-12 * run_s.max(1.0));
    assert!((run.iops - g.buffers as f64 / run_s).abs() < 1e-6 * run.iops);
}

/// A generator other than the pseudo driver on bare metal is `run_workload`; a trace is
/// `replay_trace`, with the replay report attached.
#[test]
fn bare_metal_runs_are_the_entry_points_they_replace() {
    let c =
        parse("configuration = \"strict\"\n[workload]\nkind = \"netperf-send\"\npackets = 2000\n");
    let run = run_experiment(&c, &mut no_progress).unwrap();
    let mut w = NetperfSend::new(NetperfSendConfig {
        packets: 2000,
        ..NetperfSendConfig::default()
    })
    .unwrap();
    let labels = iommulab::experiment::build::labels_of(&c);
    let direct = run_workload(&c, &mut w, labels, false, None, &mut no_progress).unwrap();
    let strip = |mut r: iommulab::experiment::RunResult| {
        r.software_ns_per_op = 0.0;
        r.wall_seconds = 0.0;
        r.measured_iops = 0.0;
        r
    };
    assert!(run.ops > 0 && run.guest.is_none() && run.replay.is_none());
    assert_eq!(strip(run), strip(direct));

    let text = format!(
        "configuration = \"modern\"\n[hardware]\ncost = \"modern\"\n[workload]\ntrace = {:?}\n",
        trace_path().display().to_string()
    );
    let c = parse(&text);
    let run = run_experiment(&c, &mut no_progress).unwrap();
    let src = open(&trace_path(), TraceFormat::Auto, false).unwrap();
    let (direct, report) = replay_trace(&c, src, &mut no_progress).unwrap();
    assert_eq!(run.replay, Some(report));
    assert!(report.maps > 3000, "{report:?}");
    assert_eq!(strip(run), strip(direct));
}

/// The guest over a real trace: the replay report and the guest part both present.
#[test]
fn a_guest_replays_a_trace() {
    let text = format!(
        "[system]\nkind = \"guest\"\nstrategy = \"single-use\"\n[hardware]\ncost = \"kvm-2010\"\n\
         [workload]\ntrace = {:?}\n",
        trace_path().display().to_string()
    );
    let run = run_experiment(&parse(&text), &mut no_progress).unwrap();
    let g = run.guest.as_ref().unwrap();
    let p = run.replay.unwrap();
    // single-use: no page map is ever a hit (S1.1).
    assert_eq!(g.hits, 0);
    assert_eq!(g.buffers, p.maps);
}

/// `system.kind = "xen-pv"` is `experiment::run_pv_dma` with `[hardware]`'s unit and prices:
/// the same counters; every option and unit is selectable by name.
#[test]
fn a_xen_pv_experiment_is_the_pv_dma_layer() {
    use iommulab::experiment::{PvDmaKind, PvDmaSpec, UnitKind, run_pv_dma};
    use iommulab::workload::{NetRx, NetRxConfig};
    for option in PvDmaKind::ALL {
        for unit in UnitKind::ALL {
            let text = format!(
                "[system]\nkind = \"xen-pv\"\noption = \"{}\"\nbatch = 8\n\
                 [hardware]\nunit = \"{}\"\ncost = \"vtd-2008\"\ncost_overrides = {{ hypercall = 1000 }}\n\
                 [workload]\nkind = \"net-rx\"\npackets = 3000\n",
                option.name(),
                unit.name()
            );
            let cfg = parse(&text);
            let run = run_experiment(&cfg, &mut no_progress).unwrap();
            let x = run.xen_pv.clone().unwrap();
            let spec = PvDmaSpec {
                option,
                unit,
                batch: 8,
                ..PvDmaSpec::default()
            };
            let direct = run_pv_dma(
                &spec,
                &cfg.resolve().unwrap().unit,
                32,
                NetRx::new(NetRxConfig {
                    packets: 3000,
                    ..NetRxConfig::default()
                }),
            )
            .unwrap();
            assert_eq!(x, direct, "{text}");
            assert_eq!(x.option, option.name());
            assert_eq!(run.ops, 3000);
            assert_eq!(run.stale_accesses, x.probes_through + x.late_probes_through);
            assert!(run.guest.is_none());
        }
    }
}

#[test]
fn a_xen_pv_domain_refuses_the_keys_it_cannot_honour() {
    for (extra, sys, key) in [
        ("dma_debug = true\n", "", "dma_debug"),
        (
            "[device]\nkind = \"malicious\"\nneighbours = 1\n",
            "",
            "device",
        ),
        ("", "domain_mib = 0\n", "system.domain_mib"),
        ("", "batch = 0\n", "system.batch"),
        ("kernel = \"2.6.26\"\n", "", "kernel"),
        ("reserved = [{ start = 0, end = 0xfff }]\n", "", "reserved"),
        ("[hardware.cpu_cache]\n", "", "hardware.cpu_cache"),
    ] {
        let c = parse(&format!("{extra}[system]\nkind = \"xen-pv\"\n{sys}"));
        match c.resolve() {
            Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key),
            other => panic!("{key}: {other:?}"),
        }
    }
    // A misspelt key inside a reserved window or a quota policy is an error, not ignored.
    for text in [
        "reserved = [{ start = 0x1000, end = 0x1fff, size = 5 }]\n",
        "[system]\nkind = \"guest\"\nquota_policy = { kind = \"selfish\", quota = 16, bogus = 1 }\n",
    ] {
        let e = ExperimentConfig::from_toml(text).unwrap_err().to_string();
        assert!(e.contains("unknown field"), "{text}: {e}");
    }
    // An unknown option is named with the ones there are.
    let e = ExperimentConfig::from_toml("[system]\nkind = \"xen-pv\"\noption = \"sometimes\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("sometimes") && e.contains("never-free"), "{e}");
}

/// A Xen PV domain replays a real trace; its map requests are the trace's (S2.5: how many
/// entries each multicall carries on a real machine's virtio traffic).
#[test]
fn a_xen_pv_domain_replays_a_trace() {
    let text = format!(
        "[system]\nkind = \"xen-pv\"\n[hardware]\nunit = \"vtd\"\n[workload]\ntrace = {:?}\n",
        trace_path().display().to_string()
    );
    // The trace's machine has more memory than the default domain: said by key.
    let e = run_experiment(&parse(&text), &mut no_progress)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("system.domain_mib") && e.contains("at least"),
        "{e}"
    );
    let text = text.replace(
        "kind = \"xen-pv\"\n",
        "kind = \"xen-pv\"\ndomain_mib = 16384\n",
    );
    let run = run_experiment(&parse(&text), &mut no_progress).unwrap();
    let x = run.xen_pv.as_ref().unwrap();
    let p = run.replay.as_ref().unwrap();
    assert_eq!(x.pairs, p.unmaps - p.unmatched_unmaps, "{x:?} {p:?}");
    // Pinned: 5,950 of 6,526 multicalls carry one entry (91%); virtio-blk's scatterlists
    // make the rest, up to 63 entries. The paper's "over 99%" was a NIC's traffic.
    let single = x.multicall_sizes[0];
    assert_eq!((single.entries, single.multicalls), (1, 5950), "{x:?}");
    assert!((0.90..0.92).contains(&x.single_entry_fraction), "{x:?}");
    assert_eq!(x.multicall_sizes.last().map(|b| b.entries), Some(63));
}

/// `allocator = "gap-tree"` makes the rbtree walk's choices: a run on the real trace and one
/// on a generator see the same IOMMU (same IOVAs, so the same IOTLB, walks and
/// invalidations); only the allocator's own work differs.
#[test]
fn the_gap_tree_allocator_runs_as_the_rbtree_does() {
    let run = |allocator: &str, workload: &str| {
        let text = format!(
            "[mechanisms]\ntranslation = \"iommu\"\nallocator = \"{allocator}\"\nflush = {{ kind = \"strict\" }}\n\
             [workload]\n{workload}\n"
        );
        run_experiment(&parse(&text), &mut no_progress).unwrap()
    };
    for workload in [
        format!("trace = {:?}", trace_path().display().to_string()),
        "kind = \"uniform-random\"\nios = 20000".to_string(),
    ] {
        let (a, b) = (run("rbtree", &workload), run("gap-tree", &workload));
        assert_eq!(a.stats.iommu, b.stats.iommu, "{workload}");
        assert_eq!(a.ops, b.ops);
        assert_eq!(a.stats.iova.allocs, b.stats.iova.allocs);
        assert_eq!(a.stats.iova.failures, b.stats.iova.failures);
        assert!(a.stats.iova.allocs > 1000);
    }
}

/// A run with a duration ends with the first I/O completed at or after it: without an
/// IOMMU every I/O costs exactly `io_path`, so the count is the duration over that, rounded
/// up. The ops come to the runner in the generator's own loop, which stops when it does.
#[test]
fn a_duration_ends_the_run_at_the_first_io_past_it() {
    for seconds in [0.000_1, 0.001, 0.004] {
        let c = parse(&format!(
            "configuration = \"disabled\"\nduration_s = {seconds}\n[hardware]\ncost = \"vtd-2008\"\n"
        ));
        let run = run_experiment(&c, &mut no_progress).unwrap();
        let cost = CostPreset::Vtd2008.model();
        let stop = cost.clock.cycles_from_secs(seconds).get();
        assert_eq!(run.ops, stop.div_ceil(cost.io_path), "{seconds} s");
    }
    // With an IOMMU the I/Os cost more, so fewer fit; the modeled time covers the duration.
    let c =
        parse("configuration = \"modern\"\nduration_s = 0.001\n[hardware]\ncost = \"vtd-2008\"\n");
    let run = run_experiment(&c, &mut no_progress).unwrap();
    assert!(run.ops > 0 && run.modeled_seconds >= 0.001, "{run:?}");
    let per_io = run.modeled_seconds / run.ops as f64;
    assert!(run.modeled_seconds - per_io < 0.001, "{run:?}");
}

/// An op that fails ends the run with its error, and nothing after it runs: a trace whose
/// second map's buffer runs past the end of the address space.
#[test]
fn an_op_that_fails_ends_the_run_with_its_error() {
    use iommulab::dma::DmaError;
    use iommulab::trace::{Event, EventKind, MemorySource, TraceDir, TraceHeader};
    let map = |t: u64, dma: u64, phys: u64| Event {
        time_ns: t,
        dir: TraceDir::ToDevice,
        dma: Some(dma),
        phys: Some(phys),
        len: 4096,
        ..Event::new(EventKind::Map)
    };
    let events = vec![
        map(0, 0x1000, 0x10_0000),
        map(10, 0x2000, u64::MAX - 100),
        map(20, 0x3000, 0x20_0000),
    ];
    let header = TraceHeader {
        devices: vec!["dev".into()],
        source: "test".into(),
    };
    let c = parse("configuration = \"modern\"\n");
    let err = replay_trace(&c, MemorySource::new(header, events), &mut no_progress).unwrap_err();
    match err {
        iommulab::Error::Dma(DmaError::BadLength { phys, len }) => {
            assert_eq!((phys, len), (u64::MAX - 100, 4096));
        }
        other => panic!("{other:?}"),
    }
}

/// Values a run could not hold in memory (or that mean nothing) are refused by key before
/// anything is built: before, each of these aborted the process allocating a table of
/// terabytes, or panicked.
#[test]
fn sizes_beyond_what_a_run_can_hold_are_refused_by_key() {
    for (text, key, expected) in [
        (
            "[hardware]\niotlb = { sets = 1073741824, ways = 1 }\n",
            "hardware.iotlb",
            "at most 1048576 entries",
        ),
        (
            "[hardware]\niotlb = { sets = 1099511627776, ways = 1048576 }\n",
            "hardware.iotlb",
            "at most 1048576 entries",
        ),
        (
            "[mechanisms]\ntranslation = \"iommu\"\nallocator = \"rbtree\"\n\
             flush = { kind = \"flush_queue\", entries = 1099511627776, timeout_ms = 10, hz = 250 }\n",
            "mechanisms.flush.entries",
            "1..=32768",
        ),
        (
            "[mechanisms]\ntranslation = \"iommu\"\nallocator = \"rbtree\"\n\
             flush = { kind = \"flush_queue\", entries = 256, timeout_ms = 10, hz = 10001 }\n",
            "mechanisms.flush.hz",
            "0..=10000",
        ),
        (
            "[mechanisms]\ntranslation = \"iommu\"\nallocator = \"rbtree\"\n\
             flush = { kind = \"deferred\", entries = 0, timeout_ms = 10 }\n",
            "mechanisms.flush.entries",
            "1..=1048576",
        ),
        (
            "[mechanisms]\ntranslation = \"iommu\"\nallocator = \"magazine\"\n\
             flush = { kind = \"strict\" }\nmagazine = { cpus = 0 }\n",
            "mechanisms.magazine.cpus",
            "1..=65536",
        ),
        (
            "dma_bits = 64\n[hardware]\nunit = \"calgary\"\n",
            "dma_bits",
            "13..=35 with unit = \"calgary\"",
        ),
        (
            "dma_bits = 44\n[hardware]\nunit = \"dart\"\n",
            "dma_bits",
            "13..=35 with unit = \"dart\"",
        ),
        (
            "[system]\nkind = \"guest\"\nguest_mib = 1125899906842624\n[hardware]\ncost = \"kvm-2010\"\n",
            "system.guest_mib",
            "1..=1048576",
        ),
        (
            "[hardware.cost_overrides]\nio_path = 9223372036854775807\n",
            "hardware.cost_overrides.io_path",
            "0..=100000000 cycles",
        ),
        (
            "[hardware.cost_overrides]\nghz = 1e-300\n",
            "hardware.cost_overrides.ghz",
            "0.1..=100 GHz",
        ),
        (
            "[mechanisms]\ntranslation = \"iommu\"\nallocator = \"rbtree\"\n\
             flush = { kind = \"strict\" }\nmagazine = { mag_size = 0 }\n",
            "mechanisms.magazine.mag_size",
            "1..=65536",
        ),
    ] {
        match parse(text).resolve() {
            Err(ConfigError::Invalid {
                key: k,
                expected: e,
                ..
            }) => {
                assert_eq!(k, key, "{text}");
                assert!(e.contains(expected), "{text}: {e}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    // The largest of each still resolves.
    for text in [
        "[hardware]\niotlb = { sets = 1048576, ways = 1 }\n",
        "dma_bits = 35\n[hardware]\nunit = \"calgary\"\n",
        "[system]\nkind = \"guest\"\nguest_mib = 1048576\n[hardware]\ncost = \"kvm-2010\"\n",
        "[hardware.cost_overrides]\nio_path = 100000000\nghz = 100.0\n",
    ] {
        parse(text).resolve().unwrap();
    }
}

/// `replay_trace` replays bare metal: a config describing another system, or a run length,
/// is refused by key instead of being ignored under the config's label.
#[test]
fn replay_trace_refuses_what_it_would_ignore() {
    use iommulab::trace::{MemorySource, TraceHeader};
    let empty = || {
        MemorySource::new(
            TraceHeader {
                devices: vec!["dev".into()],
                source: "test".into(),
            },
            Vec::new(),
        )
    };
    for (text, key) in [
        (
            "[system]\nkind = \"guest\"\n[hardware]\ncost = \"kvm-2010\"\n",
            "system.kind",
        ),
        ("[system]\nkind = \"xen-pv\"\n", "system.kind"),
        ("duration_s = 0.5\n", "duration_s"),
    ] {
        match replay_trace(&parse(text), empty(), &mut no_progress) {
            Err(iommulab::Error::Config(ConfigError::Invalid { key: k, .. })) => {
                assert_eq!(k, key, "{text}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    // The same guest runs the trace as its workload.
    let text = format!(
        "[system]\nkind = \"guest\"\n[hardware]\ncost = \"kvm-2010\"\n[workload]\ntrace = {:?}\n",
        trace_path().display().to_string()
    );
    let r = run_experiment(&parse(&text), &mut no_progress).unwrap();
    assert!(r.guest.is_some() && r.replay.is_some());
    // A generator other than the pseudo driver runs to its own end: no `duration_s`.
    let e = parse("duration_s = 0.5\n[workload]\nkind = \"netperf-send\"\npackets = 100\n")
        .resolve()
        .unwrap_err();
    assert!(
        matches!(&e, ConfigError::Invalid { key, .. } if key == "duration_s"),
        "{e}"
    );
}

/// A progress callback that says `Break` stops any run with `Error::Cancelled` (Python's
/// Ctrl-C), on every system, from a generator or a trace, and in the offline policies'
/// first pass; one that goes on sees the I/Os counted up to the end.
#[test]
fn a_progress_callback_can_stop_every_kind_of_run() {
    use std::ops::ControlFlow;

    use iommulab::Error;
    use iommulab::experiment::PROGRESS_EVERY;
    use iommulab::experiment::record::generate;
    use iommulab::trace::TraceHeader;
    use iommulab::workload::UniformRandomConfig;

    let n = 3 * PROGRESS_EVERY;
    // A trace of more I/Os than the runs report at (the committed ones are smaller).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.iot");
    let mut sink = iommulab::create_trace(&path, &TraceHeader::default()).unwrap();
    let random = WorkloadConfig::UniformRandom(UniformRandomConfig::default());
    generate(&random, &mut *sink, 4 * n).unwrap();
    sink.finish().unwrap();
    let trace = path.display().to_string().replace('\\', "/");
    let cases = [
        format!("[workload]\nkind = \"pseudo-scsi\"\nios = {n}\n"),
        format!("[workload]\nkind = \"uniform-random\"\nios = {n}\n"),
        format!("[workload]\ntrace = \"{trace}\"\n"),
        format!(
            "[system]\nkind = \"guest\"\nstrategy = \"on-demand\"\nquota = 64\n\
             [hardware]\ncost = \"kvm-2010\"\n[workload]\nkind = \"netperf-send\"\npackets = {n}\n"
        ),
        format!(
            "[system]\nkind = \"guest\"\nstrategy = \"on-demand\"\nquota = 64\n\
             eviction = {{ kind = \"opt\" }}\n\
             [hardware]\ncost = \"kvm-2010\"\n[workload]\nkind = \"netperf-send\"\npackets = {n}\n"
        ),
        format!(
            "[system]\nkind = \"guest\"\nstrategy = \"on-demand\"\nquota = 64\n\
             eviction = {{ kind = \"opt\" }}\n\
             [hardware]\ncost = \"kvm-2010\"\n[workload]\ntrace = \"{trace}\"\n"
        ),
        format!(
            "[system]\nkind = \"xen-pv\"\n\
             [workload]\nkind = \"net-rx\"\npackets = {n}\n"
        ),
        format!("[system]\nkind = \"xen-pv\"\n[workload]\ntrace = \"{trace}\"\n"),
    ];
    for text in &cases {
        let cfg = parse(text);
        let mut reports = Vec::new();
        let whole = run_experiment(&cfg, &mut |p| {
            reports.push(p.done);
            ControlFlow::Continue(())
        })
        .unwrap();
        assert!(reports.len() >= 2, "{text}: {reports:?}");
        let mut stops = 0;
        let e = run_experiment(&cfg, &mut |_| {
            stops += 1;
            ControlFlow::Break(())
        })
        .unwrap_err();
        assert!(matches!(e, Error::Cancelled), "{text}: {e}");
        assert_eq!(stops, 1, "{text}: the run ends at the first Break");
        // Stopped in its second pass (the first reports 0 done), an offline policy's run is
        // cancelled too, not a future that no longer matches the maps it saw.
        let e = run_experiment(&cfg, &mut |p| {
            if p.done > 0 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap_err();
        assert!(matches!(e, Error::Cancelled), "{text}: {e}");
        // Stopping changes nothing that persists: the same config runs whole again.
        let again = run_experiment(&cfg, &mut no_progress).unwrap();
        assert_eq!(again.modeled_seconds, whole.modeled_seconds, "{text}");
    }
}
