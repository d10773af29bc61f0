//! Each estimated price swept over its range, the others at their defaults: where each
//! claim's verdict holds. The counts are the run's; only prices change, so a sweep point is
//! [`super::assemble`] again (no rerun of the stack).

use crate::ReproError as Error;
use crate::claims::{Claim, Verdict};
pub use crate::sensitivity::{SensitivityRow, VerdictSpan};
use iommulab::hw::TcePrices;
use iommulab::hw::cost::PriceSource;
use iommulab::hw::tce::price::{CALGARY_X460_PRICES, DART_CPC945_PRICES};

use super::dma_layer::SOFTWARE_PRICES;
use super::netperf::HARNESS_PRICES;
use super::{Counted, Prices, assemble};

type Knob = crate::sensitivity::Knob<Prices>;

fn knob(
    group: &'static str,
    price: &'static str,
    default: f64,
    range: (f64, f64),
    set: impl Fn(&Prices, f64) -> Option<Prices> + 'static,
) -> Knob {
    Knob {
        group,
        price,
        default,
        range,
        set: Box::new(set),
    }
}

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
            v.push(knob("kernel", f, def as f64, r, move |p: &Prices, x| {
                Some(Prices {
                    software: p.software.with(f, x.round() as u64)?,
                    ..*p
                })
            }));
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
                v.push(knob(group, f, x as f64, r, move |p: &Prices, x| {
                    Some(set(p, get(p).with(f, x.round() as u64)?))
                }));
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
            v.push(knob("netperf", f, def, h.range, move |p: &Prices, x| {
                Some(Prices {
                    model: p.model.with(f, x)?,
                    ..*p
                })
            }));
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
    let at_base: Vec<(String, Verdict)> = base.iter().map(|k| (k.id.clone(), k.verdict)).collect();
    crate::sensitivity::sweep(
        knobs(),
        &Prices::default(),
        &at_base,
        |p| verdicts(c, p),
        |price| crate::ReproError::Check {
            reproduction: <super::BenYehuda2007 as crate::Paper>::NAME,
            what: format!("no price {price}"),
        },
    )
}
