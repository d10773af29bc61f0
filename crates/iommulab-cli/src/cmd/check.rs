//! `iommulab check`: dma-debug for a recorded trace (`iommulab::trace::check`).
//!
//! Exit codes: 0 clean, [`FINDINGS_EXIT`] (3) when there are findings, 1 for errors (a file
//! that cannot be read or parsed), 2 for usage errors (clap).

use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use iommulab::trace::check::{
    CheckError, CheckOptions, CheckReport, Finding, check, check_streaming, parse_dma_mask,
};

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
    opts.leaks = args.leaks;
    opts.from_boot = args.from_boot;
    if args.json {
        opts.max_findings = args.max.unwrap_or(usize::MAX);
        return run_json(args, &opts);
    }
    if let Some(n) = args.max {
        opts.max_findings = n;
    }
    let report = check(
        &args.trace,
        args.read.format.into(),
        args.read.lenient,
        &opts,
    )
    .with_context(|| format!("checking {}", args.trace.display()))?;
    crate::print_stdout(&report.to_text(args.max.unwrap_or(DEFAULT_PRINTED)))?;
    Ok(exit_code(&report))
}

/// `--json`: each finding is written, one per line, to an unnamed spool file as it is
/// found (memory flat in their number), then the report is printed around them. Nothing
/// reaches stdout unless the whole trace was read: a trace that fails to parse on its last
/// line leaves no half-written JSON.
fn run_json(args: &CheckArgs, opts: &CheckOptions) -> Result<ExitCode> {
    let spool = spool_file().context("creating a temporary file for the findings")?;
    let mut w = BufWriter::new(spool);
    let mut first = true;
    let mut write_one = |f: &Finding| -> std::io::Result<()> {
        w.write_all(if first { b"\n    " } else { b",\n    " })?;
        first = false;
        serde_json::to_writer(&mut w, f).map_err(std::io::Error::other)
    };
    let report = check_streaming(
        &args.trace,
        args.read.format.into(),
        args.read.lenient,
        opts,
        &mut write_one,
    )
    .map_err(|e| match e {
        CheckError::Write(e) => {
            anyhow::Error::new(e).context("writing the findings to a temporary file")
        }
        e => anyhow::Error::new(e),
    })
    .with_context(|| format!("checking {}", args.trace.display()))?;
    let mut spool = w.into_inner().map_err(|e| e.into_error())?;
    spool.rewind()?;
    // The report without its (empty) list, then the list.
    let mut head = serde_json::to_value(&report)?;
    if let Some(m) = head.as_object_mut() {
        m.remove("findings");
    }
    let mut head = serde_json::to_string_pretty(&head)?;
    // Reopen the object: drop its closing brace.
    head.truncate(head.trim_end().len() - 1);
    let listed = report.findings_total - report.findings_not_listed;
    let r = (|| -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        out.write_all(head.trim_end().as_bytes())?;
        out.write_all(b",\n  \"findings\": [")?;
        std::io::copy(&mut spool, &mut out)?;
        out.write_all(if listed > 0 { b"\n  ]\n}\n" } else { b"]\n}\n" })?;
        out.flush()
    })();
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.context("writing the report")?,
    }
    Ok(exit_code(&report))
}

/// A temporary file with no name (removed as soon as it is open).
fn spool_file() -> std::io::Result<File> {
    let dir = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for attempt in 0..100u32 {
        let p = dir.join(format!(
            ".iommulab-check-{}-{nanos}-{attempt}.json",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => {
                let _ = std::fs::remove_file(&p);
                return Ok(f);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free temporary file name"))
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
