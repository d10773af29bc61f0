//! The claims table every page opens with, and the scoreboard of `index.md`: both only render
//! what `iommulab_repro::claims` decided.

use std::fmt::Write as _;

use iommulab_repro::claims::{Claim, Verdict, count};
use iommulab_repro::sensitivity::SensitivityRow;
use iommulab_repro::{ReproResults, Reproduction};

use crate::table::Table;

/// A markdown cell: pipes escaped, line breaks flattened.
pub(crate) fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The page's "claims, one by one" section: one row per claim, the verdict in bold.
pub(crate) fn section(claims: &[Claim]) -> String {
    let mut p = String::from("## The paper's claims, one by one\n\n");
    let [r, pa, n, i] = count(claims);
    let _ = writeln!(
        p,
        "{} claims from the paper's abstract, results and conclusion: **{r} reproduced, {pa} partly, {n} not \
reproduced, {i} set by an input** (not tested). Each verdict is decided by the rule in its row, from this run's \
numbers (`results.json`'s `claims`); *(inferred)* marks a published value read off prose or a figure.\n",
        claims.len()
    );
    let _ = writeln!(
        p,
        "| claim | section | paper | ours | verdict | rule | why |\n|---|---|---|---|---|---|---|"
    );
    for c in claims {
        let _ = writeln!(
            p,
            "| {} | {} | {}{} | {} | **{}** | {} | {} |",
            cell(&c.claim),
            cell(c.section),
            cell(&c.published),
            if c.inferred { " (inferred)" } else { "" },
            cell(&c.ours),
            c.verdict,
            cell(&c.rule),
            cell(&c.why)
        );
    }
    p
}

/// The claims as a table (Python's `tables["claims"]`; no CSV file).
pub(crate) fn table(claims: &[Claim]) -> Table {
    let mut t = Table::new(
        "claims",
        None,
        &[
            "id",
            "claim",
            "section",
            "published",
            "inferred",
            "ours",
            "verdict",
            "rule",
            "why",
        ],
    );
    for c in claims {
        t.push(vec![
            (&c.id).into(),
            (&c.claim).into(),
            c.section.into(),
            (&c.published).into(),
            (if c.inferred { "yes" } else { "no" }).into(),
            (&c.ours).into(),
            c.verdict.as_str().into(),
            (&c.rule).into(),
            (&c.why).into(),
        ]);
    }
    t
}

/// An object's fields and a `claims` list beside them, for a `results.json` whose object
/// does not hold its claims itself.
#[derive(serde::Serialize)]
pub(crate) struct WithClaims<'a, T: serde::Serialize> {
    #[serde(flatten)]
    pub(crate) results: &'a T,
    pub(crate) claims: &'a [Claim],
}

/// One paper's verdict counts, for the scoreboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Score {
    /// The reproduction.
    pub reproduction: Reproduction,
    /// Claims by verdict, in [`Verdict::ALL`]'s order.
    pub counts: [usize; 4],
}

impl Score {
    /// The counts of `results`' claims.
    pub fn of(results: &ReproResults) -> Self {
        Score {
            reproduction: results.reproduction(),
            counts: count(results.claims()),
        }
    }
}

/// The scoreboard of `index.md`: claims per paper and verdict, and the total.
pub(crate) fn scoreboard(scores: &[Score]) -> String {
    let mut p = String::from(
        "## Scoreboard\n\nEvery claim of each paper's abstract, results and conclusion, judged on this run by the rule \
stated on its page.\n\n| paper | claims |",
    );
    for v in Verdict::ALL {
        let _ = write!(p, " {v} |");
    }
    p.push_str("\n|---|---:|---:|---:|---:|---:|\n");
    let mut total = [0usize; 4];
    for s in scores {
        let name = s.reproduction.name();
        let _ = write!(
            p,
            "| [{name}]({name}/README.md) | {} |",
            s.counts.iter().sum::<usize>()
        );
        for (i, n) in s.counts.iter().enumerate() {
            total[i] += n;
            let _ = write!(p, " {n} |");
        }
        p.push('\n');
    }
    let _ = write!(p, "| **all** | **{}** |", total.iter().sum::<usize>());
    for n in total {
        let _ = write!(p, " **{n}** |");
    }
    p.push('\n');
    p
}

/// A number as the sensitivity tables print it: whole when it is, else two decimals.
fn num(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// The rows of a sensitivity table (`| group | price | run's value | range | changes |`),
/// one line each ([`iommulab_repro::sensitivity`]).
pub(crate) fn sensitivity_rows(rows: &[SensitivityRow]) -> String {
    let mut p = String::new();
    for row in rows {
        let changes = if row.changes.is_empty() {
            "none: every verdict holds over the range".to_string()
        } else {
            row.changes
                .iter()
                .map(|c| {
                    let other: Vec<String> = c
                        .elsewhere
                        .iter()
                        .map(|(x, v)| format!("{v} at {}", num(*x)))
                        .collect();
                    let span = if c.holds_from == c.holds_to {
                        format!("at {} only", num(c.holds_from))
                    } else {
                        format!("over {}–{}", num(c.holds_from), num(c.holds_to))
                    };
                    format!("`{}` {} {span} ({})", c.claim, c.verdict, other.join(", "))
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        let _ = writeln!(
            p,
            "| {} | `{}` | {} | {}–{} | {} |",
            row.group,
            row.price,
            num(row.default),
            num(row.low),
            num(row.high),
            changes
        );
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_in_a_claim_does_not_break_the_row() {
        assert_eq!(cell("|a − b| ≤ 0.02"), "\\|a − b\\| ≤ 0.02");
    }

    #[test]
    fn scoreboard_sums_rows() {
        let s = scoreboard(&[
            Score {
                reproduction: Reproduction::of::<iommulab_repro::fujita2008::Fujita2008>(),
                counts: [1, 2, 3, 4],
            },
            Score {
                reproduction: Reproduction::of::<iommulab_repro::iosup::Iosup>(),
                counts: [0, 1, 0, 0],
            },
        ]);
        assert!(
            s.contains("| [fujita2008](fujita2008/README.md) | 10 | 1 | 2 | 3 | 4 |"),
            "{s}"
        );
        assert!(
            s.contains("| **all** | **11** | **1** | **3** | **3** | **4** |"),
            "{s}"
        );
    }
}
