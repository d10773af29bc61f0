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

    /// Records a single mapping of `len` bytes at `phys` for the workload's `device`, at
    /// `addr`; `live` is false when the map was refused (no access or unmap follows).
    #[inline(always)]
    pub fn set_single(
        &mut self,
        live: bool,
        device: u16,
        addr: Iova,
        phys: P,
        len: u64,
        attrs: MapAttrs,
    ) {
        self.live = live;
        self.device = device;
        self.addr = addr;
        self.phys = phys;
        self.len = len;
        self.attrs = attrs;
        self.is_sg = false;
    }

    /// Starts a scatter-gather list of the workload's `device` for `dir`: the slot is not
    /// live until [`Slot::finish_sg`]; the list comes back empty, its capacity kept.
    #[inline(always)]
    pub fn start_sg(&mut self, device: u16, dir: DmaDirection) -> &mut Vec<SgEntry<P>> {
        self.live = false;
        self.device = device;
        self.attrs = MapAttrs {
            dir,
            dma_alloc: false,
        };
        self.is_sg = true;
        self.sg.clear();
        &mut self.sg
    }

    /// Ends the list [`Slot::start_sg`] began: `live` if it was mapped; the slot's address
    /// is its first entry's.
    #[inline(always)]
    pub fn finish_sg(&mut self, live: bool) {
        self.live = live;
        self.addr = self.sg.first().map(|e| e.dma).unwrap_or_default();
    }

    /// The buffer's unmap: the slot is free for the workload's next map.
    #[inline(always)]
    pub fn retire(&mut self) {
        self.live = false;
    }

    /// The byte extents the device reaches: the single mapping, or each list entry.
    #[inline]
    pub fn extents(&self) -> impl Iterator<Item = (Iova, u64)> + '_ {
        let single = (!self.is_sg).then_some((self.addr, self.len));
        let list = self.sg().unwrap_or(&[]).iter().map(|e| (e.dma, e.len));
        single.into_iter().chain(list)
    }
}

/// The slots by number; a slot past the end grows the table (workloads give a hint). The
/// driver's, and the trace recorder's (`trace generate` writes a workload's buffers out).
#[derive(Debug)]
pub struct SlotTable<P: PhysAddr> {
    slots: Vec<Slot<P>>,
}

impl<P: PhysAddr> Default for SlotTable<P> {
    fn default() -> Self {
        Self::with_len(0)
    }
}

impl<P: PhysAddr> SlotTable<P> {
    /// A table of `n` free slots.
    pub fn with_len(n: usize) -> Self {
        let mut slots = Vec::new();
        slots.resize_with(n, Slot::default);
        Self { slots }
    }

    /// Slot `slot`, live or not; the table grows to hold it.
    #[inline(always)]
    pub fn get_mut(&mut self, slot: u32) -> &mut Slot<P> {
        let i = slot as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, Slot::default);
        }
        &mut self.slots[i]
    }

    /// The live slot `slot`, if any.
    #[inline(always)]
    pub fn live(&self, slot: u32) -> Option<&Slot<P>> {
        self.slots.get(slot as usize).filter(|s| s.live)
    }

    /// The live slot `slot`, to change, if any.
    #[inline(always)]
    pub fn live_mut(&mut self, slot: u32) -> Option<&mut Slot<P>> {
        self.slots.get_mut(slot as usize).filter(|s| s.live)
    }

    /// The live slots, to change (to complete the I/Os in flight at the end).
    pub fn live_iter_mut(&mut self) -> impl Iterator<Item = &mut Slot<P>> {
        self.slots.iter_mut().filter(|s| s.live)
    }
}
