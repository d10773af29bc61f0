//! Each estimated price swept over its range, the others at their defaults: where each
//! claim's verdict holds. The counts are the run's; only prices change, so a sweep point is
//! [`super::assemble`] again (no rerun of the stack).

use serde::Serialize;

use crate::Error;
use crate::hw::TcePrices;
use crate::hw::cost::PriceSource;
use crate::hw::tce::price::{CALGARY_X460_PRICES, DART_CPC945_PRICES};
use crate::repro::claims::{Claim, Verdict};

use super::dma_layer::SOFTWARE_PRICES;
use super::netperf::HARNESS_PRICES;
use super::{Counted, Prices, assemble};

/// Points per range: the ends, the default, and two between the default and each end.
const STEPS: u32 = 3;

/// A claim whose verdict changes within a price's range.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VerdictSpan {
    /// The claim's id.
    pub claim: String,
    /// Its verdict at the defaults.
    pub verdict: String,
    /// The contiguous part of the swept range around the default where it holds.
    pub holds_from: f64,
    /// Its upper end.
    pub holds_to: f64,
    /// The swept points outside it, with the verdict there.
    pub elsewhere: Vec<(f64, String)>,
}

/// One estimated price, swept.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SensitivityRow {
    /// `kernel`, `calgary`, `dart` or `netperf`.
    pub group: &'static str,
    /// The price's field.
    pub price: &'static str,
    /// Its value in the run.
    pub default: f64,
    /// The range swept.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// The claims whose verdict changes within the range (empty: every verdict holds).
    pub changes: Vec<VerdictSpan>,
}

fn points(lo: f64, def: f64, hi: f64) -> Vec<f64> {
    let mut v = Vec::new();
    for i in 0..STEPS {
        v.push(lo + (def - lo) * f64::from(i) / f64::from(STEPS));
    }
    for i in 0..=STEPS {
        v.push(def + (hi - def) * f64::from(i) / f64::from(STEPS));
    }
    v
}

type Setter = Box<dyn Fn(&Prices, f64) -> Option<Prices>>;
/// One swept price: group, field, run's value, range, how to set it.
type Knob = (&'static str, &'static str, f64, (f64, f64), Setter);

#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "cycle prices, rounded"
)]
fn knobs() -> Vec<Knob> {
    let mut v: Vec<Knob> = Vec::new();
    let d = Prices::default();
    let int = |s: &PriceSource| s.range.map(|(a, b)| (a as f64, b as f64));
    for s in &SOFTWARE_PRICES {
        if let (Some(r), Some(def)) = (int(s), d.software.get(s.field)) {
            let f = s.field;
            v.push((
                "kernel",
                f,
                def as f64,
                r,
                Box::new(move |p: &Prices, x| {
                    Some(Prices {
                        software: p.software.with(f, x.round() as u64)?,
                        ..*p
                    })
                }),
            ));
        }
    }
    let tce = |group: &'static str,
               table: &'static [PriceSource],
               def: TcePrices,
               set: fn(&Prices, TcePrices) -> Prices,
               v: &mut Vec<Knob>| {
        for s in table {
            if let (Some(r), Some(x)) = (int(s), def.get(s.field)) {
                let f = s.field;
                let get = move |p: &Prices| if group == "dart" { p.dart } else { p.calgary };
                v.push((
                    group,
                    f,
                    x as f64,
                    r,
                    Box::new(move |p: &Prices, x| Some(set(p, get(p).with(f, x.round() as u64)?))),
                ));
            }
        }
    };
    tce(
        "calgary",
        &CALGARY_X460_PRICES,
        d.calgary,
        |p, t| Prices { calgary: t, ..*p },
        &mut v,
    );
    tce(
        "dart",
        &DART_CPC945_PRICES,
        d.dart,
        |p, t| Prices { dart: t, ..*p },
        &mut v,
    );
    for h in &HARNESS_PRICES {
        if let Some(def) = d.model.get(h.field) {
            let f = h.field;
            v.push((
                "netperf",
                f,
                def,
                h.range,
                Box::new(move |p: &Prices, x| {
                    Some(Prices {
                        model: p.model.with(f, x)?,
                        ..*p
                    })
                }),
            ));
        }
    }
    v
}

fn verdicts(c: &Counted, p: &Prices) -> Result<Vec<(String, Verdict)>, Error> {
    Ok(assemble(c, p)?
        .claims
        .into_iter()
        .map(|k| (k.id, k.verdict))
        .collect())
}

/// Sweeps every estimated price; `base` are the claims at the defaults.
pub fn sweep(c: &Counted, base: &[Claim]) -> Result<Vec<SensitivityRow>, Error> {
    let d = Prices::default();
    let mut rows = Vec::new();
    for (group, price, def, (lo, hi), set) in knobs() {
        let xs = points(lo, def, hi);
        let mut at = Vec::with_capacity(xs.len());
        for &x in &xs {
            let p = set(&d, x).ok_or_else(|| {
                Error::from(crate::repro::ReproError::Check {
                    reproduction: crate::repro::Reproduction::BenYehuda2007,
                    what: format!("no price {price}"),
                })
            })?;
            at.push(verdicts(c, &p)?);
        }
        let def_i = STEPS as usize;
        let mut changes = Vec::new();
        for (k, claim) in base.iter().enumerate() {
            let v = |i: usize| at[i].get(k).map(|x| x.1);
            if (0..xs.len()).all(|i| v(i) == Some(claim.verdict)) {
                continue;
            }
            let mut a = def_i;
            while a > 0 && v(a - 1) == Some(claim.verdict) {
                a -= 1;
            }
            let mut b = def_i;
            while b + 1 < xs.len() && v(b + 1) == Some(claim.verdict) {
                b += 1;
            }
            changes.push(VerdictSpan {
                claim: claim.id.clone(),
                verdict: claim.verdict.as_str().into(),
                holds_from: xs[a],
                holds_to: xs[b],
                elsewhere: (0..xs.len())
                    .filter(|&i| i < a || i > b)
                    .map(|i| (xs[i], v(i).map_or("?", Verdict::as_str).to_string()))
                    .collect(),
            });
        }
        rows.push(SensitivityRow {
            group,
            price,
            default: def,
            low: lo,
            high: hi,
            changes,
        });
    }
    Ok(rows)
}
