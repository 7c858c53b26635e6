//! `--plot FILE.svg`: the figure that carries an experiment, drawn with `plotters`' SVG
//! backend (no system library: the text is SVG `<text>`, laid out by plotters' own
//! estimate, drawn by the viewer's font). Each experiment builds its [`Figure`] from its
//! own measurements; this module only draws: line panels (a measure against a parameter,
//! one line per mode) and bar panels (a measure per category, one bar per mode).

use std::path::Path;

use anyhow::Context as _;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// A figure: panels stacked top to bottom.
pub struct Figure {
    pub title: String,
    pub panels: Vec<Panel>,
}

pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub kind: PanelKind,
    pub series: Vec<Series>,
}

pub enum PanelKind {
    /// Points joined by lines; x is numeric (log scale when `log_x`).
    Lines { log_x: bool },
    /// One group of bars per category; a series' point `(i, y)` is its bar in category `i`.
    Bars { categories: Vec<String> },
}

/// One mode's measurements.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const PANEL_HEIGHT_PX: u32 = 380;
const WIDTH_PX: u32 = 900;

/// Writes `figure` to `path` as SVG.
pub fn write_svg(figure: &Figure, path: &Path) -> anyhow::Result<()> {
    let panels = u32::try_from(figure.panels.len().max(1)).unwrap_or(1);
    let root = SVGBackend::new(path, (WIDTH_PX, 40 + PANEL_HEIGHT_PX * panels)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let root = root
        .titled(&figure.title, ("sans-serif", 22))
        .map_err(draw_error)?;
    let areas = root.split_evenly((figure.panels.len().max(1), 1));
    for (area, panel) in areas.iter().zip(&figure.panels) {
        match &panel.kind {
            PanelKind::Lines { log_x } => lines(area, panel, *log_x)?,
            PanelKind::Bars { categories } => bars(area, panel, categories)?,
        }
    }
    root.present()
        .map_err(draw_error)
        .with_context(|| format!("writing {}", path.display()))
}

fn draw_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the figure: {e:?}")
}

fn y_max(panel: &Panel) -> f64 {
    let m = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .fold(0.0f64, f64::max);
    if m > 0.0 {
        m * 1.15
    } else {
        1.0
    }
}

fn color(i: usize) -> RGBColor {
    // Distinguishable, and readable in grey: blue, orange, green, red, purple.
    const COLORS: [RGBColor; 5] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
    ];
    COLORS[i % COLORS.len()]
}

fn lines(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    panel: &Panel,
    log_x: bool,
) -> anyhow::Result<()> {
    let xs = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0));
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&panel.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(80);
    if log_x {
        let chart = builder
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..y_max(panel))
            .map_err(draw_error)?;
        draw_lines(chart, panel)
    } else {
        let chart = builder
            .build_cartesian_2d(lo..hi, 0f64..y_max(panel))
            .map_err(draw_error)?;
        draw_lines(chart, panel)
    }
}

/// The mesh, one line with its points per series, and the legend.
fn draw_lines<'a, X>(
    mut chart: ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    panel: &Panel,
) -> anyhow::Result<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_labels(8)
        .x_label_formatter(&|x| short(*x))
        .y_label_formatter(&|y| short(*y))
        .x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .draw()
        .map_err(draw_error)?;
    for (i, s) in panel.series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(s.points.clone(), c.stroke_width(2)))
            .map_err(draw_error)?
            .label(&s.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(draw_error)?;
    }
    legend(&mut chart)
}

/// An axis label: `18M`, `2.5k`, `0.12`, `7`.
fn short(v: f64) -> String {
    let a = v.abs();
    let (x, unit) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let mut text = format!("{x:.2}");
    while text.contains('.') && (text.ends_with('0') || text.ends_with('.')) {
        text.pop();
    }
    format!("{text}{unit}")
}

fn legend<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
) -> anyhow::Result<()>
where
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(draw_error)
}

fn bars(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    panel: &Panel,
    categories: &[String],
) -> anyhow::Result<()> {
    let n = categories.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..n as f64, 0f64..y_max(panel))
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2 * n + 1)
        .x_label_formatter(&|x| {
            // Labels at the middle of each group.
            let i = (x - 0.5).round();
            if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 {
                categories.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| short(*y))
        .light_line_style(WHITE)
        .x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .draw()
        .map_err(draw_error)?;
    let m = panel.series.len().max(1) as f64;
    let width = 0.8 / m;
    for (j, s) in panel.series.iter().enumerate() {
        let c = color(j);
        let left = 0.1 + j as f64 * width;
        chart
            .draw_series(s.points.iter().map(|&(i, y)| {
                Rectangle::new([(i + left, 0.0), (i + left + width * 0.92, y)], c.filled())
            }))
            .map_err(draw_error)?
            .label(&s.name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    legend(&mut chart)
}
