//! The one shape of a reproduction: a [`Paper`] (its name, its results type, its run and
//! its claims), registered once in [`crate::registry`]; [`Reproduction`] is a registered
//! paper and [`ReproResults`] what one returned, both without naming the paper's type, so
//! the CLI, Python and the report reach every paper through the registry and none of them
//! matches over the papers.

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};

use serde::{Serialize, Serializer};

use crate::claims::Claim;
use crate::{ReproError, ReproOptions};

/// A reproduced paper.
pub trait Paper: 'static {
    /// Everything one run returns (`results.json`): the run's numbers, the published ones
    /// and the judged claims.
    type Results: Serialize + fmt::Debug + Send + Sync + 'static;
    /// The name on the command line, in Python and as the report's folder.
    const NAME: &'static str;
    /// The paper and what is reproduced (the line of `index.md`).
    const TITLE: &'static str;
    /// Reruns the paper's experiments on the model and judges its claims.
    ///
    /// # Errors
    /// A cancelled run, a failed self-check or a model error.
    fn run(opts: &ReproOptions<'_>) -> Result<Self::Results, ReproError>;
    /// The paper's claims, judged on this run.
    fn claims(results: &Self::Results) -> &[Claim];
    /// Whether it was the shorter `quick` run.
    fn quick(results: &Self::Results) -> bool;
}

/// A registered paper, its type erased (copyable, compared by name).
#[derive(Clone, Copy)]
pub struct Reproduction {
    name: &'static str,
    title: &'static str,
    run: fn(&ReproOptions<'_>) -> Result<ReproResults, ReproError>,
}

impl Reproduction {
    /// The entry of paper `P` (the registry's one line per paper).
    pub const fn of<P: Paper>() -> Self {
        Reproduction {
            name: P::NAME,
            title: P::TITLE,
            run: run_erased::<P>,
        }
    }

    /// Every reproduction, in the order `all` runs them (Fujita & Mori first).
    pub fn all() -> &'static [Reproduction] {
        crate::registry::PAPERS
    }

    /// The reproduction called `name`, if there is one.
    pub fn named(name: &str) -> Option<Reproduction> {
        Self::all().iter().copied().find(|r| r.name == name)
    }

    /// The name on the command line, in Python and as the report's folder.
    pub const fn name(self) -> &'static str {
        self.name
    }

    /// The paper and what is reproduced (the line of `index.md`).
    pub const fn title(self) -> &'static str {
        self.title
    }

    /// Whether this is paper `P`.
    pub fn is<P: Paper>(self) -> bool {
        self.name == P::NAME
    }

    /// The reproductions a name selects: one, or every one for `all`.
    ///
    /// # Errors
    /// A name no paper has, as a configuration error listing the names.
    pub fn select(name: &str) -> Result<Vec<Reproduction>, iommulab::experiment::ConfigError> {
        if name == "all" {
            return Ok(Self::all().to_vec());
        }
        Self::named(name).map(|r| vec![r]).ok_or_else(|| {
            let mut names: Vec<&str> = Self::all().iter().map(|r| r.name).collect();
            names.push("all");
            iommulab::experiment::ConfigError::Invalid {
                key: "reproduction".into(),
                value: name.into(),
                expected: format!("one of {}", names.join(", ")),
            }
        })
    }

    /// Runs the reproduction.
    ///
    /// # Errors
    /// As [`Paper::run`].
    pub fn run(self, opts: &ReproOptions<'_>) -> Result<ReproResults, ReproError> {
        (self.run)(opts)
    }
}

fn run_erased<P: Paper>(opts: &ReproOptions<'_>) -> Result<ReproResults, ReproError> {
    Ok(ReproResults {
        reproduction: Reproduction::of::<P>(),
        results: Box::new(Typed::<P>(P::run(opts)?)),
    })
}

impl PartialEq for Reproduction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Reproduction {}

impl Hash for Reproduction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl fmt::Debug for Reproduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl fmt::Display for Reproduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl Serialize for Reproduction {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name)
    }
}

/// What one reproduction returned: its paper's [`Paper::Results`], behind the paper's
/// entry. It serialises as those results do; [`ReproResults::get`] gives them typed.
pub struct ReproResults {
    reproduction: Reproduction,
    results: Box<dyn AnyResults>,
}

impl ReproResults {
    /// Results of paper `P` as a run returned them (for tests and the report's pages).
    pub fn new<P: Paper>(results: P::Results) -> Self {
        ReproResults {
            reproduction: Reproduction::of::<P>(),
            results: Box::new(Typed::<P>(results)),
        }
    }

    /// Which reproduction this is.
    pub fn reproduction(&self) -> Reproduction {
        self.reproduction
    }

    /// The paper's claims, judged on this run.
    pub fn claims(&self) -> &[Claim] {
        self.results.claims()
    }

    /// Whether it was the shorter `quick` run.
    pub fn quick(&self) -> bool {
        self.results.quick()
    }

    /// The results typed, when they are paper `P`'s.
    pub fn get<P: Paper>(&self) -> Option<&P::Results> {
        self.results
            .as_any()
            .downcast_ref::<Typed<P>>()
            .map(|t| &t.0)
    }
}

impl fmt::Debug for ReproResults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.results.fmt(f)
    }
}

impl Serialize for ReproResults {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        erased_serde::serialize(&*self.results, s)
    }
}

/// A paper's results with the paper's type kept for the downcast.
struct Typed<P: Paper>(P::Results);

/// What [`ReproResults`] needs of a paper's results, object-safe.
trait AnyResults: erased_serde::Serialize + fmt::Debug + Send + Sync {
    fn claims(&self) -> &[Claim];
    fn quick(&self) -> bool;
    fn as_any(&self) -> &dyn Any;
}

impl<P: Paper> AnyResults for Typed<P> {
    fn claims(&self) -> &[Claim] {
        P::claims(&self.0)
    }

    fn quick(&self) -> bool {
        P::quick(&self.0)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl<P: Paper> fmt::Debug for Typed<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<P: Paper> Serialize for Typed<P> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}
