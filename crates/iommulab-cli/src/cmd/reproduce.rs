//! `iommulab reproduce`: reruns a paper's experiments (`iommulab::repro`) and writes
//! `OUT/<paper>/` with JSON, CSV, SVG/PNG figures and a markdown page that puts our numbers
//! beside the published ones (`iommulab_report`); `all` also writes `OUT/index.md` and
//! `OUT/index.html` (every reproduction on one self-contained page).

use std::ops::ControlFlow;

use anyhow::{Context, Result};
use iommulab::repro::{ReproOptions, Reproduction};

use crate::args::{Paper, ReproduceArgs};
use crate::progress::Progress;

/// `iommulab reproduce`.
pub fn run(args: &ReproduceArgs, quiet: bool) -> Result<()> {
    let selected: &[Reproduction] = match args.paper {
        Paper::Fujita2008 => &[Reproduction::Fujita2008],
        Paper::Yassour2010 => &[Reproduction::Yassour2010],
        Paper::All => &Reproduction::ALL,
    };
    for &r in selected {
        let bar = Progress::steps(r.name(), quiet);
        let report = |p: &iommulab::repro::Progress<'_>| {
            bar.step(p);
            ControlFlow::Continue(())
        };
        let opts = ReproOptions::new(args.quick).with_progress(&report);
        let results = r.run(&opts).with_context(|| format!("reproducing {r}"))?;
        bar.finish();
        let page = iommulab_report::render(&args.out, &results)?;
        crate::print_stdout(&format!("report: {}\n", page.display()))?;
    }
    if args.paper == Paper::All {
        let index = iommulab_report::write_index(&args.out, selected, args.quick)?;
        crate::print_stdout(&format!("index: {}\n", index.display()))?;
        let html = iommulab_report::index_html_path(&args.out);
        crate::print_stdout(&format!("html: {}\n", html.display()))?;
    }
    Ok(())
}
