//! A Xen domain's DMA layer on a hypervisor-owned IOMMU, and the ways to make it cheaper
//! that Ben-Yehuda et al. weigh (S2.5, S2.6).
//!
//! The domain keeps the OS stack of bare metal: the same [`DmaApi`](iommulab_os::dma::DmaApi),
//! IOVA allocator and flush policy (the next-fit bitmap with its roll-around flush on
//! Calgary, S2.4). What differs is the backend, [`PvDmaBackend`]: the domain may not write
//! the translation table, so each map or unmap request becomes a multicall to the
//! [`Hypervisor`], which checks the frames against the domain's [`P2m`] and writes the
//! entries. How requests become hypercalls is the *option*, a type parameter chosen at the
//! configuration boundary:
//!
//! | option | file | DMA address | what a map / an unmap costs | protection lost |
//! |---|---|---|---|---|
//! | [`Streaming`] | `streaming.rs` | IOVA | one multicall each (measured, S2.5) | none (the S2.4 roll-around window) |
//! | [`MapMulti`] | `map_multi.rs` | IOVA | consecutive requests share one multicall (`map_multi`/`unmap_multi`) | unmaps take effect when their batch is issued |
//! | [`NeverFree`] | `never_free.rs` | IOVA | map: one multicall; unmap: nothing | unmapped entries stay valid until reused |
//! | [`PreAllocate`] | `pre_allocate.rs` | pseudo-physical | nothing (all memory mapped at start) | no intra-domain protection; stale after a page flip or balloon |
//! | [`InAdvance`] | `in_advance.rs` | pseudo-physical | first map of a frame: one multicall; then nothing | every frame ever mapped stays reachable |
//! | [`GrantPremap`] | `grant_premap.rs` | IOVA | entries written inside the grant map/unmap (driver domains) | none |
//!
//! Multicall sizes are recorded ([`BatchSizes`]): the paper found over 99% of requests were
//! for one entry (S2.5).

mod backend;
mod grant_premap;
mod hypervisor;
mod in_advance;
mod map_multi;
pub mod multicall;
mod never_free;
mod p2m;
mod pre_allocate;
mod streaming;

use std::fmt::Debug;

use iommulab_base::addr::{DomainId, Gpa, Iova, Perm, Pfn};
use iommulab_hw::{MapError, RemapUnit};
use iommulab_os::dma::{BackendError, Translation};

pub use backend::PvDmaBackend;
pub use grant_premap::GrantPremap;
pub use hypervisor::{Crossing, Hypervisor, PvDmaStats, SETUP_BATCH};
pub use in_advance::InAdvance;
pub use map_multi::MapMulti;
pub use multicall::{BatchSizes, Entry, SizeBucket};
pub use never_free::NeverFree;
pub use p2m::P2m;
pub use pre_allocate::PreAllocate;
pub use streaming::Streaming;

/// How a PV domain's DMA requests reach the hypervisor (see the [module docs](self)). The
/// provided methods are the streaming DMA API's — each map and each unmap request one batch
/// of entries, sent as [`PvDmaOption::CROSSING`] says; an option overrides what it changes.
pub trait PvDmaOption: Debug {
    /// Short name for tables and JSON.
    const NAME: &'static str;
    /// IOVAs from the domain's allocator, or the pseudo-physical address itself.
    const TRANSLATION: Translation;
    /// Whether the device can reach only buffers mapped now (protection inside the domain).
    const PROTECTS_WITHIN_DOMAIN: bool;
    /// How a request's entries reach the hypervisor.
    const CROSSING: Crossing = Crossing::Hypercall;
    /// Unmap requests leave the entries in the table (nothing crosses).
    const KEEPS_ENTRIES: bool = false;

    /// When the domain's device is attached.
    fn setup<U: RemapUnit>(
        &mut self,
        _hv: &mut Hypervisor<U>,
        _domain: DomainId,
    ) -> Result<(), MapError> {
        Ok(())
    }

    /// One buffer of a map request: its entries are queued.
    #[inline]
    fn map<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        domain: DomainId,
        iova: Pfn<Iova>,
        gfn: Pfn<Gpa>,
        pages: u64,
        perm: Perm,
    ) -> Result<(), BackendError> {
        hv.queue_map(domain, iova, gfn, pages, perm)
    }

    /// The map request is complete: its entries go out.
    #[inline]
    fn after_map<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), BackendError> {
        Ok(hv.submit(Self::CROSSING)?)
    }

    /// One buffer of an unmap request: its clears are queued (unless the option keeps
    /// entries).
    #[inline]
    fn unmap<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
    ) -> Result<(), BackendError> {
        if !Self::KEEPS_ENTRIES {
            hv.queue_unmap(domain, iova, pages);
        }
        Ok(())
    }

    /// The unmap request is complete: its clears go out (nothing, if none were queued).
    #[inline]
    fn after_unmap<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), BackendError> {
        Ok(hv.submit(Self::CROSSING)?)
    }

    /// The device is about to access memory: what the driver has handed it must be mapped.
    fn before_device<U: RemapUnit>(&mut self, _hv: &mut Hypervisor<U>) -> Result<(), MapError> {
        Ok(())
    }

    /// The cache is about to be invalidated: entries cleared so far must be in the table.
    fn before_invalidate<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), MapError> {
        hv.submit(Self::CROSSING)
    }
}
