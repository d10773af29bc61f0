//! One run of the S4.4 model as a user describes it: any subset of the parameters (the rest
//! keep [`ExpEtherParams::default`]'s estimates), the direction, each host's streams, per-VF
//! QoS and the modeled time; and what it gives beside the limits the model's mechanisms
//! set (the wire's goodput, N reads per round trip, each stream end's core alone).
//!
//! The reproduction of Figures 9 and 11 (`repro/expether.rs` in the façade) runs the same
//! [`simulate`]; this is the door for other NICs, networks and host counts.

use serde::{Deserialize, Serialize};

use crate::timing::host_stack::{CLIENT_GHZ, core_limit_gbps, packet_cost_ps, server_ghz};
use crate::timing::{
    Direction, ExpEtherParams, Scenario, SimResult, TimingError, read_limit_gbps,
    reads_to_remove_limit, simulate,
};

/// What to run. Every field has a default: receive, one host with one stream, no QoS,
/// 0.1 s of modeled time, the estimates of [`ExpEtherParams::default`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExpEtherRun {
    /// Which way the data goes (`send`: the client to the hosts; `receive`: the hosts to
    /// the client; `inter_host`: host 1 to the others through the NIC's switch).
    pub direction: Direction,
    /// Greedy iperf streams per host; its length is the number of hosts (1..=16).
    pub streams: Vec<u32>,
    /// Per-VF QoS in the NIC (S4.3): equal shares whatever the demand.
    pub qos: bool,
    /// Modeled seconds (a tenth of them fill the pipeline and are not counted).
    pub duration_s: f64,
    /// The model's parameters.
    pub params: ExpEtherParams,
}

impl Default for ExpEtherRun {
    fn default() -> Self {
        Self {
            direction: Direction::Receive,
            streams: vec![1],
            qos: false,
            duration_s: 0.1,
            params: ExpEtherParams::default(),
        }
    }
}

/// One stream end's core alone ([`crate::timing::host_stack`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamEnd {
    /// `client` or `host N` (1-based).
    pub machine: String,
    /// `sender` or `receiver`.
    pub end: &'static str,
    /// Its clock, GHz (Table I; hosts past the third take server 3's).
    pub ghz: f64,
    /// The goodput one stream's core sustains alone, Gb/s.
    pub gbps: f64,
}

/// A run's result beside the limits its mechanisms set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExpEtherReport {
    /// What ran.
    pub run: ExpEtherRun,
    /// What the model measured.
    pub result: SimResult,
    /// The external wire's ceiling on iperf goodput, Gb/s.
    pub line_goodput_gbps: f64,
    /// N reads per unloaded round trip as goodput, Gb/s (reads only: not for send).
    pub read_limit_gbps: Option<f64>,
    /// The fewest outstanding reads that would lift that limit (reads only).
    pub reads_to_remove_limit: Option<u32>,
    /// Each stream end's core alone: the client's and each host's.
    pub stream_ends: Vec<StreamEnd>,
    /// Parameters that differ from [`ExpEtherParams::default`]'s estimates, by name.
    pub changed: Vec<String>,
}

impl ExpEtherRun {
    /// Runs it.
    pub fn run(&self) -> Result<ExpEtherReport, TimingError> {
        let p = &self.params;
        let result = simulate(
            p,
            &Scenario {
                direction: self.direction,
                streams: self.streams.clone(),
                qos: self.qos,
                duration_s: self.duration_s,
            },
        )?;
        let reads = self.direction != Direction::Send && result.unloaded_read_rtt_ns > 0.0;
        let rtt = result.unloaded_read_rtt_ns;
        Ok(ExpEtherReport {
            line_goodput_gbps: p.line_goodput_gbps(),
            read_limit_gbps: reads.then(|| read_limit_gbps(p, p.outstanding_reads, rtt)),
            reads_to_remove_limit: reads.then(|| reads_to_remove_limit(p, rtt)),
            stream_ends: self.stream_ends(),
            changed: changed(p),
            result,
            run: self.clone(),
        })
    }

    /// The client's end and each host's, as the direction sets who sends.
    fn stream_ends(&self) -> Vec<StreamEnd> {
        let p = &self.params;
        let bytes = p.goodput_bytes_per_packet();
        let end = |machine: String, ghz: f64, sends: bool| {
            let cost = if sends {
                packet_cost_ps(p.tx_cycles_per_packet, ghz, p.tx_ns_per_byte, bytes)
            } else {
                packet_cost_ps(p.rx_cycles_per_packet, ghz, p.rx_ns_per_byte, bytes)
            };
            StreamEnd {
                machine,
                end: if sends { "sender" } else { "receiver" },
                ghz,
                gbps: core_limit_gbps(bytes, cost),
            }
        };
        let mut v = Vec::with_capacity(self.streams.len() + 1);
        if self.direction != Direction::InterHost {
            v.push(end(
                "client".into(),
                CLIENT_GHZ,
                self.direction == Direction::Send,
            ));
        }
        for h in 0..self.streams.len() {
            let sends = match self.direction {
                Direction::Send => false,
                Direction::Receive => true,
                Direction::InterHost => h == 0,
            };
            v.push(end(format!("host {}", h + 1), server_ghz(h), sends));
        }
        v
    }
}

/// The names of `p`'s fields that differ from the defaults.
fn changed(p: &ExpEtherParams) -> Vec<String> {
    let (Ok(serde_json::Value::Object(ours)), Ok(serde_json::Value::Object(base))) = (
        serde_json::to_value(p),
        serde_json::to_value(ExpEtherParams::default()),
    ) else {
        return Vec::new();
    };
    ours.iter()
        .filter(|(k, v)| base.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults are the reproduction's one-host receive: N = 8 reads per round trip.
    /// A short run: the model is in steady state within microseconds.
    fn short() -> ExpEtherRun {
        ExpEtherRun {
            duration_s: 0.01,
            ..ExpEtherRun::default()
        }
    }

    #[test]
    fn the_default_run_is_one_host_receiving() {
        let r = short().run().unwrap();
        assert_eq!(r.result.per_host_gbps.len(), 1);
        let limit = r.read_limit_gbps.unwrap();
        assert!((r.result.total_gbps - limit).abs() / limit < 0.02, "{r:?}");
        assert!(r.reads_to_remove_limit.unwrap() > 8);
        assert!(r.changed.is_empty());
        assert_eq!(r.stream_ends.len(), 2);
        assert_eq!(r.stream_ends[0].end, "receiver");
    }

    /// A partial parameter table keeps the other estimates and is named in `changed`; more
    /// outstanding reads lift receive.
    #[test]
    fn a_partial_table_overrides_only_its_fields() {
        let run: ExpEtherRun = toml::from_str(
            "direction = \"receive\"\nstreams = [1, 1]\nduration_s = 0.01\n\
             [params]\noutstanding_reads = 16\n",
        )
        .unwrap();
        assert_eq!(run.params.bridge_ns, ExpEtherParams::default().bridge_ns);
        let r = run.run().unwrap();
        assert_eq!(r.changed, ["outstanding_reads"]);
        let base = ExpEtherRun {
            streams: vec![1, 1],
            ..short()
        }
        .run()
        .unwrap();
        assert!(r.result.total_gbps > base.result.total_gbps + 1.0, "{r:?}");
    }

    /// Send has no reads, so no read limit; inter-host has no client end.
    #[test]
    fn limits_follow_the_direction() {
        let send = ExpEtherRun {
            direction: Direction::Send,
            ..short()
        }
        .run()
        .unwrap();
        assert_eq!(send.read_limit_gbps, None);
        // The count's window edges may add a packet's worth.
        assert!(
            send.result.total_gbps <= send.line_goodput_gbps * 1.005,
            "{send:?}"
        );
        let inter = ExpEtherRun {
            direction: Direction::InterHost,
            streams: vec![0, 1, 1],
            ..short()
        }
        .run()
        .unwrap();
        assert_eq!(inter.stream_ends.len(), 3);
        assert_eq!(inter.stream_ends[0].end, "sender");
    }

    /// Bad input is named: an unknown field, a parameter out of range, no hosts.
    #[test]
    fn bad_input_is_named() {
        let e = toml::from_str::<ExpEtherRun>("[params]\noutstanding_read = 4\n").unwrap_err();
        assert!(e.to_string().contains("outstanding_read"), "{e}");
        let mut run = ExpEtherRun::default();
        run.params.outstanding_reads = 0;
        let e = run.run().unwrap_err();
        assert!(e.to_string().contains("outstanding_reads"), "{e}");
        let e = ExpEtherRun {
            streams: Vec::new(),
            ..ExpEtherRun::default()
        }
        .run()
        .unwrap_err();
        assert!(e.to_string().contains("hosts"), "{e}");
    }
}
