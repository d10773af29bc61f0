//! A netperf `TCP_STREAM` sender (S1.8–S1.9; Yassour et al., SYSTOR 2010, §4.1 and §4.2:
//! "netperf send with a 65KB socket buffer" over an e1000e 1 GbE NIC), and the NIC transmit
//! path it shares with [`super::apache_sendfile`].
//!
//! **What it models.** `sockets` TCP sockets, served round-robin, each copying a stream of
//! `message_size`-byte messages into its send buffer. As Linux 2.6's `tcp_sendmsg` does, the
//! data is copied into a per-socket page that is filled to the end before the next page is
//! taken from the page allocator ([`super::page_alloc`]); each packet (an skb) gets a small
//! head buffer from a kmalloc-1024 slab holding the 66 bytes of Ethernet/IPv4/TCP headers
//! (TCP timestamps on), plus 1–17 page fragments pointing at the payload. Packets carry one
//! MSS (`mtu − 52` bytes, 1448 for a 1500-byte MTU), or with `tso` one TSO segment (the most
//! MSS that fit in 64 KiB less the header room, 45 × 1448 = 65160 bytes).
//!
//! **Mapping.** With [`TxMapping::PerFragment`] (the default) each packet is mapped the way
//! e1000e/ixgbe do it: `dma_map_single` of the head and one `dma_map_page` (a [`DmaOp::Map`])
//! per fragment, so every buffer is one I/O of the runner; with [`TxMapping::Sg`] the head
//! and fragments are one [`DmaOp::MapSg`] (one I/O per packet). The NIC reads every buffer
//! once ([`Access::Read`]) when the packet is posted. Each buffer takes one descriptor of a
//! `tx_ring`-descriptor ring (e1000e's default 256).
//!
//! **Transmit completion, ACK and memory.** A socket may have at most `send_buffer` bytes
//! charged (payload + the 1024-byte head object: Linux charges an skb's `truesize`) until
//! they are acknowledged, so the sender is always ahead of the link, as netperf is. Two
//! events free what a packet holds, as in Linux:
//!
//! - **Transmit completion** (the NIC driver's clean-up, e1000e's `clean_tx_irq`): the
//!   packet's last frame has left the `link_mbps` link (frames of `payload + 90` bytes:
//!   headers, FCS, preamble and inter-frame gap; a packet starts when the link is free or
//!   when it is posted, whichever is later). A [`DmaOp::Tick`] at that time, then the
//!   unmaps of its buffers; its descriptors go back to the ring. The pages stay allocated:
//!   the socket's retransmit queue still holds the original skb.
//! - **ACK**, `rtt_us` after the completion: the socket drops the packet, its head object
//!   goes back to the slab, every payload page it finished goes back to the per-CPU free
//!   list (LIFO), and its charge leaves the send buffer, so the socket can copy more data
//!   into the page the allocator hands back: the same few physical pages come back again
//!   and again (S1.8).
//!
//! A packet is posted when its socket's buffer has room for its charge and the
//! `tx_ring`-descriptor ring for its buffers; otherwise the earliest pending event (a
//! completion or an ACK) happens first. So the pages mapped at once (S1.2's pinned set P)
//! are those of the packets on the ring, while the working set also holds the pages of
//! packets awaiting their ACK and of the page being filled.
//!
//! **Working set** (S1.8): `Total = SendBuf × NumSendSockets`. Here, in 4 KiB pages, about
//! `sockets × send_buffer / 4096` (payload pages charged, the page being filled, and the
//! slab pages of the heads charged to the same buffer): 18 pages for the defaults (formula
//! 16), 70 for 4 sockets (64); the tests check −10 %/+50 %. When the ring rather than the
//! buffers is full (about `tx_ring / 2.5` MSS packets on the ring), it is smaller.
//!
//! **Deviations.** Every packet is acknowledged on its own, a fixed `rtt_us` after its
//! completion (no delayed ACKs covering two segments, no jitter); the driver cleans each
//! packet at its own completion rather than a batch per interrupt; there is no receive
//! side, no congestion window (a loss-free LAN: the send buffer, not `cwnd`, bounds the
//! data in flight) and no retransmission; no qdisc: a packet that does not fit on the ring
//! waits in the socket; with `nodelay = false` (netperf's default, Nagle on) message
//! boundaries do not show in the packets, as the socket always has unacknowledged data at
//! link saturation; every socket runs on CPU `socket % cpus` and its transmit completions
//! and ACKs run on the same CPU. One device (index 0).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::page_alloc::{PageAllocConfig, PageAllocator, Slab};
use super::{DmaOp, ParamError, Segment, Workload, WorkloadError, idx, invalid};
use iommulab_base::addr::{Access, CpuId, DmaDirection, Hpa, PAGE_4K};

/// Most page fragments of one packet (Linux's `MAX_SKB_FRAGS` with 4 KiB pages).
pub const MAX_FRAGS: usize = 17;
/// Ethernet (14) + IPv4 (20) + TCP with timestamps (32) header bytes of every frame.
pub const HEADER_LEN: u64 = 66;
/// IPv4 + TCP header bytes inside the MTU: the MSS is `mtu − 52`.
const TCPIP_LEN: u64 = 52;
/// Bytes a frame takes on the wire besides its payload: headers, FCS (4), preamble and SFD
/// (8) and the inter-frame gap (12).
const WIRE_OVERHEAD: u64 = HEADER_LEN + 4 + 8 + 12;
/// Size of an skb head object (kmalloc-1024: `MAX_TCP_HEADER` headroom + shared info).
pub const HEAD_OBJECT: u64 = 1024;
/// Where the headers start inside the head object (after the reserved headroom).
const HEAD_OFFSET: u64 = 128;
/// Header room a TSO segment leaves in its 64 KiB (`MAX_TCP_HEADER`).
const TSO_HEADROOM: u64 = 320;
/// The largest TSO segment, header included.
const TSO_MAX: u64 = 65_536;

/// How a packet's buffers are handed to the DMA API.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TxMapping {
    /// One `dma_map_single` for the head and one `dma_map_page` per fragment, as e1000e and
    /// ixgbe do: `1 + fragments` I/Os per packet.
    #[default]
    PerFragment,
    /// One `dma_map_sg` of head + fragments: one I/O per packet.
    Sg,
}

/// Parameters of [`NetperfSend`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetperfSendConfig {
    /// Packets (TSO segments with `tso`) to send. `u64::MAX` runs until the runner stops.
    pub packets: u64,
    /// Sending sockets (`NumSendSockets` of S1.8; one netperf stream = 1).
    pub sockets: u32,
    /// Send socket buffer in bytes (`SendBuf` of S1.8; S1.9's 65 KB → 65536).
    pub send_buffer: u64,
    /// Bytes per `send()` call (netperf `-m`; netperf's default is the send buffer size).
    /// Only matters with `nodelay`.
    pub message_size: u64,
    /// `TCP_NODELAY` (netperf `-D`): every message ends with a short packet. Off by default
    /// (Nagle coalesces messages).
    pub nodelay: bool,
    /// IP MTU in bytes (1500, standard Ethernet; 576..=9216).
    pub mtu: u64,
    /// TCP segmentation offload: packets are 64 KiB segments the NIC cuts into frames.
    pub tso: bool,
    /// How packets are mapped (see [`TxMapping`]).
    pub mapping: TxMapping,
    /// The skb heads come from a slab the driver set aside for DMA, so their maps are of
    /// memory *allocated for DMA* (S1.11's relaxation, a driver change; `workload::DmaOp`'s
    /// `dma_alloc`). Off (Linux as it is): heads come from kmalloc-1024 like any skb's,
    /// and every map is an ordinary streaming map of memory handed to the driver.
    pub heads_allocated_for_dma: bool,
    /// Transmit descriptors (one per buffer; e1000e's default 256, at least 18).
    pub tx_ring: u32,
    /// Link rate in Mb/s for the workload clock (Yassour's 1 GbE = 1000; 10000 for 10 GbE).
    pub link_mbps: u64,
    /// Microseconds from a packet's transmit completion (its last frame has left the wire)
    /// to the sender processing the TCP ACK that covers it: the receiver's interrupt
    /// moderation and stack, the ACK frame, the sender's receive interrupt. 100 µs, the
    /// order of a round trip on a 1 GbE LAN with 2010-era NIC interrupt throttling
    /// (0..=1_000_000).
    pub rtt_us: u32,
    /// CPUs; socket `i` runs on CPU `i % cpus`.
    pub cpus: u16,
    /// The page allocator the send buffers and skb heads come from.
    pub memory: PageAllocConfig,
    /// Seed of the page allocator's initial shuffle (the only randomness).
    pub seed: u64,
}

impl Default for NetperfSendConfig {
    fn default() -> Self {
        Self {
            packets: 200_000,
            sockets: 1,
            send_buffer: 65_536,
            message_size: 65_536,
            nodelay: false,
            mtu: 1500,
            tso: false,
            mapping: TxMapping::PerFragment,
            heads_allocated_for_dma: false,
            tx_ring: 256,
            link_mbps: 1000,
            rtt_us: 100,
            cpus: 1,
            memory: PageAllocConfig::default(),
            seed: 1,
        }
    }
}

/// TCP payload bytes of one packet at IP MTU `mtu` (576..=9216): the MSS, or with `tso` the
/// most whole MSS-sized frames a 64 KiB segment holds after its header room (Linux's size
/// goal: 45 × 1448 = 65 160 bytes at MTU 1500).
pub fn packet_payload_bytes(mtu: u64, tso: bool) -> u64 {
    let mss = mtu.saturating_sub(TCPIP_LEN).max(1);
    if tso {
        (TSO_MAX - TSO_HEADROOM) / mss * mss
    } else {
        mss
    }
}

/// Most send-buffer pages `payload` bytes can span, one fragment per page: a packet's
/// payload starts anywhere in a page, so it may touch one page more than it fills (17 for
/// a TSO segment at MTU 1500, [`MAX_FRAGS`]).
pub fn max_payload_pages(payload: u64) -> u64 {
    match payload {
        0 => 0,
        b => ((b - 1) / PAGE_4K.bytes() + 2).min(MAX_FRAGS as u64),
    }
}

/// Validates the NIC parameters shared with Apache; returns `(mss, size goal)`.
pub(super) fn check_nic(
    mtu: u64,
    tso: bool,
    tx_ring: u32,
    link_mbps: u64,
) -> Result<(u64, u64), ParamError> {
    if !(576..=9216).contains(&mtu) {
        return Err(invalid("workload.mtu", mtu, "an IP MTU in 576..=9216"));
    }
    if (tx_ring as usize) < MAX_FRAGS + 1 {
        return Err(invalid(
            "workload.tx_ring",
            tx_ring,
            "at least 18 descriptors (a head + 17 fragments)",
        ));
    }
    if !(1..=8_000_000).contains(&link_mbps) {
        return Err(invalid("workload.link_mbps", link_mbps, "1..=8000000 Mb/s"));
    }
    Ok((mtu - TCPIP_LEN, packet_payload_bytes(mtu, tso)))
}

/// One packet on the transmit ring.
#[derive(Clone, Copy, Debug)]
pub(super) struct TxPacket {
    /// Socket or connection that sent it.
    pub owner: u32,
    /// CPU that maps and unmaps it.
    pub cpu: CpuId,
    /// The skb head object.
    pub head: Hpa,
    /// Bytes of the head the NIC reads (headers).
    pub head_len: u64,
    /// Payload bytes.
    pub payload: u64,
    /// Bytes charged to the socket buffer.
    pub charge: u64,
    /// Bytes the packet takes on the wire.
    pub wire_bytes: u64,
    /// When its last frame has left the wire (ps; set by [`TxPath::post`]).
    pub end_ps: u64,
    nfrags: usize,
    frags: [Segment; MAX_FRAGS],
    nslots: usize,
    slots: [u32; MAX_FRAGS + 1],
}

const NO_SEGMENT: Segment = Segment {
    phys: Hpa::new(0),
    len: 0,
};

impl TxPacket {
    /// A packet with no fragments yet.
    pub fn new(owner: u32, cpu: CpuId, head: Hpa, head_len: u64) -> Self {
        Self {
            owner,
            cpu,
            head,
            head_len,
            payload: 0,
            charge: 0,
            wire_bytes: 0,
            end_ps: 0,
            nfrags: 0,
            frags: [NO_SEGMENT; MAX_FRAGS],
            nslots: 0,
            slots: [0; MAX_FRAGS + 1],
        }
    }

    /// Appends a payload fragment (callers keep to [`MAX_FRAGS`]).
    pub fn push_frag(&mut self, phys: Hpa, len: u64) {
        self.frags[self.nfrags] = Segment { phys, len };
        self.nfrags += 1;
        self.payload += len;
    }

    /// Sets wire bytes for an MSS of `mss` and the charge of a `head_object`-byte head.
    pub fn finish(&mut self, mss: u64, head_object: u64) {
        let frames = self.payload.div_ceil(mss).max(1);
        self.wire_bytes = self.payload + frames * WIRE_OVERHEAD;
        self.charge = self.payload + head_object;
    }

    fn descriptors(&self) -> u32 {
        // nfrags ≤ 17.
        u32::try_from(1 + self.nfrags).unwrap_or(u32::MAX)
    }
}

/// The NIC transmit path: slots, the descriptor ring, the output queue and the link clock.
#[derive(Debug, Clone)]
pub(super) struct TxPath {
    mapping: TxMapping,
    /// The heads' maps are marked allocated for DMA (S1.11's relaxation).
    heads_allocated_for_dma: bool,
    ps_per_byte: u64,
    /// When the link finishes the last frame posted so far (ps).
    link_free_ps: u64,
    /// The workload clock (ps): the last completion or event the owner advanced to.
    now_ps: u64,
    ring: u32,
    used: u32,
    in_flight: VecDeque<TxPacket>,
    free_slots: Vec<u32>,
    next_slot: u32,
    out: VecDeque<DmaOp>,
    sg: Vec<Segment>,
}

impl TxPath {
    /// An idle ring of `ring` descriptors on a `link_mbps` link; `heads_allocated_for_dma`:
    /// the skb heads come from a slab set aside for DMA (S1.11).
    pub fn new(
        mapping: TxMapping,
        ring: u32,
        link_mbps: u64,
        heads_allocated_for_dma: bool,
    ) -> Self {
        let n = ring as usize;
        Self {
            mapping,
            heads_allocated_for_dma,
            ps_per_byte: (8_000_000 / link_mbps.max(1)).max(1),
            link_free_ps: 0,
            now_ps: 0,
            ring,
            used: 0,
            in_flight: VecDeque::with_capacity(n),
            free_slots: Vec::with_capacity(n),
            next_slot: 0,
            out: VecDeque::with_capacity(2 * (MAX_FRAGS + 1) + 2),
            sg: Vec::with_capacity(MAX_FRAGS + 1),
        }
    }

    /// Whether a packet of `frags` fragments fits on the ring now.
    pub fn has_room(&self, frags: u64) -> bool {
        u64::from(self.used) + 1 + frags <= u64::from(self.ring)
    }

    /// Whether no packet is in flight.
    pub fn is_idle(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// The next queued operation.
    pub fn pop_op(&mut self) -> Option<DmaOp> {
        self.out.pop_front()
    }

    /// Segments of the last `MapSg`.
    pub fn sg(&self) -> &[Segment] {
        &self.sg
    }

    /// I/Os (unmaps) a packet of `frags` fragments makes.
    pub fn ios_per_packet(mapping: TxMapping, frags: u64) -> u64 {
        match mapping {
            TxMapping::PerFragment => 1 + frags,
            TxMapping::Sg => 1,
        }
    }

    /// Slots in use at most (one per descriptor).
    pub fn max_slots(&self) -> usize {
        self.ring as usize
    }

    fn take_slot(&mut self) -> u32 {
        self.free_slots.pop().unwrap_or_else(|| {
            self.next_slot += 1;
            self.next_slot - 1
        })
    }

    /// Moves the clock forward to `t_ps` (an event of the owner, e.g. a TCP ACK).
    pub fn advance_to(&mut self, t_ps: u64) {
        self.now_ps = self.now_ps.max(t_ps);
    }

    /// Queues a [`DmaOp::Tick`] at the clock's time.
    pub fn tick(&mut self) {
        self.out.push_back(DmaOp::Tick {
            now_ns: self.now_ps / 1000,
        });
    }

    /// When the oldest packet in flight completes (its last frame leaves the wire), in ps.
    pub fn next_completion_ps(&self) -> Option<u64> {
        self.in_flight.front().map(|p| p.end_ps)
    }

    /// Maps `p` and lets the NIC read it. Its frames go on the wire after those already
    /// queued, or now if the link is idle.
    pub fn post(&mut self, mut p: TxPacket) {
        let start = self.now_ps.max(self.link_free_ps);
        p.end_ps = start + p.wire_bytes * self.ps_per_byte;
        self.link_free_ps = p.end_ps;
        let head = Segment {
            phys: Hpa::new(p.head.get() + HEAD_OFFSET),
            len: p.head_len,
        };
        match self.mapping {
            TxMapping::PerFragment => {
                for i in 0..=p.nfrags {
                    let seg = if i == 0 { head } else { p.frags[i - 1] };
                    let slot = self.take_slot();
                    p.slots[i] = slot;
                    self.out.push_back(DmaOp::Map {
                        slot,
                        cpu: p.cpu,
                        device: 0,
                        phys: seg.phys,
                        len: seg.len,
                        dir: DmaDirection::ToDevice,
                        // S1.11: only a driver that takes its heads from a slab set aside
                        // for DMA has memory allocated for DMA here; payload pages are
                        // handed over by the stack (socket pages, page cache).
                        dma_alloc: i == 0 && self.heads_allocated_for_dma,
                    });
                }
                p.nslots = p.nfrags + 1;
            }
            TxMapping::Sg => {
                self.sg.clear();
                self.sg.push(head);
                self.sg.extend_from_slice(&p.frags[..p.nfrags]);
                let slot = self.take_slot();
                p.slots[0] = slot;
                p.nslots = 1;
                self.out.push_back(DmaOp::MapSg {
                    slot,
                    cpu: p.cpu,
                    device: 0,
                    dir: DmaDirection::ToDevice,
                });
            }
        }
        for &slot in &p.slots[..p.nslots] {
            self.out.push_back(DmaOp::Access {
                slot,
                access: Access::Read,
            });
        }
        self.used += p.descriptors();
        self.in_flight.push_back(p);
    }

    /// Completes the oldest packet: a tick at its last frame's end, then its unmaps. Returns
    /// it so its owner can release its memory.
    pub fn complete(&mut self) -> Option<TxPacket> {
        let p = self.in_flight.pop_front()?;
        self.now_ps = self.now_ps.max(p.end_ps);
        self.out.push_back(DmaOp::Tick {
            now_ns: p.end_ps / 1000,
        });
        for &slot in &p.slots[..p.nslots] {
            self.out.push_back(DmaOp::Unmap { slot, cpu: p.cpu });
            self.free_slots.push(slot);
        }
        self.used -= p.descriptors();
        Some(p)
    }
}

/// Where a socket's byte stream stands (shared by the generator and the I/O count).
#[derive(Clone, Copy, Debug, Default)]
struct Cursor {
    /// Bytes written so far.
    off: u64,
    /// Bytes left in the current message (with `nodelay`).
    msg_left: u64,
}

impl Cursor {
    /// Payload bytes of the next packet.
    fn peek(&self, goal: u64, cfg: &NetperfSendConfig) -> u64 {
        if !cfg.nodelay {
            return goal;
        }
        let left = if self.msg_left == 0 {
            cfg.message_size
        } else {
            self.msg_left
        };
        left.min(goal)
    }

    fn advance(&mut self, len: u64, cfg: &NetperfSendConfig) {
        if cfg.nodelay {
            if self.msg_left == 0 {
                self.msg_left = cfg.message_size;
            }
            self.msg_left -= len;
        }
        self.off += len;
    }

    fn frags(&self, len: u64) -> u64 {
        PAGE_4K.pages_spanned(self.off % PAGE_4K.bytes(), len)
    }
}

/// A packet whose transmit completed (unmapped) and whose ACK has not arrived yet: its
/// head and payload pages stay referenced by the socket's retransmit queue.
#[derive(Clone, Copy, Debug)]
struct Unacked {
    owner: u32,
    head: Hpa,
    payload: u64,
    charge: u64,
    ack_ps: u64,
}

#[derive(Debug, Clone)]
struct Socket {
    cpu: CpuId,
    cursor: Cursor,
    /// Bytes of the stream completed (sent and acknowledged).
    completed: u64,
    /// Pages holding the stream from `first_page_off` on, oldest first.
    pages: VecDeque<Hpa>,
    first_page_off: u64,
    /// Bytes charged to the send buffer.
    charged: u64,
}

/// The generator (see the module doc).
#[derive(Debug, Clone)]
pub struct NetperfSend {
    cfg: NetperfSendConfig,
    mss: u64,
    goal: u64,
    tx: TxPath,
    mem: PageAllocator,
    slab: Slab,
    sockets: Vec<Socket>,
    /// Transmitted packets awaiting their ACK, in ACK order (completion order + `rtt`).
    unacked: VecDeque<Unacked>,
    rtt_ps: u64,
    sent: u64,
    total: Option<u64>,
}

impl NetperfSend {
    /// A generator, or an error naming the first bad field.
    ///
    /// # Examples
    /// ```
    /// use iommulab_workload::{NetperfSend, NetperfSendConfig, Workload};
    /// let mut w = NetperfSend::new(NetperfSendConfig { packets: 10, ..Default::default() })?;
    /// let mut n = 0;
    /// while let Some(_op) = w.next_op()? {
    ///     n += 1;
    /// }
    /// assert!(n > 0);
    /// # Ok::<(), iommulab_workload::WorkloadError>(())
    /// ```
    pub fn new(cfg: NetperfSendConfig) -> Result<Self, ParamError> {
        let (mss, goal) = check_nic(cfg.mtu, cfg.tso, cfg.tx_ring, cfg.link_mbps)?;
        if cfg.sockets == 0 {
            return Err(invalid("workload.sockets", cfg.sockets, "at least 1"));
        }
        if cfg.cpus == 0 {
            return Err(invalid("workload.cpus", cfg.cpus, "at least 1"));
        }
        if cfg.send_buffer == 0 {
            return Err(invalid("workload.send_buffer", 0, "at least 1 byte"));
        }
        if cfg.rtt_us > 1_000_000 {
            return Err(invalid("workload.rtt_us", cfg.rtt_us, "0..=1000000 µs"));
        }
        if cfg.nodelay && cfg.message_size == 0 {
            return Err(invalid("workload.message_size", 0, "at least 1 byte"));
        }
        // Pages a socket can hold: its charged payload (the buffer plus one packet, as a
        // socket with nothing charged may always send), the page being filled and a partial
        // first page; plus the slab pages of every head on the ring.
        let per_socket = (cfg.send_buffer + goal).div_ceil(PAGE_4K.bytes()) + 2;
        let heads = u64::from(cfg.tx_ring / 2).div_ceil(PAGE_4K.bytes() / HEAD_OBJECT) + 1;
        let need = u64::from(cfg.sockets) * per_socket + heads;
        if cfg.memory.pages < need {
            return Err(invalid(
                "workload.memory.pages",
                cfg.memory.pages,
                &format!("at least {need} pages for these sockets and buffers"),
            ));
        }
        let sockets = (0..cfg.sockets)
            .map(|i| Socket {
                cpu: CpuId::new(u16::try_from(i % u32::from(cfg.cpus)).unwrap_or(0)),
                cursor: Cursor::default(),
                completed: 0,
                pages: VecDeque::with_capacity(usize::try_from(per_socket + 1).unwrap_or(0)),
                first_page_off: 0,
                charged: 0,
            })
            .collect();
        let total = (cfg.packets <= crate::COUNTED_TOTAL_MAX).then(|| Self::count_ios(&cfg, goal));
        Ok(Self {
            mss,
            goal,
            tx: TxPath::new(
                cfg.mapping,
                cfg.tx_ring,
                cfg.link_mbps,
                cfg.heads_allocated_for_dma,
            ),
            mem: PageAllocator::new(&cfg.memory, cfg.cpus, cfg.seed),
            slab: Slab::new(HEAD_OBJECT),
            sockets,
            unacked: VecDeque::with_capacity(cfg.tx_ring as usize),
            rtt_ps: u64::from(cfg.rtt_us) * 1_000_000,
            sent: 0,
            total,
            cfg,
        })
    }

    /// The I/Os (unmaps) of the whole run: packet `k` goes to socket `k % sockets`.
    fn count_ios(cfg: &NetperfSendConfig, goal: u64) -> u64 {
        let n = u64::from(cfg.sockets);
        (0..n)
            .map(|s| {
                let packets = cfg.packets / n + u64::from(s < cfg.packets % n);
                let mut c = Cursor::default();
                (0..packets)
                    .map(|_| {
                        let len = c.peek(goal, cfg);
                        let ios = TxPath::ios_per_packet(cfg.mapping, c.frags(len));
                        c.advance(len, cfg);
                        ios
                    })
                    .sum::<u64>()
            })
            .sum()
    }

    /// The configuration in use.
    pub fn config(&self) -> &NetperfSendConfig {
        &self.cfg
    }

    /// S1.8's working set in 4 KiB pages: `⌈SendBuf / 4096⌉ × NumSendSockets`.
    pub fn working_set_pages(&self) -> u64 {
        self.cfg.send_buffer.div_ceil(PAGE_4K.bytes()) * u64::from(self.cfg.sockets)
    }

    fn out_of_memory() -> WorkloadError {
        WorkloadError::from(invalid(
            "workload.memory.pages",
            "too few",
            "more pages for the send buffers",
        ))
    }

    /// Sends the next packet of socket `s`, of `len` payload bytes.
    fn send(&mut self, s: usize, len: u64) -> Result<(), WorkloadError> {
        let cpu = self.sockets[s].cpu;
        let head = self
            .slab
            .alloc(&mut self.mem, cpu)
            .ok_or_else(Self::out_of_memory)?;
        let sock = &mut self.sockets[s];
        let end = sock.cursor.off + len;
        while sock.first_page_off + PAGE_4K.bytes() * (sock.pages.len() as u64) < end {
            let page = self.mem.alloc(cpu).ok_or_else(Self::out_of_memory)?;
            sock.pages.push_back(page);
        }
        let owner = u32::try_from(s).unwrap_or(u32::MAX);
        let mut p = TxPacket::new(owner, cpu, head, HEADER_LEN);
        let mut at = sock.cursor.off;
        while at < end {
            let page = idx((at - sock.first_page_off) / PAGE_4K.bytes());
            let in_page = at % PAGE_4K.bytes();
            let n = (end - at).min(PAGE_4K.bytes() - in_page);
            p.push_frag(Hpa::new(sock.pages[page].get() + in_page), n);
            at += n;
        }
        p.finish(self.mss, self.slab.object_size());
        sock.charged += p.charge;
        sock.cursor.advance(len, &self.cfg);
        self.tx.post(p);
        Ok(())
    }

    /// Transmit completion of the oldest packet on the ring (e1000e's `clean_tx_irq`): its
    /// buffers are unmapped and its descriptors freed; its memory stays with the socket
    /// until the ACK, `rtt` later.
    fn complete_one(&mut self) {
        let Some(p) = self.tx.complete() else {
            return;
        };
        self.unacked.push_back(Unacked {
            owner: p.owner,
            head: p.head,
            payload: p.payload,
            charge: p.charge,
            ack_ps: p.end_ps + self.rtt_ps,
        });
    }

    /// The ACK of the oldest unacknowledged packet: the socket's retransmit queue drops it,
    /// its head goes back to the slab, every payload page it finished back to the per-CPU
    /// free list (LIFO), and its charge leaves the send buffer.
    fn ack_one(&mut self) {
        let Some(a) = self.unacked.pop_front() else {
            return;
        };
        self.tx.advance_to(a.ack_ps);
        self.tx.tick();
        self.slab.free(a.head);
        let sock = &mut self.sockets[a.owner as usize];
        sock.charged -= a.charge;
        sock.completed += a.payload;
        while sock.first_page_off + PAGE_4K.bytes() <= sock.completed {
            if let Some(page) = sock.pages.pop_front() {
                self.mem.free(sock.cpu, page);
            }
            sock.first_page_off += PAGE_4K.bytes();
        }
    }

    /// Handles the earliest pending event (a transmit completion before an ACK due at the
    /// same time); `false` when nothing is pending.
    fn next_event(&mut self) -> bool {
        match (
            self.tx.next_completion_ps(),
            self.unacked.front().map(|a| a.ack_ps),
        ) {
            (Some(c), Some(a)) if a < c => self.ack_one(),
            (Some(_), _) => self.complete_one(),
            (None, Some(_)) => self.ack_one(),
            (None, None) => return false,
        }
        true
    }

    /// Queues the next group of operations; `false` at the end.
    fn refill(&mut self) -> Result<bool, WorkloadError> {
        if self.sent < self.cfg.packets {
            let s = idx(self.sent % u64::from(self.cfg.sockets));
            let sock = &self.sockets[s];
            let len = sock.cursor.peek(self.goal, &self.cfg);
            let charge = len + self.slab.object_size();
            let fits = sock.charged == 0 || sock.charged + charge <= self.cfg.send_buffer;
            if fits && self.tx.has_room(sock.cursor.frags(len)) {
                self.send(s, len)?;
                self.sent += 1;
            } else {
                let progressed = self.next_event();
                debug_assert!(progressed, "a blocked socket has packets in flight");
            }
            return Ok(true);
        }
        Ok(self.next_event())
    }
}

/// `Workload` for a sender built on [`TxPath`]: ops come from its transmit path, which the
/// sender's `refill` (`Result<bool, WorkloadError>`: false when it has nothing more to send) feeds;
/// one device; `total` I/Os if known. Shared by netperf-send and apache-sendfile.
macro_rules! nic_workload {
    ($sender:ty) => {
        impl Workload for $sender {
            type Phys = Hpa;
            fn next_op(&mut self) -> Result<Option<DmaOp>, WorkloadError> {
                loop {
                    if let Some(op) = self.tx.pop_op() {
                        return Ok(Some(op));
                    }
                    if !self.refill()? {
                        return Ok(None);
                    }
                }
            }

            fn sg_segments(&self) -> &[Segment] {
                self.tx.sg()
            }

            fn slots(&self) -> usize {
                self.tx.max_slots()
            }

            fn devices(&self) -> usize {
                1
            }

            fn total_ios(&self) -> Option<u64> {
                self.total
            }
        }
    };
}
pub(super) use nic_workload;

nic_workload!(NetperfSend);

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::check::{Checked, run_checked};

    fn cfg(packets: u64) -> NetperfSendConfig {
        NetperfSendConfig {
            packets,
            ..Default::default()
        }
    }

    fn run(c: NetperfSendConfig) -> Checked {
        run_checked(&mut NetperfSend::new(c).unwrap())
    }

    #[test]
    fn rejects_bad_fields_by_name() {
        let bad = |c: NetperfSendConfig| NetperfSend::new(c).unwrap_err().to_string();
        assert!(bad(NetperfSendConfig { mtu: 100, ..cfg(1) }).contains("workload.mtu"));
        assert!(
            bad(NetperfSendConfig {
                tx_ring: 4,
                ..cfg(1)
            })
            .contains("workload.tx_ring")
        );
        assert!(
            bad(NetperfSendConfig {
                sockets: 0,
                ..cfg(1)
            })
            .contains("workload.sockets")
        );
        let tiny = NetperfSendConfig {
            memory: PageAllocConfig {
                pages: 8,
                ..Default::default()
            },
            ..cfg(1)
        };
        assert!(bad(tiny).contains("workload.memory.pages"));
    }

    /// Per-fragment mapping: every packet is a head map + 1–2 page fragments (1448 bytes
    /// straddle a page boundary now and then), all ToDevice, all read by the NIC.
    #[test]
    fn per_fragment_packets_map_head_and_pages() {
        let c = run(cfg(1000));
        assert_eq!(
            c.unmaps,
            NetperfSend::new(cfg(1000)).unwrap().total.unwrap()
        );
        // 1000 packets of 1448 bytes = 1,448,000 bytes ≈ 354 pages: 1000 heads, 1000 frags
        // plus one per page boundary crossed mid-packet.
        assert!(c.unmaps > 2000 && c.unmaps < 2400, "{}", c.unmaps);
        assert_eq!(c.maps_by_dir[0], c.maps);
        assert_eq!(c.reads, c.maps);
        assert_eq!(c.max_len, 1448);
    }

    #[test]
    fn sg_mapping_is_one_io_per_packet() {
        let c = run(NetperfSendConfig {
            mapping: TxMapping::Sg,
            ..cfg(500)
        });
        assert_eq!(c.unmaps, 500);
        assert_eq!(c.sg_maps, 500);
        assert!(c.max_sg_segments >= 2 && c.max_sg_segments <= 3);
    }

    /// TSO: 45 × 1448-byte segments spanning up to 17 pages.
    #[test]
    fn tso_segments_span_up_to_seventeen_pages() {
        let c = run(NetperfSendConfig {
            tso: true,
            mapping: TxMapping::Sg,
            send_buffer: 256 * 1024,
            ..cfg(200)
        });
        assert_eq!(c.unmaps, 200);
        assert_eq!(c.max_sg_segments, 1 + 17);
        assert_eq!(c.sg_bytes, 200 * (45 * 1448 + HEADER_LEN));
        // The bound the reproduction pages quote is the one the run reaches.
        let payload = packet_payload_bytes(1500, true);
        assert_eq!(payload, 45 * 1448);
        assert_eq!(1 + max_payload_pages(payload), c.max_sg_segments as u64);
        assert_eq!(max_payload_pages(1448), 2);
        assert_eq!(max_payload_pages(0), 0);
    }

    /// The clock runs at the link rate when the send buffer covers the round trip: 1 GbE
    /// sends a 1538-byte frame in 12.304 µs, and a 64 KiB buffer (26 packets, 320 µs of
    /// wire time) outlasts a 100 µs RTT; 10 GbE also, with no RTT.
    #[test]
    fn ticks_follow_the_link_rate() {
        for (mbps, ns, rtt_us) in [(1000u64, 12_304u64, 100u32), (10_000, 1230, 0)] {
            let c = run(NetperfSendConfig {
                link_mbps: mbps,
                rtt_us,
                mapping: TxMapping::Sg,
                ..cfg(1000)
            });
            // The last completion, then the last ACK one RTT later.
            let want = 1000 * 1538 * 8_000_000 / mbps / 1000;
            assert_eq!(c.last_tick, want + u64::from(rtt_us) * 1000);
            assert!(want.abs_diff(1000 * ns) <= 1000);
        }
    }

    /// At 10 GbE a 64 KiB buffer (26 packets of 1448 + 1024 charged bytes) is sent in
    /// 32 µs, less than a 100 µs RTT: the ACK clock, not the link, paces the sender. Packet
    /// `i` waits for the ACK of packet `i − 26`, so 26 packets go per RTT + one frame time.
    #[test]
    fn a_small_window_is_paced_by_acks() {
        let c = run(NetperfSendConfig {
            link_mbps: 10_000,
            rtt_us: 100,
            mapping: TxMapping::Sg,
            ..cfg(1040)
        });
        let window = 65_536 / (1448 + HEAD_OBJECT);
        assert_eq!(window, 26);
        let want_ns = 1040 / window * (100_000 + 1230);
        assert!(
            c.last_tick.abs_diff(want_ns) * 20 <= want_ns,
            "{} ns vs {want_ns} ns",
            c.last_tick
        );
        // Far slower than the link alone.
        assert!(c.last_tick > 3 * 1040 * 1230);
    }

    /// S1.8: distinct pages mapped over a long run ≈ SendBuf × NumSendSockets / 4096 (within
    /// −10 %/+50 %), because freed pages come back LIFO from the per-CPU lists; a ring too
    /// small for the buffers bounds it instead.
    #[test]
    fn working_set_is_send_buffer_times_sockets() {
        let ws = |sockets, cpus, send_buffer, tx_ring| {
            let c = NetperfSendConfig {
                sockets,
                cpus,
                send_buffer,
                tx_ring,
                ..cfg(20_000)
            };
            let formula = NetperfSend::new(c).unwrap().working_set_pages();
            (run(c).pages.len() as u64, formula)
        };
        for (sockets, cpus, buf, ring) in [
            (1u32, 1u16, 65_536u64, 256u32),
            (4, 2, 65_536, 256),
            (2, 1, 262_144, 1024),
        ] {
            let (got, formula) = ws(sockets, cpus, buf, ring);
            assert!(
                got * 10 >= formula * 9 && got * 2 <= formula * 3,
                "sockets={sockets} buf={buf}: {got} pages vs formula {formula}"
            );
        }
        // 2 × 256 KiB of buffers, but 256 descriptors hold only ~100 packets (~36 pages).
        let (got, formula) = ws(2, 1, 262_144, 256);
        assert!(got < formula * 2 / 3, "{got} vs {formula}");
    }

    /// With nodelay, a 5000-byte message is 1448 × 3 + 656: every fourth packet is short.
    #[test]
    fn nodelay_ends_each_message_with_a_short_packet() {
        let c = NetperfSendConfig {
            nodelay: true,
            message_size: 5000,
            mapping: TxMapping::Sg,
            ..cfg(400)
        };
        let got = run(c);
        assert_eq!(got.sg_bytes, 100 * (5000 + 4 * HEADER_LEN));
        let mut w = NetperfSend::new(c).unwrap();
        assert_eq!(w.total_ios(), Some(400));
        while w.next_op().unwrap().is_some() {}
        // 400 000 bytes fill 97 pages and part of one more: only that one is still held.
        assert_eq!(w.sockets[0].pages.len(), 1, "every finished page freed");
    }

    /// The I/O count is worked out packet by packet, so only up to a bound: a run of 10^15
    /// packets (or validating one) starts at once with its total unknown.
    #[test]
    fn the_total_is_counted_only_for_runs_of_countable_size() {
        let small = NetperfSend::new(cfg(crate::COUNTED_TOTAL_MAX)).unwrap();
        assert!(
            small
                .total_ios()
                .is_some_and(|t| t >= crate::COUNTED_TOTAL_MAX)
        );
        let huge = NetperfSend::new(cfg(1_000_000_000_000_000)).unwrap();
        assert_eq!(huge.total_ios(), None);
        let apache = |requests| {
            crate::ApacheSendfile::new(crate::ApacheSendfileConfig {
                requests,
                ..crate::ApacheSendfileConfig::default()
            })
            .unwrap()
            .total_ios()
        };
        assert!(apache(1000).is_some());
        assert_eq!(apache(1_000_000_000_000_000), None);
    }

    #[test]
    fn same_seed_same_ops_other_seed_other_pages() {
        let ops = |seed| {
            let mut w = NetperfSend::new(NetperfSendConfig { seed, ..cfg(300) }).unwrap();
            let mut v = Vec::new();
            while let Some(op) = w.next_op().unwrap() {
                v.push(op);
            }
            v
        };
        assert_eq!(ops(5), ops(5));
        assert_ne!(ops(5), ops(6));
    }

    #[test]
    fn heads_live_in_slab_objects() {
        let c = run(cfg(100));
        let heads: HashSet<u64> = c
            .buffers
            .iter()
            .filter(|b| b.1 == HEADER_LEN)
            .map(|b| b.0 % PAGE_4K.bytes())
            .collect();
        assert!(heads.iter().all(|off| off % HEAD_OBJECT == HEAD_OFFSET));
    }

    /// `(most distinct pages mapped at once, distinct pages mapped)` over a run (`steady`:
    /// the most after the first fifth of the run, past the start-up burst): S1.2's pinned
    /// set |P| at its largest, and the working set.
    fn pinned_and_working_set(c: NetperfSendConfig, steady: bool) -> (u64, u64) {
        // Every buffer's 4 KiB pages, mapped (true) and unmapped (false) in op order: the
        // page references the guest map cache sees with `cache_only = all`.
        let pages =
            |phys: u64, len: u64| (phys >> 12)..=(phys.saturating_add(len.max(1) - 1) >> 12);
        let mut w = NetperfSend::new(c).unwrap();
        let mut refs: Vec<(u64, bool)> = Vec::new();
        let mut live: std::collections::HashMap<u32, Vec<u64>> = Default::default();
        while let Some(op) = w.next_op().unwrap() {
            let (slot, buf): (u32, Vec<u64>) = match op {
                DmaOp::Map {
                    slot, phys, len, ..
                } => (slot, pages(phys.get(), len).collect()),
                DmaOp::MapSg { slot, .. } => {
                    let segs = w.sg_segments();
                    (
                        slot,
                        segs.iter()
                            .flat_map(|s| pages(s.phys.get(), s.len))
                            .collect(),
                    )
                }
                DmaOp::Unmap { slot, .. } => {
                    let buf = live.remove(&slot).unwrap_or_default();
                    refs.extend(buf.into_iter().map(|g| (g, false)));
                    continue;
                }
                _ => continue,
            };
            refs.extend(buf.iter().map(|&g| (g, true)));
            live.insert(slot, buf);
        }
        let mut rc: std::collections::HashMap<u64, u32> = Default::default();
        let (mut now, mut most) = (0u64, 0u64);
        let from = refs.len() / 5 * usize::from(steady);
        for (i, &(page, map)) in refs.iter().enumerate() {
            if i == from {
                most = now;
            }
            let c = rc.entry(page).or_insert(0);
            if map {
                *c += 1;
                if *c == 1 {
                    now += 1;
                    most = most.max(now);
                }
            } else {
                *c -= 1;
                if *c == 0 {
                    now -= 1;
                }
            }
        }
        (most, rc.len() as u64)
    }

    /// Buffers are unmapped at transmit completion, pages freed at the ACK: the pages
    /// mapped at once are those of the buffers on the ring (one page at most each), fewer
    /// than the working set by the pages of packets awaiting their ACK (at 1 GbE, 100 µs is
    /// 8 packets); the longer the RTT, the fewer. With no RTT nothing waits and the two
    /// coincide. At the start every socket fills its buffer at once (no slow start), so the
    /// largest pinned set of a whole run is higher than in the steady state.
    #[test]
    fn pinned_pages_are_the_rings_not_the_working_set() {
        let four = |rtt_us| NetperfSendConfig {
            sockets: 4,
            rtt_us,
            ..cfg(20_000)
        };
        let live = run(four(100)).peak_live as u64;
        assert!(live <= u64::from(four(100).tx_ring));
        let (pinned, ws) = pinned_and_working_set(four(100), false);
        assert!(pinned <= live, "{pinned} pages vs {live} buffers");
        assert!(pinned < ws, "pinned {pinned} vs working set {ws}");
        let (p0, ws0) = pinned_and_working_set(four(0), true);
        assert_eq!(
            p0, ws0,
            "no RTT: every page of the working set is on the ring"
        );
        let (p100, _) = pinned_and_working_set(four(100), true);
        let (p1000, ws1000) = pinned_and_working_set(four(1000), true);
        assert!(p100 < ws0 && p1000 < p100, "{p1000} < {p100} < {ws0}");
        assert!(
            p1000 * 2 < ws1000,
            "rtt 1 ms: {p1000} vs working set {ws1000}"
        );
    }

    /// A payload page is not given back to the allocator before the ACK of the last packet
    /// with data in it. From the operation stream alone: a socket fills a page from offset 0,
    /// so a fragment at offset 0 of a page seen before is the page reused; by then every
    /// earlier fragment in it must be unmapped, and the clock (a `Tick` at each completion
    /// and each ACK) must have passed the latest of their completions + RTT.
    #[test]
    fn a_page_is_not_reused_before_its_ack() {
        let rtt_us = 300u32;
        let mut w = NetperfSend::new(NetperfSendConfig {
            sockets: 3,
            rtt_us,
            ..cfg(5_000)
        })
        .unwrap();
        let rtt_ns = u64::from(rtt_us) * 1000;
        let mut now = 0u64;
        let mut pending_tick = 0u64;
        // Live fragment slots → page; per page: live fragments and the latest completion.
        let mut slot_page: std::collections::HashMap<u32, u64> = Default::default();
        let mut live: std::collections::HashMap<u64, u32> = Default::default();
        let mut last_done: std::collections::HashMap<u64, u64> = Default::default();
        let (mut reuses, mut waited_ns) = (0u64, 0u64);
        while let Some(op) = w.next_op().unwrap() {
            match op {
                DmaOp::Tick { now_ns } => {
                    now = now_ns;
                    pending_tick = now_ns;
                }
                DmaOp::Map {
                    slot, phys, len, ..
                } if len != HEADER_LEN => {
                    let (page, off) = (phys.get() / PAGE_4K.bytes(), phys.get() % PAGE_4K.bytes());
                    if off == 0
                        && let Some(&done) = last_done.get(&page)
                    {
                        assert_eq!(
                            live.get(&page).copied().unwrap_or(0),
                            0,
                            "reused while mapped"
                        );
                        assert!(
                            now >= done + rtt_ns,
                            "page reused at {now} ns, ACK due at {} ns",
                            done + rtt_ns
                        );
                        reuses += 1;
                        waited_ns += now - done;
                        last_done.remove(&page);
                    }
                    slot_page.insert(slot, page);
                    *live.entry(page).or_insert(0) += 1;
                }
                DmaOp::Unmap { slot, .. } => {
                    if let Some(page) = slot_page.remove(&slot) {
                        *live.get_mut(&page).unwrap() -= 1;
                        let d = last_done.entry(page).or_insert(0);
                        *d = (*d).max(pending_tick);
                    }
                }
                _ => {}
            }
        }
        assert!(reuses > 1000, "pages come back LIFO: {reuses} reuses");
        // Reused pages waited at least the RTT after their last completion, on average more.
        assert!(waited_ns / reuses >= rtt_ns);
    }
}
