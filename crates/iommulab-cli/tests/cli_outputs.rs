//! Outputs named by the user, on every command that writes one: a device or FIFO is written in
//! place (never replaced by a regular file), a symbolic link keeps pointing where it did and
//! its target gets the content, `-` is standard output, missing folders are created, and an
//! output that cannot be written fails before the run, not after it.
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use predicates::prelude::*;
use tempfile::TempDir;

fn iommulab() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

/// A small bench: one configuration, a few I/Os.
const BENCH: [&str; 6] = ["bench", "-q", "--config", "modern", "--ops", "200"];

fn generate(out: &Path) -> Command {
    let mut c = iommulab();
    c.args([
        "trace",
        "generate",
        "uniform-random",
        "--events",
        "50",
        "-q",
        "-o",
    ])
    .arg(out);
    c
}

fn is_char_device(p: &str) -> bool {
    fs::metadata(p).unwrap().file_type().is_char_device()
}

#[test]
fn dev_null_is_written_in_place_by_every_writer() {
    iommulab()
        .args(BENCH)
        .args(["--out", "/dev/null", "--out", "/dev/null"])
        .assert()
        .success();
    generate(Path::new("/dev/null")).assert().success();
    let dir = TempDir::new().unwrap();
    let exp = dir.path().join("e.toml");
    fs::write(&exp, "[workload]\nios = 100\n").unwrap();
    iommulab()
        .args(["run", "-q", "--out", "/dev/null"])
        .arg(&exp)
        .assert()
        .success();
    assert!(is_char_device("/dev/null"));
    // Nothing was created beside it either.
    assert!(
        !fs::read_dir("/dev").unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".tmp-"))
    );
}

#[test]
fn dev_full_reports_no_space_left() {
    {
        iommulab()
            .args(BENCH)
            .args(["--out", "/dev/full"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains("No space left on device"));
    }
    generate(Path::new("/dev/full"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("No space left on device"));
    assert!(is_char_device("/dev/full"));
}

#[test]
fn a_symlinked_output_keeps_its_link_and_the_target_gets_the_content() {
    let dir = TempDir::new().unwrap();
    for (name, target) in [("out.json", "real.json"), ("t.csv", "real.csv")] {
        let link = dir.path().join(name);
        fs::write(dir.path().join(target), "old").unwrap();
        std::os::unix::fs::symlink(target, &link).unwrap();
        if name.ends_with(".json") {
            iommulab()
                .args(BENCH)
                .arg("--out")
                .arg(&link)
                .assert()
                .success();
        } else {
            generate(&link).assert().success();
        }
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let content = fs::read_to_string(dir.path().join(target)).unwrap();
        assert_ne!(content, "old", "{name}");
        assert!(content.len() > 10, "{name}: {content}");
    }
}

#[test]
fn a_fifo_is_written_in_place() {
    let dir = TempDir::new().unwrap();
    let fifo = dir.path().join("pipe.csv");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
    };
    generate(&fifo)
        .timeout(Duration::from_secs(20))
        .assert()
        .success();
    let text = reader.join().unwrap();
    assert!(text.starts_with("# iommulab trace"), "{text}");
    assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn dash_and_dev_stdout_are_standard_output() {
    // A trace output named without a format extension that is not a regular file is CSV.
    for out in ["-", "/dev/stdout"] {
        iommulab()
            .args([
                "trace",
                "generate",
                "uniform-random",
                "--events",
                "5",
                "-q",
                "-o",
                out,
            ])
            .assert()
            .success()
            .stdout(predicate::str::starts_with("# iommulab trace v1"));
    }
    let out = iommulab()
        .args(BENCH)
        .args(["--out", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"config\": \"modern\""), "{text}");
    // A regular file without a format is still refused, naming the formats.
    let dir = TempDir::new().unwrap();
    generate(&dir.path().join("trace.txt"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("unknown output format"));
}

/// One rule for missing folders: created, by `trace ... -o` and `--out` alike.
#[test]
fn missing_parent_folders_are_created_by_every_writer() {
    let dir = TempDir::new().unwrap();
    let t = dir.path().join("a/b/t.iot");
    generate(&t).assert().success();
    assert!(t.is_file());
    let j = dir.path().join("c/d/r.json");
    iommulab()
        .args(BENCH)
        .arg("--out")
        .arg(&j)
        .assert()
        .success();
    assert!(j.is_file());
}

/// An output that cannot be written fails before the run: this bench would run for many
/// minutes, and the timeout fails the test if the check came after it.
#[test]
fn an_unwritable_output_fails_before_the_run() {
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("file");
    fs::write(&file, "").unwrap();
    for name in ["x", "x.csv"] {
        let flag = "--out";
        iommulab()
            .args([
                "bench",
                "-q",
                "--config",
                "modern",
                "--ops",
                "1000000000",
                flag,
            ])
            .arg(file.join(name))
            .timeout(Duration::from_secs(20))
            .assert()
            .code(1)
            .stderr(
                predicate::str::contains(flag)
                    .and(predicate::str::contains("cannot create folder")),
            );
    }
    iommulab()
        .args([
            "trace",
            "generate",
            "uniform-random",
            "--events",
            "1000000000",
            "-q",
            "-o",
        ])
        .arg(file.join("t.iot"))
        .timeout(Duration::from_secs(20))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot create folder"));
    iommulab()
        .args(["reproduce", "fujita2008", "--quick", "-q", "--out"])
        .arg(&file)
        .timeout(Duration::from_secs(20))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--out"));
    // A folder named as a file output.
    iommulab()
        .args(BENCH)
        .arg("--out")
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains("folder"));
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}
