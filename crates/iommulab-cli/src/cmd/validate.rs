//! `iommulab validate`: the Linux 6.x IOVA allocator model against a real kernel's trace
//! (`iommulab::validate`). The library does the work; this renders it.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use iommulab::iova::{ByteRange, DomainConfig};
use iommulab::validate::{ValidateOptions, validate};

use crate::args::ValidateArgs;
use crate::cmd::check::parse_mask;

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
    let report = validate(&args.trace, &opts)
        .with_context(|| format!("validating against {}", args.trace.display()))?;
    let text = if args.json {
        let mut t = serde_json::to_string_pretty(&report)?;
        t.push('\n');
        t
    } else if args.lazy {
        report.to_text() + LAZY_NOTE
    } else {
        report.to_text()
    };
    crate::print_stdout(&text)?;
    if report.scored == 0 {
        // Not an error of the command's (the report above says what was read): the trace
        // holds nothing the model can be compared with.
        let _ = writeln!(
            std::io::stderr(),
            "error: nothing to validate in {}: {} allocations read, none scored after the \
             warm-up ({}); validate needs the IOVA allocations of a Linux trace (dma:* map \
             events with their DMA addresses)",
            args.trace.display(),
            report.allocations,
            report.warmup
        );
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}

/// Under `--lazy` the exact-match rates are low by nature, and the text says so.
const LAZY_NOTE: &str = "note: low rates are expected with --lazy: the flush queue frees IOVAs \
when its timer expires, which no tracepoint records, so the model cannot know when each range \
came back to the allocator (docs/validation.md)\n";

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
