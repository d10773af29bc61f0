//! `iommulab validate`: how faithful the Linux 6.x IOVA allocator model is to a real kernel,
//! allocation by allocation.
//!
//! A trace with `iommu:map`/`iommu:unmap` and the `dma:` events records, for every
//! allocation, which IOVA range the kernel picked. [`validate`] replays the IOMMU-layer
//! allocations and frees (`validate/group.rs` turns events into allocator calls) through one
//! [`IovaDomain`] per IOMMU domain (dma-iommu over `iova.c`: rbtree + per-CPU magazines,
//! reserved windows, the below-4 GiB first attempt) and compares each IOVA the model picks
//! with the kernel's, in two modes at once:
//!
//! - **open loop**: the model keeps its own choices from the start of the trace (a kernel
//!   address is mapped to the model's for the free);
//! - **one step**: the model predicts each allocation without making it; then it adopts the
//!   kernel's choice: on a match it makes its own allocation, otherwise it takes the
//!   kernel's range from where it sits in the model: from a magazine or the depot at
//!   magazine granularity (the magazine holding it becomes the CPU's loaded one, as a kernel
//!   CPU only allocates from its own: [`Magazine::adopt_cached`](crate::iova::Magazine::adopt_cached)),
//!   from the tree's free space (`place`) or the flush queue, leaving everything else as it
//!   was. One-step accuracy is the fraction of allocations the model gets right given the
//!   kernel's past.
//!
//! A mismatch is classified by where the kernel's range was in the model
//! ([`MismatchKind`]). The first `warmup` fraction of the allocations is replayed but not
//! scored. The CPU count is the trace's (`#P:N`), overriding the domain config's.
//!
//! In lazy mode (`iommu.strict=0`) a free goes to a flush queue (256 entries per CPU, a 10 ms
//! timer) that the trace does not record; the model's queue frees at its own flushes, so its
//! exact-match rates measure the allocator and the queue model together; [`LazyReport`]
//! adds what a trace can check without knowing the flush times. A trace that records the
//! frees (a `free_iova_fast` kprobe, docs/capture.md) is replayed with each range freed at
//! its recorded moment and CPU instead, and the queue model is not used.

mod flush_queue;
mod group;
mod report;
mod session;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use group::{MAX_WAITING, Skipped};
pub use report::{
    DeviceResult, KindCounts, LazyReport, Mismatch, MismatchKind, Mode, ModeResult, ValidateReport,
};

use flush_queue::FlushQueue;
use report::rate;
pub use session::{MultiReport, validate_many};
use session::{Session, not_ftrace};

use crate::addr::{CpuId, Pfn};
use crate::clock::{ClockRate, Cycles, Jiffies};
use crate::experiment::ConfigError;
use crate::hash::FxHashMap;
use crate::iova::{ByteRange, CacheSite, DeviceIova, DomainConfig, IovaAllocator, IovaDomain};
use crate::trace::ftrace::{FtraceReader, IOMMU_DEVICE};
use crate::trace::{EventSource, Log2Histogram, TraceError, TraceFormat};
use crate::{Error, Result};
use group::{Grouper, Op, OpKind, error_at};

/// The IOVA granule's shift.
const SHIFT: u32 = 12;

/// Mismatches listed in a report by default (all are counted).
pub const DEFAULT_MAX_MISMATCHES: usize = 20;

/// How to validate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValidateOptions {
    /// The kernel whose allocator is modelled: `6.x` (only the Linux 6 allocator is).
    pub kernel: String,
    /// The kernel ran with lazy invalidation (`iommu.strict=0`): frees go through a flush
    /// queue.
    pub lazy: bool,
    /// The fraction of allocations replayed but not scored, `0 <= warmup < 1`.
    pub warmup: f64,
    /// Skip unmatched events and calls, counting them, instead of stopping at the first.
    pub lenient: bool,
    /// A free of a range the trace never showed mapped is an error (or, with `lenient`,
    /// skipped). Off by default: a capture that starts mid-run has such frees, and the range
    /// is learned where the kernel had it and counted as mapped before tracing.
    pub strict_trace: bool,
    /// The trace records every IOVA free with a `free_iova_fast` kprobe (docs/capture.md):
    /// frees are replayed at their recorded moment and CPU, not at the unmap (in lazy mode:
    /// not through a modelled flush queue). `None`: [`validate`] looks for one (the kprobe
    /// fires within the flush timeout of an unmap).
    pub recorded_frees: Option<bool>,
    /// Every domain's setup (start page, aperture, reserved windows, caches).
    pub domain: DomainConfig,
    /// CPUs, when the trace's header does not say (`#P:N`); the header wins otherwise.
    pub cpus: Option<usize>,
    /// DMA masks by device (default: 64-bit).
    pub dma_masks: Vec<(String, u64)>,
    /// Devices that share one IOMMU group, hence one domain (default: one per device).
    pub groups: Vec<Vec<String>>,
    /// Mismatches listed (all are counted).
    pub max_mismatches: usize,
    /// Flush-queue entries per CPU (lazy mode; Linux: 256, holding 255).
    pub fq_size: usize,
    /// Flush-queue timeout in ms (lazy mode; Linux: 10).
    pub fq_timeout_ms: u64,
    /// The kernel's `CONFIG_HZ` (lazy mode): the flush-queue timer fires on a jiffy boundary,
    /// `msecs_to_jiffies(fq_timeout_ms)` ticks after the one it was armed in (Debian: 250;
    /// 0 = exactly `fq_timeout_ms` later).
    pub fq_hz: u32,
}

impl Default for ValidateOptions {
    fn default() -> Self {
        ValidateOptions {
            kernel: "6.12".to_owned(),
            lazy: false,
            warmup: 0.0,
            lenient: false,
            strict_trace: false,
            recorded_frees: None,
            domain: DomainConfig::default(),
            cpus: None,
            dma_masks: Vec::new(),
            groups: Vec::new(),
            max_mismatches: DEFAULT_MAX_MISMATCHES,
            fq_size: 256,
            fq_timeout_ms: 10,
            fq_hz: 250,
        }
    }
}

/// Validates the trace at `path` (Linux ftrace text, optionally `.gz`/`.zst`).
pub fn validate(path: &Path, options: &ValidateOptions) -> Result<ValidateReport> {
    let format = crate::trace::detect(path)?;
    if format != TraceFormat::Ftrace {
        return Err(not_ftrace(path, format));
    }
    let options = with_recorded_frees(&[path], options)?;
    let mut r = crate::trace::open_ftrace(path, options.lenient)?;
    validate_ftrace(&mut r, &options)
}

/// `options` with `recorded_frees` decided: as given, else whether the first trace has a
/// `free_iova_fast` kprobe line within 100,000 lines of its first `iommu:unmap` (the
/// kprobe fires at the free, at most a flush-queue timeout after the unmap).
fn with_recorded_frees(paths: &[&Path], options: &ValidateOptions) -> Result<ValidateOptions> {
    let mut o = options.clone();
    if o.recorded_frees.is_none() {
        o.recorded_frees = Some(match paths.first() {
            Some(p) => records_frees(p)?,
            None => false,
        });
    }
    Ok(o)
}

fn records_frees(path: &Path) -> Result<bool> {
    const AFTER_UNMAP: u64 = 100_000;
    let mut r = crate::trace::open_text(path)?;
    let mut line = Vec::with_capacity(256);
    let mut since_unmap: Option<u64> = None;
    loop {
        line.clear();
        let n = r
            .read_until(b'\n', &mut line)
            .map_err(|source| TraceError::Io {
                path: path.to_owned(),
                source,
            })?;
        if n == 0 {
            return Ok(false);
        }
        let has = |pat: &[u8]| line.windows(pat.len()).any(|w| w == pat);
        if has(b" free_iova_fast: ") {
            return Ok(true);
        }
        match &mut since_unmap {
            Some(k) => {
                *k += 1;
                if *k > AFTER_UNMAP {
                    return Ok(false);
                }
            }
            None if has(b" unmap: ") => since_unmap = Some(0),
            None => {}
        }
    }
}

fn invalid(key: &str, value: impl ToString, expected: &str) -> Error {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_string(),
        expected: expected.to_owned(),
    }
    .into()
}

impl ValidateOptions {
    /// Checks the options without reading a trace (a bad one is named as the option it is,
    /// not blamed on the trace).
    pub fn check(&self) -> Result<()> {
        check_options(self)
    }
}

fn check_options(o: &ValidateOptions) -> Result<()> {
    for (i, g) in o.groups.iter().enumerate() {
        if g.is_empty() || g.iter().any(String::is_empty) {
            return Err(invalid(
                "group",
                g.join(","),
                "device names separated by commas, none empty",
            ));
        }
        if let Some(d) = g
            .iter()
            .find(|d| o.groups[..i].iter().any(|h| h.contains(d)))
        {
            return Err(invalid(
                "group",
                g.join(","),
                &format!("groups without a device in common ({d} is in an earlier group)"),
            ));
        }
    }
    let mut domain = o.domain.clone();
    domain.magazine.cpus = 1;
    IovaDomain::new(&domain).map_err(ConfigError::from)?;
    if !o.kernel.starts_with("6.") && o.kernel != "6" {
        return Err(invalid(
            "kernel",
            &o.kernel,
            "a Linux 6.x version such as 6.12 (the modelled allocator is 6.x's)",
        ));
    }
    if !(0.0..1.0).contains(&o.warmup) {
        return Err(invalid("warmup", o.warmup, "a fraction 0 <= warmup < 1"));
    }
    if o.fq_size < 2 {
        return Err(invalid("fq_size", o.fq_size, "at least 2 (Linux: 256)"));
    }
    if o.cpus == Some(0) {
        return Err(invalid("cpus", 0, "at least 1"));
    }
    Ok(())
}

/// Validates ftrace text being read by `r`.
pub fn validate_ftrace<R: BufRead>(
    r: &mut FtraceReader<R>,
    options: &ValidateOptions,
) -> Result<ValidateReport> {
    check_options(options)?;
    let mut session = Session::default();
    session.trace(r, options)
}

/// Where a trace began in a session's counts.
#[derive(Clone, Copy, Debug, Default)]
struct TraceMark {
    allocations: usize,
    frees: u64,
    mapped_before_tracing: u64,
    recorded_frees: u64,
    recorded_unmatched: u64,
}

/// A mismatch as recorded while replaying (the device by slot, resolved at the end).
#[derive(Clone, Copy, Debug)]
struct MismatchRec {
    mode: Mode,
    kind: MismatchKind,
    cpu: u16,
    slot: usize,
    allocation: u64,
    line: u64,
    pages: u64,
    kernel: u64,
    model: Option<u64>,
}

/// A kernel allocation still live, per domain, keyed by its first page.
#[derive(Clone, Copy, Debug)]
struct Live {
    pages: u64,
    /// The open-loop model's first page for it (`None`: the model failed to allocate).
    open_pfn: Option<u64>,
    /// Whether the one-step model holds it (it could adopt the kernel's range).
    one_held: bool,
    line: u64,
}

/// One model (one mode): its domains, device states and flush queues.
#[derive(Debug)]
struct Model {
    domains: Vec<IovaDomain>,
    devices: Vec<DeviceIova>,
    fqs: Vec<FlushQueue>,
    /// Per domain, the model's live ranges' last free, for reuse distances (open loop).
    last_free: Vec<FxHashMap<u64, u64>>,
}

/// Where the kernel's `[pfn, pfn + pages)` was in `d`.
fn classify(
    d: &IovaDomain,
    fq: &FlushQueue,
    reserved: &[ByteRange],
    cpu: u16,
    pfn: u64,
    pages: u64,
) -> (MismatchKind, Option<CacheSite>) {
    let m = d.allocator();
    let size = m.rounded_pages(pages);
    let in_window = reserved.iter().any(|w| {
        let (p, n) = w.pages();
        p.get() < pfn + size && pfn < p.get() + n
    });
    if in_window {
        return (MismatchKind::Reserved, None);
    }
    let tree = m.inner();
    if pfn < tree.space_start().get() || pfn + size > tree.space_end().get() {
        return (MismatchKind::OutsideSpace, None);
    }
    // A cached or queued range is still allocated in the tree: without a node there, it is
    // free (and the `O(cached)` search of the magazines is skipped).
    if m.overlapping(Pfn::new(pfn), pages).is_none() {
        return (MismatchKind::FreeInTree, None);
    }
    if let Some(site) = m.locate(CpuId::new(cpu), Pfn::new(pfn), pages) {
        let kind = match site {
            CacheSite::Loaded { cpu: c, .. } | CacheSite::Prev { cpu: c } if c == cpu => {
                MismatchKind::ThisCpuCache
            }
            CacheSite::Depot { .. } => MismatchKind::Depot,
            _ => MismatchKind::OtherCache,
        };
        return (kind, Some(site));
    }
    if fq.holds(pfn, size) {
        return (MismatchKind::Queued, None);
    }
    (MismatchKind::InUse, None)
}

/// The validation state.
#[derive(Debug)]
struct Validator {
    options: ValidateOptions,
    config: DomainConfig,
    clock: ClockRate,
    cpus: usize,
    /// Trace device index → (domain, device slot); resolved on first sight.
    device_slot: Vec<Option<usize>>,
    /// Per device slot: (name, domain).
    slots: Vec<(String, usize)>,
    /// Domain names (group index or device) → domain index.
    domain_of_group: Vec<Option<usize>>,
    /// Per domain: its devices.
    domain_devices: Vec<Vec<String>>,
    open: Model,
    one: Model,
    live: Vec<BTreeMap<u64, Live>>,
    /// Kernel: when each domain's ranges were last freed (allocation count then), lazy.
    kernel_last_free: Vec<FxHashMap<u64, u64>>,
    /// Per domain: allocations so far.
    domain_allocs: Vec<u64>,
    /// Per allocation: device slot (bits 0..16), open-loop exact (16), one-step exact (17).
    outcomes: Vec<u32>,
    /// Mismatches kept for listing: with no warm-up the first `max_mismatches` of each mode;
    /// with one, every mismatch (where the warm-up ends is known only at the end).
    mismatches: Vec<MismatchRec>,
    /// Mismatches kept per mode.
    kept: [usize; 2],
    /// Whether the CPU count is the trace's or the user's (else an event on a higher CPU is
    /// an error: the model would share caches the machine did not).
    cpus_known: bool,
    frees: u64,
    /// Frees of ranges mapped before the trace began (learned, not errors).
    mapped_before_tracing: u64,
    /// The trace records every free (options.recorded_frees): unmapped ranges wait in
    /// `released` for theirs.
    recorded: bool,
    /// Per domain: ranges unmapped whose recorded free has not come yet.
    released: Vec<FxHashMap<u64, Live>>,
    /// Recorded frees' `iova_domain` pointers → domain, learned at the first unambiguous one.
    iovad_dom: FxHashMap<u64, usize>,
    recorded_frees: u64,
    recorded_unmatched: u64,
    lazy: LazyReport,
}

const OPEN_EXACT: u32 = 1 << 16;
const ONE_EXACT: u32 = 1 << 17;
/// Bits 18..22: the open-loop mismatch's kind + 1; 22..26: the one-step one's.
const OPEN_KIND_SHIFT: u32 = 18;
const ONE_KIND_SHIFT: u32 = 22;
const KIND_MASK: u32 = 0xf;

fn kind_code(k: MismatchKind) -> u32 {
    MismatchKind::ALL
        .iter()
        .position(|&x| x == k)
        .and_then(|i| u32::try_from(i + 1).ok())
        .unwrap_or(0)
}

fn kind_of(code: u32) -> Option<MismatchKind> {
    MismatchKind::ALL
        .get(usize::try_from(code).ok()?.checked_sub(1)?)
        .copied()
}

impl Validator {
    fn new(options: &ValidateOptions, cpus: usize) -> Result<Self> {
        let mut config = options.domain.clone();
        config.magazine.cpus = cpus;
        // Fail on a bad config before reading on.
        IovaDomain::new(&config).map_err(ConfigError::from)?;
        let model = || Model {
            domains: Vec::new(),
            devices: Vec::new(),
            fqs: Vec::new(),
            last_free: Vec::new(),
        };
        Ok(Validator {
            options: options.clone(),
            config,
            clock: ClockRate::GHZ_1,
            cpus,
            device_slot: Vec::new(),
            slots: Vec::new(),
            domain_of_group: vec![None; options.groups.len()],
            domain_devices: Vec::new(),
            open: model(),
            one: model(),
            live: Vec::new(),
            kernel_last_free: Vec::new(),
            domain_allocs: Vec::new(),
            outcomes: Vec::new(),
            mismatches: Vec::new(),
            kept: [0; 2],
            cpus_known: true,
            frees: 0,
            mapped_before_tracing: 0,
            recorded: options.recorded_frees == Some(true),
            released: Vec::new(),
            iovad_dom: FxHashMap::default(),
            recorded_frees: 0,
            recorded_unmatched: 0,
            lazy: LazyReport::default(),
        })
    }

    /// The device slot of trace device `dev`, creating its domain on first sight.
    fn slot(&mut self, dev: u16, name: &str) -> Result<usize> {
        let i = usize::from(dev);
        if self.device_slot.len() <= i {
            self.device_slot.resize(i + 1, None);
        }
        if let Some(s) = self.device_slot[i] {
            return Ok(s);
        }
        // A device an earlier trace of the session named.
        if let Some(s) = self.slots.iter().position(|(n, _)| n == name) {
            self.device_slot[i] = Some(s);
            return Ok(s);
        }
        let group = self
            .options
            .groups
            .iter()
            .position(|g| g.iter().any(|d| d == name));
        let domain = match group.and_then(|g| self.domain_of_group[g]) {
            Some(d) => d,
            None => {
                let d = IovaDomain::new(&self.config).map_err(ConfigError::from)?;
                self.open.domains.push(d.clone());
                self.one.domains.push(d);
                for m in [&mut self.open, &mut self.one] {
                    m.fqs.push(FlushQueue::new(
                        self.options.fq_size,
                        self.options.fq_timeout_ms,
                        self.options.fq_hz,
                    ));
                    m.last_free.push(FxHashMap::default());
                }
                self.live.push(BTreeMap::new());
                self.released.push(FxHashMap::default());
                self.kernel_last_free.push(FxHashMap::default());
                self.domain_allocs.push(0);
                self.domain_devices.push(Vec::new());
                let d = self.open.domains.len() - 1;
                if let Some(g) = group {
                    self.domain_of_group[g] = Some(d);
                }
                d
            }
        };
        self.domain_devices[domain].push(name.to_owned());
        let mask = self
            .options
            .dma_masks
            .iter()
            .find(|(d, _)| d == name)
            .map_or(u64::MAX, |&(_, m)| m);
        let dev_iova = DeviceIova::new(mask, is_pci_name(name), self.config.forcedac);
        self.open.devices.push(dev_iova);
        self.one.devices.push(dev_iova);
        self.slots.push((name.to_owned(), domain));
        let s = self.slots.len() - 1;
        self.device_slot[i] = Some(s);
        Ok(s)
    }

    fn apply(
        &mut self,
        op: &Op,
        header: &crate::trace::TraceHeader,
        path: &Path,
        skipped: &mut Skipped,
    ) -> Result<()> {
        if op.kind == OpKind::RecordedFree {
            self.recorded_free(op);
            return Ok(());
        }
        let name = header
            .devices
            .get(usize::from(op.device()))
            .cloned()
            .unwrap_or_default();
        let slot = self.slot(op.device(), &name)?;
        let dom = self.slots[slot].1;
        let now = op.time_ns;
        for m in [&mut self.open, &mut self.one] {
            m.domains[dom].on_tick(Cycles::new(now), self.clock);
            if self.options.lazy {
                let Model { domains, fqs, .. } = m;
                fqs[dom].tick(&mut domains[dom], now);
            }
        }
        match op.kind {
            OpKind::Alloc => self.alloc(op, slot, dom, &name, path, skipped),
            OpKind::Free | OpKind::RecordedFree => self.free(op, dom, path, skipped),
        }
    }

    fn alloc(
        &mut self,
        op: &Op,
        slot: usize,
        dom: usize,
        name: &str,
        path: &Path,
        skipped: &mut Skipped,
    ) -> Result<()> {
        let (k, pages) = (op.pfn, op.pages());
        let cpu = CpuId::new(op.cpu);
        // Ranges are disjoint: only the last one starting below the new end can overlap.
        if let Some((&pfn, l)) = self.live[dom]
            .range(..k + pages)
            .next_back()
            .filter(|(p, l)| k < **p + l.pages)
        {
            if !self.options.lenient {
                return Err(error_at(
                    path,
                    op.line,
                    "an allocation of a range free in its domain (devices sharing an IOMMU group share a domain: --group)",
                    format!(
                        "{name}: [{:#x}, {:#x}) overlaps [{:#x}, {:#x}) mapped at line {} and not yet unmapped",
                        k << SHIFT,
                        (k + pages) << SHIFT,
                        pfn << SHIFT,
                        (pfn + l.pages) << SHIFT,
                        l.line
                    ),
                )
                .into());
            }
            skipped.overlapping_allocations += 1;
            return Ok(());
        }
        if !self.cpus_known && usize::from(op.cpu) >= self.cpus {
            return Err(invalid(
                "cpus",
                format!("{} (the trace's header gives no CPU count)", self.cpus),
                &format!(
                    "at least {}: the trace has events on CPU {} (pass --cpus)",
                    op.cpu + 1,
                    op.cpu
                ),
            ));
        }
        let index = self.outcomes.len() as u64;
        let mut outcome = u32::try_from(slot).unwrap_or(0xffff) & 0xffff;
        // Reuse distance (lazy report): allocations in this domain since the range's unmap.
        let n = self.domain_allocs[dom];
        if self.options.lazy
            && let Some(at) = self.kernel_last_free[dom].remove(&k)
        {
            self.lazy.kernel_reuse_distance.add(n - at);
        }
        self.domain_allocs[dom] += 1;
        let rec = |mode, kind, model| MismatchRec {
            mode,
            kind,
            cpu: op.cpu,
            slot,
            allocation: index,
            line: op.line,
            pages,
            kernel: k,
            model,
        };
        let reserved = &self.config.reserved;

        // Open loop: the model allocates; the kernel's address maps to the model's.
        let m = &mut self.open;
        let got = m.domains[dom]
            .alloc_iova(&mut m.devices[slot], cpu, pages)
            .ok()
            .map(Pfn::get);
        let mut open_miss = None;
        if got == Some(k) {
            outcome |= OPEN_EXACT;
        } else {
            let (kind, _) = classify(&m.domains[dom], &m.fqs[dom], reserved, op.cpu, k, pages);
            outcome |= kind_code(kind) << OPEN_KIND_SHIFT;
            open_miss = Some(rec(Mode::OpenLoop, kind, got));
        }
        if self.options.lazy
            && let Some(p) = got
            && let Some(at) = m.last_free[dom].remove(&p)
        {
            self.lazy.model_reuse_distance.add(n - at);
        }

        // One step: predict, then adopt the kernel's choice.
        let m = &mut self.one;
        let predicted = m.domains[dom]
            .peek_iova(&m.devices[slot], cpu, pages)
            .map(Pfn::get);
        let mut one_miss = None;
        let one_held = if predicted == Some(k) {
            let made = m.domains[dom]
                .alloc_iova(&mut m.devices[slot], cpu, pages)
                .ok()
                .map(Pfn::get);
            debug_assert_eq!(made, Some(k), "peek_iova and alloc_iova disagree");
            outcome |= ONE_EXACT;
            made == Some(k)
        } else {
            let (kind, site) = classify(&m.domains[dom], &m.fqs[dom], reserved, op.cpu, k, pages);
            outcome |= kind_code(kind) << ONE_KIND_SHIFT;
            one_miss = Some(rec(Mode::OneStep, kind, predicted));
            // The kernel went above 4 GiB: its 32-bit attempt failed, and it stopped trying.
            if k + pages > 1 << 20 {
                m.devices[slot].pci_32bit_workaround = false;
            }
            let alloc = m.domains[dom].allocator_mut();
            match (kind, site) {
                // The kernel's CPU allocated from its own magazine: adopt the magazine.
                (
                    MismatchKind::ThisCpuCache | MismatchKind::OtherCache | MismatchKind::Depot,
                    Some(_),
                ) => alloc.adopt_cached(cpu, Pfn::new(k), pages).is_ok(),
                (MismatchKind::FreeInTree, _) => alloc.place(Pfn::new(k), pages).is_ok(),
                (MismatchKind::Queued, _) => m.fqs[dom].remove(k),
                _ => false,
            }
        };
        for r in [open_miss, one_miss].into_iter().flatten() {
            self.record(r);
        }
        self.live[dom].insert(
            k,
            Live {
                pages,
                open_pfn: got,
                one_held,
                line: op.line,
            },
        );
        self.outcomes.push(outcome);
        Ok(())
    }

    /// Keeps a mismatch for listing (see `mismatches`).
    fn record(&mut self, m: MismatchRec) {
        let i = usize::from(m.mode == Mode::OneStep);
        if self.options.warmup > 0.0 || self.kept[i] < self.options.max_mismatches {
            self.kept[i] += 1;
            self.mismatches.push(m);
        }
    }

    fn free(&mut self, op: &Op, dom: usize, path: &Path, skipped: &mut Skipped) -> Result<()> {
        let k = op.pfn;
        let l = match self.live[dom].remove(&k) {
            Some(l) => l,
            None if self.options.strict_trace => {
                if !self.options.lenient {
                    return Err(error_at(
                        path,
                        op.line,
                        "an iommu:unmap of a range the trace mapped (--strict-trace: start tracing before the driver maps anything, or drop --strict-trace)",
                        format!(
                            "[{:#x}, {:#x}) on CPU {} was never mapped in this trace",
                            k << SHIFT,
                            op.end << SHIFT,
                            op.cpu
                        ),
                    )
                    .into());
                }
                skipped.unknown_frees += 1;
                return Ok(());
            }
            None => self.learn_mapped_before_tracing(op, dom),
        };
        self.frees += 1;
        let n = self.domain_allocs[dom];
        let lazy = self.options.lazy;
        if lazy {
            self.kernel_last_free[dom].insert(k, n);
        }
        if self.recorded {
            // Unmapped; back in the allocator at its recorded free.
            self.released[dom].insert(k, l);
            return Ok(());
        }
        let cpu = CpuId::new(op.cpu);
        let release = |m: &mut Model, pfn: u64| {
            if lazy {
                let Model {
                    domains,
                    fqs,
                    last_free,
                    ..
                } = m;
                fqs[dom].queue(&mut domains[dom], op.cpu, pfn, l.pages, op.time_ns);
                last_free[dom].insert(pfn, n);
            } else {
                let _ = m.domains[dom].free_iova(cpu, Pfn::new(pfn), l.pages);
            }
        };
        if let Some(p) = l.open_pfn {
            release(&mut self.open, p);
        }
        if l.one_held {
            release(&mut self.one, k);
        }
        Ok(())
    }

    /// A recorded free (`free_iova_fast` kprobe): the range unmapped earlier goes back to
    /// each model's allocator now, on the CPU that freed it. Its domain is the one its
    /// `iova_domain` pointer was learned for, else the only one with that range unmapped.
    fn recorded_free(&mut self, op: &Op) {
        let pfn = op.pfn;
        let dom = match self.iovad_dom.get(&op.iovad) {
            Some(&d) => self.released[d].contains_key(&pfn).then_some(d),
            None => {
                let mut with =
                    (0..self.released.len()).filter(|&d| self.released[d].contains_key(&pfn));
                let first = with.next();
                if let Some(d) = first
                    && with.next().is_none()
                    && op.iovad != 0
                {
                    self.iovad_dom.insert(op.iovad, d);
                }
                first
            }
        };
        let Some((dom, l)) = dom.and_then(|d| Some((d, self.released[d].remove(&pfn)?))) else {
            self.recorded_unmatched += 1;
            return;
        };
        self.recorded_frees += 1;
        let now = op.time_ns;
        let cpu = CpuId::new(op.cpu);
        let n = self.domain_allocs[dom];
        for m in [&mut self.open, &mut self.one] {
            m.domains[dom].on_tick(Cycles::new(now), self.clock);
        }
        if let Some(p) = l.open_pfn {
            let _ = self.open.domains[dom].free_iova(cpu, Pfn::new(p), l.pages);
            if self.options.lazy {
                self.open.last_free[dom].insert(p, n);
            }
        }
        if l.one_held {
            let _ = self.one.domains[dom].free_iova(cpu, Pfn::new(pfn), l.pages);
        }
    }

    /// A range freed that the trace never showed mapped: the kernel mapped it before tracing
    /// began. Each model takes it where the kernel had it (out of its tree's free space, or
    /// out of a cache where the model thought it free), so the free that follows puts it
    /// where the kernel's did; a model that has it in use itself leaves it alone.
    fn learn_mapped_before_tracing(&mut self, op: &Op, dom: usize) -> Live {
        self.mapped_before_tracing += 1;
        let (pfn, pages) = (Pfn::new(op.pfn), op.pages());
        let cpu = CpuId::new(op.cpu);
        let hold = |m: &mut Model| {
            let a = m.domains[dom].allocator_mut();
            if a.overlapping(pfn, pages).is_none() {
                a.place(pfn, pages).is_ok()
            } else {
                a.take_cached(cpu, pfn, pages).is_ok() || m.fqs[dom].remove(op.pfn)
            }
        };
        let open_held = hold(&mut self.open);
        let one_held = hold(&mut self.one);
        Live {
            pages,
            open_pfn: open_held.then_some(op.pfn),
            one_held,
            line: op.line,
        }
    }

    /// Starts another trace of the session: its device table is its own; its first
    /// mismatches are listed afresh.
    fn begin_trace(&mut self) -> TraceMark {
        self.device_slot.clear();
        self.kept = [0; 2];
        TraceMark {
            allocations: self.outcomes.len(),
            frees: self.frees,
            mapped_before_tracing: self.mapped_before_tracing,
            recorded_frees: self.recorded_frees,
            recorded_unmatched: self.recorded_unmatched,
        }
    }

    /// The report of the allocations since `mark`.
    fn report(
        &mut self,
        trace: &str,
        mark: TraceMark,
        cpus_from: String,
        skipped: Skipped,
        direct_mappings: u64,
    ) -> ValidateReport {
        let from = mark.allocations.min(self.outcomes.len());
        let outcomes = &self.outcomes[from..];
        let allocations = outcomes.len() as u64;
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let warm = (self.options.warmup * allocations as f64).ceil() as u64;
        let base = from as u64;
        let scored_range = base + warm..base + allocations;
        let mut devices: Vec<(u64, u64, u64, u64)> = vec![(0, 0, 0, 0); self.slots.len()];
        let (mut open_exact, mut one_exact) = (0, 0);
        for (i, &o) in outcomes.iter().enumerate() {
            let d = &mut devices[(o & 0xffff) as usize];
            d.0 += 1;
            if scored_range.contains(&(base + i as u64)) {
                d.1 += 1;
                if o & OPEN_EXACT != 0 {
                    d.2 += 1;
                    open_exact += 1;
                }
                if o & ONE_EXACT != 0 {
                    d.3 += 1;
                    one_exact += 1;
                }
            }
        }
        let scored = scored_range.end - scored_range.start;
        let mut kinds = KindCounts::default();
        let mut scored_mismatches = 0u64;
        for &o in &outcomes[usize::try_from(warm)
            .unwrap_or(usize::MAX)
            .min(outcomes.len())..]
        {
            for (shift, map) in [
                (OPEN_KIND_SHIFT, &mut kinds.open_loop),
                (ONE_KIND_SHIFT, &mut kinds.one_step),
            ] {
                if let Some(kind) = kind_of((o >> shift) & KIND_MASK) {
                    *map.entry(kind).or_insert(0) += 1;
                    scored_mismatches += 1;
                }
            }
        }
        let mut listed = Vec::new();
        let mut per_mode_listed = [0usize; 2];
        for m in &self.mismatches {
            if !scored_range.contains(&m.allocation) {
                continue;
            }
            let i = usize::from(m.mode == Mode::OneStep);
            if per_mode_listed[i] < self.options.max_mismatches {
                per_mode_listed[i] += 1;
                listed.push(Mismatch {
                    mode: m.mode,
                    allocation: m.allocation,
                    line: m.line,
                    device: self.slots[m.slot].0.clone(),
                    cpu: m.cpu,
                    pages: m.pages,
                    kernel_iova: m.kernel << SHIFT,
                    model_iova: m.model.map(|p| p << SHIFT),
                    kind: m.kind,
                });
            }
        }
        listed.sort_by_key(|m| (m.mode, m.allocation));
        let not_listed = scored_mismatches - listed.len() as u64;
        let devices = devices
            .iter()
            .zip(&self.slots)
            .filter(|((a, ..), _)| *a > 0)
            .map(|(&(a, s, o, e), (name, dom))| DeviceResult {
                device: name.clone(),
                domain: *dom,
                allocations: a,
                scored: s,
                open_loop: ModeResult::new(o, s),
                one_step: ModeResult::new(e, s),
                open_loop_rate: rate(o, s),
                one_step_rate: rate(e, s),
            })
            .collect();
        let lazy = self.options.lazy.then(|| {
            let (mut hits, mut misses) = (0, 0);
            for d in &self.open.domains {
                hits += d.allocator().stats().cache_hits;
                misses += d.allocator().stats().cache_misses;
            }
            let mut l = self.lazy.clone();
            l.model_cache_hit_fraction = rate(hits, hits + misses);
            l.model_full_flushes = self.open.fqs.iter().map(|f| f.full_flushes).sum();
            l.model_timer_flushes = self.open.fqs.iter().map(|f| f.timer_flushes).sum();
            l.trace_flushes = None;
            l
        });
        let open_loop = ModeResult::new(open_exact, scored);
        let one_step = ModeResult::new(one_exact, scored);
        ValidateReport {
            trace: trace.to_owned(),
            kernel: self.options.kernel.clone(),
            invalidation: if self.options.lazy { "lazy" } else { "strict" }.to_owned(),
            cpus: self.cpus,
            cpus_from,
            allocations,
            frees: self.frees - mark.frees,
            warmup: self.options.warmup,
            scored,
            open_loop_rate: open_loop.rate,
            one_step_rate: one_step.rate,
            open_loop,
            one_step,
            devices,
            mismatch_kinds: kinds,
            first_mismatches: listed,
            mismatches_not_listed: not_listed,
            skipped,
            direct_mappings,
            mapped_before_tracing: self.mapped_before_tracing - mark.mapped_before_tracing,
            recorded_frees: self.recorded_frees - mark.recorded_frees,
            recorded_frees_unmatched: self.recorded_unmatched - mark.recorded_unmatched,
            lazy,
            domains: self.domain_devices.clone(),
        }
    }
}

/// A PCI device name (`0000:00:04.0`, domain optional): the 32-bit first attempt applies.
fn is_pci_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split(':').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let (bus, devfn) = match parts.as_slice() {
        [dom, bus, devfn] if hex(dom, 4) => (*bus, *devfn),
        [bus, devfn] => (*bus, *devfn),
        _ => return false,
    };
    let Some((dev, func)) = devfn.split_once('.') else {
        return false;
    };
    hex(bus, 2) && hex(dev, 2) && func.len() == 1 && func.bytes().all(|b| b.is_ascii_digit())
}
