//! `iommulab expether`: S4.4's timing model (an SR-IOV NIC shared by hosts over ExpEther)
//! with the user's parameters; the library's `pcie::timing::ExpEtherRun` does the work.

use std::fmt::Write as _;

use anyhow::Result;
use iommulab::pcie::timing::{Direction, ExpEtherReport};

use crate::args::ExpEtherArgs;
use crate::output::{json_text, write_outs};

/// `iommulab expether`.
pub fn run(args: &ExpEtherArgs) -> Result<()> {
    let mut run: iommulab::pcie::timing::ExpEtherRun = crate::cmd::load_run(
        args.config.as_deref(),
        &args.set,
        Some("params"),
        &args.out,
        "iommulab expether",
    )?;
    if let Some(d) = args.direction {
        run.direction = d.into();
    }
    if let Some(h) = args.hosts {
        run.streams = vec![1; usize::try_from(h).unwrap_or(usize::MAX).min(1 << 16)];
    }
    if let Some(s) = &args.streams {
        run.streams.clone_from(s);
    }
    run.qos |= args.qos;
    if let Some(d) = args.duration {
        run.duration_s = d;
    }
    let report = iommulab::experiment::expether::run(&run)?;
    let json = json_text(&report)?;
    write_outs(&args.out, &json, None)?;
    crate::print_stdout(&if args.json { json } else { text_of(&report) })
}

/// The report as a reader sees it: each host's goodput, then the limits.
fn text_of(r: &ExpEtherReport) -> String {
    let run = &r.run;
    let res = &r.result;
    let mut t = String::new();
    let dir = match run.direction {
        Direction::Send => "send (the client sends to the hosts: the NIC's posted writes)",
        Direction::Receive => "receive (the hosts send to the client: the NIC's DMA reads)",
        Direction::InterHost => "inter-host (host 1 sends to the others through the NIC's switch)",
    };
    let streams = run
        .streams
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        t,
        "ExpEther, {dir}; {} host(s), streams {streams}; {}; {} s modeled",
        run.streams.len(),
        if run.qos {
            "per-VF QoS"
        } else {
            "no QoS (first come, first served)"
        },
        run.duration_s
    );
    let _ = writeln!(
        t,
        "parameters: {}",
        if r.changed.is_empty() {
            "the estimates (iommulab reproduce expether's)".to_string()
        } else {
            format!("the estimates but {}", r.changed.join(", "))
        }
    );
    let _ = writeln!(t, "\nhost  iperf goodput, Gb/s");
    for (h, g) in res.per_host_gbps.iter().enumerate() {
        let note = if run.direction == Direction::InterHost && h == 0 {
            "  (the sender)"
        } else {
            ""
        };
        let _ = writeln!(t, "{:>4}  {g:.2}{note}", h + 1);
    }
    if run.direction == Direction::InterHost {
        let _ = writeln!(t, "total {:.2} Gb/s", res.total_gbps);
    } else {
        let _ = writeln!(
            t,
            "total {:.2} Gb/s; the external wire allows {:.2} Gb/s of goodput (busy {:.0}% of the run)",
            res.total_gbps,
            r.line_goodput_gbps,
            100.0 * res.wire_utilization
        );
    }
    if let (Some(limit), Some(lift)) = (r.read_limit_gbps, r.reads_to_remove_limit) {
        let n = run.params.outstanding_reads;
        let verdict = if n < lift {
            format!("{lift} outstanding would lift that limit")
        } else {
            format!("more than the links carry ({lift} would do), so N is not the limit")
        };
        let _ = writeln!(
            t,
            "reads: {n} outstanding at most; a read's round trip {:.0} ns unloaded, {:.0} ns mean; \
             {n} reads per unloaded round trip give {limit:.2} Gb/s: {verdict}",
            res.unloaded_read_rtt_ns, res.mean_read_rtt_ns
        );
    }
    let ends = r
        .stream_ends
        .iter()
        .map(|e| format!("{} {} {:.2}", e.machine, e.end, e.gbps))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(t, "one stream's core alone, Gb/s: {ends}");
    let _ = writeln!(
        t,
        "through the functional model: {} TLPs, {} Ethernet frames, {} host IOMMU translations",
        res.path.tlps, res.path.frames, res.path.translations
    );
    t
}
