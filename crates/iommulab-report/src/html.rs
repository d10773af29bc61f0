//! `index.html`: every reproduction on one self-contained page, for a browser.
//!
//! The page is rendered from the reproductions' markdown pages (`OUT/<paper>/README.md`, the
//! files [`crate::render`] just wrote), so the HTML and the markdown cannot say different
//! things: the same tables of ours-vs-paper numbers, the same explanations. On top it adds
//! what a browser can show and markdown cannot: every figure inline, and a list of links to
//! every data file with the command that regenerates it.
//!
//! Self-contained means no network and no other file needed to read it: the style sheet is
//! inline and the figures are `data:` URIs of their SVG files (base64), so the page can be
//! mailed or opened from an archive. Links to the data files are relative to `OUT`.
//!
//! The markdown subset understood is the one the report pages use: `#` headings, paragraphs,
//! `- ` lists with indented continuation lines, pipe tables with an alignment row, fenced
//! code, images, links, `code`, **bold** and *italic*.

use std::fmt::Write as _;
use std::path::Path;

use iommulab_repro::Reproduction;

/// `s` with `&`, `<`, `>` and `"` escaped for HTML text and attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

/// Standard base64 (RFC 4648, with padding), for `data:` URIs.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                o.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                o.push('=');
            }
        }
    }
    o
}

/// Renders markdown of one report page; relative links and images resolve in `dir`
/// (`OUT/<paper>`), which the page links as `prefix` (`<paper>/`).
#[derive(Debug)]
struct Page<'a> {
    dir: &'a Path,
    prefix: &'a str,
    /// Image files the page showed inline (the gallery leaves them out).
    shown: Vec<String>,
}

fn is_relative(url: &str) -> bool {
    !(url.contains("://") || url.starts_with('#') || url.starts_with('/'))
}

impl Page<'_> {
    fn href(&self, url: &str) -> String {
        if is_relative(url) {
            format!("{}{url}", self.prefix)
        } else {
            url.to_string()
        }
    }

    /// An `<img>` of the SVG file `name` in `dir` as a data URI, or a note if it is missing.
    fn figure(&mut self, name: &str, alt: &str) -> String {
        self.shown.push(name.to_string());
        let png = name
            .strip_suffix(".svg")
            .map(|stem| format!("{stem}.png"))
            .filter(|png| self.dir.join(png).is_file());
        match std::fs::read(self.dir.join(name)) {
            Ok(bytes) => {
                let mime = if name.ends_with(".svg") {
                    "image/svg+xml"
                } else {
                    "image/png"
                };
                let mut s = format!(
                    "<figure><img alt=\"{}\" src=\"data:{mime};base64,{}\"><figcaption>{} — <a href=\"{}\">{}</a>",
                    escape(alt),
                    base64(&bytes),
                    escape(alt),
                    escape(&self.href(name)),
                    escape(name)
                );
                if let Some(png) = png {
                    let _ = write!(
                        s,
                        ", <a href=\"{}\">{}</a>",
                        escape(&self.href(&png)),
                        escape(&png)
                    );
                }
                s.push_str("</figcaption></figure>");
                s
            }
            Err(_) => format!(
                "<p class=\"missing\">figure {} is missing</p>",
                escape(name)
            ),
        }
    }

    /// Inline markdown: `code`, images, links, **bold**, *italic*; the rest escaped.
    fn inline(&mut self, s: &str) -> String {
        let mut o = String::new();
        let mut rest = s;
        let mut bold = false;
        let mut italic = false;
        while let Some(c) = rest.chars().next() {
            if c == '`'
                && let Some(end) = rest[1..].find('`')
            {
                let _ = write!(o, "<code>{}</code>", escape(&rest[1..1 + end]));
                rest = &rest[end + 2..];
                continue;
            }
            if let Some((is_image, text, url, len)) = link_at(rest) {
                if is_image {
                    let fig = self.figure(url, text);
                    o.push_str(&fig);
                } else {
                    let inner = self.inline(text);
                    let _ = write!(o, "<a href=\"{}\">{inner}</a>", escape(&self.href(url)));
                }
                rest = &rest[len..];
                continue;
            }
            if rest.starts_with("**") {
                o.push_str(if bold { "</strong>" } else { "<strong>" });
                bold = !bold;
                rest = &rest[2..];
                continue;
            }
            // `*` opens emphasis only before a non-space and closes after one (so `2 * 3`
            // and `× 0.5` stay text).
            if c == '*' {
                let next_ok = rest[1..].chars().next().is_some_and(|n| !n.is_whitespace());
                let prev_ok = o.chars().last().is_some_and(|p| !p.is_whitespace());
                if (!italic && next_ok && rest[1..].contains('*')) || (italic && prev_ok) {
                    o.push_str(if italic { "</em>" } else { "<em>" });
                    italic = !italic;
                    rest = &rest[1..];
                    continue;
                }
            }
            o.push_str(&escape(&c.to_string()));
            rest = &rest[c.len_utf8()..];
        }
        if italic {
            o.push_str("</em>");
        }
        if bold {
            o.push_str("</strong>");
        }
        o
    }

    /// Block markdown to HTML; headings move down `shift` levels (the page's `#` is an
    /// `<h2>` inside the index).
    fn blocks(&mut self, md: &str, shift: usize) -> String {
        let lines: Vec<&str> = md.lines().collect();
        let mut o = String::new();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            let t = line.trim_end();
            if t.is_empty() {
                i += 1;
            } else if t.starts_with("```") {
                let mut code = String::new();
                i += 1;
                while i < lines.len() && !lines[i].starts_with("```") {
                    code.push_str(lines[i]);
                    code.push('\n');
                    i += 1;
                }
                i += 1;
                let _ = writeln!(o, "<pre><code>{}</code></pre>", escape(&code));
            } else if t.starts_with('#') {
                let level = t.chars().take_while(|&c| c == '#').count();
                let text = t[level..].trim();
                let h = (level + shift).min(6);
                let _ = writeln!(o, "<h{h}>{}</h{h}>", self.inline(text));
                i += 1;
            } else if t.starts_with('|') {
                let start = i;
                while i < lines.len() && lines[i].trim_start().starts_with('|') {
                    i += 1;
                }
                o.push_str(&self.table(&lines[start..i]));
            } else if t.starts_with("- ") {
                o.push_str("<ul>\n");
                while i < lines.len() && lines[i].starts_with("- ") {
                    let mut item = lines[i][2..].to_string();
                    i += 1;
                    while i < lines.len()
                        && lines[i].starts_with("  ")
                        && !lines[i].trim().is_empty()
                    {
                        item.push(' ');
                        item.push_str(lines[i].trim());
                        i += 1;
                    }
                    let _ = writeln!(o, "<li>{}</li>", self.inline(&item));
                }
                o.push_str("</ul>\n");
            } else {
                let mut para = String::new();
                while i < lines.len() {
                    let l = lines[i].trim();
                    if l.is_empty()
                        || l.starts_with('#')
                        || l.starts_with('|')
                        || l.starts_with("- ")
                        || l.starts_with("```")
                    {
                        break;
                    }
                    if !para.is_empty() {
                        para.push(' ');
                    }
                    para.push_str(l);
                    i += 1;
                }
                // A paragraph that is one image is a figure, not text.
                let inner = self.inline(&para);
                if inner.starts_with("<figure>") && inner.ends_with("</figure>") {
                    let _ = writeln!(o, "{inner}");
                } else {
                    let _ = writeln!(o, "<p>{inner}</p>");
                }
            }
        }
        o
    }

    fn table(&mut self, rows: &[&str]) -> String {
        let cells = |l: &str| -> Vec<String> {
            let l = l.trim();
            let l = l.strip_prefix('|').unwrap_or(l);
            let l = l.strip_suffix('|').unwrap_or(l);
            l.split('|').map(|c| c.trim().to_string()).collect()
        };
        let is_rule = |l: &str| {
            l.trim().chars().all(|c| matches!(c, '|' | '-' | ':' | ' ')) && l.contains('-')
        };
        let mut o = String::from("<div class=\"table\"><table>\n");
        let (head, body, align): (Vec<String>, &[&str], Vec<&str>) =
            if rows.len() >= 2 && is_rule(rows[1]) {
                let align = cells(rows[1])
                    .iter()
                    .map(|c| if c.ends_with(':') { "right" } else { "left" })
                    .collect();
                (cells(rows[0]), &rows[2..], align)
            } else {
                (Vec::new(), rows, Vec::new())
            };
        let style = |j: usize| match align.get(j) {
            Some(&"right") => " class=\"num\"",
            _ => "",
        };
        if !head.is_empty() {
            o.push_str("<thead><tr>");
            for (j, c) in head.iter().enumerate() {
                let _ = write!(o, "<th{}>{}</th>", style(j), self.inline(c));
            }
            o.push_str("</tr></thead>\n");
        }
        o.push_str("<tbody>\n");
        for r in body {
            o.push_str("<tr>");
            for (j, c) in cells(r).iter().enumerate() {
                let _ = write!(o, "<td{}>{}</td>", style(j), self.inline(c));
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</tbody></table></div>\n");
        o
    }
}

/// A markdown link or image at the start of `s`: (is image, text, url, bytes consumed).
fn link_at(s: &str) -> Option<(bool, &str, &str, usize)> {
    let (is_image, body) = match s.strip_prefix("![") {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('[')?),
    };
    let close = body.find("](")?;
    let text = &body[..close];
    if text.contains('[') {
        return None;
    }
    let after = &body[close + 2..];
    let end = after.find(')')?;
    let url = &after[..end];
    if url.is_empty() || url.contains(' ') {
        return None;
    }
    let consumed = s.len() - after.len() + end + 1;
    Some((is_image, text, url, consumed))
}

const STYLE: &str = "body{font:15px/1.5 system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:0 auto;padding:1em 2em;color:#222}\
h1,h2,h3,h4{line-height:1.2}h2{border-top:3px solid #345;padding-top:.6em;margin-top:2.5em}\
code{background:#f3f3f3;padding:0 .2em;border-radius:3px;font-size:90%}pre{background:#f3f3f3;padding:.6em;overflow:auto}\
.table{overflow-x:auto;margin:1em 0}table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ccc;padding:.2em .5em;vertical-align:top}\
th{background:#eef2f6}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}tr:nth-child(even) td{background:#fafafa}\
figure{margin:1em 0;display:inline-block;max-width:100%}figure img{max-width:100%;height:auto;border:1px solid #ddd}\
figcaption{font-size:13px;color:#555}.gallery figure{width:49%;margin:.3em 0}.cmd{background:#223;color:#eee;padding:.5em .8em;border-radius:4px}\
.cmd code{background:none;color:inherit}.files{columns:3;font-size:13px}.missing{color:#a00}nav li{margin:.2em 0}";

/// The regenerating command of one reproduction.
fn command(r: Reproduction, quick: bool, out: &str) -> String {
    format!(
        "iommulab reproduce {}{} --out {out}",
        r.name(),
        if quick { " --quick" } else { "" }
    )
}

/// The whole `index.html` for `reproductions` rendered under `out`.
pub(crate) fn index_html(
    out: &Path,
    reproductions: &[Reproduction],
    quick: bool,
) -> Result<String, crate::ReportError> {
    let out_arg = out.display().to_string();
    let all = format!(
        "iommulab reproduce all{} --out {out_arg}",
        if quick { " --quick" } else { "" }
    );
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>iommulab reproductions</title><style>{STYLE}</style></head><body>\n\
<h1>iommulab reproductions</h1>\n\
<p>Each section reruns a paper's experiments on iommulab's model and puts our numbers beside the \
published ones, with the mechanisms that explain the differences. Everything below is also in the \
markdown pages and the data files linked from each section{}.</p>\n\
<p class=\"cmd\">Regenerate all: <code>{}</code></p>\n<nav><ul>\n",
        if quick {
            "; this is a <strong>quick</strong> run (fewer repeats, less modeled time)"
        } else {
            ""
        },
        escape(&all)
    );
    for r in reproductions {
        let _ = writeln!(
            h,
            "<li><a href=\"#{}\">{}</a></li>",
            r.name(),
            escape(r.title())
        );
    }
    h.push_str("</ul></nav>\n");
    for &r in reproductions {
        let name = r.name();
        let dir = out.join(name);
        let prefix = format!("{name}/");
        let mut page = Page {
            dir: &dir,
            prefix: &prefix,
            shown: Vec::new(),
        };
        let _ = writeln!(h, "<section id=\"{name}\">");
        let md = match std::fs::read_to_string(dir.join("README.md")) {
            Ok(md) => md,
            Err(_) => {
                let _ = writeln!(
                    h,
                    "<h2>{}</h2><p class=\"missing\">Not rendered yet: run <code>{}</code>.</p></section>",
                    escape(r.title()),
                    escape(&command(r, quick, &out_arg))
                );
                continue;
            }
        };
        // The page's own title first, then the command and files, then its body.
        let (title, body) = match md.split_once('\n') {
            Some((t, b)) if t.starts_with("# ") => (t, b),
            _ => ("", md.as_str()),
        };
        if title.is_empty() {
            let _ = writeln!(h, "<h2>{}</h2>", escape(r.title()));
        } else {
            h.push_str(&page.blocks(title, 1));
        }
        let _ = writeln!(
            h,
            "<p class=\"cmd\">Regenerate: <code>{}</code></p>",
            escape(&command(r, quick, &out_arg))
        );
        let body_html = page.blocks(body, 1);
        let files = crate::files(r)?;
        // By file name: the papers' figure numbers lead their names.
        let mut figures: Vec<&str> = files
            .iter()
            .filter_map(|f| f.strip_prefix(&prefix))
            .filter(|f| f.ends_with(".svg") && !page.shown.iter().any(|s| s == f))
            .collect();
        figures.sort_unstable();
        h.push_str("<details open><summary>Data files</summary><ul class=\"files\">\n");
        for f in &files {
            let _ = writeln!(
                h,
                "<li><a href=\"{}\">{}</a></li>",
                escape(f),
                escape(f.strip_prefix(&prefix).unwrap_or(f))
            );
        }
        h.push_str("</ul></details>\n");
        if !figures.is_empty() {
            h.push_str("<h3>Figures</h3><div class=\"gallery\">\n");
            for f in figures {
                let alt = f.trim_end_matches(".svg").replace('_', " ");
                let fig = page.figure(f, &alt);
                h.push_str(&fig);
                h.push('\n');
            }
            h.push_str("</div>\n");
        }
        h.push_str(&body_html);
        h.push_str("</section>\n");
    }
    let _ = writeln!(
        h,
        "<footer><p>Written by iommulab {}; the markdown index is <a href=\"index.md\">index.md</a>.</p></footer>\n</body></html>",
        env!("CARGO_PKG_VERSION")
    );
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o, "{i}");
        }
    }

    #[test]
    fn markdown_subset_renders() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.svg"), "<svg width=\"2\" height=\"2\"/>").unwrap();
        let mut p = Page {
            dir: dir.path(),
            prefix: "paper/",
            shown: Vec::new(),
        };
        let md = "# Title\n\nText with `a<b`, **bold**, *it*, 2 * 3 and [data](x.csv).\n\n\
![Fig](f.svg)\n\n| a | n |\n|---|---:|\n| x | 1 |\n\n- one\n  more\n- two\n";
        let h = p.blocks(md, 1);
        assert!(h.contains("<h2>Title</h2>"), "{h}");
        assert!(h.contains("<code>a&lt;b</code>"), "{h}");
        assert!(h.contains("<strong>bold</strong>"), "{h}");
        assert!(h.contains("<em>it</em>"), "{h}");
        assert!(h.contains("2 * 3"), "{h}");
        assert!(h.contains("<a href=\"paper/x.csv\">data</a>"), "{h}");
        assert!(
            h.contains("src=\"data:image/svg+xml;base64,") && p.shown == ["f.svg"],
            "{h}"
        );
        assert!(h.contains("<td class=\"num\">1</td>"), "{h}");
        assert!(h.contains("<li>one more</li>"), "{h}");
    }
}
