//! A NIC's receive ring under NAPI (S2.7's netperf receiver): the driver keeps `ring`
//! receive buffers mapped for the device; each poll the device fills up to `budget` of them
//! (oldest first), the driver unmaps each filled buffer and hands it up the stack, then
//! refills the ring with as many freshly mapped buffers. Maps therefore come in runs of up
//! to `budget` after runs of unmaps, which is what a batching DMA interface
//! (`map_multi`/`unmap_multi`, S2.6) can exploit, and every map and unmap request is for
//! one buffer, which is why Xen's multicalls carried one entry (S2.5).
//!
//! Buffers are `buf_size`-byte slab objects (2 KiB: two per page, as the e1000 family's
//! receive buffers), drawn at random from the free objects of a pool of `pool_pages` pages
//! (a slab never hands out an object still in use: a posted buffer is never mapped twice);
//! page-sized buffers are whole pages taken from the pool in turn. The pool holds more
//! buffers than the ring ([`NetRx::min_pool_pages`]). One CPU polls.
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

use super::live_objects::LiveObjects;
use super::{DmaOp, ParamError, Segment, Workload, WorkloadError, invalid};
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

/// Refuses (as `key`) a pool too small for `cfg`'s ring: a posted buffer is never handed
/// out again, so the pool needs one buffer more than the ring.
pub(crate) fn check_pool(key: &str, cfg: &NetRxConfig) -> Result<(), ParamError> {
    let need = NetRx::min_pool_pages(cfg.ring, cfg.buf_size);
    if cfg.pool_pages < need {
        return Err(invalid(
            key,
            cfg.pool_pages,
            &format!(
                "at least {need} pages: one buffer more than the ring's {} of {} bytes",
                cfg.ring, cfg.buf_size
            ),
        ));
    }
    Ok(())
}

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
    /// Slab objects (small buffers drawn at random) in use: a set sized by the ring, not
    /// the pool (a pool may hold 2^36 pages).
    live: LiveObjects,
    /// Per ring slot, the object its posted buffer is (small buffers drawn at random).
    posted: Vec<u64>,
}

impl NetRx {
    /// The fewest pool pages that hold one buffer more than `ring` buffers of `buf_size`
    /// bytes (a posted buffer is never handed out again), each taking its power-of-two slab
    /// size (a 9000-byte buffer takes 16 KiB, as kmalloc's size classes do).
    pub fn min_pool_pages(ring: u32, buf_size: u64) -> u64 {
        let buffers = u64::from(ring.max(1)) + 1;
        let size = buf_size.max(1).next_power_of_two();
        if size >= PAGE_4K.bytes() {
            buffers * (size / PAGE_4K.bytes())
        } else {
            buffers.div_ceil(PAGE_4K.bytes() / size)
        }
    }

    /// A generator; `ring`, `budget` and `buf_size` below 1 count as 1, the budget is at most
    /// the ring, and the pool holds at least [`NetRx::min_pool_pages`] (a configuration
    /// file asking for fewer is refused by `WorkloadConfig::validate`).
    pub fn new(cfg: NetRxConfig) -> Self {
        let ring = cfg.ring.max(1);
        let buf_size = cfg.buf_size.max(1);
        let cfg = NetRxConfig {
            ring,
            budget: cfg.budget.clamp(1, ring),
            buf_size,
            pool_pages: cfg.pool_pages.max(Self::min_pool_pages(ring, buf_size)),
            ..cfg
        };
        let random = !recycles(&cfg) && buf_size < PAGE_4K.bytes();
        Self {
            live: LiveObjects::new(if random { ring as usize } else { 0 }),
            posted: vec![0; if random { ring as usize } else { 0 }],
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
        let drawn = page * per_page + self.rng.gen_range(0..per_page);
        // The slab hands out a free object: the drawn one, or the next free after it. The
        // pool holds more objects than the ring, so one is free.
        let object = self.live.take_free(drawn, self.cfg.pool_pages * per_page);
        let slot = self.slot(n) as usize;
        self.posted[slot] = object;
        Hpa::new(POOL_BASE + object * self.cfg.buf_size.next_power_of_two())
    }

    /// The driver unmapped receive map `n`: its slab object is free again.
    fn release(&mut self, n: u64) {
        if !self.posted.is_empty() {
            let object = self.posted[self.slot(n) as usize];
            self.live.remove(object);
        }
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
                    self.release(n);
                    return Ok(Some(DmaOp::Unmap {
                        slot: self.slot(n),
                        cpu: CpuId::new(0),
                    }));
                }
                Phase::Unmap => {
                    let n = self.received;
                    self.received += 1;
                    self.release(n);
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

    /// A slab never hands out an object in use: over many laps no posted buffer is mapped
    /// again before its unmap, even where the pool holds barely more than the ring (the
    /// random draw lands on live objects and moves on to a free one). Seen as a `check`
    /// finding (`overlapping_mapping`) on a generated trace before the pool tracked its
    /// objects.
    #[test]
    fn a_posted_buffer_is_never_handed_out_again() {
        for (pool_pages, buf_size, copybreak) in [
            (4096, 2048, 0),
            (129, 2048, 0),
            (NetRx::min_pool_pages(256, 2048), 2048, 0),
            (NetRx::min_pool_pages(256, 1024), 1024, 0),
            (NetRx::min_pool_pages(256, 4096), 4096, 0),
            (NetRx::min_pool_pages(256, 9000), 9000, 0),
            (NetRx::min_pool_pages(256, 2048), 2048, 4096),
        ] {
            let cfg = NetRxConfig {
                packets: 20_000,
                pool_pages,
                buf_size,
                copybreak,
                ..NetRxConfig::default()
            };
            let mut posted = std::collections::HashMap::new();
            let mut live = HashSet::new();
            let mut maps = 0;
            for op in ops(cfg) {
                match op {
                    DmaOp::Map { slot, phys, .. } => {
                        maps += 1;
                        assert!(live.insert(phys), "{phys:?} mapped twice ({cfg:?})");
                        posted.insert(slot, phys);
                    }
                    DmaOp::Unmap { slot, .. } => {
                        assert!(live.remove(&posted[&slot]));
                    }
                    _ => {}
                }
            }
            assert_eq!(maps, 20_000);
            assert!(live.is_empty());
        }
    }

    /// A pool of 2^36 pages costs memory by the ring, not the pool.
    #[test]
    fn a_huge_pool_costs_memory_by_the_ring() {
        let huge = NetRx::new(NetRxConfig {
            pool_pages: 1 << 36,
            packets: 1000,
            ..NetRxConfig::default()
        });
        assert!(huge.live.capacity() <= 1024);
    }

    /// A pool that cannot hold one buffer more than the ring is refused by name; `new`
    /// (the library's own callers) raises it to the least that can.
    #[test]
    fn a_pool_smaller_than_the_ring_is_refused() {
        assert_eq!(NetRx::min_pool_pages(256, 2048), 129);
        assert_eq!(NetRx::min_pool_pages(256, 9000), 257 * 4);
        let small = NetRxConfig {
            pool_pages: 128,
            ..NetRxConfig::default()
        };
        let e = crate::WorkloadConfig::NetRx(small).validate().unwrap_err();
        assert!(
            e.to_string().contains("workload.pool_pages") && e.to_string().contains("129"),
            "{e}"
        );
        assert!(
            crate::WorkloadConfig::NetRx(NetRxConfig {
                pool_pages: 129,
                ..small
            })
            .validate()
            .is_ok()
        );
        assert_eq!(NetRx::new(small).config().pool_pages, 129);
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
