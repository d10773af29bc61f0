//! The map-backend seam: who turns "map these frames for this device" into translation
//! entries. The DMA API ([`super::DmaApi`]) chooses DMA addresses (an IOVA allocator, or the
//! buffer's own address), tracks mappings (dma-debug, the stale-access oracle) and hands
//! freed IOVAs to a flush policy; a backend carries the mapping out:
//!
//! | backend | file | frames | what a map becomes |
//! |---|---|---|---|
//! | [`Native`] | `native.rs` | [`Hpa`] | PTE writes in the local remapping unit (bare metal) |
//! | `HypercallBackend` | `virt/hypercall_backend.rs` | [`Gpa`](iommulab_base::addr::Gpa) | a guest's request to its host, under a strategy and a batching mode (S1.1, S1.6) |
//!
//! A backend is a type parameter of the DMA API, chosen at the configuration boundary, so
//! the per-operation path is monomorphised.

mod native;

pub use native::Native;

use iommulab_base::addr::{Access, Bdf, DmaDirection, DomainId, Hpa, Iova, Perm, Pfn, PhysAddr};
use iommulab_hw::cost::CostModel;
use iommulab_hw::error::MapError;
use iommulab_hw::fault::Fault;
use iommulab_hw::invalidate::InvRequest;
use iommulab_hw::unit::InvalidationCaps;

/// What the driver said about a mapping besides its pages (Linux's DMA attributes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapAttrs {
    /// The direction of the transfer.
    pub dir: DmaDirection,
    /// The buffer was allocated for DMA (S1.11; see `workload::DmaOp::Map`).
    pub dma_alloc: bool,
}

/// Why a backend did not carry out a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The translation tables refused the change (a caller bug).
    #[error(transparent)]
    Map(#[from] MapError),
    /// The mapping was refused by policy (a guest's map cache full of pinned pages, or a
    /// page outside guest memory): nothing of the buffer stays mapped.
    #[error("the map was refused: {pages} page(s) could not be mapped")]
    Refused {
        /// Pages of the buffer refused.
        pages: u64,
    },
    /// The hypercall path failed: the host refused a hypercall the guest believed valid,
    /// or the guest's bookkeeping broke (model bugs). The message says which.
    #[error("{0}")]
    Host(String),
}

/// Who carries out the DMA API's mappings (see the [module docs](self)).
pub trait MapBackend {
    /// The address space the driver's buffers live in.
    type Phys: PhysAddr;

    /// Short name for tables and JSON.
    const NAME: &'static str;

    /// What the remapping hardware behind the backend can invalidate.
    fn caps(&self) -> InvalidationCaps;

    /// The cycle prices.
    fn cost(&self) -> &CostModel;

    /// Input address width of a domain, in bits.
    fn address_bits(&self) -> u8;

    /// Routes `bdf`'s DMA through `domain`, creating the domain if it does not exist yet (a
    /// device joining its group's domain finds it there).
    fn attach(&mut self, bdf: Bdf, domain: DomainId) -> Result<(), MapError>;

    /// Stops translating for `bdf`.
    fn detach(&mut self, bdf: Bdf) -> Result<(), MapError>;

    /// Maps `pages` pages `[iova, iova + pages)` → `[frame, frame + pages)` with `perm`.
    /// A backend may defer the work to [`MapBackend::after_map`] (batching); on an error
    /// nothing of this call stays mapped.
    fn map(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        frame: Pfn<Self::Phys>,
        pages: u64,
        perm: Perm,
        attrs: MapAttrs,
    ) -> Result<(), BackendError>;

    /// The driver call's maps are all issued (VT-d: the write-buffer flush, S1.10; a guest:
    /// the batched map hypercall). On an error nothing the call mapped stays mapped.
    fn after_map(&mut self) -> Result<(), BackendError>;

    /// Removes the mapping of `[iova, iova + pages)`. The translation cache is not touched:
    /// invalidation is the flush policy's (bare metal) or the host's (a guest).
    fn unmap(
        &mut self,
        domain: DomainId,
        iova: Pfn<Iova>,
        pages: u64,
        attrs: MapAttrs,
    ) -> Result<(), BackendError>;

    /// The driver call's unmaps are all issued (a guest: the batched unmap hypercall).
    fn after_unmap(&mut self) -> Result<(), BackendError>;

    /// Submits invalidation requests, each one the hardware supports
    /// ([`InvalidationCaps::widen`] first).
    fn invalidate(&mut self, reqs: &[InvRequest]);

    /// A device access, translated by the hardware.
    fn translate(&mut self, bdf: Bdf, iova: Iova, access: Access) -> Result<Hpa, Fault>;

    /// Whether the translation cache holds `iova` in `domain` (the flush invariant's check).
    fn cache_holds(&self, domain: DomainId, iova: Pfn<Iova>) -> bool;
}
