//! One page per paper: each paper's module implements [`Page`] for its
//! [`Paper`](iommulab_repro::Paper) (the exporter shape: one trait, one implementation per
//! output, one list), and [`PAGES`] is the report's one list of them. `render`, `tables` and
//! `files` find a paper's page by its name; nothing matches over the papers.

use std::path::{Path, PathBuf};

use iommulab_repro::{Paper, ReproResults, Reproduction};

use crate::{ReportError, Table};

/// The page of one paper.
pub(crate) trait Page {
    /// The paper it renders.
    type Paper: Paper;
    /// Writes the paper's folder `dir`; returns the markdown page's path.
    fn render(dir: &Path, r: &<Self::Paper as Paper>::Results) -> Result<PathBuf, ReportError>;
    /// The page's tables: those with a `file` are its CSV files (the claims table is added
    /// for every paper by the caller).
    fn tables(r: &<Self::Paper as Paper>::Results) -> Vec<Table>;
    /// The files [`Page::render`] writes besides `README.md`, relative to `dir`.
    fn files() -> Vec<String>;
}

/// A page, its paper's type erased.
#[derive(Clone, Copy)]
pub(crate) struct PageEntry {
    name: &'static str,
    render: fn(&Path, &ReproResults) -> Result<PathBuf, ReportError>,
    tables: fn(&ReproResults) -> Result<Vec<Table>, ReportError>,
    files: fn() -> Vec<String>,
}

impl PageEntry {
    /// The entry of page `P` (the list's one line per paper).
    pub(crate) const fn of<P: Page>() -> Self {
        PageEntry {
            name: <P::Paper as Paper>::NAME,
            render: render_as::<P>,
            tables: tables_as::<P>,
            files: P::files,
        }
    }

    /// The page of `reproduction`.
    pub(crate) fn find(reproduction: Reproduction) -> Result<&'static PageEntry, ReportError> {
        PAGES
            .iter()
            .find(|p| p.name == reproduction.name())
            .ok_or(ReportError::NoPage {
                reproduction: reproduction.name(),
            })
    }

    pub(crate) fn render(&self, dir: &Path, r: &ReproResults) -> Result<PathBuf, ReportError> {
        (self.render)(dir, r)
    }

    pub(crate) fn tables(&self, r: &ReproResults) -> Result<Vec<Table>, ReportError> {
        (self.tables)(r)
    }

    pub(crate) fn files(&self) -> Vec<String> {
        (self.files)()
    }
}

fn render_as<P: Page>(dir: &Path, r: &ReproResults) -> Result<PathBuf, ReportError> {
    P::render(dir, typed::<P>(r)?)
}

fn tables_as<P: Page>(r: &ReproResults) -> Result<Vec<Table>, ReportError> {
    Ok(P::tables(typed::<P>(r)?))
}

/// `r` as page `P`'s paper's results.
fn typed<P: Page>(r: &ReproResults) -> Result<&<P::Paper as Paper>::Results, ReportError> {
    r.get::<P::Paper>().ok_or(ReportError::NoPage {
        reproduction: r.reproduction().name(),
    })
}

/// `data` files, then each figure stem as SVG and PNG (the order the pages write them).
pub(crate) fn data_and_figures<S: AsRef<str>>(
    data: &[&str],
    figures: impl IntoIterator<Item = S>,
) -> Vec<String> {
    let mut v: Vec<String> = data.iter().map(|f| (*f).to_string()).collect();
    for stem in figures {
        for ext in ["svg", "png"] {
            v.push(format!("{}.{ext}", stem.as_ref()));
        }
    }
    v
}

/// Every paper's page.
pub(crate) static PAGES: &[PageEntry] = &[
    PageEntry::of::<crate::fujita2008::Fujita2008Page>(),
    PageEntry::of::<crate::yassour2010::Yassour2010Page>(),
    PageEntry::of::<crate::benyehuda2007::BenYehuda2007Page>(),
    PageEntry::of::<crate::iosup::IosupPage>(),
    PageEntry::of::<crate::expether::ExpEtherPage>(),
    PageEntry::of::<crate::peleg2015::Peleg2015Page>(),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_paper_has_one_page_and_every_page_a_paper() {
        for r in Reproduction::all() {
            assert_eq!(
                PAGES.iter().filter(|p| p.name == r.name()).count(),
                1,
                "{r}"
            );
        }
        assert_eq!(PAGES.len(), Reproduction::all().len());
    }
}
