//! IOSUP (S3.4): per-level pools of freed page-table pages (PGD, PMD, PTE). A page-table
//! page freed into its pool keeps its Xen type (and its pin), so the next page table of
//! that level takes it without a type change: no I/O unmap, no IOTLB invalidation, no
//! validation. With a [`ShrinkConfig`], a level's pool shrinks when both the proportion
//! pool / in use and the total pool + in use exceed its thresholds: `num_in_pool −
//! num_in_use` pages go back to the buddy allocator (S3.4's Δnum_to_free); without one it
//! keeps every page (S3.5 adds the freeing to the dynamic group only). The pool can be on
//! from boot or switched on at run time.

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{Gpa, Pfn};

use super::page_type::PageType;

/// The page-table levels of a PAE guest (Linux 3.2 i386 PAE under Xen, S3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PtLevel {
    /// The page global directory: Xen type L3 under PAE.
    Pgd,
    /// A page middle directory: L2.
    Pmd,
    /// A page of PTEs: L1.
    Pte,
}

impl PtLevel {
    /// Every level, top first.
    pub const ALL: [PtLevel; 3] = [PtLevel::Pgd, PtLevel::Pmd, PtLevel::Pte];

    /// The Xen page type of a table of this level.
    pub const fn page_type(self) -> PageType {
        match self {
            PtLevel::Pgd => PageType::L3,
            PtLevel::Pmd => PageType::L2,
            PtLevel::Pte => PageType::L1,
        }
    }

    /// Index into per-level arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The name in tables (`pgd`, `pmd`, `pte`).
    pub const fn name(self) -> &'static str {
        match self {
            PtLevel::Pgd => "pgd",
            PtLevel::Pmd => "pmd",
            PtLevel::Pte => "pte",
        }
    }
}

/// When a level's pool gives pages back (S3.4). The paper tuned both by trial ("after
/// several trials by slightly modifying default values"), publishing neither: these
/// defaults are ours.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShrinkConfig {
    /// Shrink when `in_pool / in_use` exceeds this.
    pub proportion: f64,
    /// ... and `in_pool + in_use` exceeds this many pages.
    pub total: u64,
}

impl Default for ShrinkConfig {
    fn default() -> Self {
        Self {
            proportion: 1.0,
            total: 64,
        }
    }
}

/// The three pools.
#[derive(Clone, Debug, Default)]
pub struct PtPool {
    pools: [Vec<Pfn<Gpa>>; 3],
    in_use: [u64; 3],
    enabled: bool,
    shrink: Option<ShrinkConfig>,
    peak: [u64; 3],
    max_proportion: [f64; 3],
}

impl PtPool {
    /// Pools that are off until [`PtPool::enable`]; `shrink`: when they give pages back
    /// (`None`: never).
    pub fn new(shrink: Option<ShrinkConfig>) -> Self {
        Self {
            shrink,
            ..Self::default()
        }
    }

    /// Switches the pools on (at boot, or at run time: pages in use stay where they are
    /// and join a pool when they are freed).
    pub fn enable(&mut self) {
        self.enabled = true;
    }

    /// Whether the pools are on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// A page for a new table of `level` from its pool (still typed), if the pools are on
    /// and it has one. The caller counts the page in use either way ([`PtPool::in_use`]).
    pub fn take(&mut self, level: PtLevel) -> Option<Pfn<Gpa>> {
        let i = level.index();
        self.in_use[i] += 1;
        if !self.enabled {
            return None;
        }
        self.pools[i].pop()
    }

    /// A table of `level` at `frame` is freed: kept in its pool (`true`, still typed) when
    /// the pools are on, else the caller returns it to the buddy allocator (`false`).
    pub fn give(&mut self, level: PtLevel, frame: Pfn<Gpa>) -> bool {
        let i = level.index();
        self.in_use[i] = self.in_use[i].saturating_sub(1);
        if !self.enabled {
            return false;
        }
        self.pools[i].push(frame);
        let pool = self.pools[i].len() as u64;
        self.peak[i] = self.peak[i].max(pool);
        // What the shrink rule compares with its proportion, kept so a page can say why it
        // did or did not fire (frees that leave no table of the level in use are skipped).
        if self.in_use[i] > 0 {
            let p = pool as f64 / self.in_use[i] as f64;
            self.max_proportion[i] = self.max_proportion[i].max(p);
        }
        true
    }

    /// The pages `level`'s pool gives back now, if it has a [`ShrinkConfig`] and both
    /// thresholds are exceeded (`num_in_pool − num_in_use` of them, S3.4).
    pub fn shrink(&mut self, level: PtLevel, out: &mut Vec<Pfn<Gpa>>) {
        let Some(shrink) = self.shrink else {
            return;
        };
        let i = level.index();
        let pool = self.pools[i].len() as u64;
        let used = self.in_use[i];
        if pool as f64 > shrink.proportion * used as f64
            && pool + used > shrink.total
            && pool > used
        {
            let n = usize::try_from(pool - used).unwrap_or(usize::MAX);
            let keep = self.pools[i].len().saturating_sub(n);
            out.extend(self.pools[i].drain(keep..));
        }
    }

    /// Pages in `level`'s pool now.
    pub fn pooled(&self, level: PtLevel) -> u64 {
        self.pools[level.index()].len() as u64
    }

    /// Tables of `level` in use now.
    pub fn in_use(&self, level: PtLevel) -> u64 {
        self.in_use[level.index()]
    }

    /// The most pages `level`'s pool held at once.
    pub fn peak(&self, level: PtLevel) -> u64 {
        self.peak[level.index()]
    }

    /// The largest `in_pool / in_use` of `level` right after a page joined its pool (what
    /// the shrink rule compares with [`ShrinkConfig::proportion`]); 0 before any.
    pub fn max_proportion(&self, level: PtLevel) -> f64 {
        self.max_proportion[level.index()]
    }

    /// Every pooled page, with its level (invariant checks).
    pub fn pooled_pages(&self) -> impl Iterator<Item = (PtLevel, Pfn<Gpa>)> + '_ {
        PtLevel::ALL
            .into_iter()
            .flat_map(move |l| self.pools[l.index()].iter().map(move |&f| (l, f)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_keeps_pages_only_when_on_and_shrinks_past_both_thresholds() {
        let mut p = PtPool::new(Some(ShrinkConfig {
            proportion: 1.0,
            total: 4,
        }));
        assert_eq!(p.take(PtLevel::Pte), None);
        assert!(!p.give(PtLevel::Pte, Pfn::new(7)));
        p.enable();
        for f in 0..6 {
            assert_eq!(p.take(PtLevel::Pte), None);
            let _ = f;
        }
        for f in 10..16 {
            assert!(p.give(PtLevel::Pte, Pfn::new(f)));
        }
        assert_eq!((p.pooled(PtLevel::Pte), p.in_use(PtLevel::Pte)), (6, 0));
        assert_eq!(p.take(PtLevel::Pte), Some(Pfn::new(15)));
        // 5 pooled, 1 in use: 5 > 1.0 × 1 and 6 > 4 → give back 5 − 1 = 4.
        let mut out = Vec::new();
        p.shrink(PtLevel::Pte, &mut out);
        assert_eq!(out.len(), 4);
        assert_eq!(p.pooled(PtLevel::Pte), 1);
        out.clear();
        p.shrink(PtLevel::Pte, &mut out);
        assert!(out.is_empty(), "1 pooled, 1 in use: below the proportion");
        assert_eq!(p.peak(PtLevel::Pte), 6);
        // 5 pooled against 1 in use after the fifth give (the sixth left none in use: skipped).
        assert_eq!(p.max_proportion(PtLevel::Pte), 5.0);
    }

    /// Without a shrink configuration (S3.5's pre-enabled group) the pool keeps every page.
    #[test]
    fn a_pool_without_shrink_config_keeps_every_page() {
        let mut p = PtPool::new(None);
        p.enable();
        for _ in 0..6 {
            assert_eq!(p.take(PtLevel::Pte), None);
        }
        for f in 10..16 {
            assert!(p.give(PtLevel::Pte, Pfn::new(f)));
        }
        assert_eq!(p.take(PtLevel::Pte), Some(Pfn::new(15)));
        let mut out = Vec::new();
        p.shrink(PtLevel::Pte, &mut out);
        assert!(out.is_empty());
        assert_eq!(p.pooled(PtLevel::Pte), 5);
    }
}
