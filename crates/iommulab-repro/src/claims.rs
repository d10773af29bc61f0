//! The claims table: every claim a paper makes in its abstract, results and conclusion, our
//! number beside the published one, and a verdict decided here, in the library, by a rule
//! stated with its tolerance — the same type and the same rules for every reproduction,
//! so the pages only render what is decided here and `reproduce all` can count them.
//!
//! The rules are deliberately strict: *partly* needs the direction right **and** a stated
//! closeness; a claim whose result is set by an input of the run is *input — not tested*,
//! whatever the numbers say.

use std::fmt;

use serde::{Serialize, Serializer};

/// How a claim fared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// Our number meets the rule's close tolerance.
    Reproduced,
    /// The direction is right and the number within the rule's wider tolerance.
    Partly,
    /// Neither.
    NotReproduced,
    /// The result is set by an input of the run (a line rate, an anchored price, a chosen
    /// parameter): agreement tests nothing.
    Input,
}

impl Verdict {
    /// Every verdict, in the scoreboard's column order.
    pub const ALL: [Verdict; 4] = [
        Verdict::Reproduced,
        Verdict::Partly,
        Verdict::NotReproduced,
        Verdict::Input,
    ];

    /// The word on the pages and in `results.json`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Partly => "partly",
            Verdict::NotReproduced => "not reproduced",
            Verdict::Input => "input — not tested",
        }
    }

    /// `ok` → reproduced, else `partly` → partly, else not reproduced.
    pub const fn of(ok: bool, partly: bool) -> Verdict {
        if ok {
            Verdict::Reproduced
        } else if partly {
            Verdict::Partly
        } else {
            Verdict::NotReproduced
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Verdict {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One claim of a paper, judged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Claim {
    /// A short stable id, unique within the paper (`default-20pct`), for tests and links.
    pub id: String,
    /// The paper's words (translated where the paper is not in English).
    pub claim: String,
    /// Where the paper says it (`abstract`, `§3.3`, `§5`, `Figure 4`).
    pub section: &'static str,
    /// The published value or statement, as the paper gives it.
    pub published: String,
    /// Whether `published` is read off prose or a figure rather than printed as a number.
    pub inferred: bool,
    /// Our value, from this run.
    pub ours: String,
    /// The verdict the rule gave.
    pub verdict: Verdict,
    /// The rule, with its tolerances.
    pub rule: String,
    /// The mechanism or input that explains the verdict (a miss above all), from the run.
    pub why: String,
}

/// A verdict and the rule that gave it, before the claim's words are attached.
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    /// The verdict.
    pub verdict: Verdict,
    /// The rule, stated with its tolerances.
    pub rule: String,
}

impl Judged {
    /// A claim from this judgement.
    pub fn claim(
        self,
        id: impl Into<String>,
        section: &'static str,
        claim: impl Into<String>,
        published: impl Into<String>,
        ours: impl Into<String>,
        why: impl Into<String>,
    ) -> Claim {
        Claim {
            id: id.into(),
            claim: claim.into(),
            section,
            published: published.into(),
            inferred: false,
            ours: ours.into(),
            verdict: self.verdict,
            rule: self.rule,
            why: why.into(),
        }
    }
}

impl Claim {
    /// Marks the published value as read off prose or a figure.
    pub fn inferred(mut self) -> Self {
        self.inferred = true;
        self
    }
}

/// One claim of a paper as data: where the paper makes it, its words and the published value,
/// and its judge — one small function per claim that reads a run's results `C` and returns
/// the verdict, our value and why. A paper's claims are a table of these, judged by
/// [`judge_table`].
#[derive(Clone, Copy)]
pub struct ClaimSpec<C> {
    /// A short stable id, unique within the paper (`default-20pct`).
    pub id: &'static str,
    /// Where the paper says it (`abstract`, `§3.3`, `Figure 4`).
    pub section: &'static str,
    /// The paper's words.
    pub claim: &'static str,
    /// The published value or statement, as the paper gives it.
    pub published: &'static str,
    /// Whether `published` is read off prose or a figure rather than printed as a number.
    pub inferred: bool,
    /// The judge.
    pub judge: fn(&C) -> Judgement,
}

impl<C> fmt::Debug for ClaimSpec<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimSpec")
            .field("id", &self.id)
            .field("section", &self.section)
            .finish_non_exhaustive()
    }
}

/// What a claim's judge decides from a run: the verdict with its rule, our value, and the
/// mechanism or input that explains the verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    /// The verdict and its rule.
    pub judged: Judged,
    /// Our value, from this run.
    pub ours: String,
    /// Why.
    pub why: String,
}

impl Judged {
    /// This verdict with our value and its explanation.
    pub fn with(self, ours: impl Into<String>, why: impl Into<String>) -> Judgement {
        Judgement {
            judged: self,
            ours: ours.into(),
            why: why.into(),
        }
    }
}

impl<C> ClaimSpec<C> {
    /// The claim judged on `ctx`.
    pub fn judge(&self, ctx: &C) -> Claim {
        let j = (self.judge)(ctx);
        Claim {
            id: self.id.to_string(),
            claim: self.claim.to_string(),
            section: self.section,
            published: self.published.to_string(),
            inferred: self.inferred,
            ours: j.ours,
            verdict: j.judged.verdict,
            rule: j.judged.rule,
            why: j.why,
        }
    }
}

/// Every claim of `table` judged on `ctx`, in the table's order.
pub fn judge_table<C>(table: &[ClaimSpec<C>], ctx: &C) -> Vec<Claim> {
    table.iter().map(|spec| spec.judge(ctx)).collect()
}

/// A tolerance or reference as a reader wants it: at most two decimals, no trailing zeros.
fn num(x: f64) -> String {
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn side(x: f64, reference: f64) -> i8 {
    if x > reference {
        1
    } else if x < reference {
        -1
    } else {
        0
    }
}

/// A level: reproduced within `close` of `paper`; partly when on the same side of
/// `reference` as the paper (the direction: e.g. slower than disabled, below 1.0) and within
/// `near`; else not reproduced. `unit` is printed after the tolerances (`""`, `" points"`).
pub fn level(ours: f64, paper: f64, reference: f64, close: f64, near: f64, unit: &str) -> Judged {
    let gap = (ours - paper).abs();
    let direction = side(ours, reference) == side(paper, reference) && ours.is_finite();
    Judged {
        verdict: Verdict::of(gap <= close + 1e-12, direction && gap <= near + 1e-12),
        rule: format!(
            "within ±{}{unit} of the paper's: reproduced; on its side of {} and within ±{}{unit}: partly",
            num(close),
            num(reference),
            num(near)
        ),
    }
}

/// A relative change in percent (`ours_pct`, `paper_pct`, e.g. −45.1): reproduced within
/// `close` percentage points; partly with the same sign and within a factor `factor` of the
/// paper's size; else not reproduced.
pub fn change(ours_pct: f64, paper_pct: f64, close: f64, factor: f64) -> Judged {
    let same_sign = side(ours_pct, 0.0) == side(paper_pct, 0.0) && ours_pct.is_finite();
    let ratio = if paper_pct == 0.0 {
        f64::INFINITY
    } else {
        ours_pct / paper_pct
    };
    let within_factor = same_sign && ratio >= 1.0 / factor && ratio <= factor;
    Judged {
        verdict: Verdict::of(
            (ours_pct - paper_pct).abs() <= close + 1e-12 && same_sign,
            within_factor,
        ),
        rule: format!(
            "within ±{close} points of the paper's change: reproduced; same sign and within ×{factor} of its size: partly"
        ),
    }
}

/// A range claim ("usually about 30%, up to 60%"; "40–60%"): reproduced when `ours` lies in
/// `[lo, hi]`; partly when within `slack` of the range; else not reproduced.
pub fn within_range(ours: f64, lo: f64, hi: f64, slack: f64, unit: &str) -> Judged {
    let ok = ours >= lo - 1e-12 && ours <= hi + 1e-12;
    let near = ours >= lo - slack && ours <= hi + slack;
    Judged {
        verdict: Verdict::of(ok, near),
        rule: format!("in {lo}–{hi}{unit}: reproduced; within {slack}{unit} of that range: partly"),
    }
}

/// A claim judged by conditions the caller computes (an ordering, a compound statement):
/// `rule` must state both conditions.
pub fn holds(ok: bool, partly: bool, rule: impl Into<String>) -> Judged {
    Judged {
        verdict: Verdict::of(ok, partly),
        rule: rule.into(),
    }
}

/// A claim whose result is set by an input of the run: not tested, whatever the numbers.
pub fn input(what: impl Into<String>) -> Judged {
    Judged {
        verdict: Verdict::Input,
        rule: format!("not tested: set by an input ({})", what.into()),
    }
}

/// Claims counted by verdict, in [`Verdict::ALL`]'s order.
pub fn count(claims: &[Claim]) -> [usize; 4] {
    let mut n = [0; 4];
    for c in claims {
        let i = Verdict::ALL
            .iter()
            .position(|v| *v == c.verdict)
            .unwrap_or(0);
        n[i] += 1;
    }
    n
}

/// The scoreboard line of one paper: `N of M claims reproduced, P partly, Q not, R input`.
pub fn summary(claims: &[Claim]) -> String {
    let [r, p, n, i] = count(claims);
    format!(
        "{r} of {} claims reproduced, {p} partly, {n} not reproduced, {i} set by an input",
        claims.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_passes_partly_and_fails() {
        // Paper 0.80 (slower than disabled, reference 1.0); close 0.02, near 0.05.
        assert_eq!(
            level(0.81, 0.80, 1.0, 0.02, 0.05, "").verdict,
            Verdict::Reproduced
        );
        assert_eq!(
            level(0.76, 0.80, 1.0, 0.02, 0.05, "").verdict,
            Verdict::Partly
        );
        assert_eq!(
            level(0.70, 0.80, 1.0, 0.02, 0.05, "").verdict,
            Verdict::NotReproduced
        );
        // Within `near` but on the wrong side of the reference: not partly.
        assert_eq!(
            level(1.01, 0.98, 1.0, 0.02, 0.05, "").verdict,
            Verdict::NotReproduced
        );
        assert_eq!(
            level(f64::NAN, 0.8, 1.0, 0.02, 0.05, "").verdict,
            Verdict::NotReproduced
        );
    }

    #[test]
    fn change_needs_the_sign_and_a_factor() {
        assert_eq!(change(-44.0, -45.1, 5.0, 2.0).verdict, Verdict::Reproduced);
        assert_eq!(change(-80.0, -45.1, 5.0, 2.0).verdict, Verdict::Partly);
        // Any reduction is not enough: −98.5% is more than twice −45.1%.
        assert_eq!(
            change(-98.5, -45.1, 5.0, 2.0).verdict,
            Verdict::NotReproduced
        );
        assert_eq!(
            change(10.0, -45.1, 5.0, 2.0).verdict,
            Verdict::NotReproduced
        );
        assert_eq!(
            change(0.0, -45.1, 50.0, 2.0).verdict,
            Verdict::NotReproduced
        );
    }

    #[test]
    fn range_and_holds_and_input() {
        assert_eq!(
            within_range(45.0, 40.0, 60.0, 10.0, "%").verdict,
            Verdict::Reproduced
        );
        assert_eq!(
            within_range(35.0, 40.0, 60.0, 10.0, "%").verdict,
            Verdict::Partly
        );
        assert_eq!(
            within_range(20.0, 40.0, 60.0, 10.0, "%").verdict,
            Verdict::NotReproduced
        );
        assert_eq!(holds(false, true, "r").verdict, Verdict::Partly);
        assert_eq!(holds(false, false, "r").verdict, Verdict::NotReproduced);
        let j = input("the line rate");
        assert_eq!(j.verdict, Verdict::Input);
        assert!(j.rule.contains("the line rate"));
    }

    #[test]
    fn counts_and_summary() {
        let c = |v| Claim {
            id: "x".into(),
            claim: String::new(),
            section: "",
            published: String::new(),
            inferred: false,
            ours: String::new(),
            verdict: v,
            rule: String::new(),
            why: String::new(),
        };
        let claims = [
            c(Verdict::Reproduced),
            c(Verdict::Partly),
            c(Verdict::Partly),
            c(Verdict::Input),
        ];
        assert_eq!(count(&claims), [1, 2, 0, 1]);
        assert_eq!(
            summary(&claims),
            "1 of 4 claims reproduced, 2 partly, 0 not reproduced, 1 set by an input"
        );
        assert_eq!(
            serde_json::to_value(Verdict::Input).unwrap(),
            serde_json::json!("input — not tested")
        );
    }
}
