//! IOTLB invalidation requests and the two VT-d invalidation interfaces.
//!
//! The IOTLB caches translations, so clearing a PTE is not enough: software must invalidate
//! the cached copy before the page may be reused (S0.3). A change from non-present to present
//! needs no invalidation, only a write-buffer flush on hardware that reports `CAP.RWBF`
//! (S1.10). VT-d offers three granularities, global, domain-selective and page-selective, and
//! the page-selective one can invalidate part of a domain: a naturally aligned block of
//! `2^order` pages given by the address mask `IVA.AM` (S0.3, S1.10, S3.2).
//!
//! Requests reach the hardware through one of two interfaces (S1.10, S3.2):
//!
//! | interface | per request | per batch |
//! |---|---|---|
//! | [`InvalidationInterface::Register`] | `inv_register_overhead` + hardware cost | — |
//! | [`InvalidationInterface::Queued`] | `inv_descriptor` + hardware cost | one `inv_wait` |
//!
//! The register interface handles one request at a time and software polls until each
//! completes; the queued interface lets software post a batch of descriptors and wait once
//! with an invalidation-wait descriptor.

use serde::{Deserialize, Serialize};

use crate::cost::CostModel;
use iommulab_base::addr::{DomainId, Iova, Pfn};

/// The largest address mask (`IVA.AM`) the modeled hardware accepts for a page-selective
/// invalidation: 2^18 pages = 1 GiB, as QEMU's `VTD_MAMV`
/// (hw/i386/intel_iommu.h). [`InvRequest::covering`] falls back to a domain-selective
/// request above it.
pub const MAX_ADDRESS_MASK: u8 = 18;

/// How invalidation requests reach the hardware (S1.10, S3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvalidationInterface {
    /// Register-based invalidation (VT-d 1.0, `IOTLB_REG`/`IVA_REG`): each request pays
    /// `inv_register_overhead` plus its hardware cost, one at a time, waiting for each.
    Register,
    /// Queued invalidation (`ECAP.QI`): each request pays `inv_descriptor` plus its hardware
    /// cost, and the batch pays one `inv_wait`.
    Queued,
}

impl InvalidationInterface {
    /// Modeled CPU cycles to submit `reqs` as one batch through this interface and wait for
    /// completion. An empty batch costs nothing (no wait descriptor is posted).
    pub fn batch_cost(self, reqs: &[InvRequest], cost: &CostModel) -> u64 {
        if reqs.is_empty() {
            return 0;
        }
        let per_request = match self {
            InvalidationInterface::Register => cost.inv_register_overhead,
            InvalidationInterface::Queued => cost.inv_descriptor,
        };
        let body: u64 = reqs
            .iter()
            .map(|r| per_request.saturating_add(r.hw_cost(cost)))
            .fold(0, u64::saturating_add);
        match self {
            InvalidationInterface::Register => body,
            InvalidationInterface::Queued => body.saturating_add(cost.inv_wait),
        }
    }
}

/// One IOTLB invalidation request (S1.10 granularities).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvRequest {
    /// Global: every entry of every domain.
    Global,
    /// Domain-selective: every entry tagged with this domain.
    Domain(DomainId),
    /// Page-selective with address mask: the naturally aligned block of `2^order` 4 KiB pages
    /// that contains `pfn` (VT-d `IVA.AM = order`), in `domain`. Entries of any page size that
    /// overlap the block are invalidated.
    Page {
        /// Domain whose entries are invalidated.
        domain: DomainId,
        /// Any page of the block; the block is `pfn` rounded down to `2^order` pages.
        pfn: Pfn<Iova>,
        /// log2 of the block length in 4 KiB pages.
        order: u8,
    },
}

impl InvRequest {
    /// The smallest aligned page-selective request covering `[pfn, pfn + pages)`, or a
    /// domain-selective one if that would need a mask above [`MAX_ADDRESS_MASK`] (as Linux
    /// does when the mask exceeds `CAP.MAMV`). `pages == 0` is treated as one page.
    ///
    /// ```
    /// use iommulab_base::addr::{DomainId, Pfn};
    /// use iommulab_hw::InvRequest;
    /// let d = DomainId::new(1);
    /// // [6, 10) straddles 8, so the smallest aligned block holding it is [0, 16): order 4.
    /// assert_eq!(
    ///     InvRequest::covering(d, Pfn::new(6), 4),
    ///     InvRequest::Page { domain: d, pfn: Pfn::new(0), order: 4 }
    /// );
    /// assert_eq!(InvRequest::covering(d, Pfn::new(0), 1 << 19), InvRequest::Domain(d));
    /// ```
    pub fn covering(domain: DomainId, pfn: Pfn<Iova>, pages: u64) -> InvRequest {
        let first = pfn.get();
        let last = first.saturating_add(pages.max(1) - 1);
        // The block of 2^o pages holding `first` also holds `last` iff they agree above bit o.
        let order = 64 - (first ^ last).leading_zeros();
        if order > u32::from(MAX_ADDRESS_MASK) {
            return InvRequest::Domain(domain);
        }
        let base = first & !((1u64 << order) - 1);
        #[expect(clippy::cast_possible_truncation, reason = "order <= MAX_ADDRESS_MASK")]
        InvRequest::Page {
            domain,
            pfn: Pfn::new(base),
            order: order as u8,
        }
    }

    /// Hardware time of this request alone (without interface overheads).
    pub fn hw_cost(&self, cost: &CostModel) -> u64 {
        match self {
            InvRequest::Global => cost.inv_global,
            InvRequest::Domain(_) => cost.inv_domain,
            InvRequest::Page { .. } => cost.inv_page,
        }
    }

    /// For a page-selective request, the half-open page range `[start, end)` it invalidates
    /// (`end` saturates at `u64::MAX` for absurd orders); `None` for the other granularities.
    pub fn page_block(&self) -> Option<(u64, u64)> {
        match *self {
            InvRequest::Page { pfn, order, .. } => {
                let len = 1u64.checked_shl(u32::from(order)).unwrap_or(0);
                if len == 0 {
                    return Some((0, u64::MAX));
                }
                let start = pfn.get() & !(len - 1);
                Some((start, start.saturating_add(len)))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: DomainId = DomainId::new(3);

    /// S1.10, S3.2: a page-selective request with mask `order` covers the aligned block.
    #[test]
    fn covering_picks_smallest_aligned_block() {
        //  pages: 0 1 2 3 4 5 6 7 | 8 ...
        //  [5,6)  -> order 0 at 5; [4,8) -> order 2 at 4; [7,9) -> order 4 at 0
        assert_eq!(
            InvRequest::covering(D, Pfn::new(5), 1),
            InvRequest::Page {
                domain: D,
                pfn: Pfn::new(5),
                order: 0
            }
        );
        assert_eq!(
            InvRequest::covering(D, Pfn::new(4), 4),
            InvRequest::Page {
                domain: D,
                pfn: Pfn::new(4),
                order: 2
            }
        );
        assert_eq!(
            InvRequest::covering(D, Pfn::new(7), 2),
            InvRequest::Page {
                domain: D,
                pfn: Pfn::new(0),
                order: 4
            }
        );
        assert_eq!(
            InvRequest::covering(D, Pfn::new(9), 0),
            InvRequest::Page {
                domain: D,
                pfn: Pfn::new(9),
                order: 0
            }
        );
    }

    /// QEMU `VTD_MAMV = 18`: masks above it fall back to a domain-selective request.
    #[test]
    fn covering_falls_back_to_domain_above_max_mask() {
        assert_eq!(
            InvRequest::covering(D, Pfn::new(0), 1 << 18),
            InvRequest::Page {
                domain: D,
                pfn: Pfn::new(0),
                order: 18
            }
        );
        assert_eq!(
            InvRequest::covering(D, Pfn::new(1), 1 << 18),
            InvRequest::Domain(D)
        );
    }

    #[test]
    fn page_block_is_aligned_half_open_range() {
        let r = InvRequest::Page {
            domain: D,
            pfn: Pfn::new(13),
            order: 3,
        };
        assert_eq!(r.page_block(), Some((8, 16)));
        assert_eq!(InvRequest::Global.page_block(), None);
    }

    /// S1.10: N register invalidations cost N×(overhead+hw); N queued ones N×(desc+hw)+1 wait.
    #[test]
    fn register_and_queued_batch_costs_differ_by_wait_and_overhead() {
        let c = CostModel::MODERN;
        let reqs = [InvRequest::Page {
            domain: D,
            pfn: Pfn::new(0),
            order: 0,
        }; 5];
        assert_eq!(
            InvalidationInterface::Register.batch_cost(&reqs, &c),
            5 * (c.inv_register_overhead + c.inv_page)
        );
        assert_eq!(
            InvalidationInterface::Queued.batch_cost(&reqs, &c),
            5 * (c.inv_descriptor + c.inv_page) + c.inv_wait
        );
        assert_eq!(InvalidationInterface::Queued.batch_cost(&[], &c), 0);
    }
}
