//! Each estimated price swept over its range, the others at the run's values: where each
//! claim's verdict holds. Shared by the reproductions whose claims can be judged again from
//! what the run counted with only the prices changed (a sweep point is the claims again, not
//! a rerun of the stack): Ben-Yehuda 2007 and Yassour 2010.

use serde::Serialize;

use crate::ReproError as Error;
use crate::claims::Verdict;

/// Points per side of the run's value: the ends, the run's value, and two between it and
/// each end.
pub const STEPS: u32 = 3;

/// A claim whose verdict changes within a price's range.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VerdictSpan {
    /// The claim's id.
    pub claim: String,
    /// Its verdict at the run's prices.
    pub verdict: String,
    /// The contiguous part of the swept range around the run's value where it holds.
    pub holds_from: f64,
    /// Its upper end.
    pub holds_to: f64,
    /// The swept points outside it, with the verdict there.
    pub elsewhere: Vec<(f64, String)>,
}

/// One estimated price, swept.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SensitivityRow {
    /// Where the price belongs (`kernel`, `calgary`, `kvm-2010`, `input`, …).
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

/// How a knob sets its price in a copy of the prices (`None`: no such field).
pub type Setter<P> = Box<dyn Fn(&P, f64) -> Option<P>>;

/// One price to sweep.
pub struct Knob<P> {
    /// See [`SensitivityRow::group`].
    pub group: &'static str,
    /// The price's field.
    pub price: &'static str,
    /// Its value in the run.
    pub default: f64,
    /// Its estimated range.
    pub range: (f64, f64),
    /// How to set it.
    pub set: Setter<P>,
}

impl<P> std::fmt::Debug for Knob<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Knob")
            .field("group", &self.group)
            .field("price", &self.price)
            .field("default", &self.default)
            .field("range", &self.range)
            .finish_non_exhaustive()
    }
}

/// The swept values: `STEPS` from `lo` up to `def`, then `def` and `STEPS` up to `hi`
/// (`def` is at index `STEPS`).
pub fn points(lo: f64, def: f64, hi: f64) -> Vec<f64> {
    let mut v = Vec::with_capacity(2 * STEPS as usize + 1);
    for i in 0..STEPS {
        v.push(lo + (def - lo) * f64::from(i) / f64::from(STEPS));
    }
    for i in 0..=STEPS {
        v.push(def + (hi - def) * f64::from(i) / f64::from(STEPS));
    }
    v
}

/// Sweeps every knob from `base`; `judge` gives each claim's (id, verdict) at a set of
/// prices, and `at_base` is what it gave at `base`. `missing` is the error for a knob whose
/// setter finds no such price.
pub fn sweep<P>(
    knobs: Vec<Knob<P>>,
    base: &P,
    at_base: &[(String, Verdict)],
    judge: impl Fn(&P) -> Result<Vec<(String, Verdict)>, Error>,
    missing: impl Fn(&str) -> Error,
) -> Result<Vec<SensitivityRow>, Error> {
    let mut rows = Vec::with_capacity(knobs.len());
    for k in knobs {
        let (lo, hi) = k.range;
        let xs = points(lo, k.default, hi);
        let mut at = Vec::with_capacity(xs.len());
        for &x in &xs {
            let p = (k.set)(base, x).ok_or_else(|| missing(k.price))?;
            at.push(judge(&p)?);
        }
        let def_i = STEPS as usize;
        let mut changes = Vec::new();
        for (id, verdict) in at_base {
            let v = |i: usize| at[i].iter().find(|(c, _)| c == id).map(|c| c.1);
            if (0..xs.len()).all(|i| v(i) == Some(*verdict)) {
                continue;
            }
            let (mut a, mut b) = (def_i, def_i);
            while a > 0 && v(a - 1) == Some(*verdict) {
                a -= 1;
            }
            while b + 1 < xs.len() && v(b + 1) == Some(*verdict) {
                b += 1;
            }
            changes.push(VerdictSpan {
                claim: id.clone(),
                verdict: verdict.as_str().into(),
                holds_from: xs[a],
                holds_to: xs[b],
                elsewhere: (0..xs.len())
                    .filter(|&i| i < a || i > b)
                    .map(|i| (xs[i], v(i).map_or("?", Verdict::as_str).to_string()))
                    .collect(),
            });
        }
        rows.push(SensitivityRow {
            group: k.group,
            price: k.price,
            default: k.default,
            low: lo,
            high: hi,
            changes,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A claim that holds while the price stays under 5 holds over the points up to it and
    /// says what it becomes elsewhere; one that never changes is left out.
    #[test]
    fn a_threshold_is_found_around_the_default() {
        let judge = |x: &f64| -> Result<Vec<(String, Verdict)>, Error> {
            Ok(vec![
                ("under5".into(), Verdict::of(*x < 5.0, false)),
                ("always".into(), Verdict::Partly),
            ])
        };
        let knobs = vec![Knob {
            group: "g",
            price: "p",
            default: 3.0,
            range: (0.0, 9.0),
            set: Box::new(|_: &f64, x| Some(x)),
        }];
        let base = judge(&3.0).unwrap();
        let rows = sweep(knobs, &3.0, &base, judge, |_| unreachable!()).unwrap();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(points(0.0, 3.0, 9.0), [0.0, 1.0, 2.0, 3.0, 5.0, 7.0, 9.0]);
        assert_eq!(r.changes.len(), 1);
        let c = &r.changes[0];
        assert_eq!(c.claim, "under5");
        assert_eq!((c.holds_from, c.holds_to), (0.0, 3.0));
        assert_eq!(c.elsewhere.len(), 3);
        assert_eq!(c.elsewhere[0], (5.0, "not reproduced".into()));
    }
}
