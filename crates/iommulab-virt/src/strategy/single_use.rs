//! `single-use` (S1.1): every page map is a map request and every page unmap an unmap
//! request, so a page is mapped exactly while a DMA may use it (full intra-guest
//! protection, the most hypercalls). Two in-flight DMAs of one page pin it twice.

use crate::guest::{GuestConfig, GuestError};
use crate::hypercall_backend::Channel;
use iommulab_base::addr::{DmaDirection, Gpa, Pfn};
use iommulab_hw::RemapUnit;

use super::{GuestStrategy, PageOutcome};

/// Map before each DMA, unmap right after.
#[derive(Clone, Copy, Debug)]
pub struct SingleUse {
    guest_pages: u64,
}

impl SingleUse {
    /// The strategy for a guest of `cfg.guest_pages` pages.
    pub fn new(cfg: &GuestConfig) -> Self {
        Self {
            guest_pages: cfg.guest_pages,
        }
    }
}

impl GuestStrategy for SingleUse {
    const NAME: &'static str = "single-use";

    fn host_quota(&self) -> u64 {
        self.guest_pages
    }

    fn map_page<U: RemapUnit>(
        &mut self,
        g: Pfn<Gpa>,
        dir: DmaDirection,
        _dma_alloc: bool,
        ch: &mut Channel<U>,
    ) -> Result<PageOutcome, GuestError> {
        ch.map(g, dir.perm())?;
        Ok(PageOutcome::Miss)
    }

    fn release_page<U: RemapUnit>(
        &mut self,
        g: Pfn<Gpa>,
        _dir: DmaDirection,
        _dma_alloc: bool,
        ch: &mut Channel<U>,
    ) -> Result<(), GuestError> {
        ch.release(g)
    }
}
