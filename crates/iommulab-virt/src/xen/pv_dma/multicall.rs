//! Xen multicalls (S2.5): one hypercall that carries several logical hypercalls. The DMA
//! layer's map and unmap requests reach the hypervisor as multicalls of one logical call
//! per I/O page entry; [`BatchSizes`] is the distribution the paper profiled ("over 99%" of
//! requests were for a single entry, so multicalls were pointless).

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{DomainId, Hpa, Iova, Perm, Pfn};

/// One logical call of a multicall: write or clear one translation entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Map I/O page `iova` of `domain` to machine frame `frame`.
    Map {
        /// The I/O address space (TCE table).
        domain: DomainId,
        /// The I/O page.
        iova: Pfn<Iova>,
        /// The machine frame, already checked to belong to the domain.
        frame: Pfn<Hpa>,
        /// Read/write permission.
        perm: Perm,
    },
    /// Clear I/O page `iova` of `domain`.
    Unmap {
        /// The I/O address space.
        domain: DomainId,
        /// The I/O page.
        iova: Pfn<Iova>,
    },
}

/// Largest multicall size counted exactly; larger ones share the last bucket.
pub const EXACT_SIZES: usize = 64;

/// How many entries each multicall carried: exact counts for 1..=[`EXACT_SIZES`] and one
/// bucket for more. A fixed array: recording never allocates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSizes {
    counts: [u64; EXACT_SIZES + 1],
    entries: u64,
}

impl Default for BatchSizes {
    fn default() -> Self {
        Self {
            counts: [0; EXACT_SIZES + 1],
            entries: 0,
        }
    }
}

/// One bucket of [`BatchSizes`], for tables and JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeBucket {
    /// Entries per multicall (the last bucket: at least this many).
    pub entries: u64,
    /// Whether this is the open-ended last bucket.
    pub or_more: bool,
    /// Multicalls of this size.
    pub multicalls: u64,
}

impl BatchSizes {
    /// Records one multicall of `n ≥ 1` entries.
    #[inline]
    pub fn record(&mut self, n: usize) {
        self.counts[n.clamp(1, EXACT_SIZES + 1) - 1] += 1;
        self.entries += n as u64;
    }

    /// Multicalls recorded.
    pub fn multicalls(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Entries over all multicalls.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Fraction of multicalls that carried one entry (0 when there were none).
    pub fn single_entry_fraction(&self) -> f64 {
        let n = self.multicalls();
        if n == 0 {
            return 0.0;
        }
        #[expect(clippy::cast_precision_loss, reason = "counts below 2^53")]
        let f = self.counts[0] as f64 / n as f64;
        f
    }

    /// Mean entries per multicall (0 when there were none).
    pub fn mean(&self) -> f64 {
        let n = self.multicalls();
        if n == 0 {
            return 0.0;
        }
        #[expect(clippy::cast_precision_loss, reason = "counts below 2^53")]
        let m = self.entries as f64 / n as f64;
        m
    }

    /// The non-empty buckets, smallest first.
    pub fn buckets(&self) -> Vec<SizeBucket> {
        self.counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(i, &c)| SizeBucket {
                entries: i as u64 + 1,
                or_more: i == EXACT_SIZES,
                multicalls: c,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_counted_exactly_up_to_the_last_bucket() {
        let mut s = BatchSizes::default();
        for n in [1, 1, 1, 2, 64, 65, 500] {
            s.record(n);
        }
        assert_eq!(s.multicalls(), 7);
        assert_eq!(s.entries(), 1 + 1 + 1 + 2 + 64 + 65 + 500);
        assert!((s.single_entry_fraction() - 3.0 / 7.0).abs() < 1e-12);
        let b = s.buckets();
        assert_eq!(
            b.iter()
                .map(|b| (b.entries, b.or_more, b.multicalls))
                .collect::<Vec<_>>(),
            vec![(1, false, 3), (2, false, 1), (64, false, 1), (65, true, 2)]
        );
    }
}
