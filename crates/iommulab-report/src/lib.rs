//! # iommulab-report
//!
//! Renders the reproductions of [`iommulab_repro`] as report folders: JSON, CSV, SVG/PNG
//! figures (plotters, with a bundled font) and a markdown page per paper, plus
//! `index.md`/`index.html` over them. The CLI (`iommulab reproduce`) and Python
//! (`iommulab.reproduce(..., out=...)`) both call [`render`], so they write the same files.
//! Every file is written atomically (a temporary file renamed into place).
//!
//! ```text
//!  iommulab_repro::<paper>::run ──► ReproResults ──► render(out, …) ──► out/<paper>/README.md, …
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
mod page;
mod peleg2015;
mod plot;
mod table;
mod yassour2010;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use iommulab_repro::{ReproResults, Reproduction};

use page::PageEntry;

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
    /// No page renders this reproduction (a paper registered without its page).
    #[error("no report page for reproduction {reproduction}")]
    NoPage {
        /// The reproduction's name.
        reproduction: &'static str,
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
    let r = results.reproduction();
    PageEntry::find(r)?.render(&out.join(r.name()), results)
}

/// The reproduction's tables: those with a `file` are its CSV files; the rest are the page's
/// other tables, for Python's DataFrames (`claims` among them: the judged claims).
pub fn tables(results: &ReproResults) -> Result<Vec<Table>, ReportError> {
    let mut v = PageEntry::find(results.reproduction())?.tables(results)?;
    v.push(claims::table(results.claims()));
    Ok(v)
}

/// The files [`render`] writes for `reproduction`, relative to `out`.
pub fn files(reproduction: Reproduction) -> Result<Vec<String>, ReportError> {
    let name = reproduction.name();
    let mut v = PageEntry::find(reproduction)?.files();
    v.push("README.md".into());
    Ok(v.into_iter().map(|f| format!("{name}/{f}")).collect())
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
    let html = html::index_html(out, &reproductions, quick)?;
    write_atomic(&out.join("index.html"), html.as_bytes())?;
    let index = out.join("index.md");
    write_atomic(&index, md.as_bytes())?;
    Ok(index)
}
