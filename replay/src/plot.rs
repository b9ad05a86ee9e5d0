//! Line charts as SVG files (`plotters`' SVG backend: no font files, text is laid out by
//! plotters' own estimate): one coloured line per series, with a legend.

use std::path::Path;

use plotters::prelude::*;

use crate::error::ReplayError;

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Its name in the legend.
    pub name: String,
    /// Its points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// The range of `values` with a margin, never empty.
fn range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return 0.0..1.0;
    }
    if hi - lo < 1e-9 {
        return (lo - 0.5)..(hi + 0.5);
    }
    lo..hi
}

/// Writes a line chart of `series` to `path` (an SVG file): `title` above, the axes labelled
/// `x_label` and `y_label`, one coloured line per series and a legend of their names. The y
/// axis starts at 0 when every value is ≥ 0.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), ReplayError> {
    draw(path, title, x_label, y_label, series)
        .map_err(|message| ReplayError::Plot { path: path.to_path_buf(), message })
}

fn draw(path: &Path, title: &str, x_label: &str, y_label: &str, series: &[Series]) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let xs = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let mut ys = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    if ys.start >= 0.0 {
        ys.start = 0.0;
    }
    ys.end += (ys.end - ys.start) * 0.05;
    let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(xs, ys)
        .map_err(|x| e(&x))?;
    chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(|x| e(&x))?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    if series.iter().any(|s| !s.name.is_empty()) {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_a_line_and_a_legend_entry_per_series() {
        let dir = std::env::temp_dir().join(format!("volcano-replay-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.svg");
        let series = vec![
            Series { name: "alpha".into(), points: vec![(0.0, 1.0), (1.0, 2.0), (2.0, 1.5)] },
            Series { name: "beta".into(), points: vec![(0.0, 0.5), (2.0, 0.7)] },
        ];
        line_chart(&path, "A title", "x", "y", &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
        for text in ["A title", "alpha", "beta"] {
            assert!(svg.contains(text), "the chart names {text}");
        }
        assert!(svg.matches("<polyline").count() >= 2, "a line per series");
        std::fs::remove_dir_all(&dir).ok();
    }
}
