//! Fuzzes the Linux ftrace importer (`iommulab::trace::ftrace`) with arbitrary bytes.
//!
//! Checks, for every input:
//! - no panic, in strict and lenient mode;
//! - a strict import that carries on past errors yields the same records as a lenient one,
//!   and exactly `malformed_skipped` errors, each a `Parse` error with a line number in
//!   `1..=lines` and at most 120 characters of offending text;
//! - every line is counted once in the report;
//! - every `MapSg`/`UnmapSg` is followed by exactly `nents` `SgSeg` records.
#![no_main]

use iommulab::trace::ftrace::{FtraceOptions, FtraceReader, ImportReport};
use iommulab::trace::{Event, EventKind, EventSource, TraceError};
use libfuzzer_sys::fuzz_target;

fn run(data: &[u8], lenient: bool) -> (Vec<Event>, Vec<TraceError>, ImportReport) {
    let mut r = FtraceReader::new(data, "fuzz.txt".into(), FtraceOptions { lenient });
    let (mut events, mut errors) = (Vec::new(), Vec::new());
    loop {
        match r.next_event() {
            Ok(Some(e)) => events.push(e),
            Ok(None) => break,
            Err(e) => errors.push(e),
        }
    }
    (events, errors, r.report())
}

fuzz_target!(|data: &[u8]| {
    let (lenient, lenient_errors, report) = run(data, true);
    assert!(lenient_errors.is_empty());
    assert_eq!(
        report.lines,
        report.imported_lines
            + report.skipped_header_or_comment
            + report.skipped_other_events
            + report.lost_event_markers
            + report.map_errors
            + report.malformed_skipped
    );
    assert_eq!(report.events, lenient.len() as u64);
    let (strict, errors, _) = run(data, false);
    assert_eq!(strict, lenient);
    assert_eq!(errors.len() as u64, report.malformed_skipped);
    for e in &errors {
        let TraceError::Parse { line, found, .. } = e else {
            panic!("not a parse error: {e:?}");
        };
        assert!((1..=report.lines).contains(line));
        assert!(found.chars().count() <= 120);
    }
    let mut i = 0;
    while i < lenient.len() {
        let e = lenient[i];
        assert_ne!(e.kind, EventKind::SgSeg, "orphan SgSeg at record {i}");
        i += 1;
        if matches!(e.kind, EventKind::MapSg | EventKind::UnmapSg) {
            for _ in 0..e.nents {
                assert_eq!(lenient[i].kind, EventKind::SgSeg);
                i += 1;
            }
        }
    }
});
