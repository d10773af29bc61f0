//! The driver's slot table: what it remembers of each buffer a workload mapped, by the
//! workload's slot number, until the buffer's unmap.

use crate::dma::{MapAttrs, SgEntry};
use iommulab_base::addr::{DmaDirection, Iova, PhysAddr};

/// One mapped buffer: a single mapping or a scatter-gather list.
#[derive(Clone, Debug)]
pub struct Slot<P: PhysAddr> {
    pub(super) live: bool,
    pub(super) device: u16,
    /// The single mapping's DMA address, or a list's first entry's.
    pub(super) addr: Iova,
    pub(super) phys: P,
    pub(super) len: u64,
    pub(super) attrs: MapAttrs,
    /// The list of a `map_sg`; its capacity is kept when the slot is reused, so steady
    /// state does not allocate.
    pub(super) sg: Vec<SgEntry<P>>,
    pub(super) is_sg: bool,
}

impl<P: PhysAddr> Default for Slot<P> {
    fn default() -> Self {
        Self {
            live: false,
            device: 0,
            addr: Iova::default(),
            phys: P::default(),
            len: 0,
            attrs: MapAttrs {
                dir: DmaDirection::Bidirectional,
                dma_alloc: false,
            },
            sg: Vec::new(),
            is_sg: false,
        }
    }
}

impl<P: PhysAddr> Slot<P> {
    /// Mapped and not yet unmapped.
    #[inline(always)]
    pub fn live(&self) -> bool {
        self.live
    }

    /// The workload's device index.
    #[inline(always)]
    pub fn device(&self) -> u16 {
        self.device
    }

    /// The DMA address: a single mapping's, or a list's first entry's.
    #[inline(always)]
    pub fn addr(&self) -> Iova {
        self.addr
    }

    /// A single mapping's buffer address (a list's is in [`Slot::sg`]).
    #[inline(always)]
    pub fn phys(&self) -> P {
        self.phys
    }

    /// A single mapping's length in bytes as mapped.
    #[inline(always)]
    pub fn bytes(&self) -> u64 {
        self.len
    }

    /// The attributes of the map.
    #[inline(always)]
    pub fn attrs(&self) -> MapAttrs {
        self.attrs
    }

    /// The direction of the map.
    #[inline(always)]
    pub fn dir(&self) -> DmaDirection {
        self.attrs.dir
    }

    /// The scatter-gather list, if the buffer was mapped with `map_sg`.
    #[inline(always)]
    pub fn sg(&self) -> Option<&[SgEntry<P>]> {
        self.is_sg.then_some(self.sg.as_slice())
    }

    /// The byte extents the device reaches: the single mapping, or each list entry.
    #[inline]
    pub fn extents(&self) -> impl Iterator<Item = (Iova, u64)> + '_ {
        let single = (!self.is_sg).then_some((self.addr, self.len));
        let list = self.sg().unwrap_or(&[]).iter().map(|e| (e.dma, e.len));
        single.into_iter().chain(list)
    }
}

/// The slots by number; a slot past the end grows the table (workloads give a hint).
#[derive(Debug)]
pub(super) struct BySlot<P: PhysAddr> {
    slots: Vec<Slot<P>>,
}

impl<P: PhysAddr> BySlot<P> {
    pub(super) fn with_len(n: usize) -> Self {
        let mut slots = Vec::new();
        slots.resize_with(n, Slot::default);
        Self { slots }
    }

    #[inline(always)]
    pub(super) fn get_mut(&mut self, slot: u32) -> &mut Slot<P> {
        let i = slot as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, Slot::default);
        }
        &mut self.slots[i]
    }

    /// The live slot `slot`, if any.
    #[inline(always)]
    pub(super) fn live(&self, slot: u32) -> Option<&Slot<P>> {
        self.slots.get(slot as usize).filter(|s| s.live)
    }

    #[inline(always)]
    pub(super) fn live_mut(&mut self, slot: u32) -> Option<&mut Slot<P>> {
        self.slots.get_mut(slot as usize).filter(|s| s.live)
    }

    pub(super) fn iter_mut(&mut self) -> std::slice::IterMut<'_, Slot<P>> {
        self.slots.iter_mut()
    }
}
