//! `trace stats` of every committed Linux trace (`traces/*.txt.zst`) gives exactly what the
//! first, hash-map-based implementation gave: `tests/data/stats/NAME.json` is its `--json`
//! output (`iommulab trace stats traces/NAME.txt.zst --json`, written before the faster
//! counting), so a change of representation cannot change one number.

use std::path::Path;

use iommulab_trace::{TraceFormat, open, stats};

fn check(name: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let trace = root.join("../../traces").join(format!("{name}.txt.zst"));
    let golden = root.join("tests/data/stats").join(format!("{name}.json"));
    let mut src = open(&trace, TraceFormat::Auto, false)
        .unwrap_or_else(|e| panic!("open {}: {e}", trace.display()));
    let s = stats(&mut *src).unwrap_or_else(|e| panic!("stats of {}: {e}", trace.display()));
    // As the CLI prints it: pretty JSON and a newline.
    let got = serde_json::to_string_pretty(&s).unwrap() + "\n";
    let want = std::fs::read_to_string(&golden)
        .unwrap_or_else(|e| panic!("read {}: {e}", golden.display()));
    assert!(
        got == want,
        "{name}: stats differ from {}:\n{got}",
        golden.display()
    );
}

#[test]
fn fio() {
    check("fio-6.12.95+deb12-amd64");
}

#[test]
fn lazy() {
    check("lazy-6.12.95+deb12-amd64");
}

#[test]
fn probe() {
    check("probe-6.12.95+deb12-amd64");
}

#[test]
fn qemu_virtio() {
    check("qemu-virtio-6.12.95+deb12-cloud-amd64");
}

#[test]
fn yassour_httpd() {
    check("yassour-httpd-6.12.95+deb12-amd64");
}

#[test]
fn yassour_tcp() {
    check("yassour-tcp-6.12.95+deb12-amd64");
}
