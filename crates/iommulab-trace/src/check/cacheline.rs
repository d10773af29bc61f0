//! Linux's active-cacheline tracking (`kernel/dma/debug.c`, `active_cacheline_*`): the first
//! cacheline of every device-writable mapping (not `DMA_TO_DEVICE`) is inserted into a table
//! keyed by its physical cacheline number; inserting one already there is `-EEXIST`, counted
//! as an overlap in a 3-bit tag (at most 7; an eighth overlap warns and leaves the count at
//! 7), and reported unless the map passed `DMA_ATTR_SKIP_CPU_SYNC`. Unmapping decrements the
//! count, removing the line once it goes below 0.

use super::At;
use iommulab_base::hash::FxHashMap;

/// `L1_CACHE_SHIFT` of x86-64 (64-byte lines), which the recorded traces come from.
pub(super) const L1_CACHE_SHIFT: u32 = 6;

/// `ACTIVE_CACHELINE_MAX_OVERLAP`: `(1 << RADIX_TREE_MAX_TAGS) - 1`, three tags.
pub(super) const MAX_OVERLAP: u8 = 7;

/// What inserting a cacheline did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Insert {
    /// The line was not active.
    New,
    /// `-EEXIST`: the line was active (its first mapping's site), overlap count raised.
    Exists {
        /// Where the mapping that made the line active was.
        first: At,
        /// Whether the 3-bit counter overflowed (Linux's `WARN_ONCE`).
        overflow: bool,
    },
}

/// The active cachelines: line number → (overlap count, the site that inserted it).
#[derive(Debug, Default)]
pub(super) struct ActiveCachelines {
    lines: FxHashMap<u64, (u8, At)>,
}

impl ActiveCachelines {
    /// The cacheline number of physical address `phys`.
    pub(super) fn number(phys: u64) -> u64 {
        phys >> L1_CACHE_SHIFT
    }

    /// `active_cacheline_insert`.
    pub(super) fn insert(&mut self, cln: u64, at: At) -> Insert {
        match self.lines.get_mut(&cln) {
            None => {
                self.lines.insert(cln, (0, at));
                Insert::New
            }
            Some((overlap, first)) => {
                // active_cacheline_set_overlap refuses a count above the maximum, so the tags
                // keep 7 and the next removals run it down early, as in the kernel.
                let overflow = *overlap >= MAX_OVERLAP;
                if !overflow {
                    *overlap += 1;
                }
                Insert::Exists {
                    first: *first,
                    overflow,
                }
            }
        }
    }

    /// `active_cacheline_remove`.
    pub(super) fn remove(&mut self, cln: u64) {
        if let Some((overlap, _)) = self.lines.get_mut(&cln) {
            if *overlap == 0 {
                self.lines.remove(&cln);
            } else {
                *overlap -= 1;
            }
        }
    }

    /// Active lines now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lines.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_counts_like_linux() {
        let mut c = ActiveCachelines::default();
        let at = At::default();
        assert_eq!(c.insert(5, at), Insert::New);
        for _ in 0..7 {
            assert!(matches!(
                c.insert(5, at),
                Insert::Exists {
                    overflow: false,
                    ..
                }
            ));
        }
        assert!(matches!(
            c.insert(5, at),
            Insert::Exists { overflow: true, .. }
        ));
        // Nine mappings, but the counter stopped at 7: the eighth removal frees the line.
        for _ in 0..8 {
            assert_eq!(c.len(), 1);
            c.remove(5);
        }
        assert_eq!(c.len(), 0);
        c.remove(5);
        assert_eq!(ActiveCachelines::number(0x1040), 0x41);
    }
}
