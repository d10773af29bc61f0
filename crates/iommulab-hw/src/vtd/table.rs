//! Second-level page tables: the multi-level radix tree that maps a domain's I/O page numbers
//! to host frames (S0.1: 4 KiB pages, 8-byte entries, 9 index bits per level, 512 entries per
//! table; S3.2: the context entry points to it).
//!
//! Level numbering follows the spec: level 1 tables hold 4 KiB leaves, a level-2 entry with PS
//! set is a 2 MiB leaf and a level-3 entry with PS set a 1 GiB leaf. A table of `levels`
//! levels translates `12 + 9 × levels` address bits (3 → 39, 4 → 48, 5 → 57). The index at
//! level `l` is bits `9(l-1) .. 9l` of the page number.
//!
//! Intermediate tables are never freed, not even when the last leaf under them is cleared:
//! the Linux VT-d driver of the seed papers' era (2.6.2x) kept them until the domain was
//! destroyed, and no reclamation is modeled. When a super-page is mapped over an entry that
//! points to an (empty) lower table, the lower table is orphaned, still counted in the table
//! pages.
//!
//! Complexity: a walk or a single map/unmap touches `levels` entries; a range operation of
//! `n` pages touches `n` leaves plus one walk per leaf table (`n / 512`). Nothing allocates
//! except a new table frame.

use iommulab_base::addr::{Hpa, PageSize, Perm, Pfn};

use super::entry::SlPte;
pub(crate) use crate::memory::ENTRIES_PER_TABLE;
use crate::memory::TableMemory;

/// Index bits per level (S0.1).
pub const BITS_PER_LEVEL: u32 = 9;

/// The level whose leaves have page size `size` (1, 2 or 3).
pub const fn leaf_level(size: PageSize) -> u8 {
    match size {
        PageSize::Size4K => 1,
        PageSize::Size2M => 2,
        PageSize::Size1G => 3,
    }
}

/// The page size of a leaf at `level` (1, 2 or 3).
const fn size_at(level: u8) -> PageSize {
    match level {
        1 => PageSize::Size4K,
        2 => PageSize::Size2M,
        _ => PageSize::Size1G,
    }
}

/// Number of 4 KiB pages one entry at `level` spans.
const fn span(level: u8) -> u64 {
    1 << (BITS_PER_LEVEL * (level as u32 - 1))
}

/// The entry index of page `pfn` in a table at `level`.
#[inline]
pub(crate) fn index(pfn: u64, level: u8) -> usize {
    // Masked to 9 bits, so the cast cannot truncate (clippy sees the mask).
    ((pfn >> (BITS_PER_LEVEL * (u32::from(level) - 1))) & 511) as usize
}

/// Whether `pte` at `level` is a leaf (level 1, or PS set at level 2 or 3).
#[inline]
fn is_leaf(pte: SlPte, level: u8) -> bool {
    level == 1 || (level <= 3 && pte.super_page())
}

/// A leaf the walk found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// First 4 KiB page the leaf maps.
    pub iova: Pfn<iommulab_base::addr::Iova>,
    /// First 4 KiB frame it maps to.
    pub hpa: Pfn<Hpa>,
    /// R/W bits.
    pub perm: Perm,
    /// Leaf page size.
    pub size: PageSize,
}

impl Leaf {
    /// The 4 KiB frame that page `pfn` (inside this leaf) maps to.
    pub fn frame_of(&self, pfn: u64) -> Pfn<Hpa> {
        self.hpa.add(pfn & (self.size.base_pages() - 1))
    }
}

/// Where a walk stopped: the entry it read last.
#[derive(Clone, Copy, Debug)]
pub struct PteSlot {
    /// Table frame holding the entry.
    pub table: Pfn<Hpa>,
    /// Entry index in that table.
    pub index: usize,
    /// Level of that table.
    pub level: u8,
    /// The entry (not present, or a leaf).
    pub pte: SlPte,
    /// Entries read to get here (one per level visited).
    pub fetches: u32,
}

/// Why a range of pages cannot be unmapped as 4 KiB leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeConflict {
    /// Page `0` is not mapped.
    NotMapped(u64),
    /// Page `0` lies in a super-page leaf of size `1`.
    SuperPage(u64, PageSize),
}

/// One domain's second-level page table: the frame of its top-level table and its depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlTable {
    root: Pfn<Hpa>,
    levels: u8,
}

impl SlTable {
    /// Allocates an empty top-level table of a `levels`-level tree (3, 4 or 5).
    pub fn new(mem: &mut TableMemory, levels: u8) -> Self {
        debug_assert!((3..=5).contains(&levels));
        Self {
            root: mem.alloc_frame(),
            levels,
        }
    }

    /// A view of an existing tree (as read from a context entry).
    pub fn from_root(root: Pfn<Hpa>, levels: u8) -> Self {
        Self { root, levels }
    }

    /// Frame of the top-level table (the context entry's SLPTPTR).
    pub fn root(&self) -> Pfn<Hpa> {
        self.root
    }

    /// Number of levels.
    pub fn levels(&self) -> u8 {
        self.levels
    }

    /// Input address width in bits: `12 + 9 × levels`.
    pub fn address_bits(&self) -> u8 {
        12 + 9 * self.levels
    }

    /// One past the largest 4 KiB page number the tree translates.
    pub fn page_limit(&self) -> u64 {
        1 << (BITS_PER_LEVEL * u32::from(self.levels))
    }

    /// Walks from the top table towards page `pfn` and stops at the first entry that is not
    /// present or is a leaf. `pfn` must be below [`SlTable::page_limit`].
    #[inline]
    pub fn find(&self, mem: &TableMemory, pfn: u64) -> PteSlot {
        let mut table = self.root;
        let mut level = self.levels;
        let mut fetches = 0;
        loop {
            let i = index(pfn, level);
            let pte = SlPte::from_raw(mem.read(table, i));
            fetches += 1;
            if !pte.present() || is_leaf(pte, level) {
                return PteSlot {
                    table,
                    index: i,
                    level,
                    pte,
                    fetches,
                };
            }
            table = pte.addr();
            level -= 1;
        }
    }

    /// The leaf mapping page `pfn`, and the number of entries read (one per level visited).
    #[inline]
    pub fn walk(&self, mem: &TableMemory, pfn: u64) -> (Option<Leaf>, u32) {
        let s = self.find(mem, pfn);
        let leaf = s.pte.perm().map(|perm| {
            let size = size_at(s.level);
            Leaf {
                iova: Pfn::new(pfn & !(size.base_pages() - 1)),
                hpa: s.pte.addr(),
                perm,
                size,
            }
        });
        (leaf, s.fetches)
    }

    /// Maps one leaf of `size` at aligned page `pfn` to aligned frame `hpa`. On a conflict
    /// returns the lowest already-mapped page of `[pfn, pfn + size)` and changes nothing
    /// (new intermediate tables are only allocated on paths that end in a free slot).
    pub fn map(
        &self,
        mem: &mut TableMemory,
        pfn: u64,
        hpa: Pfn<Hpa>,
        size: PageSize,
        perm: Perm,
    ) -> Result<(), u64> {
        let target = leaf_level(size);
        let table = self.descend_alloc(mem, pfn, target)?;
        let i = index(pfn, target);
        let old = SlPte::from_raw(mem.read(table, i));
        if old.present() {
            if is_leaf(old, target) {
                return Err(pfn);
            }
            // A lower table hangs here: the super-page may replace it only if it is empty.
            if let Some(p) = first_mapped(mem, old.addr(), target - 1, pfn, pfn + span(target)) {
                return Err(p);
            }
        }
        mem.write(table, i, SlPte::leaf(hpa, perm, target > 1).raw());
        Ok(())
    }

    /// The level-1 table that holds page `pfn`, allocating missing tables on the way, or
    /// `None` if a super-page covers `pfn` (then nothing was allocated).
    #[inline]
    pub fn leaf_table_alloc(&self, mem: &mut TableMemory, pfn: u64) -> Option<Pfn<Hpa>> {
        self.descend_alloc(mem, pfn, 1).ok()
    }

    /// The level-1 table that holds page `pfn`, if the walk reaches one (no allocation).
    #[inline]
    pub fn leaf_table(&self, mem: &TableMemory, pfn: u64) -> Option<Pfn<Hpa>> {
        let mut table = self.root;
        let mut level = self.levels;
        while level > 1 {
            let pte = SlPte::from_raw(mem.read(table, index(pfn, level)));
            if !pte.present() || is_leaf(pte, level) {
                return None;
            }
            table = pte.addr();
            level -= 1;
        }
        Some(table)
    }

    /// Descends to the table at `target` level that holds page `pfn`, allocating missing
    /// tables. Fails with `pfn` if a super-page leaf above `target` covers it (in which case
    /// nothing was allocated: a fresh table has no leaves below it).
    fn descend_alloc(&self, mem: &mut TableMemory, pfn: u64, target: u8) -> Result<Pfn<Hpa>, u64> {
        let mut table = self.root;
        let mut level = self.levels;
        while level > target {
            let i = index(pfn, level);
            let pte = SlPte::from_raw(mem.read(table, i));
            table = if !pte.present() {
                let t = mem.alloc_frame();
                mem.write(table, i, SlPte::table(t).raw());
                t
            } else if is_leaf(pte, level) {
                return Err(pfn);
            } else {
                pte.addr()
            };
            level -= 1;
        }
        Ok(table)
    }

    /// The lowest page of `[lo, hi)` mapped by any leaf, if any. `hi <= page_limit()`.
    pub fn first_mapped(&self, mem: &TableMemory, lo: u64, hi: u64) -> Option<u64> {
        first_mapped(mem, self.root, self.levels, lo, hi)
    }

    /// Maps `[pfn, pfn + pages)` to `[hpa, hpa + pages)` with 4 KiB leaves. The caller has
    /// checked with [`SlTable::first_mapped`] that the range is free and below the limit.
    pub fn map_4k_range(
        &self,
        mem: &mut TableMemory,
        pfn: u64,
        hpa: Pfn<Hpa>,
        pages: u64,
        perm: Perm,
    ) {
        let end = pfn + pages;
        let mut p = pfn;
        while p < end {
            let Ok(table) = self.descend_alloc(mem, p, 1) else {
                unreachable!("range checked free, yet a super-page covers page {p:#x}");
            };
            let i0 = index(p, 1);
            let n = chunk(i0, end - p);
            let mut frame = hpa.add(p - pfn);
            for i in i0..i0 + n {
                mem.write(table, i, SlPte::leaf(frame, perm, false).raw());
                frame = frame.add(1);
            }
            p += n as u64;
        }
    }

    /// Checks that every page of `[pfn, pfn + pages)` is mapped by a 4 KiB leaf and returns
    /// the lowest page that is not.
    pub fn check_4k_range(
        &self,
        mem: &TableMemory,
        pfn: u64,
        pages: u64,
    ) -> Result<(), RangeConflict> {
        self.each_leaf_table(mem, pfn, pages, |table, i0, n, p| {
            let t = mem.table(table);
            match t[i0..i0 + n]
                .iter()
                .position(|&e| !SlPte::from_raw(e).present())
            {
                Some(k) => Err(RangeConflict::NotMapped(p + k as u64)),
                None => Ok(()),
            }
        })
    }

    /// Clears the 4 KiB leaves of `[pfn, pfn + pages)`. The caller has checked the range with
    /// [`SlTable::check_4k_range`].
    pub fn clear_4k_range(&self, mem: &mut TableMemory, pfn: u64, pages: u64) {
        let end = pfn + pages;
        let mut p = pfn;
        while p < end {
            let s = self.find(mem, p);
            debug_assert_eq!(
                s.level, 1,
                "range checked, yet page {p:#x} has no 4K leaf table"
            );
            let n = chunk(s.index, end - p);
            for i in s.index..s.index + n {
                mem.write(s.table, i, 0);
            }
            p += n as u64;
        }
    }

    /// Calls `f(table, first_index, count, first_page)` for each level-1 table chunk of the
    /// range, failing on a page whose walk ends above level 1.
    fn each_leaf_table(
        &self,
        mem: &TableMemory,
        pfn: u64,
        pages: u64,
        mut f: impl FnMut(Pfn<Hpa>, usize, usize, u64) -> Result<(), RangeConflict>,
    ) -> Result<(), RangeConflict> {
        let end = pfn + pages;
        let mut p = pfn;
        while p < end {
            let s = self.find(mem, p);
            if s.level != 1 {
                return Err(if s.pte.present() {
                    RangeConflict::SuperPage(p, size_at(s.level))
                } else {
                    RangeConflict::NotMapped(p)
                });
            }
            let n = chunk(s.index, end - p);
            f(s.table, s.index, n, p)?;
            p += n as u64;
        }
        Ok(())
    }
}

/// Entries from index `i0` to the end of the table, capped at `remaining`.
#[inline]
fn chunk(i0: usize, remaining: u64) -> usize {
    let room = ENTRIES_PER_TABLE - i0;
    usize::try_from(remaining).map_or(room, |r| r.min(room))
}

/// The lowest page of `[lo, hi)` mapped by a leaf under `table` (a table at `level` whose
/// region contains the range).
fn first_mapped(mem: &TableMemory, table: Pfn<Hpa>, level: u8, lo: u64, hi: u64) -> Option<u64> {
    let span = span(level);
    let mut p = lo;
    while p < hi {
        let next = ((p & !(span - 1)) + span).min(hi);
        let pte = SlPte::from_raw(mem.read(table, index(p, level)));
        if pte.present() {
            if is_leaf(pte, level) {
                return Some(p);
            }
            if let Some(x) = first_mapped(mem, pte.addr(), level - 1, p, next) {
                return Some(x);
            }
        }
        p = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(levels: u8) -> (TableMemory, SlTable) {
        let mut m = TableMemory::new();
        let t = SlTable::new(&mut m, levels);
        (m, t)
    }

    /// S0.1: a 4-level walk reads one entry per level and allocates one table per level.
    #[test]
    fn four_level_map_allocates_one_table_per_level_and_walk_reads_four_entries() {
        let (mut m, t) = setup(4);
        t.map(
            &mut m,
            0x1_2345,
            Pfn::new(0x777),
            PageSize::Size4K,
            Perm::Read,
        )
        .unwrap();
        assert_eq!(m.frames(), 4);
        let (leaf, fetches) = t.walk(&m, 0x1_2345);
        assert_eq!(fetches, 4);
        let leaf = leaf.unwrap();
        assert_eq!(
            (leaf.hpa, leaf.perm, leaf.size),
            (Pfn::new(0x777), Perm::Read, PageSize::Size4K)
        );
        // An unmapped page in a missing subtree stops the walk early.
        assert_eq!(t.walk(&m, 1 << 30), (None, 1));
    }

    #[test]
    fn super_page_over_empty_lower_table_replaces_it_but_not_over_a_mapped_one() {
        let (mut m, t) = setup(4);
        t.map(&mut m, 515, Pfn::new(1), PageSize::Size4K, Perm::Read)
            .unwrap();
        assert_eq!(
            t.map(&mut m, 512, Pfn::new(0), PageSize::Size2M, Perm::Read),
            Err(515)
        );
        t.clear_4k_range(&mut m, 515, 1);
        t.map(&mut m, 512, Pfn::new(0), PageSize::Size2M, Perm::Read)
            .unwrap();
        assert_eq!(
            t.walk(&m, 1000).0.unwrap().frame_of(1000),
            Pfn::new(1000 - 512)
        );
        assert_eq!(t.first_mapped(&m, 0, 4096), Some(512));
        assert_eq!(t.first_mapped(&m, 1024, 4096), None);
    }

    #[test]
    fn range_check_reports_first_gap_and_super_pages() {
        let (mut m, t) = setup(3);
        t.map_4k_range(&mut m, 500, Pfn::new(9000), 20, Perm::ReadWrite);
        assert_eq!(t.check_4k_range(&m, 500, 20), Ok(()));
        assert_eq!(
            t.check_4k_range(&m, 499, 5),
            Err(RangeConflict::NotMapped(499))
        );
        assert_eq!(
            t.check_4k_range(&m, 510, 11),
            Err(RangeConflict::NotMapped(520))
        );
        t.map(&mut m, 1024, Pfn::new(0), PageSize::Size2M, Perm::Read)
            .unwrap();
        assert_eq!(
            t.check_4k_range(&m, 1030, 1),
            Err(RangeConflict::SuperPage(1030, PageSize::Size2M))
        );
        assert_eq!(t.walk(&m, 519).0.unwrap().hpa, Pfn::new(9019));
    }
}
