//! `shared` (S1.1): one mapping serves every in-flight DMA to a page. The guest counts the
//! DMAs per page; the first maps it (read-write, so any direction may share it), the last
//! unmaps it. Also the path of the pages a relaxed map cache does not admit (S1.11).

use crate::PageMap;
use crate::guest::{GuestConfig, GuestError};
use crate::hypercall_backend::Channel;
use iommulab_base::addr::{DmaDirection, Gpa, Perm, Pfn};
use iommulab_hw::RemapUnit;

use super::{GuestStrategy, PageOutcome};

/// Mapped while some DMA is in flight, by reference count.
#[derive(Clone, Debug, Default)]
pub struct Shared {
    guest_pages: u64,
    in_flight: PageMap<Pfn<Gpa>, u32>,
}

impl Shared {
    /// The strategy for a guest of `cfg.guest_pages` pages.
    pub fn new(cfg: &GuestConfig) -> Self {
        Self {
            guest_pages: cfg.guest_pages,
            in_flight: PageMap::default(),
        }
    }
}

impl GuestStrategy for Shared {
    const NAME: &'static str = "shared";

    fn host_quota(&self) -> u64 {
        self.guest_pages
    }

    fn map_page<U: RemapUnit>(
        &mut self,
        g: Pfn<Gpa>,
        _dir: DmaDirection,
        _dma_alloc: bool,
        ch: &mut Channel<U>,
    ) -> Result<PageOutcome, GuestError> {
        let rc = self.in_flight.entry(g).or_insert(0);
        *rc += 1;
        if *rc > 1 {
            return Ok(PageOutcome::Hit);
        }
        ch.map(g, Perm::ReadWrite)?;
        Ok(PageOutcome::Miss)
    }

    fn release_page<U: RemapUnit>(
        &mut self,
        g: Pfn<Gpa>,
        _dir: DmaDirection,
        _dma_alloc: bool,
        ch: &mut Channel<U>,
    ) -> Result<(), GuestError> {
        let rc = self
            .in_flight
            .get_mut(&g)
            .ok_or(GuestError::NotInFlight { gfn: g.get() })?;
        *rc -= 1;
        if *rc == 0 {
            self.in_flight.remove(&g);
            ch.release(g)?;
        }
        Ok(())
    }
}
