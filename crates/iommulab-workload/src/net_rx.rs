//! A NIC's receive ring under NAPI (S2.7's netperf receiver): the driver keeps `ring`
//! receive buffers mapped for the device; each poll the device fills up to `budget` of them
//! (oldest first), the driver unmaps each filled buffer and hands it up the stack, then
//! refills the ring with as many freshly mapped buffers. Maps therefore come in runs of up
//! to `budget` after runs of unmaps, which is what a batching DMA interface
//! (`map_multi`/`unmap_multi`, S2.6) can exploit, and every map and unmap request is for
//! one buffer, which is why Xen's multicalls carried one entry (S2.5).
//!
//! Buffers are `buf_size`-byte slab objects (2 KiB: two per page, as the e1000 family's
//! receive buffers), drawn at random from a pool of `pool_pages` pages; page-sized buffers
//! are whole pages taken from the pool in turn. One CPU polls.
//!
//! **Copybreak** (e1000e's `copybreak`, 256 bytes by default): a frame shorter than
//! `copybreak` is copied into a fresh small skb and its receive buffer stays in its ring
//! slot, so the refill maps the *same* buffer again. With `frame_len < copybreak` (ACKs,
//! HTTP requests: every frame small) every slot keeps its buffer for the whole run and the
//! ring's buffers come back in ring order, one lap (`ring` receive maps) apart, as the
//! recorded e1000e traces show (`traces/README.md`). The ring's buffers are then slab
//! objects handed out in order (two 2 KiB buffers to a page, the first lap's buffers `2k`
//! and `2k + 1` sharing a page), where uncopied buffers are placed at random as above.
//! `copybreak = 0` (the default) turns it off. [`NetRx::close`] takes the interface down:
//! the posted buffers are unmapped without the device writing them (e1000e's
//! `clean_rx_ring`), which is how [`super::nic_duplex`] ends its receive ring.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{DmaOp, Segment, Workload, WorkloadError};
use iommulab_base::addr::{Access, CpuId, DmaDirection, Hpa, PAGE_4K};

/// Parameters of [`NetRx`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetRxConfig {
    /// Packets to receive (I/Os).
    pub packets: u64,
    /// Receive descriptors kept mapped (256, the e1000's default ring).
    pub ring: u32,
    /// Packets handled per NAPI poll (Linux's default weight, 64).
    pub budget: u32,
    /// Bytes per receive buffer.
    pub buf_size: u64,
    /// Pages in the buffer pool.
    pub pool_pages: u64,
    /// Frames shorter than this many bytes are copied out and their buffer reused in place
    /// (e1000e's `copybreak`, 256 by default in the driver; 0 = never, the default here).
    pub copybreak: u64,
    /// Bytes of each received frame (1514: a full Ethernet frame; 66: a TCP ACK with
    /// timestamps). Only compared with `copybreak`.
    pub frame_len: u64,
    /// Seed of the buffer-placement RNG.
    pub seed: u64,
}

impl Default for NetRxConfig {
    fn default() -> Self {
        Self {
            packets: 100_000,
            ring: 256,
            budget: 64,
            buf_size: 2048,
            pool_pages: 4096,
            copybreak: 0,
            frame_len: 1514,
            seed: 1,
        }
    }
}

/// Physical base of the buffer pool (above the first GiB).
const POOL_BASE: u64 = 0x4000_0000;

fn recycles(cfg: &NetRxConfig) -> bool {
    cfg.frame_len < cfg.copybreak
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Mapping buffers until the ring is full.
    Refill,
    /// The device writes the next filled buffer.
    Fill,
    /// The driver unmaps the buffer just filled.
    Unmap,
    /// The interface is going down: the posted buffers are unmapped unfilled.
    Close,
    Done,
}

/// The generator.
#[derive(Debug, Clone)]
pub struct NetRx {
    cfg: NetRxConfig,
    rng: SmallRng,
    /// Buffers mapped so far (slot = mapped % ring).
    mapped: u64,
    /// Packets received (unmapped) so far.
    received: u64,
    /// Packets left in the current poll.
    poll_left: u32,
    phase: Phase,
    /// With copybreak: each slot's buffer, kept across refills (empty otherwise).
    kept: Vec<Hpa>,
}

impl NetRx {
    /// A generator; `ring`, `budget`, `buf_size` and `pool_pages` below 1 count as 1, and the
    /// budget is at most the ring.
    pub fn new(cfg: NetRxConfig) -> Self {
        let ring = cfg.ring.max(1);
        let cfg = NetRxConfig {
            ring,
            budget: cfg.budget.clamp(1, ring),
            buf_size: cfg.buf_size.max(1),
            pool_pages: cfg.pool_pages.max(1),
            ..cfg
        };
        Self {
            rng: SmallRng::seed_from_u64(cfg.seed),
            cfg,
            mapped: 0,
            received: 0,
            poll_left: 0,
            phase: Phase::Refill,
            kept: Vec::with_capacity(if recycles(&cfg) { ring as usize } else { 0 }),
        }
    }

    /// Whether every frame is copied out and its buffer reused in place.
    pub fn recycles(&self) -> bool {
        recycles(&self.cfg)
    }

    /// The configuration in use (after the clamps of [`NetRx::new`]).
    pub fn config(&self) -> &NetRxConfig {
        &self.cfg
    }

    /// Takes the interface down: no more frames arrive and no buffer is posted again; the
    /// buffers still posted are unmapped without a device write (e1000e's `clean_rx_ring`).
    pub fn close(&mut self) {
        if self.phase != Phase::Done {
            self.phase = Phase::Close;
        }
    }

    /// The physical memory the buffers come from: `[base, base + pool_pages × 4 KiB)`.
    pub fn pool(&self) -> (Hpa, u64) {
        (Hpa::new(POOL_BASE), self.cfg.pool_pages)
    }

    fn slot(&self, n: u64) -> u32 {
        u32::try_from(n % u64::from(self.cfg.ring)).unwrap_or(0)
    }

    /// The buffer of receive map `n`.
    fn buffer(&mut self, n: u64) -> Hpa {
        if self.recycles() {
            // Copybreak: the slot's own buffer again; the first lap's are slab objects in
            // turn (two 2 KiB objects to a page).
            let slot = self.slot(n) as usize;
            if let Some(&b) = self.kept.get(slot) {
                return b;
            }
            let size = self.cfg.buf_size.next_power_of_two();
            let per_page = (PAGE_4K.bytes() / size).max(1);
            let pages = size.div_ceil(PAGE_4K.bytes());
            let page = (n / per_page * pages) % self.cfg.pool_pages;
            let offset = if per_page > 1 { n % per_page * size } else { 0 };
            let b = Hpa::new(POOL_BASE + page * PAGE_4K.bytes() + offset);
            self.kept.push(b);
            return b;
        }
        self.buffer_fresh(n)
    }

    fn buffer_fresh(&mut self, n: u64) -> Hpa {
        // Page-sized buffers are whole pages taken in turn, so no two live buffers share a
        // page (what page flipping, which hands whole pages over, needs); smaller ones are
        // slab objects on random pages.
        if self.cfg.buf_size >= PAGE_4K.bytes() {
            let pages = self.cfg.buf_size.div_ceil(PAGE_4K.bytes());
            let slots = (self.cfg.pool_pages / pages).max(1);
            let page = ((n + 1) % slots) * pages;
            return Hpa::new(POOL_BASE + page * PAGE_4K.bytes());
        }
        let page = self.rng.gen_range(0..self.cfg.pool_pages);
        let per_page = (PAGE_4K.bytes() / self.cfg.buf_size.next_power_of_two()).max(1);
        let object = self.rng.gen_range(0..per_page);
        let offset = if per_page > 1 {
            object * self.cfg.buf_size.next_power_of_two()
        } else {
            0
        };
        Hpa::new(POOL_BASE + page * PAGE_4K.bytes() + offset)
    }
}

impl Workload for NetRx {
    type Phys = Hpa;

    fn next_op(&mut self) -> Result<Option<DmaOp>, WorkloadError> {
        loop {
            match self.phase {
                Phase::Done => return Ok(None),
                Phase::Refill => {
                    // Never post more buffers than packets are left to arrive.
                    let posted = self.mapped - self.received;
                    if posted < u64::from(self.cfg.ring) && self.mapped < self.cfg.packets {
                        let n = self.mapped;
                        let phys = self.buffer(n);
                        self.mapped += 1;
                        return Ok(Some(DmaOp::Map {
                            slot: self.slot(n),
                            cpu: CpuId::new(0),
                            device: 0,
                            phys,
                            len: self.cfg.buf_size,
                            dir: DmaDirection::FromDevice,
                            dma_alloc: false,
                        }));
                    }
                    if posted == 0 {
                        self.phase = Phase::Done;
                        continue;
                    }
                    let budget = u64::from(self.cfg.budget).min(posted);
                    self.poll_left = u32::try_from(budget).unwrap_or(self.cfg.budget);
                    self.phase = Phase::Fill;
                }
                Phase::Fill => {
                    self.phase = Phase::Unmap;
                    return Ok(Some(DmaOp::Access {
                        slot: self.slot(self.received),
                        access: Access::Write,
                    }));
                }
                Phase::Close => {
                    if self.received == self.mapped {
                        self.phase = Phase::Done;
                        continue;
                    }
                    let n = self.received;
                    self.received += 1;
                    return Ok(Some(DmaOp::Unmap {
                        slot: self.slot(n),
                        cpu: CpuId::new(0),
                    }));
                }
                Phase::Unmap => {
                    let n = self.received;
                    self.received += 1;
                    self.poll_left -= 1;
                    self.phase = if self.poll_left == 0 {
                        Phase::Refill
                    } else {
                        Phase::Fill
                    };
                    return Ok(Some(DmaOp::Unmap {
                        slot: self.slot(n),
                        cpu: CpuId::new(0),
                    }));
                }
            }
        }
    }

    fn sg_segments(&self) -> &[Segment] {
        &[]
    }

    fn slots(&self) -> usize {
        self.cfg.ring as usize
    }

    fn devices(&self) -> usize {
        1
    }

    fn total_ios(&self) -> Option<u64> {
        Some(self.cfg.packets)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn ops(cfg: NetRxConfig) -> Vec<DmaOp> {
        let mut w = NetRx::new(cfg);
        let mut out = Vec::new();
        while let Some(op) = w.next_op().unwrap() {
            out.push(op);
        }
        out
    }

    /// The ring fills first, then polls of `budget` fills and unmaps alternate with refills
    /// of as many maps; every buffer is unmapped once, after the device wrote it.
    #[test]
    fn polls_unmap_a_budget_then_refill() {
        let cfg = NetRxConfig {
            packets: 10,
            ring: 4,
            budget: 2,
            ..NetRxConfig::default()
        };
        let kinds: String = ops(cfg)
            .iter()
            .map(|op| match op {
                DmaOp::Map { .. } => 'M',
                DmaOp::Access { .. } => 'A',
                DmaOp::Unmap { .. } => 'U',
                _ => '?',
            })
            .collect();
        assert_eq!(
            kinds,
            "MMMM".to_owned() + "AUAU" + "MM" + "AUAU" + "MM" + "AUAU" + "MM" + "AUAU" + "AUAU"
        );
    }

    #[test]
    fn every_packet_is_mapped_and_unmapped_once() {
        let cfg = NetRxConfig {
            packets: 1000,
            ..NetRxConfig::default()
        };
        let all = ops(cfg);
        let maps = all
            .iter()
            .filter(|o| matches!(o, DmaOp::Map { .. }))
            .count();
        let unmaps = all
            .iter()
            .filter(|o| matches!(o, DmaOp::Unmap { .. }))
            .count();
        assert_eq!((maps, unmaps), (1000, 1000));
        for op in &all {
            if let DmaOp::Map { phys, len, .. } = op {
                // 2 KiB objects never cross a page.
                assert!(phys.get() % 4096 + len <= 4096);
            }
        }
    }

    /// Copybreak: every frame is short, so each slot maps its own buffer again at every
    /// refill: buffer `i` comes back exactly `ring` receive maps later, the ring's buffers
    /// are `ring` slab objects two to a page, and consecutive slots share a page.
    #[test]
    fn copybreak_reuses_each_slots_buffer_a_lap_later() {
        let cfg = NetRxConfig {
            packets: 2000,
            ring: 16,
            budget: 4,
            buf_size: 1522,
            copybreak: 256,
            frame_len: 66,
            ..NetRxConfig::default()
        };
        assert!(NetRx::new(cfg).recycles());
        let maps: Vec<u64> = ops(cfg)
            .iter()
            .filter_map(|op| match op {
                DmaOp::Map { phys, .. } => Some(phys.get()),
                _ => None,
            })
            .collect();
        assert_eq!(maps.len(), 2000);
        for (i, m) in maps.iter().enumerate().skip(16) {
            assert_eq!(*m, maps[i - 16], "map {i}");
        }
        let distinct: HashSet<u64> = maps.iter().copied().collect();
        assert_eq!(distinct.len(), 16);
        let pages: HashSet<u64> = maps.iter().map(|m| m / 4096).collect();
        assert_eq!(pages.len(), 8);
        assert_eq!(maps[0] / 4096, maps[1] / 4096);
        // A long frame is not copied: buffers are fresh again.
        let fresh = NetRxConfig {
            frame_len: 1514,
            ..cfg
        };
        assert!(!NetRx::new(fresh).recycles());
    }

    /// `close` unmaps the posted buffers without device writes and ends the stream.
    #[test]
    fn close_unmaps_the_posted_buffers_unfilled() {
        let mut w = NetRx::new(NetRxConfig {
            packets: u64::MAX,
            ring: 8,
            budget: 2,
            ..NetRxConfig::default()
        });
        // The ring fill, then the first poll's first fill.
        for _ in 0..8 {
            assert!(matches!(w.next_op().unwrap(), Some(DmaOp::Map { .. })));
        }
        assert!(matches!(w.next_op().unwrap(), Some(DmaOp::Access { .. })));
        w.close();
        let rest = std::iter::from_fn(|| w.next_op().unwrap()).collect::<Vec<_>>();
        assert_eq!(rest.len(), 8);
        assert!(rest.iter().all(|op| matches!(op, DmaOp::Unmap { .. })));
        assert!(w.next_op().unwrap().is_none());
    }
}
