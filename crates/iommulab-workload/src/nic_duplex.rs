//! One NIC, both directions: a sender's transmit path ([`NetperfSend`] or
//! [`ApacheSendfile`]) and the same NIC's receive ring ([`NetRx`]) in one DMA stream, as a
//! real guest's e1000e maps them (S1.9's recorded traces: most of the NIC's page maps are
//! receive buffers, `traces/README.md`).
//!
//! **Mechanism.** The receive ring is filled when the interface comes up (before the first
//! packet is sent). Then the sender runs as on its own, and every `tx_bytes_per_rx_frame`
//! bytes it maps for transmission (headers and payload, every `ToDevice` buffer) one frame
//! arrives on the receive ring: the TCP ACKs that clock a sender (Linux ACKs every one or two
//! full segments), and for a web server also the requests and connection set-up. Frames are
//! handled by NAPI polls of `rx.budget` frames: as soon as a poll's worth of frames is owed,
//! between two transmit operations, the device writes each posted buffer in turn, the driver
//! unmaps it and, after the poll, refills the ring with as many buffers — [`NetRx`]'s own
//! poll, driven here, not re-implemented. With copybreak (`rx.frame_len < rx.copybreak`:
//! ACKs and requests are short) every refill maps the slot's own buffer again. When the
//! sender ends, the interface goes down ([`NetRx::close`]): the posted buffers are unmapped.
//!
//! Both directions use device 0; receive slots follow the sender's (`slot + tx slots`).
//! `rx.packets` is ignored (frames arrive as long as the sender sends).
//!
//! **Deviations.** Frames arrive at a fixed byte rate, not at the moments a real receiver
//! ACKs (no delayed-ACK timer, no burst of ACKs after an interrupt); a poll handles exactly
//! `budget` frames (the recordings' polls vary: `budget` is their mean); transmit
//! completions and receive polls are not tied to one interrupt.

use serde::{Deserialize, Serialize};

use super::{
    ApacheSendfile, ApacheSendfileConfig, DmaOp, NetRx, NetRxConfig, NetperfSend,
    NetperfSendConfig, ParamError, Segment, Workload, WorkloadError, invalid,
};
use iommulab_base::addr::{DmaDirection, Hpa};

/// The transmit side of a [`NicDuplex`]: which sender, with its parameters (the `[workload.tx]`
/// table, tagged by `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DuplexTx {
    /// A netperf TCP_STREAM sender.
    NetperfSend(NetperfSendConfig),
    /// Apache serving static files with sendfile.
    ApacheSendfile(ApacheSendfileConfig),
}

impl Default for DuplexTx {
    fn default() -> Self {
        DuplexTx::NetperfSend(NetperfSendConfig::default())
    }
}

/// The receive ring of a [`NicDuplex`] (the `[workload.rx]` table): [`NetRx`]'s
/// parameters but its packet count (frames arrive as long as the sender sends).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DuplexRxConfig {
    /// Receive descriptors kept mapped (e1000e's default 256).
    pub ring: u32,
    /// Frames handled per NAPI poll, the ring refilled after each (16: e1000e refills
    /// every 16 cleaned buffers, `E1000_RX_BUFFER_WRITE`).
    pub budget: u32,
    /// Bytes per receive buffer (1522: e1000e's buffer for a 1500-byte MTU, two to a page).
    pub buf_size: u64,
    /// Pages in the buffer pool.
    pub pool_pages: u64,
    /// Frames shorter than this are copied out and their buffer reused in place (e1000e's
    /// `copybreak`, 256; 0 = never).
    pub copybreak: u64,
    /// Bytes of each received frame (66: a TCP ACK with timestamps).
    pub frame_len: u64,
    /// Seed of the buffer placement.
    pub seed: u64,
}

impl Default for DuplexRxConfig {
    fn default() -> Self {
        Self {
            ring: 256,
            budget: 16,
            buf_size: 1522,
            pool_pages: 4096,
            copybreak: 256,
            frame_len: 66,
            seed: 1,
        }
    }
}

impl DuplexRxConfig {
    /// The [`NetRx`] that runs the ring (frames without end).
    pub fn net_rx(&self) -> NetRxConfig {
        NetRxConfig {
            packets: u64::MAX,
            ring: self.ring,
            budget: self.budget,
            buf_size: self.buf_size,
            pool_pages: self.pool_pages,
            copybreak: self.copybreak,
            frame_len: self.frame_len,
            seed: self.seed,
        }
    }
}

/// Parameters of [`NicDuplex`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NicDuplexConfig {
    /// The sender.
    pub tx: DuplexTx,
    /// The receive ring.
    pub rx: DuplexRxConfig,
    /// Bytes mapped for transmission per frame received (2896: one ACK per two full-sized
    /// segments of 1448 bytes, Linux's delayed ACK).
    pub tx_bytes_per_rx_frame: u64,
}

impl Default for NicDuplexConfig {
    /// netperf-send's defaults beside an e1000e receive ring (see [`DuplexRxConfig`]).
    fn default() -> Self {
        Self {
            tx: DuplexTx::default(),
            rx: DuplexRxConfig::default(),
            tx_bytes_per_rx_frame: 2896,
        }
    }
}

impl NicDuplexConfig {
    /// Checks the receive side (the sender checks its own when built).
    fn check(&self) -> Result<(), ParamError> {
        if self.tx_bytes_per_rx_frame == 0 {
            return Err(invalid(
                "workload.tx_bytes_per_rx_frame",
                0,
                "at least 1 byte",
            ));
        }
        for (key, v) in [
            ("workload.rx.ring", u64::from(self.rx.ring)),
            ("workload.rx.budget", u64::from(self.rx.budget)),
            ("workload.rx.buf_size", self.rx.buf_size),
            ("workload.rx.pool_pages", self.rx.pool_pages),
        ] {
            if v == 0 {
                return Err(invalid(key, 0, "at least 1"));
            }
        }
        if self.rx.budget > self.rx.ring {
            return Err(invalid(
                "workload.rx.budget",
                self.rx.budget,
                &format!("at most the ring ({})", self.rx.ring),
            ));
        }
        crate::net_rx::check_pool("workload.rx.pool_pages", &self.rx.net_rx())
    }

    /// Builds the generator and hands it to `f` (the sender's type is chosen here, once).
    pub fn with<R>(&self, f: impl FnOnce(NicDuplexAny) -> R) -> Result<R, ParamError> {
        Ok(match self.tx {
            DuplexTx::NetperfSend(c) => f(NicDuplexAny::Netperf(NicDuplex::new(
                NetperfSend::new(c)?,
                self,
            )?)),
            DuplexTx::ApacheSendfile(c) => f(NicDuplexAny::Apache(NicDuplex::new(
                ApacheSendfile::new(c)?,
                self,
            )?)),
        })
    }
}

/// A [`NicDuplex`] over either sender (what [`NicDuplexConfig::with`] builds).
#[derive(Debug, Clone)]
pub enum NicDuplexAny {
    /// Over netperf-send.
    Netperf(NicDuplex<NetperfSend>),
    /// Over apache-sendfile.
    Apache(NicDuplex<ApacheSendfile>),
}

/// Where the receive side stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Filling the ring before the first transmission.
    Up,
    /// Passing the sender's operations through.
    Tx,
    /// In a NAPI poll with this many unmaps left.
    Poll(u32),
    /// The sender is done: unmapping the posted buffers.
    Down,
    Done,
}

/// The generator (see the module doc).
#[derive(Debug, Clone)]
pub struct NicDuplex<T> {
    tx: T,
    rx: NetRx,
    /// Transmitted bytes per poll's worth of frames.
    poll_bytes: u64,
    /// Transmitted bytes not yet answered by a poll.
    owed: u64,
    /// Polls due before the next transmit operation.
    polls_due: u64,
    /// Receive slots start here (after the sender's).
    rx_base: u32,
    /// The receive op read past the end of the last poll (its next device write).
    ahead: Option<DmaOp>,
    state: State,
    total: Option<u64>,
}

/// Bytes a transmit operation maps for the device (`ToDevice`), 0 for anything else.
fn tx_bytes<T: Workload<Phys = Hpa>>(op: &DmaOp, tx: &T) -> u64 {
    match *op {
        DmaOp::Map {
            len,
            dir: DmaDirection::ToDevice,
            ..
        } => len,
        DmaOp::MapSg {
            dir: DmaDirection::ToDevice,
            ..
        } => tx.sg_segments().iter().map(|s| s.len).sum(),
        _ => 0,
    }
}

impl<T: Workload<Phys = Hpa> + Clone> NicDuplex<T> {
    /// The sender `tx` beside `cfg.rx`'s receive ring, or an error naming the bad field.
    pub fn new(tx: T, cfg: &NicDuplexConfig) -> Result<Self, ParamError> {
        cfg.check()?;
        let rx = NetRx::new(cfg.rx.net_rx());
        let poll_bytes = cfg.tx_bytes_per_rx_frame * u64::from(cfg.rx.budget);
        // Every receive buffer mapped is unmapped once: the ring fill and one refill per
        // frame received, frames in whole polls. The sender's bytes are known only by
        // running it, so a copy runs once here (no allocation per op, no dynamic dispatch).
        let total = tx.total_ios().map(|t| {
            let mut copy = tx.clone();
            let mut bytes = 0u64;
            while let Ok(Some(op)) = copy.next_op() {
                bytes += tx_bytes(&op, &copy);
            }
            t + u64::from(cfg.rx.ring) + bytes / poll_bytes * u64::from(cfg.rx.budget)
        });
        let rx_base = u32::try_from(tx.slots()).unwrap_or(u32::MAX);
        Ok(Self {
            tx,
            rx,
            poll_bytes,
            owed: 0,
            polls_due: 0,
            rx_base,
            ahead: None,
            state: State::Up,
            total,
        })
    }

    /// The receive ring.
    pub fn rx(&self) -> &NetRx {
        &self.rx
    }

    /// The next receive op, its slot moved past the sender's.
    fn rx_op(&mut self) -> Result<Option<DmaOp>, WorkloadError> {
        let op = match self.ahead.take() {
            Some(op) => Some(op),
            None => self.rx.next_op()?,
        };
        Ok(op)
    }

    fn shifted(&self, op: DmaOp) -> DmaOp {
        let base = self.rx_base;
        op.with_slot(|slot| slot + base)
    }
}

impl<T: Workload<Phys = Hpa> + Clone> Workload for NicDuplex<T> {
    type Phys = Hpa;

    fn next_op(&mut self) -> Result<Option<DmaOp>, WorkloadError> {
        loop {
            match self.state {
                State::Done => return Ok(None),
                State::Up => match self.rx_op()? {
                    // The ring is full when the device's first write comes up.
                    Some(op @ DmaOp::Access { .. }) => {
                        self.ahead = Some(op);
                        self.state = State::Tx;
                    }
                    Some(op) => return Ok(Some(self.shifted(op))),
                    None => self.state = State::Tx,
                },
                State::Tx => {
                    if self.polls_due > 0 {
                        self.polls_due -= 1;
                        self.state = State::Poll(self.rx.config().budget);
                        continue;
                    }
                    match self.tx.next_op()? {
                        Some(op) => {
                            self.owed += tx_bytes(&op, &self.tx);
                            self.polls_due += self.owed / self.poll_bytes;
                            self.owed %= self.poll_bytes;
                            return Ok(Some(op));
                        }
                        None => {
                            // The device's next write never happens: the interface goes
                            // down.
                            self.ahead = None;
                            self.rx.close();
                            self.state = State::Down;
                        }
                    }
                }
                State::Poll(left) => match self.rx_op()? {
                    Some(op @ DmaOp::Access { .. }) if left == 0 => {
                        // The poll's refill is done: this write opens the next poll.
                        self.ahead = Some(op);
                        self.state = State::Tx;
                    }
                    Some(op) => {
                        if matches!(op, DmaOp::Unmap { .. }) {
                            self.state = State::Poll(left.saturating_sub(1));
                        }
                        return Ok(Some(self.shifted(op)));
                    }
                    None => self.state = State::Tx,
                },
                State::Down => match self.rx.next_op()? {
                    Some(op) => return Ok(Some(self.shifted(op))),
                    None => self.state = State::Done,
                },
            }
        }
    }

    fn sg_segments(&self) -> &[Segment] {
        // The receive ring maps single buffers: every `MapSg` is the sender's.
        self.tx.sg_segments()
    }

    fn slots(&self) -> usize {
        self.rx_base as usize + self.rx.config().ring as usize
    }

    fn devices(&self) -> usize {
        self.tx.devices().max(1)
    }

    fn total_ios(&self) -> Option<u64> {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::check::run_checked;

    fn netperf(packets: u64) -> NicDuplexConfig {
        NicDuplexConfig {
            tx: DuplexTx::NetperfSend(NetperfSendConfig {
                packets,
                ..NetperfSendConfig::default()
            }),
            ..NicDuplexConfig::default()
        }
    }

    fn ops(cfg: &NicDuplexConfig) -> Vec<DmaOp> {
        cfg.with(|w| match w {
            NicDuplexAny::Netperf(mut w) => std::iter::from_fn(|| w.next_op().unwrap()).collect(),
            NicDuplexAny::Apache(mut w) => std::iter::from_fn(|| w.next_op().unwrap()).collect(),
        })
        .unwrap()
    }

    /// The ring fills first; then one receive map per `tx_bytes_per_rx_frame` bytes sent,
    /// in polls of `budget`, every received buffer written by the device before its unmap.
    #[test]
    fn frames_arrive_at_the_configured_byte_rate() {
        let cfg = netperf(2000);
        let all = ops(&cfg);
        let rx_ring = 256usize;
        assert!(all[..rx_ring].iter().all(|op| matches!(
            op,
            DmaOp::Map {
                dir: DmaDirection::FromDevice,
                ..
            }
        )));
        let (mut tx, mut rx_maps, mut writes) = (0u64, 0u64, 0u64);
        for op in &all {
            match op {
                DmaOp::Map {
                    len,
                    dir: DmaDirection::ToDevice,
                    ..
                } => tx += len,
                DmaOp::Map {
                    dir: DmaDirection::FromDevice,
                    ..
                } => rx_maps += 1,
                DmaOp::Access {
                    access: iommulab_base::addr::Access::Write,
                    ..
                } => writes += 1,
                _ => {}
            }
        }
        let frames = tx / (2896 * 16) * 16;
        assert_eq!(writes, frames);
        assert_eq!(rx_maps, 256 + frames);
        // 2000 packets of 1448 payload bytes and 66 header bytes, one frame per 2896 bytes
        // (1045.6), in whole polls of 16.
        assert_eq!(tx, 2000 * (1448 + 66));
        assert_eq!(frames, 1040);
    }

    /// Well formed (every slot mapped once at a time, accessed only while mapped, all
    /// unmapped at the end), `total_ios` exact, and with copybreak the receive buffers are
    /// the ring's 256 (128 pages), apart from the sender's pages.
    #[test]
    fn the_stream_is_well_formed_and_the_ring_recycles() {
        for cfg in [
            netperf(3000),
            NicDuplexConfig {
                tx: DuplexTx::ApacheSendfile(ApacheSendfileConfig {
                    requests: 300,
                    ..ApacheSendfileConfig::default()
                }),
                tx_bytes_per_rx_frame: 1000,
                rx: DuplexRxConfig {
                    budget: 3,
                    ..DuplexRxConfig::default()
                },
            },
        ] {
            cfg.with(|w| {
                let c = match w {
                    NicDuplexAny::Netperf(mut w) => {
                        let c = run_checked(&mut w);
                        assert_eq!(Some(c.unmaps), w.total_ios());
                        c
                    }
                    NicDuplexAny::Apache(mut w) => {
                        let c = run_checked(&mut w);
                        assert_eq!(Some(c.unmaps), w.total_ios());
                        c
                    }
                };
                assert!(c.maps_by_dir[1] > 256, "{:?}", c.maps_by_dir);
            })
            .unwrap();
            let rx: HashSet<u64> = ops(&cfg)
                .iter()
                .filter_map(|op| match op {
                    DmaOp::Map {
                        phys,
                        dir: DmaDirection::FromDevice,
                        ..
                    } => Some(phys.get() / 4096),
                    _ => None,
                })
                .collect();
            assert_eq!(rx.len(), 128);
        }
    }

    #[test]
    fn rejects_bad_fields_by_name() {
        let bad = |c: NicDuplexConfig| c.with(drop).unwrap_err().to_string();
        assert!(
            bad(NicDuplexConfig {
                tx_bytes_per_rx_frame: 0,
                ..netperf(1)
            })
            .contains("workload.tx_bytes_per_rx_frame")
        );
        let mut c = netperf(1);
        c.rx.budget = 300;
        assert!(bad(c).contains("workload.rx.budget"));
        c.rx.ring = 0;
        assert!(bad(c).contains("workload.rx.ring"));
        let mut c = netperf(1);
        if let DuplexTx::NetperfSend(n) = &mut c.tx {
            n.sockets = 0;
        }
        assert!(bad(c).contains("workload.sockets"));
    }

    #[test]
    fn reads_from_toml() {
        let c: NicDuplexConfig = toml::from_str(
            "tx_bytes_per_rx_frame = 1445\n[tx]\nkind = \"netperf-send\"\ntso = true\n[rx]\nbudget = 11\n",
        )
        .unwrap();
        assert_eq!(c.tx_bytes_per_rx_frame, 1445);
        assert_eq!(c.rx.budget, 11);
        assert_eq!(c.rx.ring, 256, "unset fields keep the duplex defaults");
        assert!(matches!(c.tx, DuplexTx::NetperfSend(n) if n.tso));
    }
}
