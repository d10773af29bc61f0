//! [`NeverFree`] (S2.6 "never free"): unmap requests leave the entries in the table. The
//! allocator still frees the IOVA (the domain must know which entries it may reuse), and a
//! later map of that IOVA overwrites the entry inside its multicall. Unmaps cost no
//! hypercall; the price is that a DMA to an unmapped buffer goes through until its entry is
//! reused ("any errant DMA ... will go through"). Maps are the streaming API's.

use iommulab_os::dma::Translation;

use super::PvDmaOption;

/// Entries are written, never cleared.
#[derive(Clone, Copy, Debug, Default)]
pub struct NeverFree;

impl PvDmaOption for NeverFree {
    const NAME: &'static str = "never-free";
    const TRANSLATION: Translation = Translation::Iommu;
    const PROTECTS_WITHIN_DOMAIN: bool = false;
    const KEEPS_ENTRIES: bool = true;
}
