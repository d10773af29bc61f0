//! Which host's VF the NIC serves next, with and without per-VF QoS (S4.3: resources such
//! as bandwidth are partitioned per VF; S4.4: without the NIC's QoS the shares were unequal).
//!
//! - Without QoS the NIC serves traffic in the order it comes: each host's share follows
//!   its demand, here the number of streams it runs (a smooth weighted round robin over
//!   streams, the steady state of first-come first-served among equally greedy streams).
//! - With QoS the NIC enforces a share per VF: a round robin over VFs with equal weight,
//!   whatever the number of streams behind each.
//!
//! What makes real TCP streams unequal (the paper's 3-host send case) is not modeled:
//! equally greedy streams get equal service here.

/// The NIC's choice of the next packet's VF.
#[derive(Clone, Debug)]
pub struct Arbiter {
    weights: Vec<i64>,
    credit: Vec<i64>,
}

impl Arbiter {
    /// An arbiter over hosts with `streams[h]` streams each; `qos` gives each VF one share.
    pub fn new(streams: &[u32], qos: bool) -> Self {
        let weights: Vec<i64> = streams
            .iter()
            .map(|&s| {
                if qos {
                    i64::from(s.min(1))
                } else {
                    i64::from(s)
                }
            })
            .collect();
        Arbiter {
            credit: vec![0; weights.len()],
            weights,
        }
    }

    /// The next host (smooth weighted round robin: deterministic, shares exact over time).
    /// `None` when no host has any demand.
    #[inline]
    pub fn pick(&mut self) -> Option<usize> {
        let total: i64 = self.weights.iter().sum();
        let mut best: Option<usize> = None;
        for i in 0..self.weights.len() {
            if self.weights[i] == 0 {
                continue;
            }
            self.credit[i] += self.weights[i];
            if best.is_none_or(|b| self.credit[i] > self.credit[b]) {
                best = Some(i);
            }
        }
        let b = best?;
        self.credit[b] -= total;
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(streams: &[u32], qos: bool) -> Vec<usize> {
        let mut a = Arbiter::new(streams, qos);
        let mut n = vec![0; streams.len()];
        for _ in 0..1200 {
            n[a.pick().unwrap()] += 1;
        }
        n
    }

    #[test]
    fn without_qos_shares_follow_streams_with_qos_each_vf_gets_one() {
        assert_eq!(shares(&[2, 1, 1], false), [600, 300, 300]);
        assert_eq!(shares(&[2, 1, 1], true), [400, 400, 400]);
        assert_eq!(shares(&[1, 0, 1], true), [600, 0, 600]);
        assert_eq!(Arbiter::new(&[0, 0], false).pick(), None);
    }
}
