//! The largest values a configuration accepts, each with the reason for its bound: past
//! them a run would not fit in memory, overflow a counter or run for ever.

/// The longest `duration_s`: an hour of modeled time, 120 times S0.8's 30 s run. A run that
/// long takes minutes of wall time already; past it a slip such as `1e300` would run for
/// ever (the clock saturates before the run's end), so it is refused.
pub const MAX_DURATION_S: f64 = 3600.0;

/// The largest deferred-flush array (`mechanisms.flush.entries` of `deferred`): 2^20, S0.8's
/// "as rarely as the bitmap" array.
pub const MAX_DEFERRED_ENTRIES: usize = 1 << 20;

/// The largest flush queue per CPU: Linux's `IOVA_SINGLE_FQ_SIZE`.
pub const MAX_FQ_ENTRIES: usize = 32_768;

/// The longest flush timer: a minute (Linux: 10 ms).
pub const MAX_FLUSH_TIMEOUT_MS: u64 = 60_000;

/// The most IOTLB entries (`sets × ways`): 2^20, thousands of times any published IOTLB;
/// the model keeps every entry in memory.
pub const MAX_IOTLB_ENTRIES: usize = 1 << 20;

/// The largest TCE table: 8 Mi entries, Calgary's largest (`TCE_TABLE_SIZE_8M` in Linux's
/// `pci-calgary_64.c`), so a TCE unit covers `dma_bits` up to 35.
pub const MAX_TCE_ENTRIES: u64 = 1 << 23;

/// The largest guest: 1 TiB. The host keeps 5 bytes per guest page (pin count and
/// permissions), 1.3 GB at this size.
pub const MAX_GUEST_MIB: u64 = 1 << 20;

/// The most requests per Xen multicall (`system.batch`).
pub const MAX_XEN_BATCH: u32 = 65_536;

/// The highest price a `hardware.cost_overrides` field may name: 10^8 cycles, a thirtieth of
/// a second at 3 GHz, about 10^4 times the dearest measured price (a hypercall). The model
/// multiplies prices by counts without overflow checks on its hot paths; this keeps
/// `price × count` in 64 bits for runs of up to 10^11 operations.
pub const MAX_PRICE_CYCLES: u64 = 100_000_000;

/// The clock rates a `hardware.cost_overrides.ghz` may name: 0.1–100 GHz.
pub const GHZ_RANGE: std::ops::RangeInclusive<f64> = 0.1..=100.0;
