//! [`Streaming`]: what the paper measured (S2.5). Every map and every unmap request of the
//! streaming DMA API is one multicall carrying one entry per I/O page: the provided methods
//! of [`PvDmaOption`].

use iommulab_os::dma::Translation;

use super::PvDmaOption;

/// One multicall per request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Streaming;

impl PvDmaOption for Streaming {
    const NAME: &'static str = "streaming";
    const TRANSLATION: Translation = Translation::Iommu;
    const PROTECTS_WITHIN_DOMAIN: bool = true;
}
