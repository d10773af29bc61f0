//! `iommulab check`: dma-debug for a recorded trace (`iommulab::trace::check`).
//!
//! Exit codes: 0 clean, [`FINDINGS_EXIT`] (3) when there are findings, 1 for errors (a file
//! that cannot be read or parsed), 2 for usage errors (clap).

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use iommulab::trace::check::{CheckOptions, CheckReport, check, parse_dma_mask};

use crate::args::CheckArgs;

/// The exit code when the trace has findings.
pub const FINDINGS_EXIT: u8 = 3;

/// Findings printed by default.
const DEFAULT_PRINTED: usize = 50;

/// `DEVICE=MASK`: hex (`0xffffffff`) or a number of bits (`32`).
pub fn parse_mask(s: &str) -> Result<(String, u64)> {
    let Some((dev, m)) = s.rsplit_once('=') else {
        bail!("--dma-mask {s:?}: expected DEVICE=MASK (MASK hex like 0xffffffff, or bits like 32)");
    };
    match parse_dma_mask(m) {
        Some(mask) if !dev.is_empty() => Ok((dev.to_owned(), mask)),
        _ => bail!(
            "--dma-mask {s:?}: expected DEVICE=MASK with MASK hex like 0xffffffff or 1-64 bits"
        ),
    }
}

/// The options of `args`.
pub fn options(dma_masks: &[String], no_iommu: bool) -> Result<CheckOptions> {
    Ok(CheckOptions {
        dma_masks: dma_masks
            .iter()
            .map(|s| parse_mask(s))
            .collect::<Result<_>>()?,
        iommu: !no_iommu,
        ..CheckOptions::default()
    })
}

/// The exit code of a report.
pub fn exit_code(report: &CheckReport) -> ExitCode {
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(FINDINGS_EXIT)
    }
}

/// `iommulab check`.
pub fn run(args: &CheckArgs) -> Result<ExitCode> {
    let mut opts = options(&args.dma_masks, args.no_iommu)?;
    if let Some(n) = args.max {
        opts.max_findings = n;
    }
    let report = check(&args.trace, args.format.into(), args.lenient, &opts)
        .with_context(|| format!("checking {}", args.trace.display()))?;
    let text = if args.json {
        let mut t = serde_json::to_string_pretty(&report)?;
        t.push('\n');
        t
    } else {
        report.to_text(args.max.unwrap_or(DEFAULT_PRINTED))
    };
    crate::print_stdout(&text)?;
    Ok(exit_code(&report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_parse_as_hex_or_bits() {
        assert_eq!(parse_mask("0000:00:01.0=32").unwrap().1, 0xffff_ffff);
        assert_eq!(parse_mask("d=0xfffff").unwrap(), ("d".into(), 0xfffff));
        assert_eq!(parse_mask("d=64").unwrap().1, u64::MAX);
        for bad in ["d", "=32", "d=0", "d=65", "d=0xzz", "d=abc", "d=0x0"] {
            let e = parse_mask(bad).unwrap_err().to_string();
            assert!(e.contains("DEVICE=MASK"), "{bad}: {e}");
        }
    }
}
