//! Runs a hot loop compiled a second time for the instruction set the CPU has, chosen once at
//! run time.
//!
//! The baseline x86-64 target has SSE2 alone: no 32-bit vector min, no 32-bit lane compare
//! with a mask out of a full 256-bit register, so each 16-lane pass of a loop written for
//! vectors (`[i32; 16]` arrays, no early exits) takes several instructions per step. A
//! [`Kernel`] run through [`Isa::run`] is compiled twice: as is, and under
//! `#[target_feature(enable = "avx2")]`, with everything it inlines (`#[inline(always)]`
//! helpers) compiled for AVX2 too. [`Isa::detect`] asks the CPU once; the caller keeps the
//! answer and passes it at its configuration boundary (a curve, a batch), never per
//! operation. `IOMMULAB_ISA=baseline` in the environment makes [`Isa::detect`] choose the
//! baseline.
//!
//! ```
//! use isa_dispatch::{Isa, Kernel};
//!
//! struct Sum<'a>(&'a [i32]);
//! impl Kernel for Sum<'_> {
//!     type Output = i32;
//!     #[inline(always)]
//!     fn run(self) -> i32 {
//!         self.0.iter().sum()
//!     }
//! }
//! let isa = Isa::detect();
//! assert_eq!(isa.run(Sum(&[1, 2, 3])), Isa::BASELINE.run(Sum(&[1, 2, 3])));
//! ```
//!
//! [`prefetch`] asks for a cache line a loop will read a few steps later.
//!
//! This crate is separate because the workspace forbids unsafe code. Its two `unsafe` calls:
//! the AVX2 copy, after the check that makes it sound (an [`Isa`] cannot be built any other
//! way: its field is private), and the prefetch instruction, which every x86-64 CPU has.

/// A loop to compile per instruction set: `run` (and what it calls) should be
/// `#[inline(always)]`, so that it is compiled into each copy rather than called from it.
pub trait Kernel {
    /// What the loop returns.
    type Output;
    /// The loop.
    fn run(self) -> Self::Output;
}

/// An instruction set this CPU has, for [`Isa::run`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Isa(Level);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    /// The target's own (x86-64: SSE2).
    Baseline,
    /// x86-64 with AVX2 (checked at run time).
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Isa {
    /// The target's baseline, on every CPU.
    pub const BASELINE: Isa = Isa(Level::Baseline);

    /// The best instruction set this CPU has of those a kernel is compiled for, or the
    /// baseline if the environment variable `IOMMULAB_ISA` is `baseline` (to measure what
    /// the dispatch gains, and to run the fallback on any machine).
    pub fn detect() -> Isa {
        if std::env::var_os("IOMMULAB_ISA").is_some_and(|v| v == "baseline") {
            return Isa::BASELINE;
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            return Isa(Level::Avx2);
        }
        Isa::BASELINE
    }

    /// Its name (`baseline`, `avx2`).
    pub fn name(self) -> &'static str {
        match self.0 {
            Level::Baseline => "baseline",
            #[cfg(target_arch = "x86_64")]
            Level::Avx2 => "avx2",
        }
    }

    /// Runs `k` compiled for this instruction set.
    #[inline]
    pub fn run<K: Kernel>(self, k: K) -> K::Output {
        match self.0 {
            Level::Baseline => k.run(),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Level::Avx2` is built only by `detect`, after
            // `is_x86_feature_detected!("avx2")` found AVX2 on this CPU (the field is
            // private), so the instructions `run_avx2` is compiled with exist here.
            Level::Avx2 => unsafe { run_avx2(k) },
        }
    }
}

/// `k` compiled with AVX2 (and what it inlines).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn run_avx2<K: Kernel>(k: K) -> K::Output {
    k.run()
}

/// Asks the CPU to bring `r`'s cache line into its caches (a hint: no fault, no wait), for
/// state a loop will read a few steps later at an address it knows now.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse"))]
    // SAFETY: `_mm_prefetch` needs SSE, which this target has (the cfg above: every x86-64
    // CPU); it reads nothing and cannot fault, and `r` is a valid reference anyway.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(r).cast());
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse")))]
    let _ = r;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 16-lane min and mask, the kind of pass the kernels are written with.
    struct Lanes<'a>(&'a [[i32; 16]]);
    impl Kernel for Lanes<'_> {
        type Output = (i32, u32);
        #[inline(always)]
        fn run(self) -> (i32, u32) {
            let (mut least, mut masks) = (i32::MAX, 0u32);
            for l in self.0 {
                let mut mask = 0u32;
                for (i, &v) in l.iter().enumerate() {
                    least = least.min(v);
                    mask |= u32::from(v <= 0) << i;
                }
                masks = masks.wrapping_add(mask);
            }
            (least, masks)
        }
    }

    #[test]
    fn each_instruction_set_gives_the_same_answer() {
        let lanes: Vec<[i32; 16]> = (0..100)
            .map(|j: i32| std::array::from_fn(|i| ((j * 31 + i as i32 * 7) % 23) - 11))
            .collect();
        let want = Isa::BASELINE.run(Lanes(&lanes));
        assert_eq!(want.0, -11);
        assert_eq!(Isa::detect().run(Lanes(&lanes)), want);
        assert!(["baseline", "avx2"].contains(&Isa::detect().name()));
    }
}
