//! The HTML report in a real browser: `iommulab reproduce all --quick` writes
//! `OUT/index.html`, and headless Chromium (Debian's `chromium` package; `make test`
//! installs it) opens it with the network switched off, takes a screenshot, and a page
//! script reports every image's decoded size, every resource the page loaded and every
//! link. The test checks that every figure decoded (`naturalWidth > 0`), that nothing came
//! from the network, and that every link names a file on disk.
//!
//! Chromium: `$CHROMIUM`, else `chromium`, `chromium-browser`, `google-chrome` on PATH. If
//! none runs, the test prints why and passes, unless `IOMMULAB_REQUIRE_CHROMIUM=1` (set by
//! `make test`) makes it fail.

use std::path::{Path, PathBuf};
use std::process::Command;

fn iommulab() -> assert_cmd::Command {
    assert_cmd::cargo::cargo_bin_cmd!("iommulab")
}

/// A Chromium that runs, or `None` (after checking it is not required).
fn chromium() -> Option<String> {
    let candidates: Vec<String> = match std::env::var("CHROMIUM") {
        Ok(c) if !c.is_empty() => vec![c],
        _ => ["chromium", "chromium-browser", "google-chrome"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
    };
    for c in &candidates {
        if Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(c.clone());
        }
    }
    assert!(
        std::env::var("IOMMULAB_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
        "no Chromium found (tried {candidates:?}); install it (Debian/Ubuntu: apt-get install \
         chromium) or set CHROMIUM=/path/to/chrome"
    );
    eprintln!("skipped: no Chromium found (tried {candidates:?}; `make test` installs it)");
    None
}

/// Headless Chromium with its own profile and no network (every host name fails to
/// resolve), so the page must be self-contained to render.
fn headless(chrome: &str, profile: &Path) -> Command {
    let mut c = Command::new(chrome);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--hide-scrollbars",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--virtual-time-budget=10000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// The page script: after `load`, one `<pre id="probe">` line per image, resource and link.
const PROBE: &str = r#"<script>
window.addEventListener('load', () => {
  const lines = [];
  for (const img of document.images) {
    lines.push(['img', img.naturalWidth, img.naturalHeight, img.complete, img.alt].join('\t'));
  }
  for (const r of performance.getEntriesByType('resource')) {
    lines.push(['resource', r.name.slice(0, 60)].join('\t'));
  }
  for (const a of document.querySelectorAll('a[href]')) {
    lines.push(['link', a.getAttribute('href')].join('\t'));
  }
  lines.push(['title', document.title].join('\t'));
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = lines.join('\n');
  document.body.appendChild(pre);
});
</script>"#;

fn file_url(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// The `<pre id="probe">` lines of a dumped DOM (HTML-unescaped enough for our values).
fn probe_lines(dom: &str) -> Vec<Vec<String>> {
    let start = dom
        .find("<pre id=\"probe\">")
        .unwrap_or_else(|| panic!("no probe output in the DOM: {}", &dom[..dom.len().min(500)]))
        + "<pre id=\"probe\">".len();
    let end = start + dom[start..].find("</pre>").expect("probe end");
    dom[start..end]
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// Width and height from a PNG's IHDR.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    (w, h)
}

#[test]
fn the_html_report_renders_in_chromium_with_every_figure_and_link() {
    let Some(chrome) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let assert = iommulab()
        .args(["reproduce", "all", "--quick", "--out"])
        .arg(&out)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let index = out.join("index.html");
    assert!(
        stdout.contains(&format!("html: {}", index.display())),
        "{stdout}"
    );
    let html = std::fs::read_to_string(&index).unwrap();

    // The screenshot: the page as a reader sees it (top of the page, 1280 px wide).
    let shot = std::env::var_os("IOMMULAB_REPORT_SCREENSHOT")
        .map_or_else(|| tmp.path().join("index.png"), PathBuf::from);
    let profile = tmp.path().join("profile");
    let o = headless(&chrome, &profile)
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1280,2400")
        .arg(file_url(&index))
        .output()
        .unwrap();
    assert!(
        o.status.success() && shot.is_file(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(png_size(&png), (1280, 2400));
    // A blank page compresses to a few KiB; text, tables and a figure do not.
    assert!(png.len() > 50_000, "screenshot only {} bytes", png.len());

    // The probe: the same page with the script appended, beside it so links resolve alike.
    let probed = out.join("index-probe.html");
    std::fs::write(&probed, html.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let o = headless(&chrome, &profile)
        .arg("--dump-dom")
        .arg(file_url(&probed))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines = probe_lines(&String::from_utf8_lossy(&o.stdout));

    let figures: Vec<String> = [
        "fujita2008",
        "yassour2010",
        "benyehuda2007",
        "iosup",
        "expether",
        "peleg2015",
    ]
    .iter()
    .flat_map(|p| {
        std::fs::read_dir(out.join(p))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|f| f.ends_with(".svg"))
            .collect::<Vec<_>>()
    })
    .collect();
    let images: Vec<&Vec<String>> = lines.iter().filter(|l| l[0] == "img").collect();
    assert_eq!(images.len(), figures.len(), "one image per figure file");
    for img in &images {
        let (w, h): (u32, u32) = (img[1].parse().unwrap(), img[2].parse().unwrap());
        assert!(
            w > 0 && h > 0 && img[3] == "true",
            "figure `{}` did not render: {img:?}",
            img[4]
        );
    }
    for r in lines.iter().filter(|l| l[0] == "resource") {
        assert!(
            r[1].starts_with("data:") || r[1].starts_with("file:"),
            "the page loaded {} (it must be self-contained)",
            r[1]
        );
    }
    let links: Vec<&str> = lines
        .iter()
        .filter(|l| l[0] == "link")
        .map(|l| l[1].as_str())
        .collect();
    assert!(links.len() > 20, "{links:?}");
    for href in &links {
        if let Some(anchor) = href.strip_prefix('#') {
            assert!(html.contains(&format!("id=\"{anchor}\"")), "anchor {href}");
            continue;
        }
        assert!(!href.contains("://"), "external link {href}");
        assert!(out.join(href).is_file(), "link {href} names no file");
    }
    for expected in [
        "fujita2008/results.csv",
        "fujita2008/figure4.png",
        "yassour2010/hit_rate.csv",
        "yassour2010/README.md",
    ] {
        assert!(links.contains(&expected), "no link to {expected}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l[0] == "title" && l[1] == "iommulab reproductions")
    );
    // The ours-vs-paper tables and the regenerating commands are on the page.
    for needle in [
        "relative (paper)",
        "Every claim on every stream",
        "iommulab reproduce fujita2008 --quick",
        "iommulab reproduce yassour2010 --quick",
    ] {
        assert!(html.contains(needle), "{needle}");
    }
}
