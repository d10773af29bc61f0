//! The conventions every command follows: `--version` names the git revision, shell
//! completions, `--json` on every command that prints results (valid JSON on stdout, nothing
//! else), `-q/--quiet` (no informational lines, no progress), and `--help` detailed enough to
//! use a command without the README.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

fn iommulab() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

fn stdout(args: &[&str]) -> String {
    let out = iommulab()
        .args(args)
        .assert()
        .success()
        .get_output()
        .clone();
    assert!(
        out.stderr.is_empty(),
        "{args:?} wrote to stderr (progress must stay off when stderr is not a terminal): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(args: &[&str]) -> Value {
    let text = stdout(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {text}"))
}

fn real_trace() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces/qemu-virtio-6.12.95+deb12-cloud-amd64.txt.zst")
        .display()
        .to_string()
}

#[test]
fn version_names_the_git_revision() {
    let v = stdout(&["--version"]);
    assert!(
        v.starts_with(&format!("iommulab {} (git ", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    let rev = v
        .split("(git ")
        .nth(1)
        .unwrap()
        .trim_end()
        .trim_end_matches(')');
    // A 12-digit commit id (maybe `-dirty`), or `unknown` outside a git checkout.
    let id = rev.trim_end_matches("-dirty");
    assert!(
        id == "unknown" || (id.len() == 12 && id.chars().all(|c| c.is_ascii_hexdigit())),
        "{v}"
    );
    // Subcommands say the same.
    assert_eq!(
        stdout(&["trace", "--version"]).replace("iommulab-trace", "iommulab"),
        v
    );
}

#[test]
fn completions_for_bash_zsh_and_fish_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout(&["completions", shell]);
        for word in [
            "iommulab",
            "reproduce",
            "replay",
            "mrc",
            "stats",
            "quiet",
            "json",
        ] {
            assert!(script.contains(word), "{shell}: no `{word}`");
        }
    }
    iommulab()
        .args(["completions", "tcsh"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("bash"));
}

/// Every command that prints results prints one JSON value with `--json`.
#[test]
fn json_on_every_command_that_prints_results() {
    let dir = TempDir::new().unwrap();
    let d = |f: &str| dir.path().join(f).display().to_string();
    let t = real_trace();

    let b = json(&["bench", "--config", "strict", "--ops", "2000", "--json"]);
    assert_eq!(b["config"], "strict");
    let g = json(&[
        "trace",
        "generate",
        "block",
        "--events",
        "2000",
        "-o",
        &d("b.iot"),
        "--json",
    ]);
    assert!(g["events"].as_u64().unwrap() >= 2000, "{g}");
    let c = json(&["trace", "convert", &d("b.iot"), "-o", &d("b.csv"), "--json"]);
    assert_eq!(c["events"], g["events"]);
    let i = json(&["trace", "import", &t, "-o", &d("q.iot"), "--json"]);
    assert_eq!(i["format"], "ftrace");
    assert_eq!(i["ftrace"]["malformed_skipped"], 0, "{i}");
    let s = json(&["trace", "stats", &d("q.iot"), "--json"]);
    assert_eq!(s["events"], i["events"]);
    let r = json(&["replay", &d("b.iot"), "--json"]);
    assert_eq!(r["config"], "linux-lazy");
    let k = json(&["check", &d("b.iot"), "--json"]);
    assert!(k.is_object(), "{k}");
    std::fs::write(
        dir.path().join("e.toml"),
        format!(
            "[system]\nkind = \"guest\"\nquota = 16\n[workload]\ntrace = {:?}\n",
            d("b.iot")
        ),
    )
    .unwrap();
    let e = json(&["run", &d("e.toml"), "--json"]);
    assert_eq!(e["config"], "guest-on-demand");
    assert!(e["guest"]["maps"].as_u64().unwrap() > 0, "{e}");
    let m = json(&["mrc", &d("b.iot"), "--quotas", "4,16", "--json"]);
    assert_eq!(m["quota"], serde_json::json!([4, 16]));
    let p = json(&[
        "reproduce",
        "fujita2008",
        "--quick",
        "--out",
        &d("results"),
        "--json",
    ]);
    let rep = &p["reproductions"][0];
    assert_eq!(rep["name"], "fujita2008");
    assert!(rep["results"]["results"].is_array(), "{rep}");
    for f in rep["files"].as_array().unwrap() {
        assert!(Path::new(f.as_str().unwrap()).is_file(), "{f}");
    }
    assert!(p["index_html"].is_null(), "one paper writes no index");
}

/// `-q` leaves only results: the commands that only write files print nothing.
#[test]
fn quiet_leaves_only_results() {
    let dir = TempDir::new().unwrap();
    let d = |f: &str| dir.path().join(f).display().to_string();
    assert_eq!(
        stdout(&[
            "-q",
            "trace",
            "generate",
            "block",
            "--events",
            "500",
            "-o",
            &d("b.iot")
        ]),
        ""
    );
    assert_eq!(
        stdout(&[
            "trace",
            "convert",
            &d("b.iot"),
            "-o",
            &d("b.csv"),
            "--quiet"
        ]),
        ""
    );
    assert_eq!(
        stdout(&["-q", "trace", "import", &real_trace(), "-o", &d("q.iot")]),
        ""
    );
    // Results still print.
    assert!(stdout(&["-q", "trace", "stats", &d("b.iot")]).contains("DMA API layer"));
    assert!(!stdout(&["-q", "mrc", &d("b.iot"), "--quotas", "4"]).is_empty());
}

/// Each command's `--help` explains it and shows examples; `trace stats --help` defines
/// every field it prints.
#[test]
fn help_is_enough_to_use_each_command() {
    let top = stdout(&["--help"]);
    for w in ["--json", "--quiet", "Examples", "completions", "reproduce"] {
        assert!(top.contains(w), "--help lacks {w}");
    }
    for cmd in [
        &["bench"][..],
        &["reproduce"],
        &["replay"],
        &["mrc"],
        &["run"],
        &["expether"],
        &["iosup"],
        &["completions"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let h = stdout(&args);
        assert!(h.lines().count() > 15, "{cmd:?} --help is thin:\n{h}");
        assert!(h.contains("Examples") || h.contains("Install"), "{cmd:?}");
    }
    let h = stdout(&["trace", "stats", "--help"]);
    for field in [
        "DMA API layer",
        "IOMMU page-table layer",
        "unmatched unmaps",
        "working set",
        "reuse distance",
        "page maps",
        "never added up",
    ] {
        assert!(h.contains(field), "trace stats --help lacks {field}");
    }
}
