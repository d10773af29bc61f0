//! An ExpEther run (S4.4's timing model, [`crate::pcie::timing::ExpEtherRun`]) as users
//! give it: read by [`crate::experiment::run_file::load_with_sets`] (a plain `--set` NAME
//! goes into `[params]`), run here with a parameter out of range as a `ConfigError`
//! naming its key.

use crate::Error;
use crate::pcie::timing::{ExpEtherReport, ExpEtherRun};

/// Runs `run`; a parameter out of range is a [`crate::experiment::ConfigError`] naming
/// its key.
pub fn run(run: &ExpEtherRun) -> Result<ExpEtherReport, Error> {
    Ok(run.run()?)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::experiment::ConfigError;
    use crate::experiment::run_file::load_with_sets;

    /// What the CLI and Python read: a plain NAME goes into `[params]`.
    fn load_run(
        path: Option<&Path>,
        text: Option<&str>,
        sets: &[String],
    ) -> Result<ExpEtherRun, ConfigError> {
        load_with_sets(path, text, sets, Some("params"))
    }
    use crate::pcie::timing::Direction;

    #[test]
    fn a_file_and_settings_make_one_run() {
        let r = load_run(
            Some(Path::new("nic.toml")),
            Some("direction = \"send\"\nstreams = [1, 2]\n[params]\nswitch_ns = 800\n"),
            &["outstanding_reads=16".into(), " bridge_ns = 300.5 ".into()],
        )
        .unwrap();
        assert_eq!(r.direction, Direction::Send);
        assert_eq!(r.streams, [1, 2]);
        assert_eq!(r.params.outstanding_reads, 16);
        assert!((r.params.switch_ns - 800.0).abs() < 1e-9);
        assert!((r.params.bridge_ns - 300.5).abs() < 1e-9);
        let j = load_run(
            Some(Path::new("nic.JSON")),
            Some(r#"{"qos": true, "params": {"paths": 1}}"#),
            &[],
        )
        .unwrap();
        assert!(j.qos);
        assert_eq!(j.params.paths, 1);
        assert_eq!(load_run(None, None, &[]).unwrap(), ExpEtherRun::default());
    }

    #[test]
    fn bad_keys_and_values_are_named() {
        let e = load_run(None, None, &["outstanding_read=4".into()]).unwrap_err();
        assert!(e.to_string().contains("outstanding_read"), "{e}");
        let e = load_run(None, None, &["outstanding_reads=many".into()]).unwrap_err();
        assert!(e.to_string().contains("params.outstanding_reads"), "{e}");
        let e = load_run(None, None, &["16".into()]).unwrap_err();
        assert!(e.to_string().contains("NAME=VALUE"), "{e}");
        let e = load_run(None, Some("params = 3"), &["paths=1".into()]).unwrap_err();
        assert!(e.to_string().contains("params"), "{e}");
        let e = load_run(None, Some("direction = \"sideways\""), &[]).unwrap_err();
        assert!(e.to_string().contains("direction"), "{e}");
    }

    /// A parameter the model refuses is the user's, named by its key in the run's schema.
    #[test]
    fn out_of_range_parameters_are_config_errors() {
        let mut r = ExpEtherRun::default();
        r.params.outstanding_reads = 300;
        let e = run(&r).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e:?}");
        assert!(e.to_string().contains("`params.outstanding_reads`"), "{e}");
        r = ExpEtherRun {
            streams: vec![1; 17],
            ..ExpEtherRun::default()
        };
        assert!(run(&r).unwrap_err().to_string().contains("`streams`"));
    }
}
