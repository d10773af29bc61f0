//! What runs (`[workload]`): a built-in generator or a trace, told apart by their keys.

use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::trace::TraceFormat;
use crate::workload::{PseudoScsiConfig, WorkloadConfig};

/// What runs: a built-in generator, or a trace replayed open-loop.
///
/// In TOML/JSON: a table with `trace` is a [`TraceSpec`]; one with `kind` is a
/// [`WorkloadConfig`]; one with neither is the pseudo driver's parameters (the schema before
/// generators had kinds, kept so every existing config still reads).
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadSpec {
    /// A built-in generator.
    Generator(WorkloadConfig),
    /// A trace file.
    Trace(TraceSpec),
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec::Generator(WorkloadConfig::default())
    }
}

/// A trace as an experiment's workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// The trace file (native, CSV or Linux ftrace text; `.gz`/`.zst`).
    pub trace: PathBuf,
    /// Its format (`auto` detects it).
    #[serde(default)]
    pub format: TraceFormat,
    /// Skip malformed ftrace lines instead of failing.
    #[serde(default)]
    pub lenient: bool,
}

impl Serialize for WorkloadSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            WorkloadSpec::Generator(w) => w.serialize(s),
            WorkloadSpec::Trace(t) => t.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for WorkloadSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let v = toml::Value::deserialize(d)?;
        let Some(t) = v.as_table() else {
            return Err(D::Error::custom(format!(
                "expected a table (generator parameters, `kind = ...` or `trace = ...`), found {}",
                v.type_str()
            )));
        };
        let r = if t.contains_key("trace") {
            TraceSpec::deserialize(v).map(WorkloadSpec::Trace)
        } else if t.contains_key("kind") {
            WorkloadConfig::deserialize(v).map(WorkloadSpec::Generator)
        } else {
            PseudoScsiConfig::deserialize(v)
                .map(|c| WorkloadSpec::Generator(WorkloadConfig::PseudoScsi(c)))
        };
        r.map_err(|e| D::Error::custom(e.message()))
    }
}
