//! A Zipf sampler over ranks `0..n`: `P(rank k) = (k + 1)^-s / H(n, s)` with
//! `H(n, s) = Σ_{i=1..n} i^-s`, as used for file popularity by [`super::apache_sendfile`]
//! (web requests follow a Zipf-like law with exponents 0.64–0.83: Breslau et al., "Web
//! Caching and Zipf-like Distributions", INFOCOM 1999).
//!
//! The sampler is exact: it keeps the cumulative distribution (one `f64` per rank, built once
//! in `O(n)`) and inverts it with a binary search, `O(log n)` per sample and no allocation.
//! It accepts any `s ≥ 0` (`s = 0` is uniform). Rejection-inversion (Hörmann & Derflinger)
//! would need `O(1)` memory, but `n` here is a file count, so the table is small and the
//! simpler method leaves nothing to get wrong.

use rand::Rng;

/// Why a [`Zipf`] cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum ZipfError {
    /// `s` is negative or not finite.
    #[error("Zipf exponent {0} must be finite and at least 0")]
    Exponent(f64),
    /// No ranks.
    #[error("Zipf needs at least one rank")]
    Empty,
}

/// The sampler (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Zipf {
    /// `cdf[k] = P(rank ≤ k)`; the last entry is exactly 1.
    cdf: Vec<f64>,
    s: f64,
}

impl Zipf {
    /// A sampler over `n` ranks with exponent `s`.
    ///
    /// # Examples
    /// ```
    /// use iommulab_workload::zipf::Zipf;
    /// use rand::{SeedableRng, rngs::SmallRng};
    /// let z = Zipf::new(100, 1.0).unwrap();
    /// let r = z.sample(&mut SmallRng::seed_from_u64(1));
    /// assert!(r < 100);
    /// assert!((z.probability(0) - 1.0 / 5.187_377_517_639_621).abs() < 1e-12);
    /// ```
    pub fn new(n: usize, s: f64) -> Result<Self, ZipfError> {
        if !s.is_finite() || s < 0.0 {
            return Err(ZipfError::Exponent(s));
        }
        if n == 0 {
            return Err(ZipfError::Empty);
        }
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0;
        for k in 1..=n {
            sum += (k as f64).powf(-s);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        cdf[n - 1] = 1.0;
        Ok(Self { cdf, s })
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    /// Always false: a sampler has at least one rank.
    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    /// The exponent.
    pub fn exponent(&self) -> f64 {
        self.s
    }

    /// `P(rank k)`, 0 outside `0..n`.
    pub fn probability(&self, k: usize) -> f64 {
        match k {
            0 => self.cdf[0],
            k if k < self.cdf.len() => self.cdf[k] - self.cdf[k - 1],
            _ => 0.0,
        }
    }

    /// One rank in `0..n` (0 is the most popular).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let u: f64 = rng.r#gen();
        // First rank whose cumulative probability exceeds u (u < 1 = the last entry).
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn rejects_bad_parameters() {
        assert_eq!(Zipf::new(0, 1.0), Err(ZipfError::Empty));
        assert_eq!(Zipf::new(5, -0.5), Err(ZipfError::Exponent(-0.5)));
        assert!(Zipf::new(5, f64::NAN).is_err());
    }

    #[test]
    fn probabilities_follow_the_power_law() {
        let z = Zipf::new(1000, 0.8).unwrap();
        let h: f64 = (1..=1000).map(|k| (k as f64).powf(-0.8)).sum();
        for k in [0usize, 1, 9, 999] {
            let want = ((k + 1) as f64).powf(-0.8) / h;
            assert!((z.probability(k) - want).abs() < 1e-12, "rank {k}");
        }
        let total: f64 = (0..1000).map(|k| z.probability(k)).sum();
        assert!((total - 1.0).abs() < 1e-9);
        assert_eq!(z.probability(1000), 0.0);
    }

    /// Sample frequencies match the law: rank 1 (and the next few) within 4 standard
    /// deviations of the binomial count, and a chi-square over the first 20 ranks + tail.
    #[test]
    fn sample_frequencies_match_the_distribution() {
        for (n, s) in [(1000usize, 0.8), (50, 1.2), (10, 0.0)] {
            let z = Zipf::new(n, s).unwrap();
            let mut rng = SmallRng::seed_from_u64(42);
            let draws = 200_000u32;
            let mut count = vec![0u32; n];
            for _ in 0..draws {
                count[z.sample(&mut rng)] += 1;
            }
            let d = f64::from(draws);
            for (k, &c) in count.iter().enumerate().take(5) {
                let p = z.probability(k);
                let sd = (d * p * (1.0 - p)).sqrt();
                let got = f64::from(c);
                assert!(
                    (got - d * p).abs() < 4.0 * sd,
                    "n={n} s={s} rank {k}: {got} vs {}",
                    d * p
                );
            }
            // Chi-square over bins: the first min(n, 20) ranks and the rest as one bin.
            let bins = n.min(20);
            let mut chi2 = 0.0;
            let mut tail_p = 1.0;
            let mut tail_c = f64::from(draws);
            for (k, &c) in count.iter().enumerate().take(bins) {
                let e = d * z.probability(k);
                chi2 += (f64::from(c) - e).powi(2) / e;
                tail_p -= z.probability(k);
                tail_c -= f64::from(c);
            }
            let mut dof = bins - 1;
            if tail_p > 1e-9 {
                let e = d * tail_p;
                chi2 += (tail_c - e).powi(2) / e;
                dof += 1;
            }
            // dof ≤ 20: the 99.9% quantile of chi-square(20) is 45.3.
            assert!(chi2 < 45.3, "n={n} s={s}: chi2 {chi2} with {dof} dof");
        }
    }

    #[test]
    fn single_rank_always_samples_zero() {
        let z = Zipf::new(1, 2.0).unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        assert!((0..100).all(|_| z.sample(&mut rng) == 0));
    }
}
