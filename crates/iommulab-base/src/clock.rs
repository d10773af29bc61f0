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
