//! `iommulab reproduce yassour2010`: Yassour, Ben-Yehuda & Wasserman, "On the DMA mapping
//! problem in direct device assignment" (SYSTOR 2010), Figures 3–6, on the built-in
//! netperf-send and apache-sendfile workloads, plus the intra-guest protection table of
//! S1.11.
//!
//! - Figures 3–4 (S1.9, the paper's §4.2 method): the workload's *page-reference
//!   sequence* (its page maps in order, no pinning), the working set = distinct pages,
//!   and the hit rate of FIFO, LRU, OPT, optimal batching and prefetching at every
//!   integer quota from 0 to the working set (≤ 200 pages; else 41 points). LRU and OPT
//!   from the one-pass stack-distance curves (exact without pinning), the others from one
//!   map-cache run per quota. A second view replays the same stream *with* pinning (pages
//!   of in-flight DMAs cannot be evicted, so small quotas refuse maps), which the paper's
//!   simulation leaves out.
//! - Figures 5–6: modeled CPU utilisation vs quota. The left end is the paper's "minimal
//!   quota (i.e., no caching allowed)": `single-use` mapping, every page map a map request
//!   and every driver unmap an unmap request, packed into hypercalls by the series'
//!   batching; then the map cache from the minimal quota that refuses no map (the most
//!   pages ever pinned at once) to the working set. Series: LRU (no batching), LRU with
//!   unmap piggyback, prefetching (with no caching there is nothing to prefetch into: the
//!   same as LRU), and "batching" (LRU with map and unmap batching, S1.6: the driver maps
//!   each packet as one scatter-gather list, so a packet is one map and one unmap
//!   hypercall). From full guest runs (hypercalls, host bookkeeping, VT-d PTE writes,
//!   write-buffer flushes and IOTLB invalidations, costs `kvm-2010`, S1.10): utilisation =
//!   modeled cycles / (payload bytes × 8 / link rate) / (2.66 GHz).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use iommulab::mrc::{self, MrcMethod};
use iommulab::virt::{
    Batching, CacheOnly, EvictionConfig, GuestConfig, GuestResult, Lookahead, PageRef, Strategy,
    guest_page_refs, replay_config, run_guest, working_set_pages,
};
use iommulab::workload::{
    ApacheSendfile, ApacheSendfileConfig, NetperfSend, NetperfSendConfig, TxMapping,
};
use serde::Serialize;

use crate::output::write_atomic;
use crate::plot::{LineSeries, line_chart};

/// A workload of the reproduction.
#[derive(Debug, Clone)]
enum Spec {
    Netperf(NetperfSendConfig),
    Apache(ApacheSendfileConfig),
}

impl Spec {
    fn name(&self) -> &'static str {
        match self {
            Spec::Netperf(_) => "netperf-send",
            Spec::Apache(_) => "apache-sendfile",
        }
    }

    fn describe(&self) -> String {
        match self {
            Spec::Netperf(c) => format!(
                "{} sockets × {} B send buffer, {} packets of one MSS",
                c.sockets, c.send_buffer, c.packets
            ),
            Spec::Apache(c) => format!("{} requests over {} files", c.requests, c.files),
        }
    }

    /// The same workload with the driver mapping each packet as one scatter-gather list
    /// (the driver change batching needs, S1.6).
    fn with_sg(&self) -> Spec {
        match self {
            Spec::Netperf(c) => Spec::Netperf(NetperfSendConfig {
                mapping: TxMapping::Sg,
                ..*c
            }),
            Spec::Apache(c) => Spec::Apache(ApacheSendfileConfig {
                mapping: TxMapping::Sg,
                ..*c
            }),
        }
    }

    fn refs(&self) -> Result<Vec<PageRef>> {
        Ok(match self {
            Spec::Netperf(c) => guest_page_refs(&mut NetperfSend::new(*c)?, CacheOnly::All)?,
            Spec::Apache(c) => guest_page_refs(&mut ApacheSendfile::new(*c)?, CacheOnly::All)?,
        })
    }

    fn run(&self, cfg: &GuestConfig, la: Option<Arc<Lookahead>>) -> Result<GuestResult> {
        Ok(match self {
            Spec::Netperf(c) => run_guest(&mut NetperfSend::new(*c)?, cfg, la)?,
            Spec::Apache(c) => run_guest(&mut ApacheSendfile::new(*c)?, cfg, la)?,
        })
    }

    /// S1.8's formula: netperf `SendBuf × NumSendSockets`; Apache: the served files (here
    /// measured as the distinct pages mapped, i.e. the files actually served).
    fn formula_pages(&self, measured: u64) -> u64 {
        match self {
            Spec::Netperf(c) => working_set_pages(c.send_buffer, u64::from(c.sockets), 0, 0),
            Spec::Apache(_) => measured,
        }
    }
}

#[derive(Debug, Serialize)]
struct HitCurve {
    policy: String,
    /// How `hit_rate` was computed (page sequence, no pinning: the paper's Figures 3–4).
    method: String,
    quota_fraction: Vec<f64>,
    quota_pages: Vec<u64>,
    hit_rate: Vec<f64>,
    /// The same stream with pinning (in-flight pages cannot be evicted; maps refused when
    /// every cached page is pinned, counted as non-hits): map-cache runs.
    hit_rate_pinned: Vec<f64>,
    refused_rate_pinned: Vec<f64>,
}

#[derive(Debug, Serialize)]
struct CpuCurve {
    series: String,
    eviction: String,
    batching: String,
    mapping: String,
    /// Per point: `single-use` for the first ("no caching allowed", quota 0), then
    /// `on-demand` from the minimal quota to the working set.
    strategy: Vec<String>,
    quota_fraction: Vec<f64>,
    quota_pages: Vec<u64>,
    cpu_utilization: Vec<f64>,
    hit_rate: Vec<f64>,
    refused: Vec<u64>,
    hypercalls: Vec<u64>,
    pages_per_hypercall: Vec<f64>,
    cycles_per_map: Vec<f64>,
    /// Page maps of the run (hits + misses + refused).
    page_maps: Vec<u64>,
    /// Page-selective IOTLB invalidations (one per PTE cleared).
    iotlb_invalidations: Vec<u64>,
}

#[derive(Debug, Serialize)]
struct Protection {
    strategy: String,
    cache_only: String,
    quota: u64,
    hit_rate: f64,
    hypercalls: u64,
    cpu_utilization: f64,
    stale_accesses: u64,
    stale_writes: u64,
}

/// Prefetching at one quota of the page sequence: how good its guesses were.
#[derive(Debug, Serialize)]
struct PrefetchAt {
    quota_fraction: f64,
    quota_pages: u64,
    hit_rate: f64,
    misses: u64,
    prefetched: u64,
    /// Prefetched pages mapped before being evicted.
    prefetch_hits: u64,
}

#[derive(Debug, Serialize)]
struct WorkloadResult {
    workload: String,
    config: String,
    page_maps: u64,
    working_set_pages: u64,
    working_set_formula_pages: u64,
    /// Most pages pinned at once (the minimal quota of Figures 5–6).
    max_pinned_pages: u64,
    policies: Vec<HitCurve>,
    prefetch: Vec<PrefetchAt>,
    cpu: Vec<CpuCurve>,
    protection: Vec<Protection>,
}

/// `(quota fraction, quota pages, hit rate)`.
type Point = (f64, u64, f64);

#[derive(Debug, Serialize)]
struct Sensitivity {
    workload: String,
    config: String,
    working_set_pages: u64,
    /// `(policy, [(quota fraction, quota pages, hit rate)])` on the page sequence.
    hit_rate: Vec<(String, Vec<Point>)>,
}

#[derive(Debug, Serialize)]
struct Results {
    paper: &'static str,
    quick: bool,
    cost: &'static str,
    link_mbps: u64,
    cpu_formula: &'static str,
    workloads: Vec<WorkloadResult>,
    sensitivity: Vec<Sensitivity>,
}

const CPU_POINTS: u64 = 20;
/// Working sets up to this size get every integer quota.
const EVERY_QUOTA_UP_TO: u64 = 200;
const CPU_FORMULA: &str =
    "cpu_utilization = modeled mapping cycles / (payload bytes x 8 / link bps) / (2.66e9 cycles/s)";
/// The quota fractions the tables quote.
const QUOTED: [f64; 3] = [0.10, 0.25, 0.50];

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn round_quota(f: f64, ws: u64) -> u64 {
    (f * ws as f64).round() as u64
}

/// Integer quotas 0..=ws: all of them for small working sets, else 41 (2.5% steps).
fn quotas(ws: u64) -> Vec<(f64, u64)> {
    let mut q: Vec<u64> = if ws <= EVERY_QUOTA_UP_TO {
        (0..=ws).collect()
    } else {
        (0..=40)
            .map(|i| round_quota(f64::from(i) / 40.0, ws))
            .collect()
    };
    // The quoted fractions are always points.
    q.extend(QUOTED.iter().map(|&f| round_quota(f, ws)));
    q.sort_unstable();
    q.dedup();
    q.into_iter()
        .map(|q| (q as f64 / ws.max(1) as f64, q))
        .collect()
}

/// `(hit rate, refused rate)` per quota and the method, for `refs`.
fn hit_curve(
    refs: &[PageRef],
    cfg: &EvictionConfig,
    qs: &[(f64, u64)],
) -> Result<(Vec<f64>, Vec<f64>, String)> {
    let ws = mrc::distinct_pages(refs);
    let one = match cfg {
        EvictionConfig::Lru(_) => Some(mrc::lru_one_pass(refs, ws)),
        EvictionConfig::Opt(_) => Some(mrc::opt_one_pass(refs, ws)),
        _ => None,
    };
    let curve = match one {
        Some(c) if c.exact => c,
        _ => {
            let qv: Vec<usize> = qs
                .iter()
                .map(|&(_, q)| usize::try_from(q).unwrap_or(usize::MAX))
                .collect();
            mrc::mrc_by_simulation_config(refs, &qv, cfg)?
        }
    };
    let method = match curve.method {
        MrcMethod::StackDistance => "one-pass stack distance",
        MrcMethod::Simulation => "map-cache run per quota",
    };
    let (mut hit, mut refused) = (Vec::new(), Vec::new());
    for &(_, q) in qs {
        let p = curve
            .at(usize::try_from(q).unwrap_or(usize::MAX))
            .with_context(|| format!("no point at quota {q}"))?;
        let maps = (p.hits + p.misses + p.refused).max(1) as f64;
        hit.push(p.hits as f64 / maps);
        refused.push(p.refused as f64 / maps);
    }
    Ok((hit, refused, method.to_string()))
}

/// The CPU series of Figures 5–6 (S1.9): name, eviction, batching, whether the driver
/// maps a packet as one sg list.
fn cpu_series() -> [(&'static str, EvictionConfig, Batching, bool); 4] {
    [
        (
            "lru",
            EvictionConfig::Lru(Default::default()),
            Batching::None,
            false,
        ),
        (
            "piggyback",
            EvictionConfig::Lru(Default::default()),
            Batching::Piggyback,
            false,
        ),
        (
            "prefetch",
            EvictionConfig::Prefetch(Default::default()),
            Batching::None,
            false,
        ),
        (
            "batching",
            EvictionConfig::Lru(Default::default()),
            Batching::MapUnmap,
            true,
        ),
    ]
}

/// Integer quotas from `lo` to `hi`, about `CPU_POINTS + 1` of them, and `half` (50% of
/// the working set) when it is at least `lo`.
fn cpu_quotas(lo: u64, hi: u64, half: u64) -> Vec<u64> {
    let hi = hi.max(lo);
    let mut q: Vec<u64> = (0..=CPU_POINTS)
        .map(|i| lo + ((hi - lo) * i + CPU_POINTS / 2) / CPU_POINTS)
        .collect();
    if (lo..=hi).contains(&half) {
        q.push(half);
    }
    q.sort_unstable();
    q.dedup();
    q
}

fn workload(spec: &Spec) -> Result<WorkloadResult> {
    let refs = spec.refs()?;
    let seq = mrc::page_sequence(&refs);
    let ws = mrc::distinct_pages(&refs) as u64;
    let qs = quotas(ws);
    let la_seq = Arc::new(Lookahead::from_refs(&seq));
    let la = Arc::new(Lookahead::from_refs(&refs));
    let mut policies = Vec::new();
    for cfg in EvictionConfig::all_default() {
        let (hit, _, method) = hit_curve(&seq, &cfg, &qs)?;
        let (hit_p, refused_p, _) = hit_curve(&refs, &cfg, &qs)?;
        policies.push(HitCurve {
            policy: cfg.name().to_string(),
            method,
            quota_fraction: qs.iter().map(|x| x.0).collect(),
            quota_pages: qs.iter().map(|x| x.1).collect(),
            hit_rate: hit,
            hit_rate_pinned: hit_p,
            refused_rate_pinned: refused_p,
        });
    }
    let _ = la_seq; // the simulation builds its own lookahead per policy
    let mut prefetch = Vec::new();
    for f in QUOTED {
        let q = round_quota(f, ws);
        let st = replay_config(
            &seq,
            usize::try_from(q)?,
            &EvictionConfig::Prefetch(Default::default()),
            None,
        )?;
        prefetch.push(PrefetchAt {
            quota_fraction: f,
            quota_pages: q,
            hit_rate: st.hit_ratio().unwrap_or(0.0),
            misses: st.misses,
            prefetched: st.prefetched,
            prefetch_hits: st.prefetch_hits,
        });
    }
    let pinned = mrc::max_pinned(&refs);
    let base = GuestConfig {
        protection_oracle: false,
        ..GuestConfig::default()
    };
    let sg = spec.with_sg();
    let mut cpu = Vec::new();
    for (name, ev, b, use_sg) in cpu_series() {
        let mut c = CpuCurve {
            series: name.into(),
            eviction: ev.name().into(),
            batching: b.name().into(),
            mapping: if use_sg { "sg" } else { "per-fragment" }.into(),
            strategy: Vec::new(),
            quota_fraction: Vec::new(),
            quota_pages: Vec::new(),
            cpu_utilization: Vec::new(),
            hit_rate: Vec::new(),
            refused: Vec::new(),
            hypercalls: Vec::new(),
            pages_per_hypercall: Vec::new(),
            cycles_per_map: Vec::new(),
            page_maps: Vec::new(),
            iotlb_invalidations: Vec::new(),
        };
        // The paper's left end, "minimal quota (i.e., no caching allowed)" (S1.9): every
        // page map is a map request and every unmap an unmap request (`single-use`), packed
        // into hypercalls by the series' batching; then the map cache from the minimal
        // quota (the most pages pinned at once) to the working set.
        let points = std::iter::once((Strategy::SingleUse, 0)).chain(
            cpu_quotas(pinned, ws, round_quota(0.5, ws))
                .into_iter()
                .map(|q| (Strategy::OnDemand, q)),
        );
        for (strategy, q) in points {
            let cfg = GuestConfig {
                strategy,
                quota: q,
                eviction: ev.clone(),
                batching: b,
                ..base.clone()
            };
            let w = if use_sg { &sg } else { spec };
            let r = w.run(&cfg, ev.is_offline().then(|| la.clone()))?;
            ensure!(
                r.refused == 0,
                "{}: {name} refused {} maps at quota {q} ≥ the most pages pinned ({pinned})",
                spec.name(),
                r.refused
            );
            ensure!(
                strategy != Strategy::SingleUse || r.hits == 0,
                "{}: {name} hit {} page maps with no caching",
                spec.name(),
                r.hits
            );
            c.strategy.push(strategy.name().into());
            c.quota_fraction.push(q as f64 / ws.max(1) as f64);
            c.quota_pages.push(q);
            c.cpu_utilization.push(r.cpu_utilization);
            c.hit_rate.push(r.hit_rate);
            c.refused.push(r.refused);
            c.hypercalls.push(r.hypercalls);
            c.pages_per_hypercall.push(r.pages_per_hypercall);
            c.cycles_per_map.push(r.cycles_per_map);
            c.page_maps.push(r.maps);
            c.iotlb_invalidations.push(r.iotlb_invalidations);
        }
        cpu.push(c);
    }
    // S1.11: protection at half the working set (at least the pinned pages).
    let half = (ws / 2).max(pinned).max(1);
    let mut protection = Vec::new();
    let cases: [(Strategy, CacheOnly, &str); 6] = [
        (Strategy::SingleUse, CacheOnly::All, "all"),
        (Strategy::Shared, CacheOnly::All, "all"),
        (Strategy::Direct, CacheOnly::All, "all"),
        (Strategy::OnDemand, CacheOnly::All, "all"),
        (Strategy::OnDemand, CacheOnly::ReadOnly, "read-only"),
        (
            Strategy::OnDemand,
            CacheOnly::DmaAllocated,
            "dma-allocated (skb heads)",
        ),
    ];
    for (s, only, label) in cases {
        let cfg = GuestConfig {
            strategy: s,
            quota: half,
            cache_only: only,
            ..GuestConfig::default()
        };
        let r = spec.run(&cfg, None)?;
        protection.push(Protection {
            strategy: s.name().into(),
            cache_only: label.into(),
            quota: half,
            hit_rate: r.hit_rate,
            hypercalls: r.hypercalls,
            cpu_utilization: r.cpu_utilization,
            stale_accesses: r.stale_accesses,
            stale_writes: r.stale_writes,
        });
    }
    Ok(WorkloadResult {
        workload: spec.name().into(),
        config: spec.describe(),
        page_maps: refs.iter().filter(|r| matches!(r, PageRef::Map(_))).count() as u64,
        working_set_pages: ws,
        working_set_formula_pages: spec.formula_pages(ws),
        max_pinned_pages: pinned,
        policies,
        prefetch,
        cpu,
        protection,
    })
}

/// The page-sequence hit rates at the quoted fractions only (a smaller configuration).
fn sensitivity(spec: &Spec) -> Result<Sensitivity> {
    let seq = mrc::page_sequence(&spec.refs()?);
    let ws = mrc::distinct_pages(&seq) as u64;
    let qs: Vec<(f64, u64)> = QUOTED.iter().map(|&f| (f, round_quota(f, ws))).collect();
    let mut hit_rate = Vec::new();
    for cfg in EvictionConfig::all_default() {
        let (h, _, _) = hit_curve(&seq, &cfg, &qs)?;
        hit_rate.push((
            cfg.name().to_string(),
            qs.iter().zip(h).map(|(&(f, q), h)| (f, q, h)).collect(),
        ));
    }
    Ok(Sensitivity {
        workload: spec.name().into(),
        config: spec.describe(),
        working_set_pages: ws,
        hit_rate,
    })
}

/// Runs the reproduction and writes `out/yassour2010/`; returns the markdown page's path.
pub fn yassour2010(out: &Path, quick: bool, quiet: bool) -> Result<PathBuf> {
    let dir = out.join("yassour2010");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // netperf: 4 sockets (see the page: one socket's 18-page working set leaves 10% = 2
    // pages and only 19 integer quotas).
    let netperf = NetperfSendConfig {
        packets: if quick { 2_000 } else { 200_000 },
        sockets: 4,
        ..NetperfSendConfig::default()
    };
    let specs = [
        Spec::Netperf(netperf),
        Spec::Apache(ApacheSendfileConfig {
            requests: if quick { 400 } else { 20_000 },
            files: if quick { 200 } else { 1000 },
            ..ApacheSendfileConfig::default()
        }),
    ];
    let mut workloads = Vec::new();
    for s in &specs {
        if !quiet {
            eprintln!("yassour2010: {}", s.name());
        }
        workloads.push(workload(s)?);
    }
    let sens = vec![sensitivity(&Spec::Netperf(NetperfSendConfig {
        sockets: 1,
        ..netperf
    }))?];
    let res = Results {
        paper: "Yassour, Ben-Yehuda, Wasserman: On the DMA mapping problem in direct device assignment (SYSTOR 2010)",
        quick,
        cost: "kvm-2010",
        link_mbps: GuestConfig::default().link_mbps,
        cpu_formula: CPU_FORMULA,
        workloads,
        sensitivity: sens,
    };
    write_atomic(
        &dir.join("results.json"),
        serde_json::to_string_pretty(&res)?.as_bytes(),
    )?;
    let mut hit_csv = String::from(
        "workload,policy,method,quota_fraction,quota_pages,hit_rate,hit_rate_pinned,refused_rate_pinned\n",
    );
    let mut cpu_csv = String::from(
        "workload,series,eviction,batching,mapping,strategy,quota_fraction,quota_pages,cpu_utilization,hit_rate,refused,hypercalls,pages_per_hypercall,cycles_per_map,page_maps,iotlb_invalidations\n",
    );
    for w in &res.workloads {
        for p in &w.policies {
            for i in 0..p.hit_rate.len() {
                let _ = writeln!(
                    hit_csv,
                    "{},{},{},{:.4},{},{:.6},{:.6},{:.6}",
                    w.workload,
                    p.policy,
                    p.method,
                    p.quota_fraction[i],
                    p.quota_pages[i],
                    p.hit_rate[i],
                    p.hit_rate_pinned[i],
                    p.refused_rate_pinned[i]
                );
            }
        }
        for c in &w.cpu {
            for i in 0..c.cpu_utilization.len() {
                let _ = writeln!(
                    cpu_csv,
                    "{},{},{},{},{},{},{:.4},{},{:.6},{:.6},{},{},{:.3},{:.1},{},{}",
                    w.workload,
                    c.series,
                    c.eviction,
                    c.batching,
                    c.mapping,
                    c.strategy[i],
                    c.quota_fraction[i],
                    c.quota_pages[i],
                    c.cpu_utilization[i],
                    c.hit_rate[i],
                    c.refused[i],
                    c.hypercalls[i],
                    c.pages_per_hypercall[i],
                    c.cycles_per_map[i],
                    c.page_maps[i],
                    c.iotlb_invalidations[i]
                );
            }
        }
    }
    write_atomic(&dir.join("hit_rate.csv"), hit_csv.as_bytes())?;
    write_atomic(&dir.join("cpu.csv"), cpu_csv.as_bytes())?;
    for (i, w) in res.workloads.iter().enumerate() {
        let series = |pick: fn(&HitCurve) -> &Vec<f64>| -> Vec<LineSeries> {
            w.policies
                .iter()
                .map(|p| LineSeries {
                    label: p.policy.clone(),
                    points: p
                        .quota_fraction
                        .iter()
                        .zip(pick(p))
                        .map(|(&f, &h)| (f * 100.0, h * 100.0))
                        .collect(),
                })
                .collect()
        };
        line_chart(
            &dir,
            &format!("figure{}_{}_hit_rate", 3 + i, w.workload),
            &format!(
                "{}: hit rate vs quota (page-reference sequence)",
                w.workload
            ),
            "quota (% of working set)",
            "hit rate (%)",
            &series(|p| &p.hit_rate),
        )?;
        line_chart(
            &dir,
            &format!("figure{}_{}_hit_rate_pinned", 3 + i, w.workload),
            &format!(
                "{}: hit rate vs quota with pinning (refused maps are misses)",
                w.workload
            ),
            "quota (% of working set)",
            "hit rate (%)",
            &series(|p| &p.hit_rate_pinned),
        )?;
        let cpu: Vec<LineSeries> = w
            .cpu
            .iter()
            .map(|c| LineSeries {
                label: c.series.clone(),
                points: c
                    .quota_fraction
                    .iter()
                    .zip(&c.cpu_utilization)
                    .map(|(&f, &u)| (f * 100.0, u * 100.0))
                    .collect(),
            })
            .collect();
        line_chart(
            &dir,
            &format!("figure{}_{}_cpu", 5 + i, w.workload),
            &format!(
                "{}: modeled mapping CPU vs quota (0% = no caching; kvm-2010, 1 Gb/s)",
                w.workload
            ),
            "quota (% of working set)",
            "CPU utilisation (%)",
            &cpu,
        )?;
    }
    let page = dir.join("README.md");
    write_atomic(&page, markdown(&res).as_bytes())?;
    Ok(page)
}

/// The value at the point whose quota is `round(f × ws)`.
fn at(v: &[f64], quotas: &[u64], ws: u64, f: f64) -> f64 {
    let q = round_quota(f, ws);
    quotas
        .iter()
        .position(|&x| x == q)
        .map_or(f64::NAN, |i| v[i])
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn markdown(res: &Results) -> String {
    let mut m = String::new();
    let _ = writeln!(
        m,
        "# Yassour, Ben-Yehuda & Wasserman (SYSTOR 2010): Figures 3–6\n"
    );
    let _ = writeln!(
        m,
        "Generated by `iommulab reproduce yassour2010{}`. Costs: `kvm-2010` (S1.10: map = 6000 + 4400 + 1400 + 1200 cycles, unmap = 6000 + 2600 + 1100 + 2000). Link {} Mb/s. {}.\n",
        if res.quick { " --quick" } else { "" },
        res.link_mbps,
        CPU_FORMULA
    );
    let _ = writeln!(
        m,
        "Files: `results.json`, `hit_rate.csv`, `cpu.csv`; figures `figure3_netperf-send_hit_rate.{{svg,png}}`, `figure4_apache-sendfile_hit_rate` (the paper's method), `figure3_netperf-send_hit_rate_pinned`, `figure4_apache-sendfile_hit_rate_pinned` (with pinning), `figure5_netperf-send_cpu`, `figure6_apache-sendfile_cpu`.\n"
    );
    let _ = writeln!(
        m,
        "**Method of Figures 3–4 (S1.9).** As in the paper's §4.2, each workload's recorded page-reference sequence (the pages it maps, in order) is replayed through each eviction policy at every quota from 0 to 100% of its working set, \"the total number of pages that are accessed during the run\", and the hit rate is hits / page maps. Each map is unmapped before the next (no pinning), so every cached page is evictable, as in the paper's simulation. `hit_rate` in `results.json` is this curve. The *pinned* view replays the same stream through the map cache with the workload's in-flight DMAs pinned: below the most pages in flight at once, maps are refused (counted as non-hits).\n"
    );
    for w in &res.workloads {
        let ws = w.working_set_pages;
        let _ = writeln!(m, "## {}\n", w.workload);
        let _ = writeln!(
            m,
            "{}: {} page maps; working set {} distinct pages (S1.8 formula: {} pages); at most {} pages pinned at once.\n",
            w.config, w.page_maps, ws, w.working_set_formula_pages, w.max_pinned_pages
        );
        let _ = writeln!(
            m,
            "**Figure {} — hit rate vs quota, page-reference sequence** ({} quota points):\n",
            if w.workload == "netperf-send" { 3 } else { 4 },
            w.policies.first().map_or(0, |p| p.quota_pages.len())
        );
        let qp = |f: f64| round_quota(f, ws);
        let _ = writeln!(
            m,
            "| policy | method | @10% ({} p) | @25% ({} p) | @50% ({} p) | @100% |",
            qp(0.1),
            qp(0.25),
            qp(0.5)
        );
        let _ = writeln!(m, "|---|---|---|---|---|---|");
        for p in &w.policies {
            let v = |f| pct(at(&p.hit_rate, &p.quota_pages, ws, f));
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} |",
                p.policy,
                p.method,
                v(0.1),
                v(0.25),
                v(0.5),
                v(1.0)
            );
        }
        let _ = writeln!(
            m,
            "\nPrefetching's guesses on this sequence (S1.4; a guess is useful if the page is mapped before it is evicted):\n"
        );
        let _ = writeln!(
            m,
            "| quota | hit rate | misses | pages prefetched | useful | accuracy |"
        );
        let _ = writeln!(m, "|---|---|---|---|---|---|");
        for a in &w.prefetch {
            let _ = writeln!(
                m,
                "| {:.0}% ({} p) | {} | {} | {} | {} | {} |",
                100.0 * a.quota_fraction,
                a.quota_pages,
                pct(a.hit_rate),
                a.misses,
                a.prefetched,
                a.prefetch_hits,
                pct(a.prefetch_hits as f64 / a.prefetched.max(1) as f64)
            );
        }
        let _ = writeln!(
            m,
            "\n**Second view — the same stream with pinning, which the paper's simulation leaves out** (map-cache runs; refused maps are non-hits):\n"
        );
        let _ = writeln!(
            m,
            "| policy | @10% | @25% | @50% | @100% | refused @10% | refused @25% | refused @50% |"
        );
        let _ = writeln!(m, "|---|---|---|---|---|---|---|---|");
        for p in &w.policies {
            let v = |f| pct(at(&p.hit_rate_pinned, &p.quota_pages, ws, f));
            let r = |f| pct(at(&p.refused_rate_pinned, &p.quota_pages, ws, f));
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                p.policy,
                v(0.1),
                v(0.25),
                v(0.5),
                v(1.0),
                r(0.1),
                r(0.25),
                r(0.5)
            );
        }
        let fig = if w.workload == "netperf-send" { 5 } else { 6 };
        let half = round_quota(0.5, ws);
        let _ = writeln!(
            m,
            "\n**Figure {fig} — modeled mapping CPU vs quota.** Left end: *no caching allowed* (the paper's minimal quota: `single-use`, every page map a map request and every driver unmap an unmap request, packed into hypercalls by the series' batching). Then the map cache (`on-demand`) from the minimal quota that refuses no map ({} pages = the most pinned at once) to the working set ({ws} pages); no map is refused at any point (checked), and no page map hits with no caching (checked). In the figure the segment from 0% to the minimal quota only joins those two measured points: quotas in between refuse maps.\n",
            w.max_pinned_pages
        );
        let _ = writeln!(
            m,
            "| series | batching | driver mapping | CPU no caching | CPU @minimal ({} p) | CPU @50% ({half} p) | CPU @100% | × LRU, no caching | hypercalls / page map, no caching | pages / hypercall, no caching | IOTLB inval. / page map, no caching | hit rate @minimal | hypercalls / page map @minimal |",
            w.max_pinned_pages
        );
        let _ = writeln!(m, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        let lru0 = cpu_of(w, "lru").and_then(|c| c.cpu_utilization.first().copied());
        for c in &w.cpu {
            let n = c.cpu_utilization.len();
            if n < 2 {
                continue;
            }
            let per_map = |i: usize, v: u64| v as f64 / c.page_maps[i].max(1) as f64;
            let q50 = c
                .quota_pages
                .iter()
                .skip(1)
                .position(|&q| q == half)
                .map(|i| i + 1);
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.3} | {:.2} | {:.3} | {} | {:.3} |",
                c.series,
                c.batching,
                c.mapping,
                pct(c.cpu_utilization[0]),
                pct(c.cpu_utilization[1]),
                q50.map_or_else(
                    || "— (below the minimal quota)".to_string(),
                    |i| pct(c.cpu_utilization[i])
                ),
                pct(c.cpu_utilization[n - 1]),
                lru0.map_or(f64::NAN, |l| c.cpu_utilization[0] / l),
                per_map(0, c.hypercalls[0]),
                c.pages_per_hypercall[0],
                per_map(0, c.iotlb_invalidations[0]),
                pct(c.hit_rate[1]),
                per_map(1, c.hypercalls[1]),
            );
        }
        let _ = writeln!(
            m,
            "\nIntra-guest protection (S1.11), quota = half the working set (at least the pinned pages):\n"
        );
        let _ = writeln!(
            m,
            "| strategy | caches | hit rate | hypercalls | CPU | stale accesses | stale writes |"
        );
        let _ = writeln!(m, "|---|---|---|---|---|---|---|");
        for p in &w.protection {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} |",
                p.strategy,
                p.cache_only,
                pct(p.hit_rate),
                p.hypercalls,
                pct(p.cpu_utilization),
                p.stale_accesses,
                p.stale_writes
            );
        }
        m.push('\n');
    }
    m.push_str(&findings(res));
    for s in &res.sensitivity {
        let _ = writeln!(
            m,
            "### Sensitivity: {} with {} (working set {} pages)\n",
            s.workload, s.config, s.working_set_pages
        );
        let _ = writeln!(m, "| policy | @10% | @25% | @50% |");
        let _ = writeln!(m, "|---|---|---|---|");
        for (name, pts) in &s.hit_rate {
            let cells: Vec<String> = pts
                .iter()
                .map(|&(_, q, h)| format!("{} ({q} p)", pct(h)))
                .collect();
            let _ = writeln!(m, "| {} | {} |", name, cells.join(" | "));
        }
        m.push('\n');
    }
    m.push_str(PAPER_SECTION);
    m
}

fn curve<'a>(w: &'a WorkloadResult, policy: &str) -> Option<&'a HitCurve> {
    w.policies.iter().find(|p| p.policy == policy)
}

fn cpu_of<'a>(w: &'a WorkloadResult, series: &str) -> Option<&'a CpuCurve> {
    w.cpu.iter().find(|c| c.series == series)
}

/// The paper's findings beside ours, computed from the results.
fn findings(res: &Results) -> String {
    let mut m = String::from(
        "## Findings beside the paper\n\n| finding (paper) | workload | ours |\n|---|---|---|\n",
    );
    for w in &res.workloads {
        let ws = w.working_set_pages;
        let h = |p: &str, f: f64| {
            curve(w, p).map_or(f64::NAN, |c| at(&c.hit_rate, &c.quota_pages, ws, f))
        };
        let _ = writeln!(
            m,
            "| LRU and FIFO \"highly inefficient for low quotas\" | {} | @10%: LRU {}, FIFO {}; @50%: LRU {}, FIFO {} |",
            w.workload,
            pct(h("lru", 0.1)),
            pct(h("fifo", 0.1)),
            pct(h("lru", 0.5)),
            pct(h("fifo", 0.5))
        );
        let _ = writeln!(
            m,
            "| optimal batching ≈ 100% hit rate at 10% quota | {} | {} |",
            w.workload,
            pct(h("opt_batch", 0.1))
        );
        let _ = writeln!(
            m,
            "| prefetching beats every non-batching policy, OPT included (netperf); ≈ 90% at 10% (Apache) | {} | @10%: prefetch {}, OPT {}, LRU {}; @25%: prefetch {}, OPT {}, LRU {} |",
            w.workload,
            pct(h("prefetch", 0.1)),
            pct(h("opt", 0.1)),
            pct(h("lru", 0.1)),
            pct(h("prefetch", 0.25)),
            pct(h("opt", 0.25)),
            pct(h("lru", 0.25))
        );
        let (Some(lru), Some(pig), Some(pre), Some(bat)) = (
            cpu_of(w, "lru"),
            cpu_of(w, "piggyback"),
            cpu_of(w, "prefetch"),
            cpu_of(w, "batching"),
        ) else {
            continue;
        };
        let Some(&l0) = lru.cpu_utilization.first() else {
            continue;
        };
        let ratio = |c: &CpuCurve| c.cpu_utilization.first().map_or(f64::NAN, |&x| x / l0);
        let at_min = |c: &CpuCurve| match (c.cpu_utilization.get(1), lru.cpu_utilization.get(1)) {
            (Some(&x), Some(&l)) if l > 0.0 => x / l,
            _ => f64::NAN,
        };
        let reductions: Vec<f64> = lru
            .cpu_utilization
            .iter()
            .zip(&pig.cpu_utilization)
            .skip(1)
            .filter(|&(&a, _)| a > 1e-3)
            .map(|(&a, &b)| 1.0 - b / a)
            .collect();
        let mean_red = if reductions.is_empty() {
            f64::NAN
        } else {
            reductions.iter().sum::<f64>() / reductions.len() as f64
        };
        let _ = writeln!(
            m,
            "| high CPU at minimal quota (no caching) for every optimisation | {} | no caching: LRU {}, piggyback {}, prefetch {}, batching {}; at the minimal quota that refuses nothing ({} p): LRU {} |",
            w.workload,
            pct(l0),
            pct(pig.cpu_utilization[0]),
            pct(pre.cpu_utilization[0]),
            pct(bat.cpu_utilization[0]),
            lru.quota_pages.get(1).copied().unwrap_or(0),
            pct(lru.cpu_utilization.get(1).copied().unwrap_or(f64::NAN))
        );
        let _ = writeln!(
            m,
            "| unmap piggyback ≈ 10% less CPU than LRU, less as the quota grows | {} | {:.0}% less with no caching; {} |",
            w.workload,
            100.0 * (1.0 - ratio(pig)),
            if mean_red.is_nan() {
                "LRU's CPU is ≈ 0 at every quota".to_string()
            } else {
                format!(
                    "mean {:.0}% over the map-cache quotas where LRU's CPU > 0.1%",
                    100.0 * mean_red
                )
            }
        );
        let _ = writeln!(
            m,
            "| prefetching reduces CPU further, its impact falls fast with the quota | {} | × {:.2} of LRU with no caching (nothing to prefetch into); × {:.2} at the minimal quota that refuses nothing |",
            w.workload,
            ratio(pre),
            at_min(pre)
        );
        let _ = writeln!(
            m,
            "| batching halves CPU at minimal quota | {} | × {:.2} of LRU with no caching; × {:.2} at the minimal quota that refuses nothing |",
            w.workload,
            ratio(bat),
            at_min(bat)
        );
    }
    m.push('\n');
    m
}

const PAPER_SECTION: &str = r#"## Where to look

| paper's finding | where to look here |
|---|---|
| LRU/FIFO inefficient at low quota; optimal batching ≈ 100% at 10% | Figure 3/4 tables, "@10%" |
| prefetching ≈ 90% at 10% quota for Apache, above OPT for netperf | `prefetch` rows and the prefetching-guesses tables |
| unmap piggyback ≈ 10% less CPU than LRU without batching | `piggyback` vs `lru` CPU rows |
| batching halves CPU at the minimal quota | `batching` vs `lru` CPU at the minimal quota |
| only single-use and shared give intra-guest protection | protection tables: stale accesses |

Mechanisms behind the differences (nothing here is tuned to the paper's numbers):

- **Working set and quota points.** The paper does not give its working-set sizes. One
  netperf socket with a 65 KB buffer touches 18 pages here (the sensitivity table), so
  10% of it is 2 pages and there are only 19 integer quotas; the reproduction uses 4
  sockets (S1.8: 4 × 16 pages; 70 measured, with the skb heads' slab pages), which gives
  71 integer quotas and a 7-page 10% point. The sensitivity table shows that one socket
  orders the policies the same way.
- **netperf's page-reference stream.** Each packet maps its skb head (a 1024-byte object,
  4 per slab page) and the payload page(s) it points into (2.8 packets per page), so the
  stream is short alternations of a head page and a data page ("h d h d h d'"), each page
  reused a few times, then not again until the whole send buffer has cycled. LRU and FIFO
  get the hits inside an alternation and nothing across cycles until the quota holds the
  whole cycle (a flat curve up to 100%); OPT keeps part of the cycle; optimal batching
  maps the next pages of the cycle with each miss.
- **Why prefetching is below LRU on netperf at small quotas** (a modelling consequence,
  not a bug; the policy is checked against S1.4 by unit tests: 3 followers with counts,
  the most frequent mapped if seen > 2 times, chained, the batch capped by the room the
  quota leaves and never evicting a page of its own chain). Pages return to the page
  allocator's LIFO free list and the slab in a different order each cycle, and a head
  page serves 4 packets while a data page serves 2.8, so the page that *follows* a page
  changes from one cycle to the next: the followers learnt in one cycle are wrong in the
  next (see the accuracy column). A wrong prefetch evicts an LRU victim, which at small
  quotas is the page of the current alternation, so prefetching loses hits LRU keeps.
  With room for a whole cycle the guesses are mostly right. Apache's sendfile streams a
  file's page-cache pages in the same order every time, so followers predict well, but
  under Zipf popularity the hot files already stay cached and prefetching adds little
  over LRU. The paper's traces evidently had stabler successor pages.
- **Transmit completion and ACK (netperf).** The driver unmaps a packet's buffers when its
  last frame has left the wire (e1000e's `clean_tx_irq`); its pages stay with the socket's
  retransmit queue until the TCP ACK, `rtt_us` = 100 µs later (S1.8), and only then go
  back to the page allocator's LIFO list. This does not change the page-reference
  sequence of Figure 3 (the socket still waits for buffer space, so pages are freed and
  taken again in the same order, only later), so the hit rates above are those of the
  earlier model. It changes the pinned set: at 1 GbE a 100 µs RTT is 8 packets of the
  ~104 the four 64 KiB buffers hold, so the pages mapped at once are the rest, the
  packets queued on the 256-descriptor ring: netperf's send buffer sits mostly in the
  sender's own transmit queue (the link is the bottleneck). The most pinned at once is
  the start-up burst (every socket fills its buffer at once: no slow start), 66 of 70
  pages; after the start (from the first fifth of a 20 000-packet run on) about 65
  (100 µs), 59 (200 µs), 45 (500 µs), 21 (1 ms). So the quota that refuses no map stays close to the working set,
  unlike the paper's Figure 5 axis; a longer ACK delay (receiver interrupt moderation,
  delayed ACKs) or a ring smaller than the buffers would widen it.
- **Pinning (second view).** The workloads keep their transmit ring's buffers mapped
  until the packet completes; below the most pages pinned at once, maps are refused and
  every policy draws nearly the same curve (the policy only chooses among evictable
  pages). The paper's simulation has no pinning.
- **Figures 5–6: the left end is "no caching allowed"** (the paper's words for its minimal
  quota): `single-use`, where every page map is a map request and every driver unmap an
  unmap request, so no map hits (checked). LRU without batching makes two hypercalls per
  page map; prefetching has nothing to prefetch into, so it equals LRU there; piggyback
  carries each unmap on the next map hypercall (one hypercall per page map); batching maps
  each packet's head and fragments with one hypercall and unmaps them with one (2.3–2.4
  pages per hypercall). The rest of the axis is the map cache from the minimal quota
  that refuses no map (the most pages pinned at once) to the working set. For netperf the
  50% point lies below that minimal quota (it would refuse maps), so the table leaves it
  out; its map-cache curve spans 66–70 pages (previous item). For Apache the minimal
  quota is 2% of the working set.
- **Why batching is × 0.66, not × 0.5, with no caching.** Counted per page map (S1.10
  costs): LRU pays 2 × 6000 transition cycles + 4400 + 2600 bookkeeping + 1400 + 1100 PTE
  work + the write-buffer flush and, per cleared PTE, a 2000-cycle IOTLB invalidation (the
  host keeps one PTE per page, cleared when no request holds it: 0.26 per page map for
  netperf, 0.15 for Apache, as head slab pages and data pages serve several packets).
  Batching a packet of ~2.35 pages into one map and one unmap hypercall removes the
  transitions of all but one page each way and shares the write-buffer flush, but the
  per-page bookkeeping, PTE writes and invalidations stay: × 0.66. Halving would need
  about twice as many pages per hypercall, e.g. a driver that unmaps every packet cleaned
  in one TX interrupt together (not modelled: each packet is cleaned on its own). With
  the map cache, a packet has at most one or two uncached pages and on-demand unmaps
  only evictions, so batching equals LRU there (× 1.00).
- **Piggyback is 29–30% less CPU with no caching, not ≈ 10%**: it removes one 6000-cycle
  transition per unmap out of ~24 700 mapping cycles per page, and our CPU is the mapping
  work alone (next item).
- **CPU covers only the mapping work.** The paper measured whole-guest CPU (network stack,
  interrupts, copies); we model only the DMA-mapping cost (hypercalls, host bookkeeping,
  VT-d updates, flushes, invalidations), on one 2.66 GHz core: with no caching it exceeds
  100% (the mapping work alone would need more than one core to keep 1 GbE busy).
  Relative savings (piggyback removes one 6000-cycle transition per unmap) are therefore
  larger here than the paper's whole-system percentages. Prefetching pays for every wrong guess with a map and a later
  eviction, so where its guesses are poor it costs more CPU than LRU.
- **Protection.** After the driver unmaps, the device probes the pages through the host
  IOMMU. `single-use` and `shared` unmap and invalidate at once (0 stale accesses);
  `on-demand` and `direct` keep pages mapped (stale accesses); the read-only relaxation
  turns every stale access into a read (no stale writes). The DMA-allocated relaxation
  caches only buffers the workload marks as allocated for DMA (the map op's `dma_alloc`
  flag: a trace's `alloc` events, i.e. `dma_alloc_coherent`; in the built-in workloads the
  skb heads, from a slab the relaxation would dedicate to DMA), while socket and
  page-cache payload pages take the `shared` path: stale accesses fall to the few head
  slab pages, at the cost of a hypercall per payload page.
"#;
