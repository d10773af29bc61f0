//! `iommulab reproduce`: reruns a paper's experiments (`iommulab_repro`) and writes
//! `OUT/<paper>/` with JSON, CSV, SVG/PNG figures and a markdown page that puts our numbers
//! beside the published ones (`iommulab_report`); `all` also writes `OUT/index.md` and
//! `OUT/index.html` (every reproduction on one self-contained page).

use anyhow::{Context, Result};
use iommulab_repro::{ReproOptions, Reproduction};
use serde_json::json;

use crate::args::ReproduceArgs;
use crate::progress::ProgressBar;

/// `iommulab reproduce`.
pub fn run(args: &ReproduceArgs, quiet: bool) -> Result<()> {
    // The parser allows only registered names and `all`.
    let selected = Reproduction::select(&args.paper)?;
    let all = args.paper == "all";
    // Lines for people as each report is written; with --json one object at the end.
    let say = |line: String| -> Result<()> {
        if quiet || args.json {
            Ok(())
        } else {
            crate::print_stdout(&line)
        }
    };
    // Every file the reports will write, checked before hours of runs.
    let mut outputs: Vec<std::path::PathBuf> = selected
        .iter()
        .map(|&r| iommulab_report::files(r))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .map(|f| args.out.join(f))
        .collect();
    if all {
        outputs.push(args.out.join("index.md"));
        outputs.push(iommulab_report::index_html_path(&args.out));
    }
    let outputs: Vec<(&str, &std::path::Path)> =
        outputs.iter().map(|p| ("--out", p.as_path())).collect();
    crate::output::prepare_outputs(&outputs, &[])?;
    let mut done = Vec::new();
    let mut scores = Vec::new();
    for &r in &selected {
        let bar = ProgressBar::steps(r.name(), quiet);
        let report = |p: &iommulab::Progress<'_>| bar.show(p);
        let opts = ReproOptions::new(args.quick).with_progress(&report);
        let results = r.run(&opts).with_context(|| format!("reproducing {r}"))?;
        bar.finish();
        let page = iommulab_report::render(&args.out, &results)?;
        scores.push(iommulab_report::Score::of(&results));
        // The paper's scoreboard line: its claims by verdict (the page's claims table).
        say(format!(
            "report: {} ({})\n",
            page.display(),
            iommulab_repro::claims::summary(results.claims())
        ))?;
        if args.json {
            done.push(json!({
                "name": r.name(),
                "title": r.title(),
                "quick": args.quick,
                "report": page.display().to_string(),
                "files": iommulab_report::files(r)?
                    .iter()
                    .map(|f| args.out.join(f).display().to_string())
                    .collect::<Vec<_>>(),
                "results": results,
            }));
        }
    }
    let mut index = serde_json::Value::Null;
    let mut html = serde_json::Value::Null;
    if all {
        let md = iommulab_report::write_index(&args.out, &scores, args.quick)?;
        let page = iommulab_report::index_html_path(&args.out);
        let total = scores.iter().fold([0usize; 4], |mut t, s| {
            for (a, b) in t.iter_mut().zip(s.counts) {
                *a += b;
            }
            t
        });
        say(format!(
            "scoreboard: {} of {} claims reproduced, {} partly, {} not reproduced, {} set by an input\nindex: {}\nhtml: {}\n",
            total[0],
            total.iter().sum::<usize>(),
            total[1],
            total[2],
            total[3],
            md.display(),
            page.display()
        ))?;
        index = md.display().to_string().into();
        html = page.display().to_string().into();
    }
    if args.json {
        let out = json!({ "reproductions": done, "index_md": index, "index_html": html });
        crate::print_stdout(&crate::output::json_text(&out)?)?;
    }
    Ok(())
}
