//! Line lexing: a line is a header or comment, a lost-events marker, or an event whose common
//! head (`TASK-PID [(TGID)] [CPU] [FLAGS] SECONDS.FRACTION: EVENT:`) gives the CPU, the
//! timestamp, the event name and the body; plus the byte-level number and blank helpers the
//! field parsers share. Everything works on bytes (see the [module doc](super)).

use crate::EventKind;

/// Event kinds this importer models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Known {
    IommuMap,
    IommuUnmap,
    Map,
    Unmap,
    MapSg,
    UnmapSg,
    Alloc,
    Free,
    SyncSingle(EventKind),
    SyncSg(EventKind),
    /// A kprobe on `free_iova_fast` (docs/capture.md): the IOVA free itself.
    IovaFree,
}

/// The importer's view of an event name, with or without its system (`iommu:map`).
pub(super) fn classify(name: &[u8]) -> Option<Known> {
    let (system, base) = match name.iter().position(|&b| b == b':') {
        Some(i) => (Some(&name[..i]), &name[i + 1..]),
        None => (None, name),
    };
    let iommu = matches!(system, None | Some(b"iommu"));
    let dma = matches!(system, None | Some(b"dma"));
    let kprobe = matches!(system, None | Some(b"kprobes"));
    Some(match base {
        b"free_iova_fast" if kprobe => Known::IovaFree,
        b"map" if iommu => Known::IommuMap,
        b"unmap" if iommu => Known::IommuUnmap,
        b"dma_map_page" | b"dma_map_phys" | b"dma_map_resource" if dma => Known::Map,
        b"dma_unmap_page" | b"dma_unmap_phys" | b"dma_unmap_resource" if dma => Known::Unmap,
        b"dma_map_sg" if dma => Known::MapSg,
        b"dma_unmap_sg" if dma => Known::UnmapSg,
        b"dma_alloc" | b"dma_alloc_pages" if dma => Known::Alloc,
        b"dma_free" | b"dma_free_pages" if dma => Known::Free,
        b"dma_sync_single_for_cpu" if dma => Known::SyncSingle(EventKind::SyncForCpu),
        b"dma_sync_single_for_device" if dma => Known::SyncSingle(EventKind::SyncForDevice),
        b"dma_sync_sg_for_cpu" if dma => Known::SyncSg(EventKind::SyncForCpu),
        b"dma_sync_sg_for_device" if dma => Known::SyncSg(EventKind::SyncForDevice),
        _ => return None,
    })
}

/// A line that is not an event.
pub(super) enum NonEvent {
    Header,
    /// A lost-events marker, with the count it gives (0 when it gives none).
    Lost(u64),
}

/// Recognises header, comment and lost-event lines (`t` trimmed).
pub(super) fn classify_non_event(t: &[u8]) -> Option<NonEvent> {
    if t.is_empty() {
        return Some(NonEvent::Header);
    }
    if t[0] == b'#' {
        if t.starts_with(b"#####") && contains(t, b"buffer started") {
            return Some(NonEvent::Lost(0));
        }
        return Some(NonEvent::Header);
    }
    if let Some(rest) = t.strip_prefix(b"CPU:") {
        // `CPU:3 [LOST 123 EVENTS]`
        let d = digits(rest);
        let rest = trim_start(&rest[d..]);
        if d > 0
            && let Some(rest) = rest.strip_prefix(b"[LOST")
        {
            let rest = trim_start(rest);
            let n = digits(rest);
            return Some(NonEvent::Lost(parse_dec(&rest[..n]).unwrap_or(0)));
        }
        return None;
    }
    if let Some(rest) = t.strip_prefix(b"cpus=") {
        return (!rest.is_empty() && digits(rest) == rest.len()).then_some(NonEvent::Header);
    }
    if let Some(rest) = t.strip_prefix(b"version") {
        let rest = trim_start(rest);
        return rest.starts_with(b"=").then_some(NonEvent::Header);
    }
    if let Some(rest) = t.strip_prefix(b"CPU ") {
        // trace-cmd: `CPU 1 is empty`
        let d = digits(rest);
        return (d > 0 && &rest[d..] == b" is empty").then_some(NonEvent::Header);
    }
    None
}

/// The common part of an event line.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Head<'a> {
    pub(super) cpu: u16,
    /// Absolute timestamp, ns.
    pub(super) ts: u64,
    pub(super) name: &'a [u8],
    pub(super) body: &'a [u8],
    /// The latency-format flags column (`..s1.`, `d.h2.`, `d..1`), when the line has one.
    pub(super) flags: Option<&'a [u8]>,
}

/// Parses `TASK-PID [(TGID)] [CPU] [FLAGS] SECS.FRAC: EVENT: BODY` (`t` trimmed).
pub(super) fn parse_head(t: &[u8]) -> Option<Head<'_>> {
    let n = t.len();
    let mut from = 0;
    let (cpu, mut i) = loop {
        let open = from + t[from..].iter().position(|&b| b == b'[')?;
        from = open + 1;
        let mut j = from;
        let mut cpu: u32 = 0;
        while j < n && j - from < 5 && t[j].is_ascii_digit() {
            cpu = cpu * 10 + u32::from(t[j] - b'0');
            j += 1;
        }
        if j == from || t.get(j) != Some(&b']') || !t.get(j + 1).is_some_and(is_space) {
            continue;
        }
        if !task_pid_before(&t[..open]) {
            continue;
        }
        let Ok(cpu) = u16::try_from(cpu) else {
            continue;
        };
        break (cpu, j + 1);
    };
    let word = |i: &mut usize| {
        while *i < n && is_space(&t[*i]) {
            *i += 1;
        }
        let start = *i;
        while *i < n && !is_space(&t[*i]) {
            *i += 1;
        }
        &t[start..*i]
    };
    let tok = word(&mut i);
    let (ts, flags) = match tok.strip_suffix(b":").and_then(parse_ts) {
        Some(ts) => (ts, None),
        None => {
            // A flags column (`..s1.`, `d..2`), then the timestamp.
            if tok.len() > 8 {
                return None;
            }
            (
                word(&mut i).strip_suffix(b":").and_then(parse_ts)?,
                Some(tok),
            )
        }
    };
    while i < n && is_space(&t[i]) {
        i += 1;
    }
    // The event name ends at the first `:` followed by a blank or the end of the line.
    let start = i;
    loop {
        let b = *t.get(i)?;
        if b == b':' && t.get(i + 1).is_none_or(is_space) {
            break;
        }
        if !(b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
            return None;
        }
        i += 1;
    }
    if i == start {
        return None;
    }
    Some(Head {
        cpu,
        ts,
        name: &t[start..i],
        body: trim_start(&t[i + 1..]),
        flags,
    })
}

pub(super) fn is_space(b: &u8) -> bool {
    *b == b' ' || *b == b'\t'
}

/// Whether `s` ends with `-PID`, optionally followed by a `(TGID)` column.
pub(super) fn task_pid_before(s: &[u8]) -> bool {
    let mut s = trim_end(s);
    if s.last() == Some(&b')') {
        let Some(open) = s.iter().rposition(|&b| b == b'(') else {
            return false;
        };
        let inner = trim(&s[open + 1..s.len() - 1]);
        let tgid_ok = !inner.is_empty()
            && (inner.iter().all(u8::is_ascii_digit) || inner.iter().all(|&b| b == b'-'));
        if !tgid_ok {
            return false;
        }
        s = trim_end(&s[..open]);
    }
    let d = s.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    d > 0 && s.len() > d && s[s.len() - d - 1] == b'-'
}

/// Hex with an optional `0x`: 1 to 16 digits.
pub(super) fn parse_hex(s: &[u8]) -> Option<u64> {
    let s = s
        .strip_prefix(b"0x")
        .or_else(|| s.strip_prefix(b"0X"))
        .unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = HEX[usize::from(b)];
        if d == NOT_HEX {
            return None;
        }
        v = (v << 4) | u64::from(d);
    }
    Some(v)
}

pub(super) const NOT_HEX: u8 = 0xff;

/// Hex digit values by byte, [`NOT_HEX`] for others.
pub(super) static HEX: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut d: u8 = 0;
    while d < 10 {
        t[(b'0' + d) as usize] = d;
        d += 1;
    }
    let mut d: u8 = 0;
    while d < 6 {
        t[(b'a' + d) as usize] = 10 + d;
        t[(b'A' + d) as usize] = 10 + d;
        d += 1;
    }
    t
};

/// Decimal, 1 to 20 digits, no overflow.
pub(super) fn parse_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s.len() <= 19 {
        // 19 digits cannot overflow.
        let mut v: u64 = 0;
        for &b in s {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + u64::from(d);
        }
        return Some(v);
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

/// `SECONDS.FRACTION` (1–9 decimals) in ns.
pub(super) fn parse_ts(s: &[u8]) -> Option<u64> {
    const SCALE: [u64; 10] = [
        1_000_000_000,
        100_000_000,
        10_000_000,
        1_000_000,
        100_000,
        10_000,
        1_000,
        100,
        10,
        1,
    ];
    let dot = s.iter().position(|&b| b == b'.')?;
    let (secs, frac) = (&s[..dot], &s[dot + 1..]);
    if frac.is_empty() || frac.len() > 9 {
        return None;
    }
    let ns = parse_dec(frac)? * SCALE[frac.len()];
    parse_dec(secs)?.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// Leading ASCII digits.
pub(super) fn digits(s: &[u8]) -> usize {
    s.iter().take_while(|b| b.is_ascii_digit()).count()
}

pub(super) fn split_word(s: &[u8]) -> (&[u8], &[u8]) {
    let end = s
        .iter()
        .position(|&b| b == b' ' || b == b'\t')
        .unwrap_or(s.len());
    s.split_at(end)
}

pub(super) fn is_blank(b: &u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

pub(super) fn trim_start(s: &[u8]) -> &[u8] {
    let i = s.iter().position(|b| !is_blank(b)).unwrap_or(s.len());
    &s[i..]
}

pub(super) fn trim_end(s: &[u8]) -> &[u8] {
    let i = s.iter().rposition(|b| !is_blank(b)).map_or(0, |i| i + 1);
    &s[..i]
}

pub(super) fn trim(s: &[u8]) -> &[u8] {
    trim_start(trim_end(s))
}

pub(super) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftrace::ImportReport;
    use crate::ftrace::tests::{MAP_PAGE, import, one, rec};
    use crate::{Event, TraceDir};

    /// Reference §5.3: the `trace` file shape, with the 5-character flags column.
    #[test]
    fn dma_map_page_in_trace_shape() {
        let e = one(MAP_PAGE);
        let want = Event {
            cpu: 5,
            ..rec(
                EventKind::Map,
                TraceDir::ToDevice,
                Some(0xffffa000),
                Some(0x1f2a3c000),
                1514,
            )
        };
        assert_eq!(e, want);
    }

    /// `trace-cmd report`: no flags, padded event name, 9 decimals, unpadded CPU.
    #[test]
    fn trace_cmd_report_shape() {
        let e = one(
            "          iperf3-2041  [5]  8123.456789123: dma_unmap_page:       0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffa000 size=1514 attrs=",
        );
        assert_eq!(e.cpu, 5);
        assert_eq!(
            e,
            Event {
                cpu: 5,
                ..rec(
                    EventKind::Unmap,
                    TraceDir::ToDevice,
                    Some(0xffffa000),
                    None,
                    1514
                )
            }
        );
    }

    /// `trace-cmd report -l`: a 4-character latency column.
    #[test]
    fn trace_cmd_report_with_latency_flags() {
        let e = one(
            "fio-3310 [002] d..1 8123.500012: dma_sync_single_for_cpu: 0000:01:00.0 dir=FROM_DEVICE dma_addr=fff00000 size=4096",
        );
        assert_eq!(
            e,
            Event {
                cpu: 2,
                ..rec(
                    EventKind::SyncForCpu,
                    TraceDir::FromDevice,
                    Some(0xfff00000),
                    None,
                    4096
                )
            }
        );
    }

    /// `record-tgid`: a `(TGID)` column between TASK-PID and [CPU], also `(-------)`.
    #[test]
    fn tgid_column() {
        let a = one(
            "  iperf3-2041    (   2041) [005] ..s1. 8123.456789: dma_map_page: 0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffa000 size=1514 phys_addr=1f2a3c000 attrs=",
        );
        let b = one(
            "  <idle>-0       (-------) [005] d.h2. 8123.456789: dma_map_page: 0000:3b:00.0 dir=TO_DEVICE dma_addr=ffffa000 size=1514 phys_addr=1f2a3c000 attrs=",
        );
        assert_eq!(a, b);
        assert_eq!(a.len, 1514);
    }

    /// The task name may hold spaces, dashes, brackets and digits; the last `-PID` before
    /// `[CPU]` ends it.
    #[test]
    fn comm_with_spaces_and_dashes() {
        for comm in [
            "my app-x-12",
            "kworker/u16:3-events_unbound",
            "a [1] b-7",
            "<...>",
            "-",
        ] {
            let line = format!(
                "{comm}-4242 [001] ..... 1.000001: dma_sync_single_for_device: virtio0 dir=BIDIRECTIONAL dma_addr=1000 size=64"
            );
            let e = one(&line);
            assert_eq!(
                (e.cpu, e.kind, e.len),
                (1, EventKind::SyncForDevice, 64),
                "{comm}"
            );
        }
    }

    /// Headers, comments, trace-cmd preambles and lost-event markers are skipped and
    /// counted; other events are counted by name.
    #[test]
    fn headers_markers_and_other_events_are_counted() {
        let text = "\
cpus=2
version = 6
CPU 1 is empty
# tracer: nop
#
# entries-in-buffer/entries-written: 3/3   #P:8
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |

##### CPU 2 buffer started ####
CPU:3 [LOST 123 EVENTS]
  <idle>-0 [002] d..2. 10.000000: sched_switch: prev_comm=swapper/2 prev_pid=0 ==> next_comm=fio next_pid=9
  fio-9 [002] ..... 10.000100: dma_map_sg_err: 0000:01:00.0 dir=TO_DEVICE dma_addrs={0x1} err=-12 attrs=
";
        let (events, header, report) = import(text, false);
        assert!(events.is_empty());
        assert!(header.devices.is_empty());
        let by_event: Vec<_> = report
            .by_event
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(by_event, [("dma_map_sg_err", 1), ("sched_switch", 1)]);
        assert_eq!(
            report,
            ImportReport {
                lines: 13,
                skipped_header_or_comment: 9,
                skipped_other_events: 2,
                lost_event_markers: 2,
                lost_events: 123,
                by_event: report.by_event.clone(),
                ..ImportReport::default()
            }
        );
    }

    #[test]
    fn number_parsers() {
        assert_eq!(parse_hex(b"0x00000001f2a3c000"), Some(0x1f2a3c000));
        assert_eq!(parse_hex(b"FFFFffff"), Some(0xffff_ffff));
        assert_eq!(parse_hex(b"ffffffffffffffff"), Some(u64::MAX));
        assert_eq!(parse_hex(b"1ffffffffffffffff"), None);
        assert_eq!(parse_hex(b"0x"), None);
        assert_eq!(parse_hex(b"g"), None);
        assert_eq!(parse_dec(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_dec(b"18446744073709551616"), None);
        assert_eq!(parse_ts(b"8123.456789"), Some(8_123_456_789_000));
        assert_eq!(parse_ts(b"8123.456789123"), Some(8_123_456_789_123));
        assert_eq!(parse_ts(b"1.5"), Some(1_500_000_000));
        assert_eq!(parse_ts(b"1.1234567890"), None);
        assert_eq!(parse_ts(b"99999999999999999999.0"), None);
    }
}
