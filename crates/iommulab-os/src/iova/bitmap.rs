//! The bitmap IOVA allocator of the older IOMMU drivers (S0.5, S2.4): one bit per I/O page
//! over `[start, end)`, next-fit upward from the end of the last allocation, wrapping to the
//! bottom when the top is reached (Calgary, GART, `lib/iommu-helper.c`).
//!
//! Every wrap is counted in [`IovaStats::wraps`]: the per-lap flush policy (S0.6) invalidates
//! the IOTLB once per wrap instead of once per unmap. That is only safe if nothing freed in
//! the current lap is handed out again before the wrap, so `free` follows AMD GART's rule
//! (`free_iommu`: `if (offset >= next_bit) next_bit = offset + size`): a freed range at or
//! above the next-fit hint moves the hint past it (here: any freed range that ends above the
//! hint does, which also covers a range straddling it). Calgary's `iommu_free` did not move
//! the hint, so a range freed above the hint could be reused within the same lap while a
//! stale IOTLB entry for it might still exist. The price of the rule: ranges of the last
//! lap still outstanding at a wrap sit above the new hint, and each one freed pushes the hint
//! to the top again, so a ring of `k` outstanding ranges can cost up to `k` extra wraps
//! (flushes) per lap; Fujita's one-outstanding pattern (S0.8) wraps exactly once per lap.
//!
//! A 4 GiB space of 4 KiB pages is 2^20 bits = 128 KiB, resident whatever the load (S0.5);
//! [`IovaAllocator::metadata_bytes`] reports exactly that bitmap.
//!
//! Deviations from Linux:
//! - a second bitmap marks the last page of every allocation, so `free` can reject ranges
//!   that are not exactly one live allocation (Linux's bitmap allocators trusted the caller).
//!   It is a checker's aid and is not counted in the metadata; [`Bitmap::host_bytes`] counts
//!   both;
//! - no alignment: `iommu_area_alloc` aligns only when a caller passes an alignment mask,
//!   and the DMA paths modelled here pass none;
//! - a search that fails from the hint counts a wrap even if the search from the bottom fails
//!   too (Calgary blasts the TCE cache before retrying from 0 either way); a search that
//!   already started at the bottom does not retry.
//!
//! Complexity: allocation scans `O(words)` from the hint (`bitmap_words` counts the 64-bit
//! words read or written on the allocation bitmap); free is `O(pages / 64)`.

use super::rbtree::{SpaceError, check_space};
use super::{IovaAllocator, IovaError, IovaStats, LineLog};
use iommulab_base::addr::{CpuId, Iova, Pfn};
use iommulab_base::clock::{ClockRate, Cycles};

/// The largest space a bitmap covers: 2^32 pages (16 TiB of 4 KiB pages, a 512 MiB bitmap).
pub const MAX_BITMAP_PAGES: u64 = 1 << 32;

/// Word index of bit `i`. Bit indices are below [`MAX_BITMAP_PAGES`], so the word index
/// fits any `usize` of 32 bits or more.
#[allow(clippy::cast_possible_truncation)]
#[inline]
const fn word(i: u64) -> usize {
    (i >> 6) as usize
}

/// Mask of bits `[lo % 64, hi)` in the word holding `lo`, where `hi <= (lo/64 + 1) * 64`.
#[inline]
const fn span_mask(lo: u64, hi: u64) -> u64 {
    let a = lo & 63;
    let b = hi - (lo & !63);
    let upper = if b >= 64 { !0 } else { (1u64 << b) - 1 };
    upper & (!0u64 << a)
}

/// One bit per I/O page, next-fit with wrap-around (see the module doc).
///
/// # Examples
///
/// ```
/// use iommulab_base::addr::{CpuId, Pfn};
/// use iommulab_os::iova::{Bitmap, IovaAllocator};
///
/// let mut b = Bitmap::new(Pfn::new(1), Pfn::new(1 << 20)).unwrap();
/// let cpu = CpuId::new(0);
/// let a = b.alloc(cpu, 3, Pfn::new(1 << 20)).unwrap();
/// let c = b.alloc(cpu, 1, Pfn::new(1 << 20)).unwrap();
/// assert_eq!((a.get(), c.get()), (1, 4)); // upward, no alignment
/// assert!(b.free(cpu, a, 2).is_err()); // not the allocation's exact length
/// b.free(cpu, a, 3).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Bitmap {
    /// Bit `i` set: page `start + i` is allocated. The modeled kernel bitmap.
    used: Vec<u64>,
    /// Bit `i` set: page `start + i` is the last page of an allocation (checker's aid).
    ends: Vec<u64>,
    start_pfn: u64,
    end_pfn: u64,
    /// Pages in the space (bits in use in `used`).
    nbits: u64,
    /// Next-fit hint: the bit after the last allocation (`next_bit`), relative to `start`.
    hint: u64,
    stats: IovaStats,
    /// Lines (`word / 8`) touched, for the CPU cache model.
    lines: LineLog,
}

impl Bitmap {
    /// An empty bitmap over `[start, end)`, at most [`MAX_BITMAP_PAGES`] pages.
    pub fn new(start: Pfn<Iova>, end: Pfn<Iova>) -> Result<Self, SpaceError> {
        let (s, e) = (start.get(), end.get());
        check_space(s, e, s.saturating_add(MAX_BITMAP_PAGES))?;
        let nbits = e - s;
        let words = word(nbits.div_ceil(64) * 64);
        let bytes = nbits.div_ceil(64) * 8;
        Ok(Bitmap {
            used: vec![0; words],
            ends: vec![0; words],
            start_pfn: s,
            end_pfn: e,
            nbits,
            hint: 0,
            stats: IovaStats {
                peak_metadata_bytes: bytes,
                ..IovaStats::default()
            },
            lines: LineLog::with_capacity(64),
        })
    }

    /// Logs the 64-byte line of word `w` for the cache model (8 words a line).
    #[inline]
    fn touch_word(&mut self, w: usize) {
        if self.lines.is_on() {
            let line = (w / 8) as u64;
            if self.lines.lines().last() != Some(&line) {
                self.lines.push(line);
            }
        }
    }

    /// Marks `[pfn, pfn + pages)` (clipped to the space) as used, as one range: a reserved
    /// window (`reserve`: not counted as an allocation) or a placed range (`place`: counted;
    /// it must be free and inside the space).
    pub(crate) fn reserve_range(
        &mut self,
        pfn: Pfn<Iova>,
        pages: u64,
        place: bool,
    ) -> Result<(), IovaError> {
        let lo = pfn.get();
        let bad = IovaError::NotFree { pfn: lo, pages };
        let hi = lo
            .checked_add(pages)
            .filter(|_| pages > 0)
            .ok_or(bad.clone())?;
        let (a, b) = (lo.max(self.start_pfn), hi.min(self.end_pfn));
        if place && (a != lo || b != hi) {
            return Err(bad);
        }
        if a >= b {
            return Ok(());
        }
        let (i, j) = (a - self.start_pfn, b - self.start_pfn);
        if place && self.first_used(Pfn::new(a), b - a).is_some() {
            return Err(bad);
        }
        let used = &mut self.used;
        Self::for_words(i, j, |w, m| {
            used[w] |= m;
            true
        });
        if !Self::bit(&self.ends, j - 1) {
            Self::flip_bit(&mut self.ends, j - 1);
        }
        if place {
            self.stats.allocs += 1;
        }
        Ok(())
    }

    /// The first used page in `[pfn, pfn + pages)`, if any (uncounted).
    pub(crate) fn first_used(&self, pfn: Pfn<Iova>, pages: u64) -> Option<Pfn<Iova>> {
        let lo = pfn.get().max(self.start_pfn);
        let hi = pfn.get().saturating_add(pages).min(self.end_pfn);
        (lo..hi)
            .find(|&p| Self::bit(&self.used, p - self.start_pfn))
            .map(Pfn::new)
    }

    /// First page of the space.
    pub fn space_start(&self) -> Pfn<Iova> {
        Pfn::new(self.start_pfn)
    }

    /// Where the next search starts (the page after the last allocation, or past the last
    /// range freed above it).
    pub fn next_fit_hint(&self) -> Pfn<Iova> {
        Pfn::new(self.start_pfn + self.hint)
    }

    /// Allocated pages.
    pub fn used_pages(&self) -> u64 {
        self.used.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Host bytes of both bitmaps (the allocation bitmap plus the checker's end bitmap).
    pub fn host_bytes(&self) -> u64 {
        2 * self.metadata_bytes()
    }

    /// First clear bit in `[from, to)` of `used`.
    fn next_zero(&mut self, from: u64, to: u64) -> Option<u64> {
        let mut i = from;
        while i < to {
            let w = word(i);
            self.stats.bitmap_words += 1;
            self.touch_word(w);
            let bits = !self.used[w] & (!0u64 << (i & 63));
            if bits != 0 {
                let z = (i & !63) + u64::from(bits.trailing_zeros());
                return (z < to).then_some(z);
            }
            i = (i & !63) + 64;
        }
        None
    }

    /// First set bit in `[from, to)` of `used`, or `to`.
    fn next_one(&mut self, from: u64, to: u64) -> u64 {
        let mut i = from;
        while i < to {
            let w = word(i);
            self.stats.bitmap_words += 1;
            self.touch_word(w);
            let bits = self.used[w] & (!0u64 << (i & 63));
            if bits != 0 {
                return ((i & !63) + u64::from(bits.trailing_zeros())).min(to);
            }
            i = (i & !63) + 64;
        }
        to
    }

    /// Lowest start of `n` clear bits inside `[from, to)` (`bitmap_find_next_zero_area`).
    fn find_zero_run(&mut self, from: u64, to: u64, n: u64) -> Option<u64> {
        if n == 1 {
            return self.next_zero(from, to);
        }
        let mut pos = from;
        while pos.checked_add(n)? <= to {
            let z = self.next_zero(pos, to)?;
            let stop = z.checked_add(n)?;
            if stop > to {
                return None;
            }
            let o = self.next_one(z, stop);
            if o >= stop {
                return Some(z);
            }
            pos = o + 1;
        }
        None
    }

    /// Applies `f(word, mask)` to every word overlapping bits `[lo, hi)`.
    #[inline]
    fn for_words(lo: u64, hi: u64, mut f: impl FnMut(usize, u64) -> bool) -> bool {
        let mut i = lo;
        while i < hi {
            let next = ((i & !63) + 64).min(hi);
            if !f(word(i), span_mask(i, next)) {
                return false;
            }
            i = next;
        }
        true
    }

    fn bit(map: &[u64], i: u64) -> bool {
        map[word(i)] >> (i & 63) & 1 == 1
    }

    fn flip_bit(map: &mut [u64], i: u64) {
        map[word(i)] ^= 1 << (i & 63);
    }

    /// Whether `[i, i + n)` is exactly one live allocation.
    fn is_allocation(&self, i: u64, n: u64) -> bool {
        let used = &self.used;
        let ends = &self.ends;
        let prev_ok = i == 0 || !Self::bit(used, i - 1) || Self::bit(ends, i - 1);
        if (i & 63) + n <= 64 {
            // The common case: the range sits in one word.
            let w = word(i);
            let m = span_mask(i, i + n);
            let last = 1u64 << ((i + n - 1) & 63);
            return used[w] & m == m && ends[w] & m == last && prev_ok;
        }
        Self::for_words(i, i + n, |w, m| used[w] & m == m)
            && Self::bit(ends, i + n - 1)
            && Self::for_words(i, i + n - 1, |w, m| ends[w] & m == 0)
            && prev_ok
    }
}

impl IovaAllocator for Bitmap {
    fn alloc(&mut self, _cpu: CpuId, pages: u64, limit: Pfn<Iova>) -> Result<Pfn<Iova>, IovaError> {
        if pages == 0 || pages > self.nbits {
            return Err(IovaError::BadRequest {
                pages,
                space: self.nbits,
            });
        }
        self.stats.lock_acquisitions += 1;
        let lim = limit.get().min(self.end_pfn).saturating_sub(self.start_pfn);
        let mut found = if self.hint < lim {
            self.find_zero_run(self.hint, lim, pages)
        } else {
            None
        };
        if found.is_none() && self.hint > 0 {
            // Wrap: the per-lap flush policy invalidates here (S0.6, S2.4).
            self.stats.wraps += 1;
            found = self.find_zero_run(0, lim, pages);
        }
        let Some(i) = found else {
            self.stats.failures += 1;
            return Err(IovaError::Exhausted {
                pages,
                limit: limit.get(),
            });
        };
        let used = &mut self.used;
        let mut words = 0;
        Self::for_words(i, i + pages, |w, m| {
            used[w] |= m;
            words += 1;
            true
        });
        self.stats.bitmap_words += words;
        self.touch_word(word(i));
        Self::flip_bit(&mut self.ends, i + pages - 1);
        self.hint = i + pages;
        self.stats.allocs += 1;
        Ok(Pfn::new(self.start_pfn + i))
    }

    fn free(&mut self, _cpu: CpuId, pfn: Pfn<Iova>, pages: u64) -> Result<(), IovaError> {
        self.stats.lock_acquisitions += 1;
        let p = pfn.get();
        let valid = pages > 0
            && p >= self.start_pfn
            && p.checked_add(pages).is_some_and(|e| e <= self.end_pfn)
            && self.is_allocation(p - self.start_pfn, pages);
        if !valid {
            return Err(IovaError::NotAllocated { pfn: p, pages });
        }
        let i = p - self.start_pfn;
        let used = &mut self.used;
        let mut words = 0;
        Self::for_words(i, i + pages, |w, m| {
            used[w] &= !m;
            words += 1;
            true
        });
        self.stats.bitmap_words += words;
        self.touch_word(word(i));
        Self::flip_bit(&mut self.ends, i + pages - 1);
        // GART's rule: nothing freed in this lap is reused before the wrap.
        if i + pages > self.hint {
            self.hint = i + pages;
        }
        self.stats.frees += 1;
        Ok(())
    }

    fn on_tick(&mut self, _now: Cycles, _clock: ClockRate) {}

    fn stats(&self) -> IovaStats {
        self.stats
    }

    fn line_log(&self) -> Option<&LineLog> {
        Some(&self.lines)
    }

    fn line_log_mut(&mut self) -> Option<&mut LineLog> {
        Some(&mut self.lines)
    }

    fn metadata_bytes(&self) -> u64 {
        self.nbits.div_ceil(64) * 8
    }

    fn space_end(&self) -> Pfn<Iova> {
        Pfn::new(self.end_pfn)
    }

    fn name(&self) -> &'static str {
        "bitmap"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPU: CpuId = CpuId::new(0);

    fn bitmap(start: u64, end: u64) -> Bitmap {
        Bitmap::new(Pfn::new(start), Pfn::new(end)).unwrap()
    }

    fn alloc(b: &mut Bitmap, pages: u64, limit: u64) -> Result<u64, IovaError> {
        b.alloc(CPU, pages, Pfn::new(limit)).map(Pfn::get)
    }

    fn free(b: &mut Bitmap, pfn: u64, pages: u64) -> Result<(), IovaError> {
        b.free(CPU, Pfn::new(pfn), pages)
    }

    /// S0.5: a 4 GiB space of 4 KiB pages is a 2^20-bit, 128 KiB bitmap, always resident.
    #[test]
    fn four_gib_space_is_a_128_kib_bitmap() {
        let b = bitmap(1, (1 << 20) + 1);
        assert_eq!(b.metadata_bytes(), 128 * 1024);
        assert_eq!(b.stats().peak_metadata_bytes, 128 * 1024);
        assert_eq!(b.host_bytes(), 256 * 1024);
    }

    /// Next-fit upward from the last allocation, no alignment.
    ///
    /// ```text
    /// pfn  1  2  3  4  5  6  7 ... | 11
    ///     [a  a  a][b][c  c]  hint |
    /// ```
    #[test]
    fn allocates_upward_next_fit_without_alignment() {
        let mut b = bitmap(1, 11);
        assert_eq!(alloc(&mut b, 3, 11), Ok(1));
        assert_eq!(alloc(&mut b, 1, 11), Ok(4));
        assert_eq!(alloc(&mut b, 2, 11), Ok(5));
        assert_eq!(b.next_fit_hint().get(), 7);
        assert_eq!(b.used_pages(), 6);
    }

    /// S0.6/S2.4: a range freed below the hint is not reused until the search wraps, and the
    /// wrap is counted.
    ///
    /// ```text
    /// pfn  1  2  3  4 | 5        free a; alloc b: hint 2..5; alloc c: wraps → reuses 1
    ///     [a][b][c][d]|
    /// ```
    #[test]
    fn freed_range_waits_for_the_wrap() {
        let mut b = bitmap(1, 5);
        let a = alloc(&mut b, 1, 5).unwrap();
        free(&mut b, a, 1).unwrap();
        assert_eq!(alloc(&mut b, 1, 5), Ok(2));
        assert_eq!(alloc(&mut b, 1, 5), Ok(3));
        assert_eq!(alloc(&mut b, 1, 5), Ok(4));
        assert_eq!(b.stats().wraps, 0);
        assert_eq!(alloc(&mut b, 1, 5), Ok(1));
        assert_eq!(b.stats().wraps, 1);
        assert!(matches!(
            alloc(&mut b, 1, 5),
            Err(IovaError::Exhausted { .. })
        ));
        assert_eq!(b.stats().wraps, 2);
    }

    /// GART's rule: a range freed at or above the hint moves the hint past it, so it is not
    /// reused in this lap either (Calgary would have handed it straight back).
    ///
    /// ```text
    /// pfn  1  2  3  4  5  6 | 7
    ///     [a  a  a  a][c  c]|   a, c allocated; hint = 7
    ///     [d  d]      [c  c]|   free a; d wraps to the bottom; hint = 3
    ///     [d  d]  .  .  .  .|   free c (above the hint): hint = 7, so the next alloc wraps
    /// ```
    #[test]
    fn free_above_the_hint_moves_the_hint_past_it() {
        let mut b = bitmap(1, 7);
        let a = alloc(&mut b, 4, 7).unwrap(); // [1,5)
        let c = alloc(&mut b, 2, 7).unwrap(); // [5,7), hint = 6 (end)
        free(&mut b, a, 4).unwrap();
        // Wrap to reuse the bottom: hint moves to 3.
        assert_eq!(alloc(&mut b, 2, 7), Ok(1));
        assert_eq!(b.stats().wraps, 1);
        assert_eq!(b.next_fit_hint().get(), 3);
        free(&mut b, c, 2).unwrap(); // [5,7) at or above the hint
        assert_eq!(b.next_fit_hint().get(), 7);
        // 3..5 and 5..7 are free, but the next allocation wraps rather than reuse [5,7) now.
        assert_eq!(alloc(&mut b, 1, 7), Ok(3));
        assert_eq!(b.stats().wraps, 2);
    }

    /// Frees must be exactly one live allocation; the end bitmap tells adjacent ones apart.
    ///
    /// ```text
    /// pfn  1  2  3  4  5 | 6
    ///     [a  a][b  b  b]|
    /// ```
    #[test]
    fn rejects_frees_that_are_not_one_allocation() {
        let mut b = bitmap(1, 6);
        assert_eq!(alloc(&mut b, 2, 6), Ok(1));
        assert_eq!(alloc(&mut b, 3, 6), Ok(3));
        let before = b.clone();
        for (pfn, pages) in [
            (1, 1),
            (1, 5),
            (2, 2),
            (3, 2),
            (4, 2),
            (1, 3),
            (0, 1),
            (5, 9),
        ] {
            assert_eq!(
                free(&mut b, pfn, pages),
                Err(IovaError::NotAllocated { pfn, pages }),
                "{pfn} {pages}"
            );
        }
        assert_eq!(b.used, before.used);
        assert_eq!(b.ends, before.ends);
        free(&mut b, 3, 3).unwrap();
        free(&mut b, 1, 2).unwrap();
        assert!(free(&mut b, 1, 2).is_err());
        assert_eq!(b.used_pages(), 0);
    }

    /// Runs cross 64-bit word boundaries and the limit is respected.
    ///
    /// ```text
    /// bit  0 ....... 60 ... 63 | 64 ... 69 ... | 200
    ///      [  a: 60 pages  ][ b: 10 pages   ]
    /// ```
    #[test]
    fn runs_cross_word_boundaries() {
        let mut b = bitmap(1, 201);
        assert_eq!(alloc(&mut b, 60, 201), Ok(1));
        assert_eq!(alloc(&mut b, 10, 201), Ok(61));
        assert_eq!(alloc(&mut b, 200, 201).ok(), None);
        free(&mut b, 61, 10).unwrap();
        free(&mut b, 1, 60).unwrap();
        // A limit below the hint wraps to the bottom.
        assert_eq!(alloc(&mut b, 70, 71), Ok(1));
        assert_eq!(b.stats().wraps, 2);
        assert!(b.stats().bitmap_words > 0);
    }
}
