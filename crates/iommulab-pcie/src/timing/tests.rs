//! The model's mechanisms, checked against their own formulas (not against the paper).

use super::*;

fn run(p: &ExpEtherParams, direction: Direction, streams: Vec<u32>, qos: bool) -> SimResult {
    simulate(
        p,
        &Scenario {
            direction,
            streams,
            qos,
            duration_s: 0.005,
        },
    )
    .unwrap()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

#[test]
fn send_runs_at_the_external_wires_goodput_for_any_number_of_hosts() {
    let p = ExpEtherParams::default();
    // (9000 - 52) / (9000 + 14 + 4 + 20) of 10 Gb/s.
    assert!(close(p.line_goodput_gbps(), 9.9004, 1e-4));
    for h in 1..=3 {
        let r = run(&p, Direction::Send, vec![1; h], false);
        assert!(
            close(r.total_gbps, p.line_goodput_gbps(), 0.005),
            "{h} hosts: {r:?}"
        );
        for g in &r.per_host_gbps {
            assert!(close(*g, r.total_gbps / h as f64, 0.01), "{r:?}");
        }
    }
}

#[test]
fn receive_is_n_reads_per_round_trip_until_the_ethernet_limits_it() {
    for n in [1, 2, 4, 8, 16, 32] {
        let p = ExpEtherParams {
            outstanding_reads: n,
            ..ExpEtherParams::default()
        };
        let r = run(&p, Direction::Receive, vec![1; 3], false);
        let limit = read_limit_gbps(&p, n, r.unloaded_read_rtt_ns);
        let want = limit.min(completion_ceiling_gbps(&p));
        assert!(
            close(r.total_gbps, want, 0.02),
            "N={n}: {} vs {want} ({r:?})",
            r.total_gbps
        );
        // Below the ceiling the round trip stays the unloaded one: the reads, not the
        // links, are the bottleneck.
        if limit < 0.9 * completion_ceiling_gbps(&p) {
            assert!(
                close(r.mean_read_rtt_ns, r.unloaded_read_rtt_ns, 0.05),
                "N={n}: {r:?}"
            );
        }
    }
    let p = ExpEtherParams::default();
    let r = run(&p, Direction::Receive, vec![1], false);
    let need = reads_to_remove_limit(&p, r.unloaded_read_rtt_ns);
    let more = ExpEtherParams {
        outstanding_reads: need,
        ..p.clone()
    };
    let r2 = run(&more, Direction::Receive, vec![1], false);
    assert!(r2.total_gbps > r.total_gbps);
    assert!(
        close(r2.total_gbps, completion_ceiling_gbps(&p), 0.02),
        "{r2:?}"
    );
}

/// The page's account of a read's round trip (bridge passes, switch hops) is the
/// simulator's: moving one latency moves the unloaded round trip by its count times.
#[test]
fn a_reads_round_trip_has_four_bridge_passes_and_one_switch_hop_each_way() {
    let p = ExpEtherParams::default();
    let rtt = |p: &ExpEtherParams| run(p, Direction::Receive, vec![1], false).unloaded_read_rtt_ns;
    let base = rtt(&p);
    let bridge = ExpEtherParams {
        bridge_ns: p.bridge_ns + 100.0,
        ..p.clone()
    };
    let switch = ExpEtherParams {
        switch_ns: p.switch_ns + 100.0,
        ..p.clone()
    };
    let memory = ExpEtherParams {
        host_memory_ns: p.host_memory_ns + 100.0,
        ..p.clone()
    };
    assert!(close(
        rtt(&bridge) - base,
        100.0 * f64::from(READ_BRIDGE_PASSES),
        1e-6
    ));
    assert!(close(
        rtt(&switch) - base,
        100.0 * f64::from(READ_SWITCH_HOPS),
        1e-6
    ));
    assert!(close(rtt(&memory) - base, 100.0, 1e-6));
    // What is left is serialization, the same whatever the latencies.
    let rest = base - read_fixed_latency_ns(&p);
    assert!(rest > 0.0);
    assert!(close(
        rtt(&bridge) - read_fixed_latency_ns(&bridge),
        rest,
        1e-6
    ));
}

#[test]
fn qos_gives_each_vf_one_share_whatever_its_demand() {
    let p = ExpEtherParams::default();
    for dir in [Direction::Send, Direction::Receive] {
        let r = run(&p, dir, vec![2, 1, 1], false);
        assert!(
            close(r.per_host_gbps[0], 2.0 * r.per_host_gbps[1], 0.01),
            "{dir:?} {r:?}"
        );
        let q = run(&p, dir, vec![2, 1, 1], true);
        assert!(
            close(q.per_host_gbps[0], q.per_host_gbps[2], 0.01),
            "{dir:?} {q:?}"
        );
        assert!(close(q.total_gbps, r.total_gbps, 0.01));
    }
}

#[test]
fn inter_host_traffic_is_read_limited_and_reads_wait_behind_the_writes() {
    let p = ExpEtherParams::default();
    let rx = run(&p, Direction::Receive, vec![1], false);
    let ih = run(&p, Direction::InterHost, vec![1, 1, 1], false);
    assert_eq!(ih.per_host_gbps[0], 0.0);
    assert!(
        close(ih.per_host_gbps[1], ih.per_host_gbps[2], 0.01),
        "{ih:?}"
    );
    assert!(ih.total_gbps < rx.total_gbps, "{ih:?} vs {rx:?}");
    assert!(ih.mean_read_rtt_ns > rx.mean_read_rtt_ns);
}

#[test]
fn bad_parameters_and_scenarios_are_refused_by_name() {
    let p = ExpEtherParams {
        max_read_request_bytes: 500,
        ..ExpEtherParams::default()
    };
    let e = simulate(
        &p,
        &Scenario {
            direction: Direction::Receive,
            streams: vec![1],
            qos: false,
            duration_s: 1.0,
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("max_read_request_bytes"), "{e}");
    let e = simulate(
        &ExpEtherParams::default(),
        &Scenario {
            direction: Direction::InterHost,
            streams: vec![1],
            qos: false,
            duration_s: 1.0,
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("inter-host"), "{e}");
}

/// The timing model and the functional path are one model: every read the event loop timed
/// was an MRd the path carried and translated at its host, with its completions, and every
/// packet sent was MWr TLPs the path carried.
#[test]
fn every_timed_dma_crossed_the_functional_path() {
    let p = ExpEtherParams::default();
    let rx = run(&p, Direction::Receive, vec![1; 3], false);
    // Reads issued ≥ reads completed; each issued read is one translation at a host.
    assert!(rx.path.translations >= rx.reads && rx.reads > 0, "{rx:?}");
    // 512-byte reads at 64-byte boundaries: 8 completions each (the tail read fewer).
    let per_read = (rx.path.tlps - rx.path.translations) as f64 / rx.path.translations as f64;
    assert!((7.5..=8.0).contains(&per_read), "{per_read}");
    assert_eq!(rx.path.frames, rx.path.tlps);
    let tx = run(&p, Direction::Send, vec![1; 2], false);
    // 9014 bytes in MWr of 128: 71 TLPs a packet, each translated by its host's IOMMU.
    assert!(
        tx.path.translations >= 71 * tx.packets && tx.packets > 0,
        "{tx:?}"
    );
    assert_eq!(tx.path.translations % 71, 0);
    assert_eq!(tx.path.tlps, tx.path.translations);
}

/// A stream's end whose core is slower than its share of the links sets the stream's rate:
/// one packet's payload per core time (host_stack), and it binds only the stream it serves.
#[test]
fn a_stream_runs_no_faster_than_the_core_at_either_end() {
    let p = ExpEtherParams {
        rx_cycles_per_packet: 20_000.0,
        rx_ns_per_byte: 0.4,
        ..ExpEtherParams::default()
    };
    let bytes = p.goodput_bytes_per_packet();
    let rx_cost =
        |ghz| host_stack::packet_cost_ps(p.rx_cycles_per_packet, ghz, p.rx_ns_per_byte, bytes);
    // Send, 1 host: server 1's receiving core (2.83 GHz), below the wire.
    let server1 = host_stack::core_limit_gbps(bytes, rx_cost(host_stack::server_ghz(0)));
    assert!(server1 < p.line_goodput_gbps() - 1.0, "{server1}");
    let r = run(&p, Direction::Send, vec![1], false);
    assert!(close(r.total_gbps, server1, 0.01), "{server1} {r:?}");
    // Two hosts need half the wire each, within each core: the wire binds again.
    let r = run(&p, Direction::Send, vec![1; 2], false);
    assert!(close(r.total_gbps, p.line_goodput_gbps(), 0.01), "{r:?}");
    // Receive with the read limit removed (N = 32): the client's receiving core (2.66 GHz).
    let p32 = ExpEtherParams {
        outstanding_reads: 32,
        ..p.clone()
    };
    let client = host_stack::core_limit_gbps(bytes, rx_cost(host_stack::CLIENT_GHZ));
    let r = run(&p32, Direction::Receive, vec![1], false);
    assert!(close(r.total_gbps, client, 0.01), "{client} {r:?}");
    assert!(client < server1);
}

/// A window of one packet makes a stream stop and wait: each packet is made, crosses the
/// wire, the NIC and the bridges, and is consumed before the next is made.
#[test]
fn a_closed_window_holds_the_sender_back() {
    let p = ExpEtherParams {
        tcp_window_bytes: 8948,
        ..ExpEtherParams::default()
    };
    assert_eq!(p.window_packets(), 1);
    let r = run(&p, Direction::Send, vec![1], false);
    let open = run(&ExpEtherParams::default(), Direction::Send, vec![1], false);
    assert!(r.total_gbps < 0.5 * open.total_gbps, "{r:?}");
    let r = run(&p, Direction::Receive, vec![1], false);
    assert!(
        r.total_gbps < 0.5 * open.total_gbps && r.total_gbps > 0.0,
        "{r:?}"
    );
}
