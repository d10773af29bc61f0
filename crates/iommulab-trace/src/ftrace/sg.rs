//! Scatter-gather: `dma_map_sg` becomes a `MapSg` record and one `SgSeg` per entry, and stays
//! open until the `dma_unmap_sg` of the same device and physical list, which mirrors its
//! records (see "Scatter-gather" in the [module doc](super)).

use std::io::BufRead;

use super::fields::{DmaFields, fraction};
use super::lexer::Head;
use super::{Bad, FtraceReader, MAX_OPEN_SG, Outcome};
use crate::{Event, EventKind};

/// Physical addresses that key an open `dma_map_sg` (the kernel's `DMA_TRACE_MAX_ENTRIES`).
const SG_KEY_ENTRIES: usize = 128;

/// An open `dma_map_sg`: its `SgSeg` records.
pub(super) struct OpenSg {
    segs: Vec<Event>,
    n_phys: usize,
    truncated: bool,
}

impl<R: BufRead> FtraceReader<R> {
    pub(super) fn dma_map_sg<'a>(&mut self, head: &Head<'a>) -> Result<Outcome, Bad<'a>> {
        let f = DmaFields::parse(head.body)?;
        let dir = f.dir()?;
        f.array(
            f.dma_addrs,
            "`dma_addrs={0x<hex>,...}`",
            &mut self.dma_addrs,
        )?;
        f.array(f.sizes, "`sizes={0x<hex>,...}`", &mut self.sizes)?;
        f.array(
            f.phys_addrs,
            "`phys_addrs={0x<hex>,...}`",
            &mut self.phys_addrs,
        )?;
        f.require(f.attrs, "`attrs=`")?;
        let sizes_tok = f.sizes.map_or(head.body, |(t, _)| t);
        if self.sizes.len() != self.dma_addrs.len() {
            return Err(Bad::new("as many `sizes` as `dma_addrs`", sizes_tok));
        }
        let mut truncated = f.truncated;
        if let Some((tok, v)) = f.nents {
            let (shown, total) = fraction(v).ok_or(Bad::new("`nents=<shown>/<total>`", tok))?;
            if shown != self.phys_addrs.len() as u64 {
                return Err(Bad::new(
                    "`nents=` shown count equal to the `phys_addrs` count",
                    tok,
                ));
            }
            truncated |= total > shown;
        }
        if let Some((tok, v)) = f.ents {
            let (shown, total) = fraction(v).ok_or(Bad::new("`ents=<shown>/<total>`", tok))?;
            if shown != self.dma_addrs.len() as u64 {
                return Err(Bad::new(
                    "`ents=` shown count equal to the `dma_addrs` count",
                    tok,
                ));
            }
            truncated |= total > shown;
        }
        let n = self.phys_addrs.len().max(self.dma_addrs.len());
        let Ok(nents) = u32::try_from(n) else {
            return Err(Bad::new("fewer than 2^32 segments", sizes_tok));
        };
        let dev = self.device(f.device)?;
        if truncated {
            self.report.truncated_sg += 1;
        }
        let mut e = self.record(head, dev, EventKind::MapSg, dir);
        e.dma = self.dma_addrs.first().copied();
        e.phys = self.phys_addrs.first().copied();
        e.len = self.sizes.iter().fold(0u64, |a, &b| a.saturating_add(b));
        e.nents = nents;
        self.push(e);
        let mut segs = self.seg_pool.pop().unwrap_or_default();
        for i in 0..n {
            segs.push(Event {
                kind: EventKind::SgSeg,
                dma: self.dma_addrs.get(i).copied(),
                phys: self.phys_addrs.get(i).copied(),
                len: self.sizes.get(i).copied().unwrap_or(0),
                nents: 0,
                ..e
            });
        }
        self.pending.extend(segs.iter().copied());
        self.report.events += segs.len() as u64;
        self.keep_open(dev, segs, truncated);
        Ok(Outcome::Imported)
    }

    /// Keeps a mapped sg list open for its `dma_unmap_sg`.
    fn keep_open(&mut self, dev: u16, mut segs: Vec<Event>, truncated: bool) {
        let n_phys = self.phys_addrs.len();
        if n_phys == 0 {
            segs.clear();
            self.seg_pool.push(segs);
            return;
        }
        if self.open_sg.len() + self.open_sg_more.len() >= MAX_OPEN_SG {
            self.report.untracked_map_sg += 1;
            segs.clear();
            self.seg_pool.push(segs);
            return;
        }
        let key = (dev, sg_hash(&self.phys_addrs));
        let open = OpenSg {
            segs,
            n_phys,
            truncated,
        };
        if let std::collections::hash_map::Entry::Vacant(v) = self.open_sg.entry(key) {
            v.insert(open);
        } else {
            self.open_sg_more.push((key, open));
        }
    }

    /// Takes the oldest open map of `dev` whose physical list is `self.phys_addrs`.
    fn take_open(&mut self, dev: u16) -> Option<OpenSg> {
        let phys = &self.phys_addrs;
        let key = (dev, sg_hash(phys));
        if self.open_sg.get(&key).is_some_and(|o| o.matches(phys)) {
            let found = self.open_sg.remove(&key);
            // Promote the next same-key map, keeping the oldest in the table.
            if let Some(i) = self.open_sg_more.iter().position(|(k, _)| *k == key) {
                let (_, o) = self.open_sg_more.remove(i);
                self.open_sg.insert(key, o);
            }
            return found;
        }
        let i = self
            .open_sg_more
            .iter()
            .position(|(k, o)| *k == key && o.matches(phys))?;
        Some(self.open_sg_more.remove(i).1)
    }

    pub(super) fn dma_unmap_sg<'a>(&mut self, head: &Head<'a>) -> Result<Outcome, Bad<'a>> {
        let f = DmaFields::parse(head.body)?;
        let dir = f.dir()?;
        f.array(
            f.phys_addrs,
            "`phys_addrs={0x<hex>,...}`",
            &mut self.phys_addrs,
        )?;
        f.require(f.attrs, "`attrs=`")?;
        let n = self.phys_addrs.len();
        let Ok(nents) = u32::try_from(n) else {
            return Err(Bad::new("fewer than 2^32 segments", head.body));
        };
        let dev = self.device(f.device)?;
        let open = if n == 0 { None } else { self.take_open(dev) };
        if open.is_none() && n > 0 {
            self.report.unmatched_unmap_sg += 1;
        }
        let map_segs: &[Event] = open.as_ref().map_or(&[], |o| &o.segs);
        let mut e = self.record(head, dev, EventKind::UnmapSg, dir);
        e.phys = self.phys_addrs.first().copied();
        e.dma = map_segs.first().and_then(|s| s.dma);
        e.len = map_segs.iter().fold(0u64, |a, s| a.saturating_add(s.len));
        e.nents = nents;
        self.pending.push_back(e);
        for (i, &p) in self.phys_addrs.iter().enumerate() {
            let m = map_segs.get(i);
            self.pending.push_back(Event {
                kind: EventKind::SgSeg,
                dma: m.and_then(|s| s.dma),
                phys: Some(p),
                len: m.map_or(0, |s| s.len),
                nents: 0,
                ..e
            });
        }
        self.report.events += 1 + n as u64;
        if let Some(mut o) = open {
            o.segs.clear();
            self.seg_pool.push(o.segs);
        }
        Ok(Outcome::Imported)
    }
}

impl OpenSg {
    /// Whether an unmap of `phys` undoes this map (the map's list may be cut at 128).
    fn matches(&self, phys: &[u64]) -> bool {
        let same_len = self.n_phys == phys.len() || (self.truncated && phys.len() > self.n_phys);
        same_len
            && self.segs[..self.n_phys.min(phys.len())]
                .iter()
                .zip(phys)
                .all(|(s, &p)| s.phys == Some(p))
    }
}

/// FNV-1a over the first [`SG_KEY_ENTRIES`] addresses.
fn sg_hash(phys: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &p in &phys[..phys.len().min(SG_KEY_ENTRIES)] {
        h = (h ^ p).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use crate::ftrace::tests::{import, rec};
    use crate::{Event, EventKind, TraceDir};

    /// Reference §5.2: a merged sg list (IOMMU): 1 DMA segment for 2 physical ones gives
    /// MapSg{nents 2} + 2 SgSeg, zipped by position.
    #[test]
    fn map_sg_merged_by_iommu() {
        let (events, _, _) = import(
            "fio-3310 [002] ..... 8123.500012: dma_map_sg: 0000:01:00.0 dir=FROM_DEVICE dma_addrs={0xfff00000} sizes={0x20000} phys_addrs={0x12c400000,0x12c420000} attrs=",
            false,
        );
        let d = TraceDir::FromDevice;
        let head = Event {
            nents: 2,
            ..rec(
                EventKind::MapSg,
                d,
                Some(0xfff00000),
                Some(0x12c400000),
                0x20000,
            )
        };
        let want: Vec<Event> = [
            head,
            rec(
                EventKind::SgSeg,
                d,
                Some(0xfff00000),
                Some(0x12c400000),
                0x20000,
            ),
            rec(EventKind::SgSeg, d, None, Some(0x12c420000), 0),
        ]
        .into_iter()
        .map(|e| Event { cpu: 2, ..e })
        .collect();
        assert_eq!(events, want);
    }

    /// The current format (`nents=a/b ents=c/d`) with one DMA segment per physical one.
    #[test]
    fn map_sg_unmerged_with_counts() {
        let (events, _, report) = import(
            "a-1 [000] ..... 1.0: dma_map_sg: virtio0 dir=TO_DEVICE nents=2/2 ents=2/2 dma_addrs={0x1000,0x5000} sizes={0x200,0x1000} phys_addrs={0xa000,0xb000} attrs=",
            false,
        );
        let d = TraceDir::ToDevice;
        assert_eq!(
            events,
            [
                Event {
                    nents: 2,
                    ..rec(EventKind::MapSg, d, Some(0x1000), Some(0xa000), 0x1200)
                },
                rec(EventKind::SgSeg, d, Some(0x1000), Some(0xa000), 0x200),
                rec(EventKind::SgSeg, d, Some(0x5000), Some(0xb000), 0x1000),
            ]
        );
        assert_eq!(report.truncated_sg, 0);
    }

    /// Trees that cap the arrays print `[TRUNCATED]`: counted, records cover what is printed.
    #[test]
    fn map_sg_truncated_is_counted() {
        let (events, _, report) = import(
            "a-1 [000] ..... 1.0: dma_map_sg: virtio0 dir=TO_DEVICE nents=2/300 ents=1/1 [TRUNCATED] dma_addrs={0x1000} sizes={0x2000} phys_addrs={0xa000,0xb000} attrs=",
            false,
        );
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].nents, 2);
        assert_eq!(report.truncated_sg, 1);
    }

    /// `dma_unmap_sg` carries only physical addresses: it is matched to the open map with the
    /// same device and list, and mirrors its records; an unknown list is counted unmatched.
    #[test]
    fn unmap_sg_matches_its_map() {
        let text = "\
a-1 [000] ..... 1.000000: dma_map_sg: dev0 dir=FROM_DEVICE dma_addrs={0xfff00000} sizes={0x20000} phys_addrs={0x12c400000,0x12c420000} attrs=
a-1 [000] ..... 1.000001: dma_map_sg: dev1 dir=FROM_DEVICE dma_addrs={0xeee00000} sizes={0x20000} phys_addrs={0x12c400000,0x12c420000} attrs=
a-1 [000] ..... 1.000002: dma_unmap_sg: dev0 dir=FROM_DEVICE phys_addrs={0x12c400000,0x12c420000} attrs=
a-1 [000] ..... 1.000003: dma_unmap_sg: dev0 dir=FROM_DEVICE phys_addrs={0x12c400000,0x12c420000} attrs=
";
        let (events, header, report) = import(text, false);
        assert_eq!(header.devices, ["dev0", "dev1"]);
        let d = TraceDir::FromDevice;
        let t = 2000;
        let unmap = &events[6..9];
        assert_eq!(
            unmap,
            [
                Event {
                    time_ns: t,
                    nents: 2,
                    ..rec(
                        EventKind::UnmapSg,
                        d,
                        Some(0xfff00000),
                        Some(0x12c400000),
                        0x20000
                    )
                },
                Event {
                    time_ns: t,
                    ..rec(
                        EventKind::SgSeg,
                        d,
                        Some(0xfff00000),
                        Some(0x12c400000),
                        0x20000
                    )
                },
                Event {
                    time_ns: t,
                    ..rec(EventKind::SgSeg, d, None, Some(0x12c420000), 0)
                },
            ]
        );
        // The second unmap of dev0 has no open map left (dev1's does not count).
        assert_eq!(events[9].kind, EventKind::UnmapSg);
        assert_eq!(
            (events[9].dma, events[9].len, events[9].nents),
            (None, 0, 2)
        );
        assert_eq!(report.unmatched_unmap_sg, 1);
        assert_eq!(report.events, 12);
    }

    /// Two open maps of the same list are undone oldest first.
    #[test]
    fn duplicate_open_sg_lists_match_in_order() {
        let text = "\
a-1 [000] ..... 1.0: dma_map_sg: d dir=TO_DEVICE dma_addrs={0x1000} sizes={0x10} phys_addrs={0xa000} attrs=
a-1 [000] ..... 1.0: dma_map_sg: d dir=TO_DEVICE dma_addrs={0x2000} sizes={0x10} phys_addrs={0xa000} attrs=
a-1 [000] ..... 1.0: dma_map_sg: d dir=TO_DEVICE dma_addrs={0x3000} sizes={0x10} phys_addrs={0xa000} attrs=
a-1 [000] ..... 1.0: dma_unmap_sg: d dir=TO_DEVICE phys_addrs={0xa000} attrs=
a-1 [000] ..... 1.0: dma_unmap_sg: d dir=TO_DEVICE phys_addrs={0xa000} attrs=
a-1 [000] ..... 1.0: dma_unmap_sg: d dir=TO_DEVICE phys_addrs={0xa000} attrs=
";
        let (events, _, report) = import(text, false);
        let unmapped: Vec<_> = events
            .iter()
            .filter(|e| e.kind == EventKind::UnmapSg)
            .map(|e| e.dma)
            .collect();
        assert_eq!(unmapped, [Some(0x1000), Some(0x2000), Some(0x3000)]);
        assert_eq!(report.unmatched_unmap_sg, 0);
    }
}
