//! What a validation reports: the modes' scores, per device, the mismatches and their kinds,
//! and lazy mode's reuse distances; the text a person reads.

use super::*;

/// The replay mode of a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The model keeps its own choices.
    OpenLoop,
    /// The model adopts the kernel's choice after each prediction.
    OneStep,
}

impl Mode {
    /// Both, in report order.
    pub const ALL: [Mode; 2] = [Mode::OpenLoop, Mode::OneStep];

    /// Its name (`open_loop`, `one_step`).
    pub const fn name(self) -> &'static str {
        match self {
            Mode::OpenLoop => "open_loop",
            Mode::OneStep => "one_step",
        }
    }
}

/// Where the kernel's range was in the model when the model picked another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MismatchKind {
    /// Free in the model's tree: the model's search went elsewhere (or its cache served).
    FreeInTree,
    /// In this CPU's magazines, but not where the next pop would take from.
    ThisCpuCache,
    /// In another CPU's magazines.
    OtherCache,
    /// In a full magazine in the depot.
    Depot,
    /// Still in use in the model (allocated, or cached with another size).
    InUse,
    /// In the model's flush queue, not yet freed (lazy mode).
    Queued,
    /// Inside a window the model reserves (the reserved windows do not match the machine's).
    Reserved,
    /// Outside the model's space (start page, aperture).
    OutsideSpace,
}

impl MismatchKind {
    /// Every kind.
    pub const ALL: [MismatchKind; 8] = [
        MismatchKind::FreeInTree,
        MismatchKind::ThisCpuCache,
        MismatchKind::OtherCache,
        MismatchKind::Depot,
        MismatchKind::InUse,
        MismatchKind::Queued,
        MismatchKind::Reserved,
        MismatchKind::OutsideSpace,
    ];

    /// Its name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            MismatchKind::FreeInTree => "free_in_tree",
            MismatchKind::ThisCpuCache => "this_cpu_cache",
            MismatchKind::OtherCache => "other_cache",
            MismatchKind::Depot => "depot",
            MismatchKind::InUse => "in_use",
            MismatchKind::Queued => "queued",
            MismatchKind::Reserved => "reserved",
            MismatchKind::OutsideSpace => "outside_space",
        }
    }
}

/// One mode's score.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModeResult {
    /// Scored allocations the model predicted exactly.
    pub exact: u64,
    /// Scored allocations.
    pub scored: u64,
    /// `exact / scored` (0–1), `None` with nothing scored.
    pub rate: Option<f64>,
}

impl ModeResult {
    pub(super) fn new(exact: u64, scored: u64) -> Self {
        ModeResult {
            exact,
            scored,
            rate: rate(exact, scored),
        }
    }
}

pub(super) fn rate(exact: u64, scored: u64) -> Option<f64> {
    #[allow(clippy::cast_precision_loss)]
    (scored > 0).then(|| exact as f64 / scored as f64)
}

/// One device's scores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceResult {
    /// The device's name (`0000:00:04.0`).
    pub device: String,
    /// Its domain (an index; devices of one group share it).
    pub domain: usize,
    /// Its allocations (warm-up included).
    pub allocations: u64,
    /// Scored allocations.
    pub scored: u64,
    /// Open-loop score.
    pub open_loop: ModeResult,
    /// One-step score.
    pub one_step: ModeResult,
    /// `open_loop.rate`.
    pub open_loop_rate: Option<f64>,
    /// `one_step.rate`.
    pub one_step_rate: Option<f64>,
}

/// One mispredicted allocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    /// The mode.
    pub mode: Mode,
    /// The allocation's index (0-based, in trace order).
    pub allocation: u64,
    /// The trace line of its first `iommu:map`.
    pub line: u64,
    /// The device.
    pub device: String,
    /// The CPU.
    pub cpu: u16,
    /// Pages asked for (the mapped span).
    pub pages: u64,
    /// The kernel's IOVA (bytes).
    pub kernel_iova: u64,
    /// The model's IOVA (`None`: the model found no space).
    pub model_iova: Option<u64>,
    /// Where the kernel's range was in the model.
    pub kind: MismatchKind,
}

/// Mismatch kinds per mode.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCounts {
    /// Open loop.
    pub open_loop: BTreeMap<MismatchKind, u64>,
    /// One step.
    pub one_step: BTreeMap<MismatchKind, u64>,
}

/// What lazy mode can validate without the flush times.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LazyReport {
    /// Kernel: allocations between a range's unmap and its next allocation in the same
    /// domain (log2 buckets; ranges never reused are not counted).
    pub kernel_reuse_distance: Log2Histogram,
    /// The open-loop model's, measured the same way on its own addresses.
    pub model_reuse_distance: Log2Histogram,
    /// Fraction of the open-loop model's cacheable allocations served from a magazine.
    pub model_cache_hit_fraction: Option<f64>,
    /// The open-loop model's flush-queue flushes: because a CPU's queue was full.
    pub model_full_flushes: u64,
    /// ... and at timer expiry.
    pub model_timer_flushes: u64,
    /// Whole-domain flushes the trace shows (it has no flush tracepoint: `None`).
    pub trace_flushes: Option<u64>,
}

/// The result of a validation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidateReport {
    /// The trace file.
    pub trace: String,
    /// The kernel version modelled.
    pub kernel: String,
    /// `strict` or `lazy`.
    pub invalidation: String,
    /// CPUs modelled.
    pub cpus: usize,
    /// Where the CPU count came from.
    pub cpus_from: String,
    /// Allocations replayed.
    pub allocations: u64,
    /// Frees replayed.
    pub frees: u64,
    /// The warm-up fraction.
    pub warmup: f64,
    /// Allocations scored (those after the warm-up).
    pub scored: u64,
    /// `open_loop.rate`.
    pub open_loop_rate: Option<f64>,
    /// `one_step.rate`.
    pub one_step_rate: Option<f64>,
    /// Open-loop score.
    pub open_loop: ModeResult,
    /// One-step score.
    pub one_step: ModeResult,
    /// Per device, in order of first allocation.
    pub devices: Vec<DeviceResult>,
    /// Scored mismatches by kind, per mode.
    pub mismatch_kinds: KindCounts,
    /// The first scored mismatches of each mode (at most `max_mismatches` each).
    pub first_mismatches: Vec<Mismatch>,
    /// Scored mismatches not listed.
    pub mismatches_not_listed: u64,
    /// What was skipped (lenient mode; all zero otherwise).
    pub skipped: Skipped,
    /// Direct mappings left out in either mode: identity `iommu:map` runs no DMA-API call
    /// made (`iommu_create_device_direct_mappings`; group.rs).
    pub direct_mappings: u64,
    /// Frees of ranges mapped before tracing began (a capture that starts mid-run): each
    /// was learned where the kernel had it, then freed.
    pub mapped_before_tracing: u64,
    /// Frees replayed at their recorded moment and CPU (a `free_iova_fast` kprobe).
    pub recorded_frees: u64,
    /// Recorded frees of no range the trace had unmapped (one unmapped before tracing).
    pub recorded_frees_unmatched: u64,
    /// Lazy mode's extra checks.
    pub lazy: Option<LazyReport>,
    /// Domains and the devices in them.
    pub domains: Vec<Vec<String>>,
}

impl ValidateReport {
    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let pct =
            |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |r| format!("{:.2}%", r * 100.0));
        let mut t = format!(
            "{}: Linux {} allocator, {} invalidation, {} CPU(s) ({})\n",
            self.trace, self.kernel, self.invalidation, self.cpus, self.cpus_from
        );
        t.push_str(&format!(
            "{} allocations, {} frees; {} scored after a warm-up of {}\n",
            self.allocations, self.frees, self.scored, self.warmup
        ));
        t.push_str(&format!(
            "exact: open loop {} ({}/{}), one step {} ({}/{})\n",
            pct(self.open_loop_rate),
            self.open_loop.exact,
            self.open_loop.scored,
            pct(self.one_step_rate),
            self.one_step.exact,
            self.one_step.scored
        ));
        t.push_str(&format!(
            "{:<16} {:>6} {:>8} {:>8} {:>10} {:>10}\n",
            "device", "domain", "allocs", "scored", "open loop", "one step"
        ));
        for d in &self.devices {
            t.push_str(&format!(
                "{:<16} {:>6} {:>8} {:>8} {:>10} {:>10}\n",
                d.device,
                d.domain,
                d.allocations,
                d.scored,
                pct(d.open_loop_rate),
                pct(d.one_step_rate)
            ));
        }
        for (mode, kinds) in [
            (Mode::OpenLoop, &self.mismatch_kinds.open_loop),
            (Mode::OneStep, &self.mismatch_kinds.one_step),
        ] {
            if !kinds.is_empty() {
                let list: Vec<String> = kinds
                    .iter()
                    .map(|(k, n)| format!("{} {n}", k.name()))
                    .collect();
                t.push_str(&format!(
                    "{} mismatches: {}\n",
                    mode.name(),
                    list.join(", ")
                ));
            }
        }
        for m in &self.first_mismatches {
            t.push_str(&format!(
                "{}:{}: {} #{} {} cpu {} {} page(s): kernel {:#x}, model {}, {}\n",
                self.trace,
                m.line,
                m.mode.name(),
                m.allocation,
                m.device,
                m.cpu,
                m.pages,
                m.kernel_iova,
                m.model_iova
                    .map_or_else(|| "none".to_owned(), |a| format!("{a:#x}")),
                m.kind.name()
            ));
        }
        if self.mismatches_not_listed > 0 {
            t.push_str(&format!(
                "... {} more mismatches (--json lists the first of each mode)\n",
                self.mismatches_not_listed
            ));
        }
        if self.skipped.total() > 0 {
            t.push_str(&format!("skipped (lenient): {:?}\n", self.skipped));
        }
        if self.direct_mappings > 0 {
            t.push_str(&format!(
                "direct mappings (identity iommu:map runs outside the DMA API), not replayed: {}\n",
                self.direct_mappings
            ));
        }
        if self.mapped_before_tracing > 0 {
            t.push_str(&format!(
                "mapped before tracing (freed, never mapped in the trace; learned where the kernel had them): {}\n",
                self.mapped_before_tracing
            ));
        }
        if self.recorded_frees + self.recorded_frees_unmatched > 0 {
            t.push_str(&format!(
                "frees at their recorded moment and CPU (free_iova_fast kprobe): {}; of no range unmapped in the trace: {}\n",
                self.recorded_frees, self.recorded_frees_unmatched
            ));
        }
        if let Some(l) = &self.lazy {
            t.push_str(&format!(
                "lazy: reuse distance (allocations in the domain between a range's unmap and its next allocation): median kernel {}, model {}; within 511: kernel {}, model {}\n",
                median_bucket(&l.kernel_reuse_distance),
                median_bucket(&l.model_reuse_distance),
                pct(share_below(&l.kernel_reuse_distance, 10)),
                pct(share_below(&l.model_reuse_distance, 10))
            ));
            t.push_str(&format!(
                "lazy: model cache hits {}, model flushes {} full + {} timer; trace flushes not recorded\n",
                pct(l.model_cache_hit_fraction),
                l.model_full_flushes,
                l.model_timer_flushes
            ));
        }
        t
    }
}

/// The log2 bucket holding the median value, as text (`256-511`; `-` when empty).
pub(super) fn median_bucket(h: &Log2Histogram) -> String {
    let half = h.total().div_ceil(2);
    let mut seen = 0;
    for (i, &n) in h.buckets.iter().enumerate() {
        seen += n;
        if n > 0 && seen >= half {
            return Log2Histogram::label(i);
        }
    }
    "-".to_owned()
}

/// The fraction of values in buckets below `bucket` (bucket 10: values up to 511).
pub(super) fn share_below(h: &Log2Histogram, bucket: usize) -> Option<f64> {
    let below: u64 = h.buckets.iter().take(bucket).sum();
    rate(below, h.total())
}
