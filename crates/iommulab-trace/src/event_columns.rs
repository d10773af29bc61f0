//! A batch of events stored by field, one array per field ([`EventColumns`]): what the
//! native format's block decoder produces without assembling 64-byte [`Event`] rows, and what
//! the replay reads an event's fields from (only the fields it uses are loaded).

use crate::{Event, EventKind, TraceDir};

/// The kind in bits 0-3 of a tag byte.
pub(crate) const TAG_KIND: u8 = 0x0f;
/// The event carries a DMA address.
pub(crate) const TAG_DMA: u8 = 0x40;
/// The event carries a physical address.
pub(crate) const TAG_PHYS: u8 = 0x80;

/// The tag byte of `e`: kind in bits 0-3, direction in bits 4-5, which of dma/phys it
/// carries in bits 6/7 (the native format stores events' tags so: docs/trace-format.md).
#[inline]
pub(crate) fn tag_of(e: &Event) -> u8 {
    let mut tag = (e.kind as u8) | ((e.dir as u8) << 4);
    if e.dma.is_some() {
        tag |= TAG_DMA;
    }
    if e.phys.is_some() {
        tag |= TAG_PHYS;
    }
    tag
}

/// Every kind by its tag nibble; nibbles 11..=15 are rejected before a tag is stored.
pub(crate) const KINDS: [EventKind; 16] = {
    let mut k = [EventKind::Map; 16];
    let mut i = 0;
    while i < EventKind::ALL.len() {
        k[i] = EventKind::ALL[i];
        i += 1;
    }
    k
};

/// Every direction by its two tag bits.
pub(crate) const DIRS: [TraceDir; 4] = [
    TraceDir::Bidirectional,
    TraceDir::ToDevice,
    TraceDir::FromDevice,
    TraceDir::None,
];

/// Events held field by field: [`EventColumns::get`] gives event `i` as an [`Event`], and
/// once inlined into its consumer loads only the fields the consumer reads. Filled by
/// [`EventSource::read_columns`](crate::EventSource::read_columns); every column has one value
/// per event.
#[derive(Clone, Debug, Default)]
pub struct EventColumns {
    tags: Vec<u8>,
    time_ns: Vec<u64>,
    /// Below 2^16.
    cpu: Vec<u64>,
    /// Below 2^16.
    device: Vec<u64>,
    /// The DMA address where the tag says it is present (anything otherwise).
    dma: Vec<u64>,
    /// The physical address where the tag says it is present (anything otherwise).
    phys: Vec<u64>,
    len: Vec<u64>,
    /// Below 2^32.
    nents: Vec<u64>,
    /// Scratch of [`EventSource::read_columns`](crate::EventSource::read_columns)'s default,
    /// which reads rows and splits them.
    pub(crate) rows: Vec<Event>,
}

impl EventColumns {
    /// Events held.
    #[inline]
    pub fn len(&self) -> usize {
        self.tags.len()
    }

    /// Whether no event is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }

    /// Drops every event (keeping the memory).
    pub fn clear(&mut self) {
        self.tags.clear();
        self.time_ns.clear();
        self.cpu.clear();
        self.device.clear();
        self.dma.clear();
        self.phys.clear();
        self.len.clear();
        self.nents.clear();
    }

    /// Appends `e`.
    pub fn push(&mut self, e: &Event) {
        self.tags.push(tag_of(e));
        self.time_ns.push(e.time_ns);
        self.cpu.push(u64::from(e.cpu));
        self.device.push(u64::from(e.device));
        self.dma.push(e.dma.unwrap_or(0));
        self.phys.push(e.phys.unwrap_or(0));
        self.len.push(e.len);
        self.nents.push(u64::from(e.nents));
    }

    /// Appends `events`.
    pub fn extend_rows(&mut self, events: &[Event]) {
        events.iter().for_each(|e| self.push(e));
    }

    /// Event `i`.
    ///
    /// # Panics
    /// If `i` is not below [`len`](Self::len).
    // cpu, device and nents were checked against their limits when stored.
    #[allow(clippy::cast_possible_truncation)]
    #[inline(always)]
    pub fn get(&self, i: usize) -> Event {
        let tag = self.tags[i];
        // Every column is as long as `tags`, so the defaults are never taken; a load that
        // cannot panic is one the compiler drops where the consumer ignores the field (a
        // bounds check on each would keep all eight).
        let at = |col: &[u64]| col.get(i).copied().unwrap_or_default();
        Event {
            time_ns: at(&self.time_ns),
            cpu: at(&self.cpu) as u16,
            device: at(&self.device) as u16,
            kind: KINDS[usize::from(tag & TAG_KIND)],
            dir: DIRS[usize::from((tag >> 4) & 3)],
            dma: (tag & TAG_DMA != 0).then(|| at(&self.dma)),
            phys: (tag & TAG_PHYS != 0).then(|| at(&self.phys)),
            len: at(&self.len),
            nents: at(&self.nents) as u32,
        }
    }

    /// Event `i`'s time, in ns since the start of the trace.
    ///
    /// # Panics
    /// If `i` is not below [`len`](Self::len).
    #[inline(always)]
    pub fn time_ns(&self, i: usize) -> u64 {
        self.time_ns[i]
    }

    /// Makes room for a decoded block of `count` events: every numeric column holds
    /// `count` values (kept, not zeroed, when it already did: blocks are mostly of one size),
    /// to be filled through [`columns_mut`](Self::columns_mut), and the tags none yet.
    pub(crate) fn begin_block(&mut self, count: usize) {
        self.tags.clear();
        for col in self.numeric_mut() {
            col.resize(count, 0);
        }
    }

    /// Events `at..at + k` of a block's numeric columns, in the native block's order (cpu,
    /// device, time, dma, phys, len, nents), to be filled and checked by the decoder: cpu and
    /// device below 2^16, nents below 2^32.
    pub(crate) fn columns_mut(&mut self, at: usize, k: usize) -> [&mut [u64]; 7] {
        self.numeric_mut().map(|c| &mut c[at..at + k])
    }

    /// The tags of the events whose columns are filled.
    pub(crate) fn extend_tags(&mut self, tags: &[u8]) {
        self.tags.extend_from_slice(tags);
    }

    fn numeric_mut(&mut self) -> [&mut Vec<u64>; 7] {
        [
            &mut self.cpu,
            &mut self.device,
            &mut self.time_ns,
            &mut self.dma,
            &mut self.phys,
            &mut self.len,
            &mut self.nents,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_back_as_they_went_in() {
        let mut events = Vec::new();
        for (i, kind) in (0u16..).zip(EventKind::ALL) {
            let v = u64::from(i);
            events.push(Event {
                time_ns: v * 1000 + 7,
                cpu: u16::MAX - i,
                device: i,
                kind,
                dir: DIRS[usize::from(i % 4)],
                dma: (i % 2 == 0).then_some(v << 40 | 0x123),
                phys: (i % 3 != 0).then_some(!v),
                len: u64::MAX - v,
                nents: if matches!(kind, EventKind::MapSg | EventKind::UnmapSg) {
                    u32::MAX
                } else {
                    0
                },
            });
        }
        let mut c = EventColumns::default();
        c.extend_rows(&events);
        assert_eq!(c.len(), events.len());
        let back: Vec<Event> = (0..c.len()).map(|i| c.get(i)).collect();
        assert_eq!(back, events);
        assert!(
            events
                .iter()
                .enumerate()
                .all(|(i, e)| c.time_ns(i) == e.time_ns)
        );
        c.clear();
        assert!(c.is_empty());
    }
}
