//! Quota policy (S1.7) and the working-set helper (S1.8).
//!
//! - A **cooperative** guest gets the quota it asks for, bounded by the memory it holds:
//!   Q(t) = min(requested, Mmax − B(t)), where B(t) is the balloon's size at time t
//!   (pages the host reclaimed through the balloon driver). Inflating the balloon
//!   shrinks the quota, and the map cache evicts ([`super::HypercallBackend::set_quota`]).
//! - A **selfish** guest does not cooperate with the balloon; the host fixes its quota
//!   (Q < M), and it stays fixed.
//!
//! The working-set formula of S1.8 suggests a quota: a network workload's DMA working
//! set is `SendBuf × NumSendSockets + RecvBuf × NumRecvSockets`; Apache serving static
//! files maps the files it serves, so its working set is the sum of their sizes.

use serde::{Deserialize, Serialize};

/// How the host sets a guest's quota over time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum QuotaPolicy {
    /// Q(t) = min(requested, Mmax − B(t)).
    Cooperative {
        /// Guest memory Mmax in pages.
        max_pages: u64,
        /// Quota the guest asks for, in pages.
        requested: u64,
        /// Balloon size schedule: `(from_ns, balloon_pages)`, sorted by time; B = 0 before
        /// the first entry.
        balloon: Vec<(u64, u64)>,
    },
    /// A fixed quota set by the host.
    Selfish {
        /// The quota in pages.
        quota: u64,
    },
}

impl QuotaPolicy {
    /// Balloon size at `now_ns` (0 for a selfish guest).
    pub fn balloon_at(&self, now_ns: u64) -> u64 {
        match self {
            QuotaPolicy::Cooperative { balloon, .. } => balloon
                .iter()
                .take_while(|&&(t, _)| t <= now_ns)
                .last()
                .map_or(0, |&(_, b)| b),
            QuotaPolicy::Selfish { .. } => 0,
        }
    }

    /// The quota at `now_ns`.
    ///
    /// # Examples
    /// ```
    /// use iommulab_virt::QuotaPolicy;
    /// let p = QuotaPolicy::Cooperative { max_pages: 1000, requested: 800, balloon: vec![(10, 500)] };
    /// assert_eq!((p.quota_at(0), p.quota_at(10)), (800, 500));
    /// ```
    pub fn quota_at(&self, now_ns: u64) -> u64 {
        match self {
            QuotaPolicy::Cooperative {
                max_pages,
                requested,
                ..
            } => (*requested).min(max_pages.saturating_sub(self.balloon_at(now_ns))),
            QuotaPolicy::Selfish { quota } => *quota,
        }
    }
}

/// 4 KiB pages covering `bytes`.
pub const fn pages_for(bytes: u64) -> u64 {
    bytes.div_ceil(4096)
}

/// S1.8's working set in pages: `SendBuf × NumSendSockets + RecvBuf × NumRecvSockets`
/// (buffers in bytes), a suggested quota.
///
/// # Examples
/// ```
/// // netperf send, one socket with a 65536-byte send buffer: 16 pages.
/// assert_eq!(iommulab_virt::working_set_pages(65536, 1, 0, 0), 16);
/// ```
pub const fn working_set_pages(
    send_buf: u64,
    send_sockets: u64,
    recv_buf: u64,
    recv_sockets: u64,
) -> u64 {
    pages_for(send_buf * send_sockets + recv_buf * recv_sockets)
}

/// Apache's working set in pages: the files it serves (each rounded up to pages).
pub fn files_working_set_pages(file_sizes: impl IntoIterator<Item = u64>) -> u64 {
    file_sizes.into_iter().map(pages_for).sum()
}
