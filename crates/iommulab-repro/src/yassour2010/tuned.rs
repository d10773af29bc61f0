//! The generators tuned to the recordings: a `nic-duplex` stream (the
//! sender beside its NIC's receive ring, [`iommulab::workload::NicDuplex`]) per recording, its
//! parameters read off the recording's own NIC operations ([`Shape`]) and the capture's
//! parameters, never off a hit rate or a CPU figure. Each derivation is returned beside its
//! value ([`TunedParam`]), so the page shows it.

use std::collections::HashMap;

use serde::Serialize;

use super::hit_rate::Sensitivity;
use super::{Spec, as_recorded};
use crate::ReproError as Error;
use iommulab::addr::{DmaDirection, Gpa};
use iommulab::workload::{
    DmaOp, DuplexRxConfig, DuplexTx, NetperfSendConfig, NicDuplexConfig, Workload,
};

/// What the tuning reads off a recording's NIC operations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Shape {
    /// Receive buffers mapped (`FromDevice` maps: one per frame received).
    pub rx_maps: u64,
    /// Bytes mapped for transmission (every `ToDevice` buffer, headers included).
    pub tx_bytes: u64,
    /// Distinct pages of the transmit buffers.
    pub tx_working_set_pages: u64,
    /// The most common receive buffer length.
    pub rx_buf_size: u64,
    /// Share of receive maps whose buffer address was mapped before (copybreak reuse).
    pub rx_reused_share: f64,
    /// The most common count of receive maps between two maps of one receive buffer.
    pub rx_reuse_maps: u64,
    /// Most receive buffers mapped at once.
    pub rx_max_posted: u64,
    /// Mean length of a run of consecutive receive unmaps (one NAPI poll's frames).
    pub rx_unmaps_per_run: f64,
}

/// Reads [`Shape`] off a recording's operations `w`.
pub(crate) fn shape<W: Workload<Phys = Gpa>>(w: &mut W) -> Result<Shape, Error> {
    let mut s = Shape::default();
    let mut slot_rx: HashMap<u32, bool> = HashMap::new();
    let mut last_map: HashMap<u64, u64> = HashMap::new();
    let mut reuse: HashMap<u64, u64> = HashMap::new();
    let mut sizes: HashMap<u64, u64> = HashMap::new();
    let mut tx_pages: std::collections::HashSet<u64> = Default::default();
    let (mut posted, mut reused) = (0u64, 0u64);
    let (mut runs, mut run_unmaps, mut in_run) = (0u64, 0u64, false);
    while let Some(op) = w.next_op()? {
        match op {
            DmaOp::Map {
                slot,
                phys,
                len,
                dir,
                ..
            } => {
                in_run = false;
                let rx = dir == DmaDirection::FromDevice;
                slot_rx.insert(slot, rx);
                if rx {
                    if let Some(prev) = last_map.insert(phys.get(), s.rx_maps) {
                        reused += 1;
                        *reuse.entry(s.rx_maps - prev).or_insert(0) += 1;
                    }
                    s.rx_maps += 1;
                    *sizes.entry(len).or_insert(0) += 1;
                    posted += 1;
                    s.rx_max_posted = s.rx_max_posted.max(posted);
                } else if dir == DmaDirection::ToDevice {
                    s.tx_bytes += len;
                    tx_pages.extend(iommulab::trace::pages::pages(phys.get(), len));
                }
            }
            DmaOp::MapSg { slot, dir, .. } => {
                in_run = false;
                slot_rx.insert(slot, dir == DmaDirection::FromDevice);
                if dir == DmaDirection::ToDevice {
                    for seg in w.sg_segments() {
                        s.tx_bytes += seg.len;
                        tx_pages.extend(iommulab::trace::pages::pages(seg.phys.get(), seg.len));
                    }
                }
            }
            DmaOp::Unmap { slot, .. } => {
                if slot_rx.remove(&slot) == Some(true) {
                    posted = posted.saturating_sub(1);
                    if !in_run {
                        runs += 1;
                        in_run = true;
                    }
                    run_unmaps += 1;
                } else {
                    in_run = false;
                }
            }
            _ => {}
        }
    }
    let mode = |m: &HashMap<u64, u64>| {
        m.iter()
            .max_by_key(|&(k, n)| (*n, std::cmp::Reverse(*k)))
            .map_or(0, |(k, _)| *k)
    };
    s.rx_buf_size = mode(&sizes);
    s.rx_reuse_maps = mode(&reuse);
    s.rx_reused_share = reused as f64 / s.rx_maps.max(1) as f64;
    s.rx_unmaps_per_run = run_unmaps as f64 / runs.max(1) as f64;
    s.tx_working_set_pages = tx_pages.len() as u64;
    Ok(s)
}

/// One tuned parameter: its value and where it comes from.
#[derive(Clone, Debug, Serialize)]
pub struct TunedParam {
    /// The key (as in a `nic-duplex` workload table).
    pub key: String,
    /// Its value.
    pub value: String,
    /// How it was derived.
    pub from: String,
}

/// A tuned generator beside its recording (an entry of `results.json`'s `tuned`).
#[derive(Clone, Debug, Serialize)]
pub struct TunedResult {
    /// The recording it is tuned to.
    pub recording: String,
    /// The stream's label.
    pub stream: String,
    /// What the recording's NIC operations show.
    pub shape: Shape,
    /// Every parameter set from the recording, with its derivation.
    pub params: Vec<TunedParam>,
    /// The page-sequence hit rates at the quoted fractions of its own working set.
    pub hit_rate: Sensitivity,
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn round(x: f64) -> u64 {
    x.round().max(1.0) as u64
}

/// The `nic-duplex` configuration for recording `index` (0: TCP send, 1: the web server)
/// from its shape, and the derivation of each parameter.
pub(crate) fn config(index: usize, s: &Shape) -> (NicDuplexConfig, Vec<TunedParam>) {
    let mut params = Vec::new();
    let mut p = |key: &str, value: String, from: String| {
        params.push(TunedParam {
            key: key.into(),
            value,
            from,
        });
    };
    let recycled = s.rx_reused_share >= 0.5;
    let ring = if recycled {
        s.rx_reuse_maps
    } else {
        s.rx_max_posted
    };
    let ring = u32::try_from(ring.max(1)).unwrap_or(u32::MAX);
    p(
        "rx.ring",
        ring.to_string(),
        if recycled {
            format!(
                "the recording maps each receive buffer again {} receive maps later (the most common distance; at most {} posted at once)",
                s.rx_reuse_maps, s.rx_max_posted
            )
        } else {
            format!(
                "the most receive buffers mapped at once ({})",
                s.rx_max_posted
            )
        },
    );
    let budget = u32::try_from(round(s.rx_unmaps_per_run))
        .unwrap_or(1)
        .min(ring);
    p(
        "rx.budget",
        budget.to_string(),
        format!(
            "estimate: a run of consecutive receive unmaps is one NAPI poll's frames; {:.2} on average, rounded",
            s.rx_unmaps_per_run
        ),
    );
    p(
        "rx.buf_size",
        s.rx_buf_size.to_string(),
        "the most common receive buffer length".into(),
    );
    let (copybreak, frame_len) = if recycled { (256, 66) } else { (0, 1514) };
    p(
        "rx.copybreak, rx.frame_len",
        format!("{copybreak}, {frame_len}"),
        format!(
            "{:.1}% of receive maps map a buffer address mapped before: short frames copied out, buffers reused in place (e1000e's copybreak, 256 bytes; 66 = a TCP ACK); below 50% it would be off",
            100.0 * s.rx_reused_share
        ),
    );
    let per_frame = s.tx_bytes / s.rx_maps.max(1);
    p(
        "tx_bytes_per_rx_frame",
        per_frame.to_string(),
        format!(
            "{} bytes mapped to send / {} receive buffers mapped ({:.2} frames received per KiB sent)",
            s.tx_bytes,
            s.rx_maps,
            s.rx_maps as f64 * 1024.0 / s.tx_bytes.max(1) as f64
        ),
    );
    let tx = match as_recorded()[index].clone() {
        Spec::Netperf(c) => {
            let send_buffer = s.tx_working_set_pages * 4096;
            p(
                "tx.send_buffer",
                send_buffer.to_string(),
                format!(
                    "estimate: S1.8's working set ≈ SendBuf / 4096 pages, inverted for the recording's {} transmit pages; the rest of tx is the capture's (one stream, TSO, 768 segments of 64 KiB)",
                    s.tx_working_set_pages
                ),
            );
            DuplexTx::NetperfSend(NetperfSendConfig { send_buffer, ..c })
        }
        Spec::Apache(c) => {
            p(
                "tx",
                "apache-sendfile (as recorded)".into(),
                format!(
                    "the capture's files, sizes, popularity and one connection, as above; its transmit working set is the served files' pages (the recording's: {} pages), nothing tuned",
                    s.tx_working_set_pages
                ),
            );
            DuplexTx::ApacheSendfile(c)
        }
        Spec::Duplex(c) => c.tx,
    };
    (
        NicDuplexConfig {
            tx,
            rx: DuplexRxConfig {
                ring,
                budget,
                buf_size: s.rx_buf_size.max(1),
                copybreak,
                frame_len,
                ..DuplexRxConfig::default()
            },
            tx_bytes_per_rx_frame: per_frame.max(1),
        },
        params,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommulab::addr::CpuId;
    use iommulab::testing::ops::{OpsWorkload, map_op};

    fn map(slot: u32, phys: u64, len: u64, dir: DmaDirection) -> DmaOp<Gpa> {
        map_op(slot, Gpa::new(phys), len, dir)
    }

    fn unmap(slot: u32) -> DmaOp<Gpa> {
        DmaOp::Unmap {
            slot,
            cpu: CpuId::new(0),
        }
    }

    /// Two receive buffers reposted in turn (each again 2 receive maps later), one 8 KiB
    /// transmit buffer: the shape and the configuration read off it.
    #[test]
    fn shape_and_config_come_from_the_operations() {
        let rx = DmaDirection::FromDevice;
        let mut ops = vec![map(0, 0x1000, 1522, rx), map(1, 0x1800, 1522, rx)];
        for _ in 0..3 {
            ops.extend([unmap(0), unmap(1)]);
            ops.extend([map(0, 0x1000, 1522, rx), map(1, 0x1800, 1522, rx)]);
        }
        ops.push(map(2, 0x10_000, 8192, DmaDirection::ToDevice));
        ops.extend([unmap(2), unmap(0), unmap(1)]);
        let s = shape(&mut OpsWorkload::new(ops)).unwrap();
        assert_eq!(
            (s.rx_maps, s.tx_bytes, s.tx_working_set_pages),
            (8, 8192, 2)
        );
        assert_eq!(
            (s.rx_buf_size, s.rx_reuse_maps, s.rx_max_posted),
            (1522, 2, 2)
        );
        assert!((s.rx_reused_share - 6.0 / 8.0).abs() < 1e-12);
        assert!((s.rx_unmaps_per_run - 2.0).abs() < 1e-12);
        let (c, params) = config(0, &s);
        assert_eq!((c.rx.ring, c.rx.budget, c.rx.copybreak), (2, 2, 256));
        assert_eq!(c.tx_bytes_per_rx_frame, 1024);
        assert!(matches!(c.tx, DuplexTx::NetperfSend(n) if n.send_buffer == 8192 && n.tso));
        assert!(params.iter().any(|p| p.key == "tx.send_buffer"));
    }
}
