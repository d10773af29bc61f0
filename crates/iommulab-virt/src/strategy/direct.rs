//! `direct` (S1.1): all guest memory is mapped and pinned once, when the guest starts; the
//! driver's maps and unmaps need nothing from the host. No protection: the device can reach
//! every guest page at any time.

use crate::guest::{GuestConfig, GuestError};
use crate::hypercall_backend::Channel;
use iommulab_base::addr::{DmaDirection, Gpa, Perm, Pfn};
use iommulab_hw::RemapUnit;

use super::{GuestStrategy, PageOutcome};

/// Everything mapped up front.
#[derive(Clone, Copy, Debug)]
pub struct Direct {
    guest_pages: u64,
}

impl Direct {
    /// The strategy for a guest of `cfg.guest_pages` pages.
    pub fn new(cfg: &GuestConfig) -> Self {
        Self {
            guest_pages: cfg.guest_pages,
        }
    }
}

impl GuestStrategy for Direct {
    const NAME: &'static str = "direct";

    fn host_quota(&self) -> u64 {
        self.guest_pages
    }

    /// One setup hypercall maps every guest page read-write.
    fn setup<U: RemapUnit>(&mut self, ch: &mut Channel<U>) -> Result<(), GuestError> {
        for p in 0..self.guest_pages {
            ch.queue_map(Pfn::new(p), Perm::ReadWrite);
        }
        ch.flush()
    }

    fn map_page<U: RemapUnit>(
        &mut self,
        _g: Pfn<Gpa>,
        _dir: DmaDirection,
        _dma_alloc: bool,
        _ch: &mut Channel<U>,
    ) -> Result<PageOutcome, GuestError> {
        Ok(PageOutcome::Hit)
    }

    fn release_page<U: RemapUnit>(
        &mut self,
        _g: Pfn<Gpa>,
        _dir: DmaDirection,
        _dma_alloc: bool,
        _ch: &mut Channel<U>,
    ) -> Result<(), GuestError> {
        Ok(())
    }
}
