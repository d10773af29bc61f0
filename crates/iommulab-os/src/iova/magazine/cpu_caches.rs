//! One magazine (`struct iova_magazine`) and one CPU's pair of them per size bin (`struct
//! iova_cpu_rcache`), shared by [`super::Magazine`] and [`crate::iova::SharedMagazine`].

use std::mem;

/// One magazine: up to `mag_size` pfns of one size class (`struct iova_magazine`). The
/// `Vec` is created with room for `mag_size` and never grows past it.
#[derive(Debug, Clone)]
pub(crate) struct Mag {
    pub(super) pfns: Vec<u64>,
}

impl Mag {
    pub(super) fn new(cap: usize) -> Self {
        Mag {
            pfns: Vec::with_capacity(cap),
        }
    }

    /// The pfn `iova_magazine_pop` would take, without taking it.
    #[inline]
    pub(super) fn peek(&self, max_pfn: u64) -> Option<u64> {
        self.pfns.iter().rev().copied().find(|&p| p <= max_pfn)
    }

    /// `iova_magazine_pop`: the topmost pfn `<= max_pfn`, swap-removed.
    #[inline]
    fn pop(&mut self, max_pfn: u64) -> Option<u64> {
        if let Some(p) = self.pop_top(max_pfn) {
            return Some(p);
        }
        let i = self.pfns.iter().rposition(|&p| p <= max_pfn)?;
        Some(self.pfns.swap_remove(i))
    }

    /// The top pfn when it is `<= max_pfn` (`iova_magazine_pop`'s first look); `None`,
    /// changing nothing, otherwise.
    #[inline]
    fn pop_top(&mut self, max_pfn: u64) -> Option<u64> {
        if self.pfns.last().is_some_and(|&top| top <= max_pfn) {
            self.pfns.pop()
        } else {
            None
        }
    }

    /// Pushes `pfn` if the magazine holds fewer than `mag_size`; `false`, changing nothing,
    /// when it is full.
    #[inline]
    fn push(&mut self, pfn: u64, mag_size: usize) -> bool {
        if self.pfns.len() < mag_size {
            self.pfns.push(pfn);
            true
        } else {
            false
        }
    }
}

/// What a CPU's own magazines could do for an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LocalGet {
    /// A pfn of the bin's size.
    Hit(u64),
    /// `loaded` held pfns but none below the limit: go to the backing allocator.
    Miss,
    /// Both magazines empty: try the depot.
    Empty,
}

/// One CPU's `loaded` and `prev` magazines for every bin (`struct iova_cpu_rcache`),
/// shared by [`super::Magazine`] and [`crate::iova::SharedMagazine`].
#[derive(Debug, Clone)]
pub(crate) struct CpuCaches {
    /// Per bin, `[loaded, prev]` inline: one indirection from the CPU to a magazine.
    pub(super) bins: Vec<[Mag; 2]>,
}

impl CpuCaches {
    pub(crate) fn new(bins: usize, mag_size: usize) -> Self {
        CpuCaches {
            bins: (0..bins)
                .map(|_| [Mag::new(mag_size), Mag::new(mag_size)])
                .collect(),
        }
    }

    /// `__iova_rcache_get` before the depot: `loaded`, else swap in a non-empty `prev`.
    #[inline]
    pub(crate) fn get(&mut self, bin: usize, max_pfn: u64) -> LocalGet {
        let pair = &mut self.bins[bin];
        if pair[0].pfns.is_empty() {
            if pair[1].pfns.is_empty() {
                return LocalGet::Empty;
            }
            pair.swap(0, 1);
        }
        match pair[0].pop(max_pfn) {
            Some(p) => LocalGet::Hit(p),
            None => LocalGet::Miss,
        }
    }

    /// The top pfn of `loaded` when it is `<= max_pfn`; `None`, changing nothing, otherwise.
    #[inline]
    pub(crate) fn pop_loaded_top(&mut self, bin: usize, max_pfn: u64) -> Option<u64> {
        self.bins[bin][0].pop_top(max_pfn)
    }

    /// Pushes `pfn` onto `loaded` if it has room ([`CpuCaches::put`] without the swap with
    /// `prev`); `false`, changing nothing, when it is full.
    #[inline]
    pub(crate) fn push_loaded(&mut self, bin: usize, pfn: u64, mag_size: usize) -> bool {
        self.bins[bin][0].push(pfn, mag_size)
    }

    /// Installs a full magazine from the depot as `loaded` and pops from it; returns the
    /// old (empty) `loaded` for recycling.
    pub(crate) fn install(&mut self, bin: usize, full: Mag, max_pfn: u64) -> (Mag, Option<u64>) {
        let loaded = &mut self.bins[bin][0];
        let empty = mem::replace(loaded, full);
        let got = loaded.pop(max_pfn);
        (empty, got)
    }

    /// `__iova_rcache_insert` before the depot: push to `loaded`, else swap with a `prev`
    /// that has room. `false` when both are full.
    #[inline]
    pub(crate) fn put(&mut self, bin: usize, pfn: u64, mag_size: usize) -> bool {
        let pair = &mut self.bins[bin];
        if pair[0].push(pfn, mag_size) {
            return true;
        }
        if pair[1].pfns.len() >= mag_size {
            return false;
        }
        pair.swap(0, 1);
        pair[0].pfns.push(pfn);
        true
    }

    /// Both magazines full: `empty` becomes `loaded` and takes `pfn`; returns the full one.
    pub(crate) fn exchange(&mut self, bin: usize, empty: Mag, pfn: u64) -> Mag {
        let loaded = &mut self.bins[bin][0];
        let full = mem::replace(loaded, empty);
        loaded.pfns.push(pfn);
        full
    }

    /// Empties every magazine (`free_cpu_cached_iovas`), calling `f(bin, pfn)` per range.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(usize, u64)) {
        for (bin, pair) in self.bins.iter_mut().enumerate() {
            for mag in pair {
                for p in mag.pfns.drain(..) {
                    f(bin, p);
                }
            }
        }
    }

    /// Ranges cached on this CPU.
    pub(crate) fn cached(&self) -> usize {
        self.bins.iter().flatten().map(|m| m.pfns.len()).sum()
    }
}
