//! Report figures drawn in Rust (plotters: SVG and PNG), so a reproduction needs no Python
//! plotting stack. One drawing function per figure kind; SVG and PNG come from the same code.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use image::ImageEncoder;

use crate::ReportError;
use crate::files::write_atomic;

type Result<T> = std::result::Result<T, ReportError>;

/// A plotters error as the crate's (its error types are generic over the backend).
fn plot_err(e: impl std::fmt::Debug) -> ReportError {
    ReportError::Plot(format!("{e:?}"))
}

static FONT: Once = Once::new();

/// DejaVu Sans, shipped with this crate (assets/DejaVuSans.LICENSE), so PNG text renders on a
/// machine without fonts.
fn register_font() {
    FONT.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../assets/DejaVuSans.ttf");
        // A failure here only loses PNG text; SVG text never needs the font file.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, bytes);
    });
}

/// One group of bars: ours, and the published value if there is one.
#[derive(Debug, Clone)]
pub struct BarGroup {
    /// Category label (the configuration).
    pub label: String,
    /// Our value.
    pub ours: f64,
    /// Our spread (standard deviation over repeats), drawn as an error bar.
    pub ours_err: f64,
    /// The paper's value.
    pub paper: Option<f64>,
}

const W: u32 = 900;
const H: u32 = 520;
const OURS: RGBColor = RGBColor(31, 119, 180);
const PAPER: RGBColor = RGBColor(255, 127, 14);

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    y_label: &str,
    groups: &[BarGroup],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(plot_err)?;
    let y_max = groups
        .iter()
        .flat_map(|g| [g.ours + g.ours_err, g.paper.unwrap_or(0.0)])
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let n = groups.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n as f64, 0.0..y_max)
        .map_err(plot_err)?;
    let labels: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor();
            if (x - i - 0.5).abs() < 0.01 {
                labels
                    .iter()
                    .zip(0..)
                    .find(|(_, k)| f64::from(*k) == i)
                    .map(|(l, _)| l.clone())
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_label)
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(plot_err)?;
    let has_paper = groups.iter().any(|g| g.paper.is_some());
    let (w, off_ours, off_paper) = if has_paper {
        (0.35, 0.12, 0.5)
    } else {
        (0.6, 0.2, 0.0)
    };
    chart
        .draw_series(groups.iter().enumerate().map(|(i, g)| {
            let x0 = i as f64 + off_ours;
            Rectangle::new([(x0, 0.0), (x0 + w, g.ours)], OURS.filled())
        }))
        .map_err(plot_err)?
        .label("iommulab")
        .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], OURS.filled()));
    chart
        .draw_series(
            groups
                .iter()
                .enumerate()
                .filter(|(_, g)| g.ours_err > 0.0)
                .map(|(i, g)| {
                    let x = i as f64 + off_ours + w / 2.0;
                    PathElement::new(
                        vec![(x, g.ours - g.ours_err), (x, g.ours + g.ours_err)],
                        BLACK.stroke_width(2),
                    )
                }),
        )
        .map_err(plot_err)?;
    chart
        .draw_series(groups.iter().enumerate().map(|(i, g)| {
            let x = i as f64 + off_ours + w / 2.0;
            Text::new(
                format!("{:.2}", g.ours),
                (x - 0.12, g.ours + y_max * 0.03),
                ("sans-serif", 14),
            )
        }))
        .map_err(plot_err)?;
    if has_paper {
        chart
            .draw_series(groups.iter().enumerate().filter_map(|(i, g)| {
                g.paper.map(|p| {
                    let x0 = i as f64 + off_paper;
                    Rectangle::new([(x0, 0.0), (x0 + w, p)], PAPER.filled())
                })
            }))
            .map_err(plot_err)?
            .label("paper")
            .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], PAPER.filled()));
        chart
            .draw_series(groups.iter().enumerate().filter_map(|(i, g)| {
                g.paper.map(|p| {
                    let x = i as f64 + off_paper + w / 2.0;
                    Text::new(
                        format!("{p:.2}"),
                        (x - 0.12, p + y_max * 0.03),
                        ("sans-serif", 14),
                    )
                })
            }))
            .map_err(plot_err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// Writes a grouped bar chart as `stem.svg` and `stem.png` in `dir`.
pub fn bar_chart(
    dir: &Path,
    stem: &str,
    title: &str,
    y_label: &str,
    groups: &[BarGroup],
) -> Result<()> {
    register_font();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        draw(root, title, y_label, groups)?;
    }
    write_atomic(&dir.join(format!("{stem}.svg")), svg.as_bytes())?;
    write_png(&dir.join(format!("{stem}.png")), |root| {
        draw(root, title, y_label, groups)
    })
}

/// Draws a PNG into memory and writes it through [`write_atomic`] like every other output.
/// The encoder is the one plotters' bitmap backend saves with (image's PNG encoder with its
/// defaults), so the bytes are those a file backend would write.
fn write_png(
    png: &Path,
    draw: impl FnOnce(DrawingArea<BitMapBackend<'_>, Shift>) -> Result<()>,
) -> Result<()> {
    let mut rgb = vec![0u8; W as usize * H as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (W, H)).into_drawing_area();
        draw(root)?;
    }
    let mut bytes = Vec::new();
    image::codecs::png::PngEncoder::new(&mut bytes)
        .write_image(&rgb, W, H, image::ColorType::Rgb8)
        .map_err(plot_err)?;
    write_atomic(png, &bytes)
}

/// One line of a line chart.
#[derive(Debug, Clone)]
pub struct LineSeries {
    /// Legend label.
    pub label: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn draw_lines<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[LineSeries],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(plot_err)?;
    let pts = || series.iter().flat_map(|s| s.points.iter().copied());
    let x_max = pts().map(|p| p.0).fold(0.0f64, f64::max).max(1e-9);
    let y_max = pts().map(|p| p.1).fold(0.0f64, f64::max).max(1e-9) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(plot_err)?;
    for (i, s) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(plotters::series::LineSeries::new(
                s.points.iter().copied(),
                c.stroke_width(2),
            ))
            .map_err(plot_err)?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3)));
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(plot_err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// Writes a line chart (one line per series) as `stem.svg` and `stem.png` in `dir`.
pub fn line_chart(
    dir: &Path,
    stem: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[LineSeries],
) -> Result<()> {
    register_font();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        draw_lines(root, title, x_label, y_label, series)?;
    }
    write_atomic(&dir.join(format!("{stem}.svg")), svg.as_bytes())?;
    write_png(&dir.join(format!("{stem}.png")), |root| {
        draw_lines(root, title, x_label, y_label, series)
    })
}
