//! Simulated host-physical memory holding the remapping tables.
//!
//! Every table (the root table, context tables and second-level page tables) is one 4 KiB frame
//! of 512 qwords (S0.1). Frames are handed out bump-style from a reserved region of the host
//! physical address space starting at [`TABLE_REGION_BASE`], and are stored back to back in
//! one flat `Vec<u64>`. Entries therefore hold real frame numbers and a walk really follows
//! them: reading an entry is `words[(frame - base) * 512 + index]`, no hashing.
//!
//! A 128-bit root or context entry `i` occupies qwords `2i` (low) and `2i + 1` (high), so a
//! root or context table holds 256 entries in one frame, as on hardware.
//!
//! Frames are never freed: the model does not reclaim page-table pages (see
//! [`crate::vtd::table`]). The model does not stop a caller from mapping data frames inside the
//! table region; on a real machine that would alias the tables, here it is harmless.

use iommulab_base::addr::{Hpa, Pfn};

/// Entries (qwords) per 4 KiB table frame (S0.1).
pub const ENTRIES_PER_TABLE: usize = 512;

/// First frame of the reserved table region: host-physical `0xF_0000_0000_0000` (bits 51:48
/// all set), far above any data frame a workload uses and still inside the 52-bit address
/// field of a second-level PTE.
pub const TABLE_REGION_BASE: Pfn<Hpa> = Pfn::new(0xF0_0000_0000);

/// The table frames allocated so far.
#[derive(Debug, Clone)]
pub struct TableMemory {
    /// Frame `TABLE_REGION_BASE + k` is `words[k*512 .. (k+1)*512]`.
    words: Vec<u64>,
}

impl Default for TableMemory {
    fn default() -> Self {
        Self::new()
    }
}

impl TableMemory {
    /// Empty memory (no frames).
    pub fn new() -> Self {
        Self { words: Vec::new() }
    }

    /// Allocates one zeroed frame (all entries not present) and returns its frame number.
    pub fn alloc_frame(&mut self) -> Pfn<Hpa> {
        let k = self.frames();
        self.words.resize(self.words.len() + ENTRIES_PER_TABLE, 0);
        TABLE_REGION_BASE.add(k)
    }

    /// Number of frames allocated.
    pub fn frames(&self) -> u64 {
        (self.words.len() / ENTRIES_PER_TABLE) as u64
    }

    /// Whether `frame` is an allocated table frame.
    pub fn contains(&self, frame: Pfn<Hpa>) -> bool {
        frame
            .pages_since(TABLE_REGION_BASE)
            .is_some_and(|k| k < self.frames())
    }

    #[inline]
    fn slot(frame: Pfn<Hpa>, index: usize) -> usize {
        debug_assert!(index < ENTRIES_PER_TABLE);
        // Table pointers are only ever written by this model, so a frame below the region
        // is a model bug; the subtraction wraps and the index check below panics.
        let k = frame.get().wrapping_sub(TABLE_REGION_BASE.get());
        #[expect(
            clippy::cast_possible_truncation,
            reason = "k < frames(), which fits in usize as a Vec length"
        )]
        let k = k as usize;
        k * ENTRIES_PER_TABLE + index
    }

    /// Reads qword `index` (0..512) of table frame `frame`. Panics if `frame` is not an
    /// allocated table frame (a model bug: only this model writes table pointers).
    #[inline]
    pub fn read(&self, frame: Pfn<Hpa>, index: usize) -> u64 {
        self.words[Self::slot(frame, index)]
    }

    /// Writes qword `index` of table frame `frame`. Panics like [`TableMemory::read`].
    #[inline]
    pub fn write(&mut self, frame: Pfn<Hpa>, index: usize, value: u64) {
        let s = Self::slot(frame, index);
        self.words[s] = value;
    }

    /// Reads 128-bit entry `index` (0..256) as `(low, high)` qwords.
    pub fn read128(&self, frame: Pfn<Hpa>, index: usize) -> (u64, u64) {
        (self.read(frame, 2 * index), self.read(frame, 2 * index + 1))
    }

    /// Writes 128-bit entry `index` (0..256) from `(low, high)` qwords.
    pub fn write128(&mut self, frame: Pfn<Hpa>, index: usize, (lo, hi): (u64, u64)) {
        self.write(frame, 2 * index, lo);
        self.write(frame, 2 * index + 1, hi);
    }

    /// The 512 qwords of table frame `frame`.
    #[inline]
    pub fn table(&self, frame: Pfn<Hpa>) -> &[u64] {
        let s = Self::slot(frame, 0);
        &self.words[s..s + ENTRIES_PER_TABLE]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_zeroed_and_addressed_from_region_base() {
        let mut m = TableMemory::new();
        let a = m.alloc_frame();
        let b = m.alloc_frame();
        assert_eq!(a, TABLE_REGION_BASE);
        assert_eq!(b, TABLE_REGION_BASE.add(1));
        assert!(m.contains(b) && !m.contains(b.add(1)));
        m.write(b, 511, 7);
        assert_eq!(m.read(b, 511), 7);
        assert_eq!(m.read(a, 511), 0);
        m.write128(a, 255, (1, 2));
        assert_eq!(m.read128(a, 255), (1, 2));
        assert_eq!(m.table(a)[510..], [1, 2]);
    }
}
