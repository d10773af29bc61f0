//! Field parsers per event format: the `key=value` body of the `dma:` tracepoints
//! (`DmaFields`) and the positional body of `iommu:map`/`iommu:unmap` (`parse_iommu`).
//! An event's handler asks for the fields it needs; a missing or malformed one is a `Bad`
//! naming what was expected.

use super::Bad;
use super::lexer::{parse_dec, parse_hex, split_word, trim_start};
use crate::TraceDir;

/// Fields of a `dma:` event body: `DEVICE key=value ...`; each is `(token, value)`.
#[derive(Debug, Default)]
pub(super) struct DmaFields<'a> {
    pub(super) body: &'a [u8],
    pub(super) device: &'a [u8],
    pub(super) dir: Option<(&'a [u8], &'a [u8])>,
    pub(super) dma_addr: Option<(&'a [u8], &'a [u8])>,
    pub(super) size: Option<(&'a [u8], &'a [u8])>,
    pub(super) phys_addr: Option<(&'a [u8], &'a [u8])>,
    pub(super) dma_addrs: Option<(&'a [u8], &'a [u8])>,
    pub(super) sizes: Option<(&'a [u8], &'a [u8])>,
    pub(super) phys_addrs: Option<(&'a [u8], &'a [u8])>,
    pub(super) attrs: Option<(&'a [u8], &'a [u8])>,
    pub(super) nents: Option<(&'a [u8], &'a [u8])>,
    pub(super) ents: Option<(&'a [u8], &'a [u8])>,
    pub(super) truncated: bool,
}

pub(super) type Field<'a> = Option<(&'a [u8], &'a [u8])>;

impl<'a> DmaFields<'a> {
    pub(super) fn parse(body: &'a [u8]) -> Result<Self, Bad<'a>> {
        let mut f = DmaFields {
            body,
            ..DmaFields::default()
        };
        let mut words = Words::new(body);
        f.device = match words.next() {
            Some(d) if !d.contains(&b'=') => d,
            _ => return Err(Bad::new("a device name first", body)),
        };
        while let Some(w) = words.next() {
            if w == b"[TRUNCATED]" {
                f.truncated = true;
                continue;
            }
            let Some(eq) = w.iter().position(|&b| b == b'=') else {
                return Err(Bad::new("`key=value` fields after the device name", w));
            };
            let v = Some((w, &w[eq + 1..]));
            match &w[..eq] {
                b"dir" => f.dir = v,
                b"dma_addr" => f.dma_addr = v,
                b"size" => f.size = v,
                b"phys_addr" => f.phys_addr = v,
                b"dma_addrs" => f.dma_addrs = v,
                b"sizes" => f.sizes = v,
                b"phys_addrs" => f.phys_addrs = v,
                b"attrs" => f.attrs = v,
                b"nents" => f.nents = v,
                b"ents" => f.ents = v,
                _ => {}
            }
        }
        Ok(f)
    }

    pub(super) fn require(
        &self,
        field: Field<'a>,
        what: &'static str,
    ) -> Result<&'a [u8], Bad<'a>> {
        field.map(|(_, v)| v).ok_or(Bad::new(what, self.body))
    }

    pub(super) fn dir(&self) -> Result<TraceDir, Bad<'a>> {
        const WHAT: &str = "`dir=` BIDIRECTIONAL, TO_DEVICE, FROM_DEVICE or NONE";
        let (tok, v) = self.dir.ok_or(Bad::new(WHAT, self.body))?;
        match v {
            b"BIDIRECTIONAL" => Ok(TraceDir::Bidirectional),
            b"TO_DEVICE" => Ok(TraceDir::ToDevice),
            b"FROM_DEVICE" => Ok(TraceDir::FromDevice),
            b"NONE" => Ok(TraceDir::None),
            _ => Err(Bad::new(WHAT, tok)),
        }
    }

    pub(super) fn hex(&self, field: Field<'a>, what: &'static str) -> Result<u64, Bad<'a>> {
        let (tok, v) = field.ok_or(Bad::new(what, self.body))?;
        parse_hex(v).ok_or(Bad::new(what, tok))
    }

    pub(super) fn dec(&self, field: Field<'a>, what: &'static str) -> Result<u64, Bad<'a>> {
        let (tok, v) = field.ok_or(Bad::new(what, self.body))?;
        parse_dec(v).ok_or(Bad::new(what, tok))
    }

    /// Parses `{0x1,0x2}` into `out` (cleared first).
    pub(super) fn array(
        &self,
        field: Field<'a>,
        what: &'static str,
        out: &mut Vec<u64>,
    ) -> Result<(), Bad<'a>> {
        let (tok, v) = field.ok_or(Bad::new(what, self.body))?;
        out.clear();
        let inner = v
            .strip_prefix(b"{")
            .and_then(|v| v.strip_suffix(b"}"))
            .ok_or(Bad::new(what, tok))?;
        if inner.is_empty() {
            return Ok(());
        }
        for el in inner.split(|&b| b == b',') {
            out.push(parse_hex(el).ok_or(Bad::new(what, tok))?);
        }
        Ok(())
    }
}

/// Fields of an `iommu:map`/`iommu:unmap` body.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct IommuFields {
    pub(super) iova: u64,
    pub(super) paddr: u64,
    pub(super) size: u64,
    pub(super) unmapped: u64,
}

/// Parses `IOMMU: iova=0x… [- 0x…] paddr=0x… size=N` (map) or
/// `IOMMU: iova=0x… [- 0x…] size=N unmapped_size=N` (unmap): the fields in this order,
/// separated by blanks.
pub(super) fn parse_iommu(body: &[u8], map: bool) -> Result<IommuFields, Bad<'_>> {
    const END: &str = "the range end `0x<hex>` after `-`";
    let mut words = Words::new(body);
    if words.next() != Some(b"IOMMU:".as_slice()) {
        return Err(Bad::new("`IOMMU:` at the start of the body", body));
    }
    let mut f = IommuFields {
        iova: words.value(b"iova=", "`iova=0x<hex>`", parse_hex)?,
        paddr: 0,
        size: 0,
        unmapped: 0,
    };
    if words.peek() == Some(b"-".as_slice()) {
        words.next();
        let end = words.next().ok_or(Bad::new(END, body))?;
        parse_hex(end).ok_or(Bad::new(END, end))?;
    }
    if map {
        f.paddr = words.value(b"paddr=", "`paddr=0x<hex>`", parse_hex)?;
    }
    f.size = words.value(b"size=", "`size=<decimal>`", parse_dec)?;
    if !map {
        f.unmapped = words.value(b"unmapped_size=", "`unmapped_size=<decimal>`", parse_dec)?;
    }
    match words.next() {
        None => Ok(f),
        Some(w) => Err(Bad::new("the end of the body", w)),
    }
}

/// The fields of a `free_iova_fast` kprobe line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct IovaFreeFields {
    /// The `struct iova_domain *` (`iovad=`), which tells domains apart; 0 when not recorded.
    pub(super) iovad: u64,
    pub(super) pfn: u64,
    pub(super) size: u64,
}

/// Parses a kprobe's body `(free_iova_fast+0x4/0x1b0) iovad=0x… pfn=0x… size=N`: the
/// probe's location in parentheses, then `key=value` fields in any order (hex with `0x`,
/// else decimal, as the probe's `:x64`/`:u64` types print them); `pfn` and `size` are
/// required, `iovad` optional, others ignored.
pub(super) fn parse_iova_free(body: &[u8]) -> Result<IovaFreeFields, Bad<'_>> {
    let num = |v: &[u8]| {
        if v.starts_with(b"0x") || v.starts_with(b"0X") {
            parse_hex(v)
        } else {
            parse_dec(v)
        }
    };
    let mut words = Words::new(body);
    let (mut iovad, mut pfn, mut size) = (None, None, None);
    while let Some(w) = words.next() {
        if w.starts_with(b"(") {
            continue;
        }
        let Some(i) = w.iter().position(|&b| b == b'=') else {
            return Err(Bad::new("`key=value` fields (`pfn=0x<hex> size=<n>`)", w));
        };
        let (key, v) = (&w[..i], &w[i + 1..]);
        let slot = match key {
            b"iovad" => &mut iovad,
            b"pfn" => &mut pfn,
            b"size" => &mut size,
            _ => continue,
        };
        *slot = Some(num(v).ok_or(Bad::new("a number (`0x<hex>` or decimal)", w))?);
    }
    Ok(IovaFreeFields {
        iovad: iovad.unwrap_or(0),
        pfn: pfn.ok_or(Bad::new("`pfn=<number>`", body))?,
        size: size
            .filter(|&n| n > 0)
            .ok_or(Bad::new("`size=<pages, at least 1>`", body))?,
    })
}

/// Blank-separated words of a body, with one word of lookahead.
struct Words<'a> {
    body: &'a [u8],
    rest: &'a [u8],
    peeked: Option<&'a [u8]>,
}

impl<'a> Words<'a> {
    fn new(body: &'a [u8]) -> Self {
        Words {
            body,
            rest: body,
            peeked: None,
        }
    }

    fn next(&mut self) -> Option<&'a [u8]> {
        if let Some(w) = self.peeked.take() {
            return Some(w);
        }
        let s = trim_start(self.rest);
        if s.is_empty() {
            self.rest = s;
            return None;
        }
        let (w, rest) = split_word(s);
        self.rest = rest;
        Some(w)
    }

    fn peek(&mut self) -> Option<&'a [u8]> {
        if self.peeked.is_none() {
            self.peeked = self.next();
        }
        self.peeked
    }

    /// The next word, which must be `key` followed by a value `parse` accepts.
    fn value(
        &mut self,
        key: &[u8],
        what: &'static str,
        parse: fn(&[u8]) -> Option<u64>,
    ) -> Result<u64, Bad<'a>> {
        let w = self.next().ok_or(Bad::new(what, self.body))?;
        w.strip_prefix(key).and_then(parse).ok_or(Bad::new(what, w))
    }
}

/// `shown/total`.
pub(super) fn fraction(v: &[u8]) -> Option<(u64, u64)> {
    let slash = v.iter().position(|&b| b == b'/')?;
    Some((parse_dec(&v[..slash])?, parse_dec(&v[slash + 1..])?))
}

#[cfg(test)]
mod tests {
    use crate::ftrace::IOMMU_DEVICE;
    use crate::ftrace::tests::{import, one, rec};
    use crate::{Event, EventKind, TraceDir};

    /// Reference §5.1: the ranged (≥ 5.17) and the old `iommu:map` formats, with or without
    /// the system prefix, give the same record on device `iommu`.
    #[test]
    fn iommu_map_old_and_new_formats() {
        let new = "iperf3-2041 [005] ..s1. 8123.456791: map: IOMMU: iova=0x00000000ffffa000 - 0x00000000ffffb000 paddr=0x00000001f2a3c000 size=4096";
        let old = "iperf3-2041 [005] ..s1. 8123.456791: map: IOMMU: iova=0x00000000ffffa000 paddr=0x00000001f2a3c000 size=4096";
        let sys = "iperf3-2041 [005] 8123.456791: iommu:map: IOMMU: iova=0x00000000ffffa000 paddr=0x00000001f2a3c000 size=4096";
        let want = Event {
            cpu: 5,
            ..rec(
                EventKind::Map,
                TraceDir::None,
                Some(0xffffa000),
                Some(0x1f2a3c000),
                4096,
            )
        };
        for line in [new, old, sys] {
            let (events, header, _) = import(line, false);
            assert_eq!(events, [want]);
            assert_eq!(header.devices, [IOMMU_DEVICE]);
        }
    }

    /// A `free_iova_fast` kprobe (docs/capture.md): `Free` on device `iommu`, the pfn and
    /// size in 4 KiB pages, the `iova_domain` pointer in `phys`; with or without the
    /// `kprobes:` system, fields in any order, decimal or hex; a line without `pfn` or with
    /// a bad number is refused with its line.
    #[test]
    fn free_iova_fast_kprobe() {
        let a = "<idle>-0 [001] d.s2. 5.157884: free_iova_fast: (free_iova_fast+0x4/0x140) iovad=0xff31660bb8248a08 pfn=0xffffd size=1";
        let b = "<idle>-0 [001] d.s2. 5.157884: kprobes:free_iova_fast: (free_iova_fast+0x4/0x140) size=1 pfn=1048573 iovad=0xff31660bb8248a08 extra=7";
        let want = Event {
            cpu: 1,
            ..rec(
                EventKind::Free,
                TraceDir::None,
                Some(0xffffd000),
                Some(0xff31_660b_b824_8a08),
                4096,
            )
        };
        for line in [a, b] {
            let (events, header, _) = import(line, false);
            assert_eq!(events, [want], "{line}");
            assert_eq!(header.devices, [IOMMU_DEVICE]);
        }
        for bad in [
            "<idle>-0 [001] d.s2. 5.157884: free_iova_fast: (free_iova_fast+0x4/0x140) size=1",
            "<idle>-0 [001] d.s2. 5.157884: free_iova_fast: (free_iova_fast+0x4/0x140) pfn=0xzz size=1",
        ] {
            let e = crate::ftrace::tests::import_err(bad);
            assert!(
                e.contains("t.txt:1:") && e.contains("free_iova_fast"),
                "{e}"
            );
        }
    }

    /// Reference §5.1: `iommu:unmap`, old and new; a short unmap is counted.
    #[test]
    fn iommu_unmap_old_and_new_formats() {
        let new = "<idle>-0 [005] d.h2. 8123.456900: unmap: IOMMU: iova=0x00000000ffffa000 - 0x00000000ffffb000 size=4096 unmapped_size=4096";
        let old = "<idle>-0 [005] d.h2. 8123.456900: unmap: IOMMU: iova=0x00000000ffffa000 size=4096 unmapped_size=0";
        let want = Event {
            cpu: 5,
            ..rec(
                EventKind::Unmap,
                TraceDir::None,
                Some(0xffffa000),
                None,
                4096,
            )
        };
        let (events, _, report) = import(&format!("{new}\n{old}\n"), false);
        assert_eq!(events, [want, want]);
        assert_eq!(report.partial_iommu_unmaps, 1);
    }

    /// `dma_map_phys`/`dma_unmap_phys` (≥ 6.18) and `*_resource` parse like `*_page`; attrs
    /// may be names, `|`-joined names or hex.
    #[test]
    fn phys_resource_and_attrs() {
        let text = "\
a-1 [000] ..... 1.000000: dma_map_phys: 0000:00:02.0 dir=BIDIRECTIONAL dma_addr=1000 size=8 phys_addr=2000 attrs=SKIP_CPU_SYNC
a-1 [000] ..... 1.000001: dma_map_resource: 0000:00:02.0 dir=FROM_DEVICE dma_addr=3000 size=8 phys_addr=fe000000 attrs=WEAK_ORDERING|MMIO
a-1 [000] ..... 1.000002: dma_unmap_resource: 0000:00:02.0 dir=FROM_DEVICE dma_addr=3000 size=8 attrs=0x10000
a-1 [000] ..... 1.000003: dma_unmap_phys: 0000:00:02.0 dir=NONE dma_addr=1000 size=8 attrs=
";
        let (events, header, report) = import(text, false);
        let kinds: Vec<_> = events.iter().map(|e| (e.kind, e.dir, e.time_ns)).collect();
        assert_eq!(
            kinds,
            [
                (EventKind::Map, TraceDir::Bidirectional, 0),
                (EventKind::Map, TraceDir::FromDevice, 1000),
                (EventKind::Unmap, TraceDir::FromDevice, 2000),
                (EventKind::Unmap, TraceDir::None, 3000),
            ]
        );
        assert_eq!(events[1].phys, Some(0xfe000000));
        assert_eq!(header.devices, ["0000:00:02.0"]);
        assert_eq!(report.by_event.get("dma_map_phys"), Some(&1));
        assert_eq!(report.by_event.len(), 4);
    }

    /// `dma_sync_sg_*`: one record, len = sum of the (hex) sizes.
    #[test]
    fn sync_sg_is_one_record() {
        let e = one(
            "a-1 [003] ..... 1.0: dma_sync_sg_for_device: 0000:01:00.0 dir=TO_DEVICE dma_addrs={0x1000,0x3000} sizes={0x800,0x100}",
        );
        assert_eq!(
            e,
            Event {
                cpu: 3,
                ..rec(
                    EventKind::SyncForDevice,
                    TraceDir::ToDevice,
                    Some(0x1000),
                    None,
                    0x900
                )
            }
        );
    }

    /// Reference §5.2: v6.12 `dma_alloc` (no dir, phys_addr) and the later format (dir,
    /// virt_addr, flags); `dma_free` likewise.
    #[test]
    fn alloc_and_free_formats() {
        let text = "\
a-1 [000] ..... 1.0: dma_alloc: 0000:00:04.0 dma_addr=fffc0000 size=16384 phys_addr=10a000000 flags=GFP_KERNEL|__GFP_ZERO attrs=
a-1 [000] ..... 1.0: dma_alloc_pages: 0000:00:04.0 dir=FROM_DEVICE dma_addr=fffb0000 size=4096 virt_addr=00000000c0ffee11 flags=GFP_KERNEL attrs=
a-1 [000] ..... 1.0: dma_free: 0000:00:04.0 dma_addr=fffc0000 size=16384 phys_addr=10a000000 attrs=
a-1 [000] ..... 1.0: dma_free_pages: 0000:00:04.0 dir=FROM_DEVICE dma_addr=fffb0000 size=4096 virt_addr=00000000c0ffee11 attrs=NO_KERNEL_MAPPING
";
        let (events, _, _) = import(text, false);
        assert_eq!(
            events,
            [
                rec(
                    EventKind::Alloc,
                    TraceDir::Bidirectional,
                    Some(0xfffc0000),
                    Some(0x10a000000),
                    16384
                ),
                rec(
                    EventKind::Alloc,
                    TraceDir::FromDevice,
                    Some(0xfffb0000),
                    None,
                    4096
                ),
                rec(
                    EventKind::Free,
                    TraceDir::Bidirectional,
                    Some(0xfffc0000),
                    Some(0x10a000000),
                    16384
                ),
                rec(
                    EventKind::Free,
                    TraceDir::FromDevice,
                    Some(0xfffb0000),
                    None,
                    4096
                ),
            ]
        );
    }

    /// A failed map (`DMA_MAPPING_ERROR`) makes no record.
    #[test]
    fn failed_map_is_skipped() {
        let (events, _, report) = import(
            "a-1 [000] ..... 1.0: dma_map_page: d dir=TO_DEVICE dma_addr=ffffffffffffffff size=64 phys_addr=1000 attrs=",
            false,
        );
        assert!(events.is_empty());
        assert_eq!(report.map_errors, 1);
    }
}
