//! Each estimated `kvm-2010` price of the guest runs swept over its range
//! ([`iommulab::hw::cost::KVM_2010_PRICES`]' estimates), the others at the run's values: where
//! each claim's verdict holds, on every stream (recordings and generators).
//!
//! A sweep point is no rerun: the CPU curves are priced again from their counts. Each price
//! enters a run linearly through a counted step: the per-call bookkeeping once per hypercall
//! with S1.10's one-page totals kept (so the per-page parts move the other way, once per page
//! mapped or unmapped), `inv_domain` once per domain-selective invalidation, the stack's
//! `net_tx_per_kib` per KiB sent ([`iommulab::virt::link_load`]). The figure claims of
//! Figures 3–4 read hit rates, which no price enters.

use super::claims::claims_by_stream;
use crate::ReproError as Error;
use crate::claims::Verdict;
use crate::sensitivity::{Knob, SensitivityRow, Setter};
use iommulab::hw::CostModel;
use iommulab::hw::cost::KVM_2010_PRICES;
use iommulab::virt::link_load;

use super::{CpuCurve, Results, check_failed};

/// The curve `c`, counted under `run`, priced under `cost` on `cpus` CPUs behind a
/// `link_mbps` link.
pub fn reprice(
    c: &CpuCurve,
    run: &CostModel,
    cost: &CostModel,
    cpus: u32,
    link_mbps: u64,
) -> CpuCurve {
    let mut out = c.clone();
    let d = |a: u64, b: u64| a as i64 - b as i64;
    let (d_call, d_map, d_unmap, d_dom) = (
        d(cost.host_call_bookkeeping, run.host_call_bookkeeping),
        d(cost.host_map_bookkeeping, run.host_map_bookkeeping),
        d(cost.host_unmap_bookkeeping, run.host_unmap_bookkeeping),
        d(cost.inv_domain, run.inv_domain),
    );
    for i in 0..c.mapping_cycles.len() {
        let n = |v: &[u64]| v.get(i).copied().unwrap_or(0) as i64;
        let mapping = (c.mapping_cycles[i] as i64
            + d_call * n(&c.hypercalls)
            + d_map * n(&c.map_requests)
            + d_unmap * n(&c.unmap_requests)
            + d_dom * n(&c.domain_invalidations))
        .max(0) as u64;
        let l = link_load(cost, cpus, link_mbps, c.sent_bytes[i], mapping);
        out.mapping_cycles[i] = mapping;
        out.stack_cycles[i] = l.stack_cycles;
        out.cpu_utilization[i] = l.cpu_utilization;
        out.mapping_cpu[i] = l.mapping_cpu;
        out.throughput_mbps[i] = l.throughput_mbps;
        out.cpu_demand[i] = l.demand;
        out.cycles_per_map[i] = mapping as f64 / (c.page_maps[i].max(1) as f64);
    }
    out
}

/// Every CPU curve of `r` priced under `cost`.
pub fn repriced(r: &Results, cost: &CostModel) -> Results {
    let mut out = r.clone();
    let curves = out
        .recorded
        .iter_mut()
        .flat_map(|w| w.cpu.iter_mut())
        .chain(out.workloads.iter_mut().flat_map(|w| w.cpu.iter_mut()));
    for c in curves {
        *c = reprice(c, &r.cost_model, cost, r.cpus, r.link_mbps);
    }
    out
}

/// Every figure claim on every stream, keyed `stream: id`.
pub fn verdicts(r: &Results) -> Vec<(String, Verdict)> {
    claims_by_stream(r)
        .into_iter()
        .map(|s| (format!("{}: {}", s.stream, s.claim.id), s.claim.verdict))
        .collect()
}

fn knobs(run: &CostModel) -> Vec<Knob<CostModel>> {
    let mut v = Vec::new();
    let (map_total, unmap_total) = (
        run.host_call_bookkeeping + run.host_map_bookkeeping,
        run.host_call_bookkeeping + run.host_unmap_bookkeeping,
    );
    for p in KVM_2010_PRICES {
        let (Some((lo, hi)), Some(def)) = (p.range, run.field(p.field)) else {
            continue;
        };
        #[expect(clippy::cast_possible_truncation, reason = "a cycle price, rounded")]
        let set: Setter<CostModel> = match p.field {
            // S1.10 gives the one-page totals: the per-page parts are what the call leaves.
            "host_call_bookkeeping" => Box::new(move |c: &CostModel, x| {
                let x = x.round() as u64;
                Some(CostModel {
                    host_call_bookkeeping: x,
                    host_map_bookkeeping: map_total.checked_sub(x)?,
                    host_unmap_bookkeeping: unmap_total.checked_sub(x)?,
                    ..*c
                })
            }),
            "inv_domain" => Box::new(|c: &CostModel, x| {
                Some(CostModel {
                    inv_domain: x.round() as u64,
                    ..*c
                })
            }),
            "net_tx_per_kib" => Box::new(|c: &CostModel, x| {
                Some(CostModel {
                    net_tx_per_kib: x.round() as u64,
                    ..*c
                })
            }),
            _ => Box::new(|_: &CostModel, _| None),
        };
        v.push(Knob {
            group: "kvm-2010",
            price: p.field,
            default: def as f64,
            range: (lo as f64, hi as f64),
            set,
        });
    }
    v
}

/// Sweeps every estimated price of `r`'s runs.
pub fn sweep(r: &Results) -> Result<Vec<SensitivityRow>, Error> {
    crate::sensitivity::sweep(
        knobs(&r.cost_model),
        &r.cost_model,
        &verdicts(r),
        |cost| Ok(verdicts(&repriced(r, cost))),
        |price| {
            check_failed(format!(
                "sensitivity: no way to set the estimated price {price}"
            ))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yassour2010::cpu::{CpuWorkload, DriverMapping, no_caching};
    use crate::yassour2010::{Spec, guest_base};
    use iommulab::virt::{Batching, Strategy};
    use iommulab::workload::NetperfSendConfig;

    /// Pricing a curve again from its counts gives what a rerun at the new prices gives:
    /// the mapping cycles exactly, the CPU and throughput to rounding; with no batching
    /// (a call per page) and with S1.6's batching (several pages per call), on TSO packets.
    #[test]
    fn repricing_matches_a_rerun() {
        let spec = Spec::Netperf(NetperfSendConfig {
            packets: 1500,
            tso: true,
            ..NetperfSendConfig::default()
        });
        let base = guest_base();
        let run = base.cost;
        let other = CostModel {
            host_call_bookkeeping: 0,
            host_map_bookkeeping: run.host_call_bookkeeping + run.host_map_bookkeeping,
            host_unmap_bookkeeping: run.host_call_bookkeeping + run.host_unmap_bookkeeping,
            inv_domain: 4000,
            net_tx_per_kib: 8192,
            ..run
        };
        for (batching, m) in [
            (Batching::None, DriverMapping::PerFragment),
            (Batching::MapUnmap, DriverMapping::PerPacket),
        ] {
            let at = |cost: CostModel| {
                let r = spec.run_cpu(&no_caching(&base, batching, cost), m).unwrap();
                let mut c = CpuCurve::empty("s", "lru", "b", "m");
                c.push(Strategy::SingleUse, 0, 1, &r);
                c
            };
            let (a, b) = (at(run), at(other));
            assert!(a.hypercalls[0] > 0);
            let p = reprice(&a, &run, &other, base.cpus, base.link_mbps);
            assert_eq!(p.mapping_cycles, b.mapping_cycles, "{batching:?}");
            if batching == Batching::None {
                // One page per call: the call's share moves to the page, the sum stays.
                assert_eq!(a.hypercalls[0], a.map_requests[0] + a.unmap_requests[0]);
            } else {
                assert_ne!(p.mapping_cycles, a.mapping_cycles, "{batching:?}");
            }
            assert_eq!(p.stack_cycles, b.stack_cycles);
            assert!((p.cpu_utilization[0] - b.cpu_utilization[0]).abs() < 1e-9);
            assert!((p.cpu_demand[0] - b.cpu_demand[0]).abs() < 1e-9);
            assert!((p.throughput_mbps[0] - b.throughput_mbps[0]).abs() < 1e-6);
        }
    }
}
