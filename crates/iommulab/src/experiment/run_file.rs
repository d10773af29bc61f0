//! A run described by a file's text and `NAME=VALUE` settings, as the CLI's run files with
//! `--set` and Python's dicts give it (`iommulab expether`, `iommulab iosup`): the file is
//! TOML, or JSON by its name; each setting is written into the document before the schema
//! reads it, so one error path names a bad key or value wherever it came from.

use std::path::Path;

use crate::experiment::config::ConfigError;

/// A value of `T`'s schema from a file's text (TOML, or JSON when `path` ends in `.json`;
/// `None`: an empty document) and `NAME=VALUE` settings: a dotted NAME is a path of tables
/// from the top, a plain one goes into `default_table` (or the top without one). Syntax
/// errors name the file's line; the schema's name the key's path.
pub fn load_with_sets<T: serde::de::DeserializeOwned>(
    path: Option<&Path>,
    text: Option<&str>,
    sets: &[String],
    default_table: Option<&str>,
) -> Result<T, ConfigError> {
    use serde_json::{Map, Value};
    let json = path.is_some_and(|p| {
        p.extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    });
    let mut doc: Value = match text {
        None => Value::Object(Map::new()),
        Some(t) if json => {
            serde_json::from_str(t).map_err(|e| ConfigError::Parse(e.to_string()))?
        }
        Some(t) => {
            let table = t
                .parse::<toml::Table>()
                .map_err(|e| ConfigError::Parse(e.to_string()))?;
            serde_json::to_value(table).map_err(|e| ConfigError::Parse(e.to_string()))?
        }
    };
    for s in sets {
        let (name, raw) = s.split_once('=').ok_or_else(|| ConfigError::Invalid {
            key: "--set".into(),
            value: s.clone(),
            expected:
                "NAME=VALUE (e.g. outstanding_reads=16, or a dotted path such as churn.minutes=5)"
                    .into(),
        })?;
        // A number, boolean or array as TOML reads it; anything else as a string, which
        // the schema then refuses by name.
        let value = format!("v = {}", raw.trim())
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .and_then(|v| serde_json::to_value(v).ok())
            .unwrap_or_else(|| Value::String(raw.trim().into()));
        let name = name.trim();
        let mut keys: Vec<&str> = name.split('.').collect();
        if keys.len() == 1
            && let Some(t) = default_table
        {
            keys.insert(0, t);
        }
        let Some((last, tables)) = keys.split_last() else {
            continue;
        };
        let mut at = &mut doc;
        let mut walked = String::new();
        for k in tables {
            if !walked.is_empty() {
                walked.push('.');
            }
            walked.push_str(k);
            let Value::Object(map) = at else {
                return Err(not_a_table(&walked, at));
            };
            at = map
                .entry((*k).to_string())
                .or_insert_with(|| Value::Object(Map::new()));
        }
        let Value::Object(map) = at else {
            return Err(not_a_table(&walked, at));
        };
        map.insert((*last).to_string(), value);
    }
    serde_path_to_error::deserialize(doc).map_err(crate::experiment::config::key_path_error)
}

fn not_a_table(key: &str, v: &serde_json::Value) -> ConfigError {
    ConfigError::Invalid {
        key: if key.is_empty() {
            "the document".into()
        } else {
            key.into()
        },
        value: v.to_string(),
        expected: "a table".into(),
    }
}
