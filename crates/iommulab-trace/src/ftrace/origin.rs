//! Where the last event came from: the line number, the `TASK-PID` that made the call, the
//! event name as printed, and the raw fields the event model has no room for (`attrs=`,
//! `virt_addr=`) — what `trace::check` needs to report a finding the way a kernel developer
//! reads it ("line 812, `kworker/u4:2-57`, `dma_unmap_page`"). Also the devices' DMA masks
//! that `swiotlb:swiotlb_bounced` lines print (the only tracepoint that shows one).
//!
//! Nothing here is computed while importing: [`FtraceReader::last_origin`] re-reads the
//! current line on request (every record a line produces is returned before the next line is
//! read, so the current line is the last record's).

use std::io::BufRead;

use super::FtraceReader;
use super::lexer::{parse_head, parse_hex, task_pid_before, trim, trim_end};

/// The line the last record returned by [`FtraceReader`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineOrigin<'a> {
    /// 1-based line number.
    pub line: u64,
    /// `TASK-PID` as printed (without a `(TGID)` column); empty if the head did not parse.
    pub task: &'a [u8],
    /// The event name as printed (`dma_map_page`, `iommu:map`, `map`, ...).
    pub event: &'a [u8],
    /// The `attrs=` value (`SKIP_CPU_SYNC|WEAK_ORDERING`, empty for none or when absent).
    pub attrs: &'a [u8],
    /// `virt_addr=` of `dma_alloc`/`dma_free` in the post-6.12 format.
    pub virt_addr: Option<u64>,
    /// The context the event ran in, from the flags column; `None` when the line has no
    /// flags column (`trace-cmd report` without `-l`) or an unknown letter there.
    pub context: Option<IrqContext>,
}

/// What a CPU was running when it recorded an event, as the third letter of ftrace's
/// latency flags column says (`trace_print_lat_fmt` in `kernel/trace/trace_output.c`:
/// `.` task, `s` softirq, `h` hardirq, `H` hardirq inside a softirq, `z` NMI, `Z` NMI
/// inside a hardirq). One CPU runs at most one context of each level at a time (hard IRQs
/// do not nest in Linux), so events of one call share (CPU, context) even when an interrupt
/// slips in between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IrqContext {
    /// Process context (`.`), BH-disabled sections included.
    Task,
    /// Serving a softirq (`s`).
    SoftIrq,
    /// Serving a hard interrupt (`h`, `H`).
    HardIrq,
    /// Serving an NMI (`z`, `Z`).
    Nmi,
}

impl IrqContext {
    /// Every context, by nesting level.
    pub const ALL: [IrqContext; 4] = [
        IrqContext::Task,
        IrqContext::SoftIrq,
        IrqContext::HardIrq,
        IrqContext::Nmi,
    ];

    /// The context of a flags column (`..s1.`, `d.h2.`, `d..1`): its third letter.
    pub fn of_flags(flags: &[u8]) -> Option<Self> {
        if flags.len() < 4 {
            return None;
        }
        Some(match flags[2] {
            b'.' => IrqContext::Task,
            b's' => IrqContext::SoftIrq,
            b'h' | b'H' => IrqContext::HardIrq,
            b'z' | b'Z' => IrqContext::Nmi,
            _ => return None,
        })
    }

    /// Its name in reports: `task`, `softirq`, `hardirq`, `nmi`.
    pub const fn name(self) -> &'static str {
        match self {
            IrqContext::Task => "task",
            IrqContext::SoftIrq => "softirq",
            IrqContext::HardIrq => "hardirq",
            IrqContext::Nmi => "nmi",
        }
    }
}

impl LineOrigin<'_> {
    /// Whether `attrs=` holds `flag` (`SKIP_CPU_SYNC`, ...).
    pub fn has_attr(&self, flag: &str) -> bool {
        self.attrs
            .split(|&b| b == b'|')
            .any(|f| f == flag.as_bytes())
    }
}

impl<R: BufRead> FtraceReader<R> {
    /// Where the last record returned by `next_event` came from (`None` before the first).
    pub fn last_origin(&self) -> Option<LineOrigin<'_>> {
        if self.line_no == 0 {
            return None;
        }
        Some(line_origin(self.line_no, &self.line))
    }

    /// DMA masks printed by `swiotlb_bounced` lines so far, by device name, in order of first
    /// sight (a later line for the same device updates its entry).
    pub fn dma_masks(&self) -> &[(String, u64)] {
        &self.dma_masks
    }

    /// Records the mask of a `swiotlb_bounced` body: `dev_name: DEV dma_mask=MASK ...`.
    pub(super) fn note_swiotlb_bounced(&mut self, body: &[u8]) {
        let Some((dev, mask)) = swiotlb_mask(body) else {
            return;
        };
        let Ok(dev) = std::str::from_utf8(dev) else {
            return;
        };
        match self.dma_masks.iter_mut().find(|(d, _)| d == dev) {
            Some(slot) => slot.1 = mask,
            None => self.dma_masks.push((dev.to_owned(), mask)),
        }
    }
}

/// `(device, mask)` of a `swiotlb_bounced` body.
fn swiotlb_mask(body: &[u8]) -> Option<(&[u8], u64)> {
    let mut words = body
        .split(|&b| b == b' ' || b == b'\t')
        .filter(|w| !w.is_empty());
    if words.next()? != b"dev_name:" {
        return None;
    }
    let dev = words.next()?;
    let mask = words.find_map(|w| w.strip_prefix(b"dma_mask="))?;
    Some((dev, parse_hex(mask)?))
}

/// The origin of line `line_no` with text `raw`.
fn line_origin(line_no: u64, raw: &[u8]) -> LineOrigin<'_> {
    let t = trim(raw);
    let mut o = LineOrigin {
        line: line_no,
        task: &[],
        event: &[],
        attrs: &[],
        virt_addr: None,
        context: None,
    };
    let Some(head) = parse_head(t) else {
        return o;
    };
    o.event = head.name;
    o.context = head.flags.and_then(IrqContext::of_flags);
    o.task = task_of(t);
    for w in head
        .body
        .split(|&b| b == b' ' || b == b'\t')
        .filter(|w| !w.is_empty())
    {
        if let Some(v) = w.strip_prefix(b"attrs=") {
            o.attrs = v;
        } else if let Some(v) = w.strip_prefix(b"virt_addr=") {
            o.virt_addr = parse_hex(v);
        }
    }
    o
}

/// `TASK-PID` before the first `[CPU]` column that follows one (as `parse_head` anchors it).
fn task_of(t: &[u8]) -> &[u8] {
    let mut from = 0;
    while let Some(rel) = t[from..].iter().position(|&b| b == b'[') {
        let open = from + rel;
        from = open + 1;
        let digits = t[from..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || t.get(from + digits) != Some(&b']') || !task_pid_before(&t[..open]) {
            continue;
        }
        let mut task = trim_end(&t[..open]);
        if task.last() == Some(&b')')
            && let Some(p) = task.iter().rposition(|&b| b == b'(')
        {
            task = trim_end(&task[..p]);
        }
        return trim(task);
    }
    &[]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventSource;
    use crate::ftrace::FtraceOptions;

    #[test]
    fn origin_names_line_task_event_and_attrs() {
        let text = "# tracer: nop\n\
            kworker/u4:2-57 (   57) [001] d..1. 5.000001: dma_map_page: 0000:00:01.0 dir=FROM_DEVICE dma_addr=ffff0000 size=4096 phys_addr=1000 attrs=SKIP_CPU_SYNC|WEAK_ORDERING\n\
            my task-9 [000] ..... 6.0: dma_free: d dir=BIDIRECTIONAL dma_addr=1000 size=4096 virt_addr=ffff888001234000 attrs=\n";
        let mut r = FtraceReader::new(text.as_bytes(), "t".into(), FtraceOptions::default());
        assert!(r.last_origin().is_none());
        r.next_event().unwrap().unwrap();
        let o = r.last_origin().unwrap();
        assert_eq!(o.line, 2);
        assert_eq!(o.task, b"kworker/u4:2-57");
        assert_eq!(o.event, b"dma_map_page");
        assert!(o.has_attr("SKIP_CPU_SYNC"));
        assert!(!o.has_attr("SKIP"));
        assert_eq!(o.virt_addr, None);
        assert_eq!(o.context, Some(IrqContext::Task));
        r.next_event().unwrap().unwrap();
        let o = r.last_origin().unwrap();
        assert_eq!(
            (o.line, o.task, o.event),
            (3, &b"my task-9"[..], &b"dma_free"[..])
        );
        assert_eq!(o.virt_addr, Some(0xffff_8880_0123_4000));
        assert!(o.attrs.is_empty());
    }

    #[test]
    fn context_from_the_flags_column() {
        for (flags, want) in [
            ("..s1.", Some(IrqContext::SoftIrq)),
            ("d.h2.", Some(IrqContext::HardIrq)),
            ("d.H3.", Some(IrqContext::HardIrq)),
            ("d.Z4.", Some(IrqContext::Nmi)),
            ("dNz1.", Some(IrqContext::Nmi)),
            ("D..1.", Some(IrqContext::Task)),
            ("d..1", Some(IrqContext::Task)),
            ("d.?1.", None),
        ] {
            let text = format!(
                "a-1 [000] {flags} 1.0: dma_unmap_page: d dir=TO_DEVICE dma_addr=1000 size=1 attrs=\n"
            );
            let mut r = FtraceReader::new(text.as_bytes(), "t".into(), FtraceOptions::default());
            r.next_event().unwrap().unwrap();
            assert_eq!(r.last_origin().unwrap().context, want, "{flags}");
        }
        // trace-cmd report without -l: no column.
        let text = "a-1 [000] 1.0: dma_unmap_page: d dir=TO_DEVICE dma_addr=1000 size=1 attrs=\n";
        let mut r = FtraceReader::new(text.as_bytes(), "t".into(), FtraceOptions::default());
        r.next_event().unwrap().unwrap();
        assert_eq!(r.last_origin().unwrap().context, None);
    }

    #[test]
    fn swiotlb_bounced_gives_the_mask() {
        let text = "a-1 [000] ..... 1.0: swiotlb_bounced: dev_name: 0000:00:05.0 dma_mask=ffffffff dev_addr=12345000 size=4096 NORMAL\n\
            a-1 [000] ..... 1.0: swiotlb_bounced: dev_name: 0000:00:05.0 dma_mask=fffffffff dev_addr=1 size=1\n\
            a-1 [000] ..... 1.0: swiotlb_bounced: garbage\n";
        let mut r = FtraceReader::new(text.as_bytes(), "t".into(), FtraceOptions::default());
        assert!(r.next_event().unwrap().is_none());
        assert_eq!(r.dma_masks(), [("0000:00:05.0".to_owned(), 0xf_ffff_ffff)]);
        assert_eq!(r.report().skipped_other_events, 3);
    }
}
