//! `iommulab validate`: the Linux 6.x IOVA allocator model against a real kernel's trace
//! (`iommulab::validate`). The library does the work; this renders it.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use iommulab::iova::{ByteRange, DomainConfig};
use iommulab::validate::{ValidateOptions, ValidateReport, validate, validate_many};

use iommulab_report::{Cell, Table};

use crate::args::ValidateArgs;
use crate::cmd::check::parse_mask;
use crate::output::{json_text, out_flags, prepare_outputs, write_outs};

/// `START-END`: inclusive byte addresses in hex (`0xfee00000-0xfeefffff`).
pub fn parse_window(s: &str) -> Result<ByteRange> {
    let hex = |t: &str| {
        let t = t.trim();
        let t = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .unwrap_or(t);
        u64::from_str_radix(t, 16).ok()
    };
    match s.split_once('-').map(|(a, b)| (hex(a), hex(b))) {
        Some((Some(start), Some(end))) if start <= end => Ok(ByteRange { start, end }),
        _ => bail!(
            "--reserve {s:?}: expected START-END, inclusive hex byte addresses like 0xfee00000-0xfeefffff"
        ),
    }
}

/// The options of `args`.
pub fn options(args: &ValidateArgs) -> Result<ValidateOptions> {
    let mut domain = DomainConfig {
        start_pfn: args.start_pfn,
        aperture_bits: args.aperture_bits,
        forcedac: args.forcedac,
        ..DomainConfig::default()
    };
    if args.no_default_windows {
        domain.reserved.clear();
    }
    for w in &args.reserve {
        domain.reserved.push(parse_window(w)?);
    }
    Ok(ValidateOptions {
        kernel: args.kernel.clone(),
        lazy: args.lazy,
        warmup: args.warmup,
        lenient: args.lenient,
        strict_trace: args.strict_trace,
        domain,
        cpus: args.cpus,
        dma_masks: args
            .dma_masks
            .iter()
            .map(|s| parse_mask(s))
            .collect::<Result<_>>()?,
        groups: args
            .groups
            .iter()
            .map(|g| g.split(',').map(|d| d.trim().to_owned()).collect())
            .collect(),
        max_mismatches: args.max,
        fq_timeout_ms: args.fq_timeout_ms,
        fq_hz: args.fq_hz,
        ..ValidateOptions::default()
    })
}

/// `iommulab validate`. Exits 2 when nothing could be scored: a "0/0" is no agreement.
pub fn run(args: &ValidateArgs) -> Result<ExitCode> {
    let opts = options(args)?;
    opts.check()?;
    let inputs: Vec<(&str, &std::path::Path)> = args
        .trace
        .iter()
        .map(|p| ("the trace", p.as_path()))
        .collect();
    prepare_outputs(&out_flags(&args.out), &inputs)?;
    let (report, json, csv, text) = match args.trace.as_slice() {
        [one] => {
            let report = validate(one, &opts)
                .with_context(|| format!("validating against {}", one.display()))?;
            let (json, csv, text) = (
                json_text(&report)?,
                scores_csv(std::slice::from_ref(&report)),
                report.to_text(),
            );
            (report, json, csv, text)
        }
        many => {
            let paths: Vec<&std::path::Path> =
                many.iter().map(std::path::PathBuf::as_path).collect();
            let names: Vec<String> = many.iter().map(|p| p.display().to_string()).collect();
            let multi = validate_many(&paths, &opts)
                .with_context(|| format!("validating against {}", names.join(", ")))?;
            let mut all = multi.traces.clone();
            all.push(multi.total.clone());
            let (json, csv, text) = (json_text(&multi)?, scores_csv(&all), multi.to_text());
            (multi.total, json, csv, text)
        }
    };
    write_outs(&args.out, &json, Some(&csv))?;
    let mut text = if args.json {
        json
    } else if args.csv {
        csv
    } else {
        text
    };
    if args.lazy && !args.json && !args.csv {
        text.push_str(lazy_note(&report));
    }
    crate::print_stdout(&text)?;
    if report.scored == 0 {
        // Not an error of the command's (the report above says what was read): the trace
        // holds nothing the model can be compared with.
        let _ = writeln!(
            std::io::stderr(),
            "error: nothing to validate in {}: {} allocations read, none scored after the \
             warm-up ({}); validate needs the IOVA allocations of a Linux trace (dma:* map \
             events with their DMA addresses)",
            args.trace
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            report.allocations,
            report.warmup
        );
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}

/// The scores as CSV: per report, its total (device `total`) and one line per device.
fn scores_csv(reports: &[ValidateReport]) -> String {
    let mut t = Table::new(
        "validate",
        None,
        &[
            "trace",
            "device",
            "allocations",
            "scored",
            "open_loop_exact",
            "open_loop_rate",
            "one_step_exact",
            "one_step_rate",
        ],
    );
    let rate = |r: Option<f64>| Cell::Float(r, 6);
    for r in reports {
        t.push(vec![
            Cell::from(&r.trace),
            Cell::from("total"),
            Cell::Int(r.allocations),
            Cell::Int(r.scored),
            Cell::Int(r.open_loop.exact),
            rate(r.open_loop.rate),
            Cell::Int(r.one_step.exact),
            rate(r.one_step.rate),
        ]);
        for d in &r.devices {
            t.push(vec![
                Cell::from(&r.trace),
                Cell::from(&d.device),
                Cell::Int(d.allocations),
                Cell::Int(d.scored),
                Cell::Int(d.open_loop.exact),
                rate(d.open_loop.rate),
                Cell::Int(d.one_step.exact),
                rate(d.one_step.rate),
            ]);
        }
    }
    t.to_csv()
}

/// Under `--lazy` without recorded frees the exact-match rates are low by nature, and the
/// text says so in one line.
const LAZY_NOTE: &str = "note: exact rates are not expected with --lazy on this trace: the flush \
queue frees IOVAs when its timer expires, which no tracepoint records (record the frees with a \
free_iova_fast kprobe: docs/capture.md), so the reuse distances above are the comparison \
(docs/validation.md)\n";

fn lazy_note(report: &ValidateReport) -> &'static str {
    if report.recorded_frees > 0 {
        ""
    } else {
        LAZY_NOTE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_as_inclusive_hex_ranges() {
        assert_eq!(
            parse_window("0xfee00000-0xfeefffff").unwrap(),
            ByteRange {
                start: 0xfee0_0000,
                end: 0xfeef_ffff
            }
        );
        for bad in ["", "0x10", "0x20-0x10", "zz-0x10", "0x1-"] {
            let e = parse_window(bad).unwrap_err().to_string();
            assert!(e.contains("START-END"), "{bad}: {e}");
        }
    }
}
