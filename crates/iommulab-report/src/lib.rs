//! # iommulab-report
//!
//! Renders the reproductions of [`iommulab::repro`] as report folders: JSON, CSV, SVG/PNG
//! figures (plotters, with a bundled font) and a markdown page per paper, plus
//! `index.md`/`index.html` over them. The CLI (`iommulab reproduce`) and Python
//! (`iommulab.reproduce(..., out=...)`) both call [`render`], so they write the same files.
//! Every file is written atomically (a temporary file renamed into place).
//!
//! ```text
//!  iommulab::repro::<paper>::run ──► ReproResults ──► render(out, …) ──► out/<paper>/README.md, …
//!                                                 └─► tables(…)      ──► CSV / pandas DataFrames
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod benyehuda2007;
mod claims;
mod expether;
mod files;
mod fujita2008;
mod fujita2008_paths;
mod html;
mod iosup;
mod peleg2015;
mod plot;
mod table;
mod yassour2010;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use iommulab::repro::{ReproResults, Reproduction};

pub use claims::Score;
pub use files::{runs_csv, write_atomic, write_json};
pub use table::{Cell, Table};

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A folder could not be created.
    #[error("cannot create folder {}", path.display())]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An output file could not be written (the message names the file and the cause).
    #[error(transparent)]
    Output(#[from] iommulab::output::OutputError),
    /// Results that do not serialise to JSON.
    #[error("cannot serialise {}", path.display())]
    Json {
        /// The file it was for.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
    /// plotters could not draw a figure.
    #[error("drawing a figure: {0}")]
    Plot(String),
}

impl ReportError {
    /// The I/O error underneath, if that is what it is.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            ReportError::CreateDir { source, .. } => Some(source),
            ReportError::Output(e) => Some(&e.error),
            _ => None,
        }
    }
}

/// The path of the HTML report [`write_index`] writes under `out`.
pub fn index_html_path(out: &Path) -> PathBuf {
    out.join("index.html")
}

/// Writes `out/<name>/` for one reproduction's results; returns the markdown page's path.
pub fn render(out: &Path, results: &ReproResults) -> Result<PathBuf, ReportError> {
    let dir = out.join(results.reproduction().name());
    match results {
        ReproResults::Fujita2008(r) => fujita2008::render(&dir, r),
        ReproResults::Yassour2010(r) => yassour2010::render(&dir, r),
        ReproResults::BenYehuda2007(r) => benyehuda2007::render(&dir, r),
        ReproResults::Iosup(r) => iosup::render(&dir, r),
        ReproResults::ExpEther(r) => expether::render(&dir, r),
        ReproResults::Peleg2015(r) => peleg2015::render(&dir, r),
    }
}

/// The reproduction's tables: those with a `file` are its CSV files; the rest are the page's
/// other tables, for Python's DataFrames (`claims` among them: the judged claims).
pub fn tables(results: &ReproResults) -> Vec<Table> {
    let mut v = match results {
        ReproResults::Fujita2008(r) => fujita2008::tables(r),
        ReproResults::Yassour2010(r) => yassour2010::tables(r),
        ReproResults::BenYehuda2007(r) => benyehuda2007::tables(r),
        ReproResults::Iosup(r) => iosup::tables(r),
        ReproResults::ExpEther(r) => expether::tables(r),
        ReproResults::Peleg2015(r) => peleg2015::tables(r),
    };
    v.push(claims::table(results.claims()));
    v
}

/// The files [`render`] writes for `reproduction`, relative to `out`.
pub fn files(reproduction: Reproduction) -> Vec<String> {
    let name = reproduction.name();
    let mut v: Vec<String> = match reproduction {
        Reproduction::Fujita2008 => [
            "results.json",
            "runs.json",
            "runs.csv",
            "results.csv",
            "prices.csv",
            "sweep.csv",
            "figure4.svg",
            "figure4.png",
            "dma_paths.json",
            "dma_paths.csv",
            "figure4_paths.svg",
            "figure4_paths.png",
        ]
        .iter()
        .map(|f| (*f).to_string())
        .collect(),
        Reproduction::Yassour2010 => {
            let mut v = vec![
                "results.json".to_string(),
                "hit_rate.csv".into(),
                "cpu.csv".into(),
                "cpu_sensitivity.csv".into(),
            ];
            for (i, w) in ["netperf-send", "apache-sendfile"].iter().enumerate() {
                for (fig, kind) in [(3, "hit_rate"), (3, "hit_rate_pinned"), (5, "cpu")] {
                    for ext in ["svg", "png"] {
                        v.push(format!("figure{}_{w}_{kind}.{ext}", fig + i));
                    }
                }
            }
            for (i, w) in ["recorded-tcp-send", "recorded-httpd"].iter().enumerate() {
                for (fig, kind) in [(3, "hit_rate"), (5, "cpu")] {
                    for ext in ["svg", "png"] {
                        v.push(format!("figure{}_{w}_{kind}.{ext}", fig + i));
                    }
                }
            }
            v
        }
        Reproduction::BenYehuda2007 => {
            let mut v = vec![
                "results.json".to_string(),
                "runs.csv".into(),
                "dma.csv".into(),
                "options.csv".into(),
                "multicalls.csv".into(),
            ];
            for fig in 2..=7 {
                for ext in ["svg", "png"] {
                    v.push(format!("figure{fig}.{ext}"));
                }
            }
            v
        }
        Reproduction::Iosup => {
            let mut v = vec![
                "results.json".to_string(),
                "runs.csv".into(),
                "groups.csv".into(),
            ];
            for stem in iosup::FIGURES {
                for ext in ["svg", "png"] {
                    v.push(format!("{stem}.{ext}"));
                }
            }
            v
        }
        Reproduction::ExpEther => {
            let mut v = vec![
                "results.json".to_string(),
                "runs.csv".into(),
                "sweep.csv".into(),
            ];
            for stem in expether::FIGURES {
                for ext in ["svg", "png"] {
                    v.push(format!("{stem}.{ext}"));
                }
            }
            v
        }
        Reproduction::Peleg2015 => {
            let mut v = vec!["results.json".to_string(), "runs.csv".into()];
            for stem in peleg2015::FIGURES {
                for ext in ["svg", "png"] {
                    v.push(format!("{stem}.{ext}"));
                }
            }
            v
        }
    };
    v.push("README.md".into());
    v.into_iter().map(|f| format!("{name}/{f}")).collect()
}

/// Writes `out/index.md` — the scoreboard of every reproduction's claims by verdict, then a
/// link to each page — and `out/index.html`, one self-contained page with every
/// reproduction's figures, tables and explanations (rendered from the markdown pages
/// [`render`] wrote, so call it after them); returns the markdown's path. Use
/// [`index_html_path`] for the HTML page's. `scores` holds one [`Score`] per reproduction
/// run, in order.
pub fn write_index(out: &Path, scores: &[Score], quick: bool) -> Result<PathBuf, ReportError> {
    let reproductions: Vec<Reproduction> = scores.iter().map(|s| s.reproduction).collect();
    let cmd = if quick {
        "iommulab reproduce all --quick"
    } else {
        "iommulab reproduce all"
    };
    let mut md = format!(
        "# iommulab reproductions\n\nRegenerate with `{cmd}`. Each page puts our numbers beside the published ones \
and explains the differences from the mechanisms. [index.html](index.html) shows them all on one page, with \
every figure.\n\n{}\n| paper | report | data |\n|---|---|---|\n",
        claims::scoreboard(scores)
    );
    for r in &reproductions {
        let (name, title) = (r.name(), r.title());
        let _ = writeln!(
            md,
            "| {title} | [{name}/README.md]({name}/README.md) | [{name}/results.json]({name}/results.json) |"
        );
    }
    let _ = writeln!(md, "\nCommand: `{cmd}`.");
    let html = html::index_html(out, &reproductions, quick);
    write_atomic(&out.join("index.html"), html.as_bytes())?;
    let index = out.join("index.md");
    write_atomic(&index, md.as_bytes())?;
    Ok(index)
}
