//! A static web server answering with `sendfile` (S1.8–S1.9; Yassour et al., SYSTOR 2010,
//! §4.1–4.2: "an Apache webserver serving an httperf client that is requesting static wiki
//! pages"; the needed quota "is equal to the sum of the sizes of the files being served").
//!
//! **What it models.** `files` files are in the page cache: each file's pages are taken
//! once from the page allocator ([`super::page_alloc`]) when the generator is built (the
//! file was read before: a warm cache) and stay put, so every response of a file maps the
//! same physical pages. `connections` responses are in progress at once (httperf's
//! concurrent connections), served round-robin one packet at a time; when a response ends,
//! its connection takes the next request. Requests pick file rank `k` with a Zipf law of
//! exponent `zipf_s` ([`super::zipf`]); rank `k` is file `k` (sizes are drawn independently
//! of popularity, as Breslau et al. 1999 found them nearly uncorrelated).
//!
//! **Sizes.** Log-normal with median `size_median` and shape `size_sigma`, clamped to
//! `1..=max_size`: the defaults (12 KiB, σ = 1.0) give a mean of `median × e^(σ²/2)` ≈ 20 KB,
//! the size of a typical rendered wiki page, with a long tail of large pages.
//!
//! **Packets.** `sendfile` hands page-cache pages to TCP (`tcp_sendpage`): each packet
//! (one MSS, or a TSO segment with `tso`) is an skb head from a kmalloc-1024 slab holding the
//! headers — the first packet of a response also carries the `http_header`-byte HTTP
//! response header — plus fragments pointing straight into the file's pages. The NIC
//! transmit path (mapping per fragment or as one scatter-gather list, the `tx_ring`
//! descriptor ring, the link-rate clock, in-order completion) is the one of
//! [`super::netperf_send`]; completion frees the head, page-cache pages stay.
//!
//! **Working set** (S1.8): the pages of the distinct files served, exactly; the heads add a
//! few slab pages.
//!
//! **Deviations.** No socket-buffer limit (responses are bounded by the ring), no request
//! parsing, reads or page-cache misses; the HTTP header rides in the first packet's head
//! instead of a separately copied page; connection `i` runs on CPU `i % cpus`. One device.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::netperf_send::{
    HEAD_OBJECT, HEADER_LEN, TxMapping, TxPacket, TxPath, check_nic, nic_workload,
};
use super::page_alloc::{PageAllocConfig, PageAllocator, Slab};
use super::zipf::Zipf;
use super::{DmaOp, ParamError, Segment, Workload, WorkloadError, idx, invalid};
use iommulab_base::addr::{CpuId, Hpa, PAGE_4K};

/// Parameters of [`ApacheSendfile`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApacheSendfileConfig {
    /// Requests (responses) to serve. `u64::MAX` runs until the runner stops.
    pub requests: u64,
    /// Files on the server (a wiki's pages).
    pub files: u32,
    /// Median file size in bytes (12 KiB).
    pub size_median: u64,
    /// Log-normal shape σ of file sizes (1.0: mean ≈ 1.65 × median ≈ 20 KB).
    pub size_sigma: f64,
    /// Largest file in bytes (4 MiB); larger draws are clamped.
    pub max_size: u64,
    /// Zipf exponent of file popularity (0.8, within the 0.64–0.83 Breslau et al. measured
    /// for web traffic; 0 = uniform).
    pub zipf_s: f64,
    /// Responses in progress at once (httperf connections).
    pub connections: u32,
    /// Bytes of the HTTP response header in the first packet of each response.
    pub http_header: u64,
    /// IP MTU in bytes (1500; 576..=9216).
    pub mtu: u64,
    /// TCP segmentation offload (64 KiB segments).
    pub tso: bool,
    /// How packets are mapped (see [`TxMapping`]).
    pub mapping: TxMapping,
    /// The skb heads come from a slab set aside for DMA (S1.11's relaxation, a driver
    /// change; see `NetperfSendConfig::heads_allocated_for_dma`). Off: Linux as it is.
    pub heads_allocated_for_dma: bool,
    /// Transmit descriptors (256, e1000e's default; at least 18).
    pub tx_ring: u32,
    /// Link rate in Mb/s for the workload clock (1000: Yassour's 1 GbE).
    pub link_mbps: u64,
    /// CPUs; connection `i` runs on CPU `i % cpus`.
    pub cpus: u16,
    /// The page allocator the page cache and skb heads come from.
    pub memory: PageAllocConfig,
    /// Seed of file sizes, request choices and the page allocator's shuffle.
    pub seed: u64,
}

impl Default for ApacheSendfileConfig {
    fn default() -> Self {
        Self {
            requests: 20_000,
            files: 1000,
            size_median: 12_288,
            size_sigma: 1.0,
            max_size: 4 << 20,
            zipf_s: 0.8,
            connections: 16,
            http_header: 256,
            mtu: 1500,
            tso: false,
            mapping: TxMapping::PerFragment,
            heads_allocated_for_dma: false,
            tx_ring: 256,
            link_mbps: 1000,
            cpus: 1,
            memory: PageAllocConfig::default(),
            seed: 1,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Conn {
    cpu: CpuId,
    /// The file being sent, if any.
    file: Option<u32>,
    /// Bytes of it sent so far.
    off: u64,
}

/// The generator (see the module doc).
#[derive(Debug, Clone)]
pub struct ApacheSendfile {
    cfg: ApacheSendfileConfig,
    mss: u64,
    goal: u64,
    tx: TxPath,
    mem: PageAllocator,
    slab: Slab,
    zipf: Zipf,
    rng: SmallRng,
    /// File sizes in bytes.
    size: Vec<u64>,
    /// File `f`'s pages are `pages[first[f]..first[f + 1]]`.
    first: Vec<usize>,
    pages: Vec<Hpa>,
    conns: Vec<Conn>,
    next_conn: usize,
    drawn: u64,
    total: Option<u64>,
}

/// One standard normal draw (Box–Muller).
fn normal(rng: &mut SmallRng) -> f64 {
    let u1 = 1.0 - rng.r#gen::<f64>(); // (0, 1]
    let u2: f64 = rng.r#gen();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

impl ApacheSendfile {
    /// A generator, or an error naming the first bad field.
    ///
    /// # Examples
    /// ```
    /// use iommulab_workload::{ApacheSendfile, ApacheSendfileConfig, Workload};
    /// let cfg = ApacheSendfileConfig { requests: 5, files: 10, ..Default::default() };
    /// let mut w = ApacheSendfile::new(cfg)?;
    /// while let Some(_op) = w.next_op()? {}
    /// # Ok::<(), iommulab_workload::WorkloadError>(())
    /// ```
    pub fn new(cfg: ApacheSendfileConfig) -> Result<Self, ParamError> {
        let (mss, goal) = check_nic(cfg.mtu, cfg.tso, cfg.tx_ring, cfg.link_mbps)?;
        if cfg.files == 0 {
            return Err(invalid("workload.files", 0, "at least 1"));
        }
        if cfg.connections == 0 {
            return Err(invalid("workload.connections", 0, "at least 1"));
        }
        if cfg.cpus == 0 {
            return Err(invalid("workload.cpus", 0, "at least 1"));
        }
        if cfg.size_median == 0 || cfg.max_size == 0 {
            return Err(invalid(
                "workload.size_median",
                cfg.size_median,
                "sizes of at least 1 byte (and max_size ≥ 1)",
            ));
        }
        if !cfg.size_sigma.is_finite() || cfg.size_sigma < 0.0 {
            return Err(invalid(
                "workload.size_sigma",
                cfg.size_sigma,
                "a finite σ ≥ 0",
            ));
        }
        // Header room after the 128-byte headroom of the 1024-byte head object.
        if cfg.http_header > 512 {
            return Err(invalid(
                "workload.http_header",
                cfg.http_header,
                "at most 512 bytes (it rides in the skb head)",
            ));
        }
        let zipf = Zipf::new(cfg.files as usize, cfg.zipf_s)
            .map_err(|e| invalid("workload.zipf_s", cfg.zipf_s, &e.to_string()))?;
        let mut rng = SmallRng::seed_from_u64(cfg.seed);
        let size: Vec<u64> = (0..cfg.files)
            .map(|_| {
                let s = cfg.size_median as f64 * (cfg.size_sigma * normal(&mut rng)).exp();
                // `as` saturates (and maps NaN to 0); the clamp bounds the result anyway.
                #[allow(clippy::cast_possible_truncation)]
                let bytes = s.round() as u64;
                bytes.clamp(1, cfg.max_size)
            })
            .collect();
        let file_pages: u64 = size.iter().map(|s| s.div_ceil(PAGE_4K.bytes())).sum();
        let heads = u64::from(cfg.tx_ring / 2).div_ceil(PAGE_4K.bytes() / HEAD_OBJECT) + 1;
        if cfg.memory.pages < file_pages + heads {
            return Err(invalid(
                "workload.memory.pages",
                cfg.memory.pages,
                &format!("at least {} pages for the files", file_pages + heads),
            ));
        }
        let mut mem = PageAllocator::new(&cfg.memory, cfg.cpus, cfg.seed ^ 0x5eed_a110c);
        let mut first = Vec::with_capacity(size.len() + 1);
        let mut pages = Vec::with_capacity(idx(file_pages));
        for (f, &s) in size.iter().enumerate() {
            first.push(pages.len());
            // The page cache is filled by whichever CPU read the file.
            let cpu = CpuId::new(u16::try_from(f % usize::from(cfg.cpus)).unwrap_or(0));
            for _ in 0..s.div_ceil(PAGE_4K.bytes()) {
                // Checked above: memory holds every file.
                pages.push(mem.alloc(cpu).unwrap_or_default());
            }
        }
        first.push(pages.len());
        let ios_per_file: Vec<u64> = size
            .iter()
            .map(|&s| {
                let mut off = 0;
                let mut ios = 0;
                while off < s {
                    let len = goal.min(s - off);
                    let frags = PAGE_4K.pages_spanned(off % PAGE_4K.bytes(), len);
                    ios += TxPath::ios_per_packet(cfg.mapping, frags);
                    off += len;
                }
                ios
            })
            .collect();
        let total = (cfg.requests <= crate::COUNTED_TOTAL_MAX).then(|| {
            // The run draws requests from this very RNG state, in this order.
            let mut r = rng.clone();
            (0..cfg.requests)
                .map(|_| ios_per_file[zipf.sample(&mut r)])
                .sum()
        });
        let conns = (0..cfg.connections)
            .map(|i| Conn {
                cpu: CpuId::new(u16::try_from(i % u32::from(cfg.cpus)).unwrap_or(0)),
                file: None,
                off: 0,
            })
            .collect();
        Ok(Self {
            mss,
            goal,
            tx: TxPath::new(
                cfg.mapping,
                cfg.tx_ring,
                cfg.link_mbps,
                cfg.heads_allocated_for_dma,
            ),
            mem,
            slab: Slab::new(HEAD_OBJECT),
            zipf,
            rng,
            size,
            first,
            pages,
            conns,
            next_conn: 0,
            drawn: 0,
            total,
            cfg,
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &ApacheSendfileConfig {
        &self.cfg
    }

    /// Size in bytes of file `f` (rank `f` in popularity).
    pub fn file_size(&self, f: usize) -> Option<u64> {
        self.size.get(f).copied()
    }

    /// The page-cache pages of file `f`.
    pub fn file_pages(&self, f: usize) -> &[Hpa] {
        match (self.first.get(f), self.first.get(f + 1)) {
            (Some(&a), Some(&b)) => &self.pages[a..b],
            _ => &[],
        }
    }

    /// Sends the next packet of connection `j`, `len` payload bytes of its file.
    fn send(&mut self, j: usize, file: u32, len: u64) -> Result<(), WorkloadError> {
        let conn = self.conns[j];
        let head = self.slab.alloc(&mut self.mem, conn.cpu).ok_or_else(|| {
            WorkloadError::from(invalid("workload.memory.pages", "too few", "more pages"))
        })?;
        let head_len = if conn.off == 0 {
            HEADER_LEN + self.cfg.http_header
        } else {
            HEADER_LEN
        };
        let owner = u32::try_from(j).unwrap_or(u32::MAX);
        let mut p = TxPacket::new(owner, conn.cpu, head, head_len);
        let base = self.first[file as usize];
        let end = conn.off + len;
        let mut at = conn.off;
        while at < end {
            let in_page = at % PAGE_4K.bytes();
            let n = (end - at).min(PAGE_4K.bytes() - in_page);
            let page = self.pages[base + idx(at / PAGE_4K.bytes())];
            p.push_frag(Hpa::new(page.get() + in_page), n);
            at += n;
        }
        p.finish(self.mss, self.slab.object_size());
        self.tx.post(p);
        let c = &mut self.conns[j];
        c.off = end;
        if end == self.size[file as usize] {
            c.file = None;
        }
        Ok(())
    }

    fn complete_one(&mut self) {
        if let Some(p) = self.tx.complete() {
            self.slab.free(p.head);
        }
    }

    /// Queues the next group of operations; `false` at the end.
    fn refill(&mut self) -> Result<bool, WorkloadError> {
        let n = self.conns.len();
        for _ in 0..n {
            let j = self.next_conn;
            self.next_conn = (j + 1) % n;
            if self.conns[j].file.is_none() && self.drawn < self.cfg.requests {
                let f = self.zipf.sample(&mut self.rng);
                self.drawn += 1;
                self.conns[j].file = Some(u32::try_from(f).unwrap_or(0));
                self.conns[j].off = 0;
            }
            let Some(file) = self.conns[j].file else {
                continue;
            };
            let off = self.conns[j].off;
            let len = self.goal.min(self.size[file as usize] - off);
            if self
                .tx
                .has_room(PAGE_4K.pages_spanned(off % PAGE_4K.bytes(), len))
            {
                self.send(j, file, len)?;
            } else {
                // The ring is full: the oldest packet completes; this connection goes next.
                self.complete_one();
                self.next_conn = j;
            }
            return Ok(true);
        }
        if self.tx.is_idle() {
            return Ok(false);
        }
        self.complete_one();
        Ok(true)
    }
}

nic_workload!(ApacheSendfile);

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;
    use crate::check::run_checked;

    fn cfg(requests: u64) -> ApacheSendfileConfig {
        ApacheSendfileConfig {
            requests,
            ..Default::default()
        }
    }

    /// Which file each page belongs to.
    fn owners(w: &ApacheSendfile) -> HashMap<u64, usize> {
        (0..w.size.len())
            .flat_map(|f| w.file_pages(f).iter().map(move |p| (p.get() >> 12, f)))
            .collect()
    }

    #[test]
    fn rejects_bad_fields_by_name() {
        let bad = |c: ApacheSendfileConfig| ApacheSendfile::new(c).unwrap_err().to_string();
        assert!(bad(ApacheSendfileConfig { files: 0, ..cfg(1) }).contains("workload.files"));
        assert!(
            bad(ApacheSendfileConfig {
                zipf_s: -1.0,
                ..cfg(1)
            })
            .contains("workload.zipf_s")
        );
        let small = ApacheSendfileConfig {
            memory: PageAllocConfig {
                pages: 100,
                ..Default::default()
            },
            ..cfg(1)
        };
        assert!(bad(small).contains("workload.memory.pages"));
    }

    /// Defaults: log-normal sizes with a mean near 20 KB and median near 12 KiB.
    #[test]
    fn file_sizes_have_the_documented_mean() {
        let w = ApacheSendfile::new(ApacheSendfileConfig {
            files: 20_000,
            memory: PageAllocConfig {
                pages: 1 << 20,
                ..Default::default()
            },
            ..cfg(1)
        })
        .unwrap();
        let mean = w.size.iter().sum::<u64>() as f64 / 20_000.0;
        assert!((mean - 20_260.0).abs() < 1000.0, "mean {mean}");
        let mut s = w.size.clone();
        s.sort_unstable();
        let median = s[10_000] as f64;
        assert!((median - 12_288.0).abs() < 600.0, "median {median}");
    }

    /// S1.8: the pages mapped are exactly the pages of the files served, every one of them
    /// (sendfile maps page-cache pages), plus a few slab pages of heads.
    #[test]
    fn working_set_is_the_sum_of_the_served_files() {
        let c = ApacheSendfileConfig {
            requests: 3000,
            files: 300,
            ..Default::default()
        };
        let w = ApacheSendfile::new(c).unwrap();
        let owner = owners(&w);
        let got = run_checked(&mut ApacheSendfile::new(c).unwrap());
        let served: HashSet<usize> = got
            .pages
            .iter()
            .filter_map(|p| owner.get(p))
            .copied()
            .collect();
        let want: u64 = served.iter().map(|&f| w.file_pages(f).len() as u64).sum();
        let payload = got.pages.iter().filter(|p| owner.contains_key(p)).count() as u64;
        assert_eq!(payload, want, "whole files, and only them");
        let heads = got.pages.len() as u64 - payload;
        assert!(heads <= 256 / 2 / 4 + 1, "{heads} head pages");
        // Zipf(0.8) over 300 files with 3000 requests reaches most files.
        assert!(served.len() > 200, "{}", served.len());
    }

    /// Popularity: file 0 (rank 1) gets `P(0) = 1 / H(1000, 0.8)` of the requests, within 4
    /// standard deviations.
    #[test]
    fn requests_follow_the_zipf_law() {
        let c = ApacheSendfileConfig {
            mapping: TxMapping::Sg,
            ..cfg(20_000)
        };
        let w = ApacheSendfile::new(c).unwrap();
        let owner = owners(&w);
        let mut w2 = ApacheSendfile::new(c).unwrap();
        let mut per_file = vec![0u32; w.size.len()];
        while let Some(op) = w2.next_op().unwrap() {
            if let DmaOp::MapSg { .. } = op {
                let segs = w2.sg_segments();
                if segs[0].len == HEADER_LEN + c.http_header {
                    // A response's first packet: its first fragment starts the file.
                    let f = owner[&(segs[1].phys.get() >> 12)];
                    assert_eq!(segs[1].phys, w.file_pages(f)[0]);
                    per_file[f] += 1;
                }
            }
        }
        assert_eq!(per_file.iter().sum::<u32>(), 20_000);
        let p = w.zipf.probability(0);
        let sd = (20_000.0 * p * (1.0 - p)).sqrt();
        assert!((f64::from(per_file[0]) - 20_000.0 * p).abs() < 4.0 * sd);
        assert!(per_file[0] > per_file[9] && per_file[9] > per_file[500]);
    }

    #[test]
    fn sg_and_tso_responses_are_whole_files() {
        let c = ApacheSendfileConfig {
            mapping: TxMapping::Sg,
            tso: true,
            ..cfg(500)
        };
        let got = run_checked(&mut ApacheSendfile::new(c).unwrap());
        assert!(got.max_sg_segments <= 18);
        assert!(got.sg_maps >= 500);
    }

    #[test]
    fn same_seed_same_ops() {
        let ops = |seed| {
            let mut w = ApacheSendfile::new(ApacheSendfileConfig { seed, ..cfg(200) }).unwrap();
            let mut v = Vec::new();
            while let Some(op) = w.next_op().unwrap() {
                v.push(op);
            }
            v
        };
        assert_eq!(ops(3), ops(3));
        assert_ne!(ops(3), ops(4));
    }
}
