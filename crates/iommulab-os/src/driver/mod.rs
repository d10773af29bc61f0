//! The one driver: runs a workload's operations through a [`DmaApi`], on bare metal, in a
//! guest or in a Xen PV domain alike.
//!
//! The driver keeps the slot table (what each mapped buffer is, by the workload's slot
//! number), maps and unmaps through the DMA API, lets the device access live buffers, and at
//! the end completes the I/Os still in flight. What truly differs per system is a [`Hooks`]
//! type, a type parameter (monomorphised: no dynamic dispatch in the per-operation loop):
//!
//! | hook | bare metal | guest | Xen PV |
//! |---|---|---|---|
//! | [`Hooks::buffer`] | — | bytes counted, length clamped | buffer inside the domain |
//! | [`Hooks::map_failed`] | error | a refused map leaves the buffer unmapped | error |
//! | [`Hooks::device_accesses`], [`Hooks::accessed`] | made, counted in the result | made with the oracle on, faults counted | made |
//! | [`Hooks::after_map`] | a malicious device reads the sub-page rest | — | — |
//! | [`Hooks::after_unmap`] | a malicious device retries the pages | S1.11's stale probes | probes, page flips |
//! | [`Hooks::io_done`] | timers, CPU cache, progress, end time | — | — |
//! | [`Hooks::tick`] | timers by the workload's clock | the quota over time (S1.7) | — |

mod slot;

pub use slot::{Slot, SlotTable};

use crate::device::AccessOutcome;
use crate::dma::{DeviceHandle, DmaApi, DmaError, MapAttrs, MapBackend, SgEntry};
use crate::flush::FlushPolicy;
use crate::iova::IovaAllocator;
use iommulab_base::addr::{Access, CpuId, DmaDirection, Iova};
use iommulab_workload::{DmaOp, OpSink, Segment, Workload, WorkloadError};

/// What a system adds to the driver (see the [module docs](self)). Every hook has a default
/// that does nothing, so a system names only what it does.
pub trait Hooks<A: IovaAllocator, F: FlushPolicy, B: MapBackend>: Sized {
    /// The run's error.
    type Error: From<DmaError> + From<WorkloadError>;

    /// Whether the driver completes (unmaps) the buffers still mapped when the workload
    /// ends, so every DMA address comes back. A guest leaves them mapped: its result
    /// reports what the workload did, the host's pinned pages at the end included.
    const COMPLETE_AT_END: bool = true;

    /// Runs one op: [`Driver::step`]; a system that wraps each op (bare metal's per-device
    /// accounting) does it here.
    #[inline(always)]
    fn op(
        d: &mut Driver<'_, A, F, B, Self>,
        op: DmaOp<B::Phys>,
        sg: &[Segment<B::Phys>],
    ) -> Result<(), Self::Error> {
        d.step(op, sg)
    }

    /// A buffer (or list segment) of `len` bytes at `phys` is about to be mapped for
    /// `dir`: the length to map, or an error.
    #[inline(always)]
    fn buffer(&mut self, _phys: B::Phys, len: u64, _dir: DmaDirection) -> Result<u64, Self::Error> {
        Ok(len)
    }

    /// A map failed: `Ok` leaves the buffer unmapped (the device does not access it, no
    /// unmap follows), `Err` ends the run.
    #[inline(always)]
    fn map_failed(&mut self, e: DmaError) -> Result<(), Self::Error> {
        Err(e.into())
    }

    /// A single buffer was mapped at `addr`.
    #[inline(always)]
    fn after_map(
        &mut self,
        _api: &mut DmaApi<A, F, B>,
        _dev: DeviceHandle,
        _addr: Iova,
        _dir: DmaDirection,
        _access: &mut AccessOutcome,
    ) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Whether the workload's device accesses are made.
    #[inline(always)]
    fn device_accesses(&self) -> bool {
        true
    }

    /// A device access to a live buffer came to `out`.
    #[inline(always)]
    fn accessed(&mut self, _out: &AccessOutcome) {}

    /// The buffer of `slot` was just unmapped.
    #[inline(always)]
    fn after_unmap(
        &mut self,
        _api: &mut DmaApi<A, F, B>,
        _dev: DeviceHandle,
        _slot: &Slot<B::Phys>,
        _access: &mut AccessOutcome,
    ) -> Result<(), Self::Error> {
        Ok(())
    }

    /// An I/O completed (the `ios`-th unmap): `Ok(true)` ends the run there.
    #[inline(always)]
    fn io_done(&mut self, _api: &mut DmaApi<A, F, B>, _ios: u64) -> Result<bool, Self::Error> {
        Ok(false)
    }

    /// The workload's clock reads `now_ns`, after `ios` I/Os.
    #[inline(always)]
    fn tick(
        &mut self,
        _api: &mut DmaApi<A, F, B>,
        _ios: u64,
        _now_ns: u64,
    ) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The run's state between ops: the sink a workload hands its ops to.
#[derive(Debug)]
pub struct Driver<'a, A: IovaAllocator, F: FlushPolicy, B: MapBackend, H: Hooks<A, F, B>> {
    api: &'a mut DmaApi<A, F, B>,
    devs: &'a [DeviceHandle],
    slots: SlotTable<B::Phys>,
    hooks: &'a mut H,
    /// I/Os completed (unmaps of live buffers).
    ios: u64,
    access: AccessOutcome,
    /// The run ends: a hook said so, or an op failed (`error`).
    stopped: bool,
    error: Option<H::Error>,
}

/// `map_single`'s and `map_sg`'s access by the device: it writes what it receives.
#[inline(always)]
pub const fn access_for(dir: DmaDirection) -> Access {
    match dir {
        DmaDirection::FromDevice => Access::Write,
        DmaDirection::ToDevice | DmaDirection::Bidirectional => Access::Read,
    }
}

impl<'a, A: IovaAllocator, F: FlushPolicy, B: MapBackend, H: Hooks<A, F, B>>
    Driver<'a, A, F, B, H>
{
    /// A driver of the devices `devs` (attached to `api`; the workload's device `d` is
    /// `devs[d % devs.len()]`), with `slots` slots to start with.
    ///
    /// # Panics
    /// Never on a run; `devs` must not be empty (a caller bug).
    pub fn new(
        api: &'a mut DmaApi<A, F, B>,
        devs: &'a [DeviceHandle],
        slots: usize,
        hooks: &'a mut H,
    ) -> Self {
        assert!(!devs.is_empty(), "a driver needs a device");
        Self {
            api,
            devs,
            slots: SlotTable::with_len(slots),
            hooks,
            ios: 0,
            access: AccessOutcome::default(),
            stopped: false,
            error: None,
        }
    }

    /// Runs `w` to its end (or until a hook ends the run), then completes the I/Os in
    /// flight ([`Hooks::COMPLETE_AT_END`]).
    pub fn run<W: Workload<Phys = B::Phys>>(&mut self, w: &mut W) -> Result<(), H::Error> {
        // The workload hands its ops to the driver in a loop of its own (a generator makes
        // them there, a trace translates its events there), so no op is returned through a
        // call.
        w.for_each_op(self)?;
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if H::COMPLETE_AT_END {
            self.complete_in_flight()?;
        }
        Ok(())
    }

    /// Unmaps every live buffer on CPU 0: a run cut short (or a workload that leaves
    /// buffers mapped) still has I/Os in flight, and every IOVA must come back.
    fn complete_in_flight(&mut self) -> Result<(), DmaError> {
        for s in self.slots.live_iter_mut() {
            s.retire();
            let dev = device_of(self.devs, s.device);
            if s.is_sg {
                self.api.unmap_sg(dev, CpuId::new(0), &s.sg, s.attrs.dir)?;
            } else {
                self.api
                    .unmap_single_attrs(dev, CpuId::new(0), s.addr, s.len, s.attrs)?;
            }
        }
        Ok(())
    }

    /// The DMA API.
    #[inline(always)]
    pub fn api(&self) -> &DmaApi<A, F, B> {
        self.api
    }

    /// The DMA API, to change.
    #[inline(always)]
    pub fn api_mut(&mut self) -> &mut DmaApi<A, F, B> {
        self.api
    }

    /// The system's hooks.
    #[inline(always)]
    pub fn hooks(&self) -> &H {
        self.hooks
    }

    /// The system's hooks, to change.
    #[inline(always)]
    pub fn hooks_mut(&mut self) -> &mut H {
        self.hooks
    }

    /// The DMA API and the hooks at once.
    #[inline(always)]
    pub fn parts_mut(&mut self) -> (&mut DmaApi<A, F, B>, &mut H) {
        (self.api, self.hooks)
    }

    /// I/Os completed so far.
    #[inline(always)]
    pub fn ios(&self) -> u64 {
        self.ios
    }

    /// What the device's accesses came to so far.
    #[inline(always)]
    pub fn access(&self) -> &AccessOutcome {
        &self.access
    }

    /// The live buffer of `slot`, if any.
    #[inline(always)]
    pub fn live(&self, slot: u32) -> Option<&Slot<B::Phys>> {
        self.slots.live(slot)
    }

    /// The handle of the workload's device `d`.
    #[inline(always)]
    pub fn device(&self, d: u16) -> DeviceHandle {
        device_of(self.devs, d)
    }

    /// Runs one op through the DMA API; a hook may end the run.
    #[inline(always)]
    pub fn step(&mut self, op: DmaOp<B::Phys>, sg: &[Segment<B::Phys>]) -> Result<(), H::Error> {
        let api = &mut *self.api;
        match op {
            DmaOp::Map {
                slot,
                cpu,
                device: d,
                phys,
                len,
                dir,
                dma_alloc,
            } => {
                let dev = device_of(self.devs, d);
                let len = self.hooks.buffer(phys, len, dir)?;
                let attrs = MapAttrs { dir, dma_alloc };
                let (live, addr) = match api.map_single_attrs(dev, cpu, phys, len, attrs) {
                    Ok(addr) => {
                        self.hooks
                            .after_map(api, dev, addr, dir, &mut self.access)?;
                        (true, addr)
                    }
                    Err(e) => {
                        self.hooks.map_failed(e)?;
                        (false, Iova::default())
                    }
                };
                self.slots
                    .get_mut(slot)
                    .set_single(live, d, addr, phys, len, attrs);
            }
            DmaOp::MapSg {
                slot,
                cpu,
                device: d,
                dir,
            } => {
                let dev = device_of(self.devs, d);
                let s = self.slots.get_mut(slot);
                let list = s.start_sg(d, dir);
                for g in sg {
                    let len = self.hooks.buffer(g.phys, g.len, dir)?;
                    list.push(SgEntry {
                        phys: g.phys,
                        len,
                        dma: Iova::default(),
                    });
                }
                let r = if list.is_empty() {
                    Err(DmaError::EmptyScatterlist)
                } else {
                    api.map_sg(dev, cpu, list, dir)
                };
                let mapped = match r {
                    Ok(_) => true,
                    Err(e) => {
                        self.hooks.map_failed(e)?;
                        false
                    }
                };
                s.finish_sg(mapped);
            }
            DmaOp::Access { slot, access: a } => {
                if !self.hooks.device_accesses() {
                    return Ok(());
                }
                let Some(s) = self.slots.live(slot) else {
                    return Ok(());
                };
                let dev = device_of(self.devs, s.device);
                if s.is_sg {
                    for e in &s.sg {
                        let out = api.device_access(dev, e.dma, e.len, a)?;
                        self.hooks.accessed(&out);
                        self.access.merge(&out);
                    }
                } else {
                    let out = api.device_access(dev, s.addr, s.len, a)?;
                    self.hooks.accessed(&out);
                    self.access.merge(&out);
                }
            }
            DmaOp::Unmap { slot, cpu } => {
                let Some(s) = self.slots.live_mut(slot) else {
                    return Ok(());
                };
                s.retire();
                let dev = device_of(self.devs, s.device);
                if s.is_sg {
                    api.unmap_sg(dev, cpu, &s.sg, s.attrs.dir)?;
                } else {
                    api.unmap_single_attrs(dev, cpu, s.addr, s.len, s.attrs)?;
                }
                self.ios += 1;
                self.hooks.after_unmap(api, dev, s, &mut self.access)?;
                if self.hooks.io_done(api, self.ios)? {
                    self.stopped = true;
                }
            }
            DmaOp::Tick { now_ns } => self.hooks.tick(api, self.ios, now_ns)?,
        }
        Ok(())
    }
}

/// The handle of the workload's device `d`; workloads with more devices than the run share
/// them round-robin (a compare, not a division, on the per-op path).
#[inline(always)]
fn device_of(devs: &[DeviceHandle], d: u16) -> DeviceHandle {
    let (i, n) = (usize::from(d), devs.len());
    devs[if i < n { i } else { i % n }]
}

impl<A: IovaAllocator, F: FlushPolicy, B: MapBackend, H: Hooks<A, F, B>> OpSink<B::Phys>
    for Driver<'_, A, F, B, H>
{
    #[inline(always)]
    fn op(&mut self, op: DmaOp<B::Phys>, sg: &[Segment<B::Phys>]) {
        if self.stopped {
            return;
        }
        if let Err(e) = H::op(self, op, sg) {
            self.error = Some(e);
            self.stopped = true;
        }
    }

    #[inline(always)]
    fn stopped(&self) -> bool {
        self.stopped
    }
}
