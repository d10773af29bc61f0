//! [`NaiveIovaSpace`]: a deliberately slow model of an IOVA space (S0.5), checked
//! against the rbtree, bitmap and magazine allocators by `tests/iova_props.rs`.
//!
//! It keeps a `BTreeSet` of used pages and a `BTreeMap` of live ranges and answers every
//! question by brute force: overlap, exact liveness, and whether any range of a size (aligned
//! or not) would fit below a limit. No deviations to speak of: it models nothing but the
//! set of used pages. Complexity: `O(pages)` per insert/remove, `O(space × pages)` per fit
//! query; fine for spaces of a few thousand pages.

use std::collections::{BTreeMap, BTreeSet};

/// The used pages and live ranges of `[start, end)`, by brute force.
///
/// # Examples
///
/// ```
/// use iommulab::testing::naive_iova::NaiveIovaSpace;
///
/// let mut s = NaiveIovaSpace::new(1, 9);
/// s.insert(4, 2).unwrap();
/// assert!(s.insert(5, 1).is_err()); // overlaps
/// assert!(!s.fits(4, 9, true)); // 4-aligned starts: 4 is used, 8 runs past the end
/// assert!(s.fits(3, 9, false)); // [1, 4)
/// assert!(s.remove(4, 2));
/// assert!(!s.remove(4, 2));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NaiveIovaSpace {
    start: u64,
    end: u64,
    used: BTreeSet<u64>,
    ranges: BTreeMap<u64, u64>,
}

impl NaiveIovaSpace {
    /// An empty space `[start, end)`.
    pub fn new(start: u64, end: u64) -> Self {
        NaiveIovaSpace {
            start,
            end,
            used: BTreeSet::new(),
            ranges: BTreeMap::new(),
        }
    }

    /// Records `[pfn, pfn + pages)` as allocated; an error says why it cannot be (outside
    /// the space, empty, or overlapping a live range). On error nothing changes.
    pub fn insert(&mut self, pfn: u64, pages: u64) -> Result<(), String> {
        let end = pfn.checked_add(pages).ok_or("overflow")?;
        if pages == 0 || pfn < self.start || end > self.end {
            return Err(format!(
                "[{pfn:#x}, {end:#x}) is empty or outside [{:#x}, {:#x})",
                self.start, self.end
            ));
        }
        if let Some(p) = (pfn..end).find(|p| self.used.contains(p)) {
            return Err(format!("[{pfn:#x}, {end:#x}) overlaps used page {p:#x}"));
        }
        self.used.extend(pfn..end);
        self.ranges.insert(pfn, pages);
        Ok(())
    }

    /// Removes the live range `[pfn, pfn + pages)` if it is exactly one; `false` otherwise.
    pub fn remove(&mut self, pfn: u64, pages: u64) -> bool {
        if !self.is_live(pfn, pages) {
            return false;
        }
        self.ranges.remove(&pfn);
        for p in pfn..pfn + pages {
            self.used.remove(&p);
        }
        true
    }

    /// Whether `[pfn, pfn + pages)` is exactly one live range.
    pub fn is_live(&self, pfn: u64, pages: u64) -> bool {
        self.ranges.get(&pfn) == Some(&pages)
    }

    /// Whether any page of `[pfn, pfn + pages)` is used.
    pub fn overlaps(&self, pfn: u64, pages: u64) -> bool {
        self.used
            .range(pfn..pfn.saturating_add(pages))
            .next()
            .is_some()
    }

    /// Whether `pages` free pages fit in `[start, limit)`, starting at a multiple of
    /// `pages.next_power_of_two()` when `aligned`.
    pub fn fits(&self, pages: u64, limit: u64, aligned: bool) -> bool {
        let limit = limit.min(self.end);
        let step = if aligned {
            pages.next_power_of_two()
        } else {
            1
        };
        let first = self.start.div_ceil(step) * step;
        (first..)
            .step_by(usize::try_from(step).unwrap_or(usize::MAX))
            .take_while(|&p| p + pages <= limit)
            .any(|p| !self.overlaps(p, pages))
    }

    /// Live ranges.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether nothing is allocated.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Used pages.
    pub fn used_pages(&self) -> usize {
        self.used.len()
    }

    /// Live ranges in address order, as `(first page, pages)`.
    pub fn ranges(&self) -> Vec<(u64, u64)> {
        self.ranges.iter().map(|(&p, &n)| (p, n)).collect()
    }
}
