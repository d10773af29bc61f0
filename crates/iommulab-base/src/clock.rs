//! The modeled clock: [`Cycles`] of the modeled CPU and its [`ClockRate`], with the one set of
//! conversions between cycles and simulated time.
//!
//! A run keeps two clocks. The **modeled** one counts [`Cycles`]: every
//! counted primitive (hardware work, kernel software, device page walks) adds its price from
//! the cost model, and the flush and magazine timers fire by it, so runs are deterministic.
//! Workloads and traces keep their own time in nanoseconds (`DmaOp::Tick`); timeouts are
//! configured in milliseconds; results report nanoseconds. [`ClockRate`] is the one place
//! those units meet. The **measured** clock (wall time of iommulab's own code) lives only in
//! `experiment::runner`.

use serde::{Deserialize, Serialize};

/// A count of CPU cycles on the modeled machine.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Cycles(u64);

impl Cycles {
    /// Zero cycles.
    pub const ZERO: Cycles = Cycles(0);
    /// Wraps a raw cycle count.
    pub const fn new(raw: u64) -> Self {
        Self(raw)
    }
    /// The raw count.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// Adds `c` cycles (saturating: a run never gets near 2^64 cycles).
    pub fn add(&mut self, c: u64) {
        self.0 = self.0.saturating_add(c);
    }
    /// `self - earlier`, zero if `earlier` is later.
    pub const fn since(self, earlier: Cycles) -> Cycles {
        Cycles(self.0.saturating_sub(earlier.0))
    }
}

impl std::ops::Add for Cycles {
    type Output = Cycles;
    fn add(self, rhs: Cycles) -> Cycles {
        Cycles(self.0.saturating_add(rhs.0))
    }
}

/// The clock rate of the modeled CPU, in **GHz** (cycles per nanosecond): what turns
/// [`Cycles`] into time and back. Always positive and finite.
///
/// It is written as a plain number of GHz in configurations and results (`ghz = 3.0` in a
/// cost model's TOML), and a number that is not a positive, finite rate is rejected there.
///
/// # Examples
/// ```
/// use iommulab_base::clock::{ClockRate, Cycles};
/// let rate = ClockRate::ghz(3.0);
/// assert_eq!(rate.cycles_from_ns(1_000), Cycles::new(3_000));
/// assert_eq!(rate.cycles_from_ms(10), Cycles::new(30_000_000));
/// assert_eq!(rate.ns(Cycles::new(3_000)), 1_000.0);
/// assert!(ClockRate::try_from(0.0).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct ClockRate(f64);

/// A clock rate that is zero, negative, infinite or not a number.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error("a clock rate must be a positive, finite number of GHz, not {0}")]
pub struct ClockRateError(pub f64);

impl ClockRate {
    /// 1 GHz: one cycle per nanosecond.
    pub const GHZ_1: ClockRate = ClockRate(1.0);

    /// `ghz` GHz, for rates known to be valid (presets, tests).
    ///
    /// # Panics
    /// If `ghz` is not positive and finite (at compile time in a `const`); use
    /// [`ClockRate::try_from`] for input.
    pub const fn ghz(ghz: f64) -> Self {
        assert!(
            ghz.is_finite() && ghz > 0.0,
            "clock rate not positive and finite"
        );
        ClockRate(ghz)
    }

    /// The rate in GHz (cycles per nanosecond).
    pub const fn as_ghz(self) -> f64 {
        self.0
    }

    /// The rate in Hz (cycles per second).
    pub const fn hz(self) -> f64 {
        self.0 * 1e9
    }

    /// `c` cycles as nanoseconds.
    pub fn ns(self, c: Cycles) -> f64 {
        c.get() as f64 / self.0
    }

    /// Nanoseconds of simulated time as cycles (rounded down, saturating).
    pub fn cycles_from_ns(self, ns: u64) -> Cycles {
        // ns · GHz = cycles; f64 is exact for the ranges used (≤ hours of simulated time).
        Cycles::new(saturating_u64(ns as f64 * self.0))
    }

    /// Milliseconds of simulated time (flush and depot timeouts) as cycles (rounded down,
    /// saturating).
    pub fn cycles_from_ms(self, ms: u64) -> Cycles {
        // ms × 10^6 ns/ms × cycles/ns.
        Cycles::new(saturating_u64(ms as f64 * 1e6 * self.0))
    }

    /// Seconds of simulated time (a run's duration) as cycles, via whole nanoseconds (rounded
    /// down, saturating).
    pub fn cycles_from_secs(self, s: f64) -> Cycles {
        self.cycles_from_ns(saturating_u64(s * 1e9))
    }
}

/// Linux's timer base: `hz` ticks (jiffies) a second, the first at modeled time 0. A timer
/// armed with `mod_timer(t, jiffies + msecs_to_jiffies(ms))` fires at the tick boundary
/// `msecs_to_jiffies(ms)` ticks after the current one, so between `ms − 1000/hz` and `ms`
/// milliseconds after arming when `ms` is a whole number of ticks, up to one tick later
/// otherwise (10 ms at HZ = 250: 3 jiffies, fired 8–12 ms after arming).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jiffies {
    /// Cycles per jiffy (whole nanoseconds per jiffy: exact for HZ = 100, 250, 1000).
    tick: u64,
    /// Jiffies the timer waits (`msecs_to_jiffies(ms)`).
    wait: u64,
}

impl Jiffies {
    /// A timer of `ms` milliseconds at `hz` ticks a second, on a machine at `clock`; `None`
    /// when `hz` is 0.
    pub fn new(ms: u64, hz: u32, clock: ClockRate) -> Option<Self> {
        if hz == 0 {
            return None;
        }
        let hz = u64::from(hz);
        // `msecs_to_jiffies`: rounds up (`_msecs_to_jiffies`, HZ ≤ MSEC_PER_SEC).
        let wait = (ms.saturating_mul(hz)).div_ceil(1000);
        let tick = clock.cycles_from_ns(1_000_000_000 / hz).get().max(1);
        Some(Self { tick, wait })
    }

    /// When a timer armed at `now` fires.
    pub fn deadline(self, now: Cycles) -> Cycles {
        let j = now.get() / self.tick;
        Cycles::new(j.saturating_add(self.wait).saturating_mul(self.tick))
    }

    /// Jiffies the timer waits.
    pub const fn wait(self) -> u64 {
        self.wait
    }
}

impl TryFrom<f64> for ClockRate {
    type Error = ClockRateError;
    fn try_from(ghz: f64) -> Result<Self, ClockRateError> {
        if ghz.is_finite() && ghz > 0.0 {
            Ok(ClockRate(ghz))
        } else {
            Err(ClockRateError(ghz))
        }
    }
}

impl From<ClockRate> for f64 {
    fn from(r: ClockRate) -> f64 {
        r.0
    }
}

impl std::fmt::Display for ClockRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} GHz", self.0)
    }
}

/// Rounds a non-negative float down to `u64`: NaN and negatives give 0, and values beyond
/// `u64::MAX` saturate (what `as` does; the lint is silenced only here).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn saturating_u64(x: f64) -> u64 {
    if x.is_finite() && x > 0.0 {
        x as u64
    } else if x > 0.0 {
        u64::MAX
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// include/linux/jiffies.h `msecs_to_jiffies` rounds up; `mod_timer(t, jiffies + n)`
    /// fires on the n-th tick boundary after the current jiffy.
    #[test]
    fn a_jiffies_timer_fires_on_a_tick_boundary() {
        let g = ClockRate::GHZ_1; // 1 cycle = 1 ns
        let j = Jiffies::new(10, 250, g).unwrap();
        assert_eq!(j.wait(), 3, "10 ms at HZ=250: 2.5 jiffies, rounded up");
        // Armed 1 ns after a boundary: fires 3 ticks after that boundary, 12 ms − 1 ns later.
        assert_eq!(j.deadline(Cycles::new(4_000_001)).get(), 16_000_000);
        // Armed 1 ns before a boundary: 8 ms + 1 ns later.
        assert_eq!(j.deadline(Cycles::new(3_999_999)).get(), 12_000_000);
        let k = Jiffies::new(10, 1000, g).unwrap();
        assert_eq!(k.wait(), 10);
        assert_eq!(k.deadline(Cycles::new(500_000)).get(), 10_000_000);
        let h = Jiffies::new(10, 100, g).unwrap();
        assert_eq!(h.wait(), 1);
        assert_eq!(h.deadline(Cycles::ZERO).get(), 10_000_000);
        assert!(Jiffies::new(10, 0, g).is_none());
    }

    #[test]
    fn ns_ms_and_seconds_convert_at_the_rate() {
        let r = ClockRate::ghz(3.0);
        assert_eq!(r.cycles_from_ns(10_000_000).get(), 30_000_000);
        assert_eq!(r.cycles_from_ms(10).get(), 30_000_000);
        assert_eq!(r.cycles_from_secs(0.01).get(), 30_000_000);
        assert!((r.ns(Cycles::new(3000)) - 1000.0).abs() < 1e-9);
        assert!((r.hz() - 3e9).abs() < 1e-3);
        // Saturates rather than wrapping.
        assert_eq!(r.cycles_from_ms(u64::MAX), Cycles::new(u64::MAX));
    }

    #[test]
    fn only_positive_finite_rates_are_accepted() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = ClockRate::try_from(bad).unwrap_err();
            assert!(e.to_string().contains("positive, finite"), "{e}");
        }
        assert_eq!(ClockRate::try_from(2.66).unwrap().as_ghz(), 2.66);
    }

    #[test]
    fn a_rate_is_a_plain_number_in_json() {
        let r: ClockRate = serde_json::from_str("2.66").unwrap();
        assert_eq!(r, ClockRate::ghz(2.66));
        assert_eq!(serde_json::to_string(&r).unwrap(), "2.66");
        let e = serde_json::from_str::<ClockRate>("0.0").unwrap_err();
        assert!(e.to_string().contains("positive, finite"), "{e}");
    }

    #[test]
    fn saturating_u64_rounds_down_and_clamps() {
        assert_eq!(saturating_u64(2.9), 2);
        assert_eq!(saturating_u64(-1.0), 0);
        assert_eq!(saturating_u64(f64::NAN), 0);
        assert_eq!(saturating_u64(f64::INFINITY), u64::MAX);
        assert_eq!(saturating_u64(1e30), u64::MAX);
    }
}
