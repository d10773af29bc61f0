//! A Xen domain's DMA layer on a hypervisor-owned IOMMU, and the ways to make it cheaper
//! that Ben-Yehuda et al. weigh (S2.5, S2.6).
//!
//! The domain keeps the OS stack of bare metal: the same [`DmaApi`](crate::dma::DmaApi),
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

use crate::addr::{DomainId, Gpa, Iova, Perm, Pfn};
use crate::dma::{BackendError, Translation};
use crate::hw::{MapError, RemapUnit};

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

/// How a PV domain's DMA requests reach the hypervisor (see the [module docs](self)).
pub trait PvDmaOption: Debug {
    /// Short name for tables and JSON.
    const NAME: &'static str;
    /// IOVAs from the domain's allocator, or the pseudo-physical address itself.
    const TRANSLATION: Translation;
    /// Whether the device can reach only buffers mapped now (protection inside the domain).
    const PROTECTS_WITHIN_DOMAIN: bool;

    /// When the domain's device is attached.
    fn setup<U: RemapUnit>(
        &mut self,
        _hv: &mut Hypervisor<U>,
        _domain: DomainId,
    ) -> Result<(), MapError> {
        Ok(())
    }

    /// One buffer of a map request.
    fn map<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        domain: DomainId,
        iova: Pfn<Iova>,
        gfn: Pfn<Gpa>,
        pages: u64,
        perm: Perm,
    ) -> Result<(), BackendError>;

    /// The map request is complete.
    fn after_map<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), BackendError>;

    /// One buffer of an unmap request.
    fn unmap<U: RemapUnit>(
        &mut self,
        hv: &mut Hypervisor<U>,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
    ) -> Result<(), BackendError>;

    /// The unmap request is complete.
    fn after_unmap<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), BackendError>;

    /// The device is about to access memory: what the driver has handed it must be mapped.
    fn before_device<U: RemapUnit>(&mut self, _hv: &mut Hypervisor<U>) -> Result<(), MapError> {
        Ok(())
    }

    /// The cache is about to be invalidated: entries cleared so far must be in the table.
    fn before_invalidate<U: RemapUnit>(&mut self, hv: &mut Hypervisor<U>) -> Result<(), MapError> {
        hv.submit(Crossing::Hypercall)
    }
}
