//! [`GrantPremap`] (S2.6, grant-table integration): in a driver domain, the backend driver
//! already makes a grant map (and later a grant unmap) hypercall for every page another
//! domain hands it. Writing the TCE entries inside those grant operations saves the DMA
//! layer's own crossings: the entries are the same, the multicalls are gone. Only I/O on
//! granted pages benefits — all of a driver domain's I/O on behalf of its guests.

use iommulab_os::dma::Translation;

use super::{Crossing, PvDmaOption};

/// Entries written inside the grant operations.
#[derive(Clone, Copy, Debug, Default)]
pub struct GrantPremap;

impl PvDmaOption for GrantPremap {
    const NAME: &'static str = "grant-premap";
    const TRANSLATION: Translation = Translation::Iommu;
    const PROTECTS_WITHIN_DOMAIN: bool = true;
    const CROSSING: Crossing = Crossing::Grant;
}
