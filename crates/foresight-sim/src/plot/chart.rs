//! The drawing of every figure: panels, axes, bars, lines and legends, with the rules that
//! make them fit for a paper. A legend sits in a strip under its panel, never over data; no
//! axis runs past what its quantity can reach (utilization stops at 100 %); tick labels carry
//! no needless decimals and log axes read as powers of ten; a figure's time axes share one
//! unit.

use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

use super::PlotError;

pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
pub(crate) type Drawn = Result<(), String>;

/// A panel's size, pixels.
pub(crate) const PANEL: (u32, u32) = (640, 420);
pub(crate) const FONT: &str = "sans-serif";
/// Height of one row of a legend strip, pixels.
const LEGEND_ROW: u32 = 20;

pub(crate) fn color(i: usize) -> RGBColor {
    // Colour-blind-safe (Okabe–Ito).
    const C: [RGBColor; 7] = [
        RGBColor(0, 114, 178),
        RGBColor(213, 94, 0),
        RGBColor(0, 158, 115),
        RGBColor(204, 121, 167),
        RGBColor(230, 159, 0),
        RGBColor(86, 180, 233),
        RGBColor(0, 0, 0),
    ];
    C[i % C.len()]
}

/// A tick label: integers without a decimal point, other values with at most two decimals
/// (trailing zeros dropped), and large values short (`25k`, `1.5M`), so that labels of a
/// crowded axis do not run into each other.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    let short = |x: f64, unit: &str| format!("{}{unit}", decimals(x));
    if a >= 1e9 {
        short(v / 1e9, "G")
    } else if a >= 1e6 {
        short(v / 1e6, "M")
    } else if a >= 1e4 {
        short(v / 1e3, "k")
    } else {
        decimals(v)
    }
}

/// `v` with at most two decimals, trailing zeros (and a trailing point) dropped.
fn decimals(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// A log axis's label: powers of ten as `10ⁿ` from 10⁴ up (the only ticks such an axis
/// needs), anything else as [`tick`].
pub fn log_tick(v: f64) -> String {
    let e = v.log10().round();
    if e >= 4.0 && (v / 10f64.powf(e) - 1.0).abs() < 1e-9 {
        const SUP: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
        let digits: String = (e as u32)
            .to_string()
            .chars()
            .map(|d| SUP[d.to_digit(10).unwrap_or(0) as usize])
            .collect();
        format!("10{digits}")
    } else {
        tick(v)
    }
}

/// How a legend entry is drawn: a line (series over a continuous axis) or a box (bars).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mark {
    Line,
    Box,
}

/// Splits `area` into the panel proper and a strip under it holding the legend of
/// `entries` (name, colour index), laid out left to right and wrapped, and draws the legend
/// there. Returns the panel proper (the whole area when there are no entries).
pub(crate) fn with_legend<'a>(
    area: &Area<'a>,
    entries: &[String],
    mark: Mark,
) -> Result<Area<'a>, String> {
    if entries.is_empty() {
        return Ok(area.clone());
    }
    let (w, h) = area.dim_in_pixel();
    // Each entry's place, laid out once: (left edge, top edge).
    let mut places = Vec::with_capacity(entries.len());
    let (mut x, mut y) = (12i32, 2i32);
    for e in entries {
        let width = 36 + 7 * e.chars().count() as i32;
        if x + width > w as i32 && x > 12 {
            x = 12;
            y += LEGEND_ROW as i32;
        }
        places.push((x, y));
        x += width;
    }
    let strip = (y + LEGEND_ROW as i32 + 2) as u32;
    let (panel, legend) = area.split_vertically(h.saturating_sub(strip));
    for (i, (name, &(x, y))) in entries.iter().zip(&places).enumerate() {
        let c = color(i);
        let mid = y + LEGEND_ROW as i32 / 2;
        match mark {
            Mark::Line => legend.draw(&PathElement::new(
                vec![(x, mid), (x + 20, mid)],
                c.stroke_width(2),
            )),
            Mark::Box => legend.draw(&Rectangle::new(
                [(x + 4, mid - 6), (x + 16, mid + 6)],
                c.filled(),
            )),
        }
        .map_err(|e| e.to_string())?;
        legend
            .draw(&Text::new(
                name.clone(),
                (x + 26, mid - 7),
                (FONT, 13).into_font(),
            ))
            .map_err(|e| e.to_string())?;
    }
    Ok(panel)
}

/// A figure of `panels` panels side by side under one title.
pub(crate) fn figure(
    path: &Path,
    title: &str,
    panels: usize,
    draw: impl FnMut(usize, &Area<'_>) -> Drawn,
) -> Result<(), PlotError> {
    figure_sized(path, title, panels, PANEL, draw)
}

/// [`figure`] with panels of `panel` pixels.
pub(crate) fn figure_sized(
    path: &Path,
    title: &str,
    panels: usize,
    panel: (u32, u32),
    mut draw: impl FnMut(usize, &Area<'_>) -> Drawn,
) -> Result<(), PlotError> {
    let err = |message: String| PlotError {
        path: path.display().to_string(),
        message,
    };
    let panels = panels.max(1);
    let size = (panel.0 * panels as u32, panel.1 + 40);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let body = root
        .titled(title, (FONT, 22))
        .map_err(|e| err(e.to_string()))?;
    for (k, area) in body.split_evenly((1, panels)).iter().enumerate() {
        draw(k, area).map_err(err)?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// Lines over a linear x axis from 0 to `xmax` (shared by the panels of a figure); the y
/// axis from 0 to the data's top, or to `ymax` when the quantity has a ceiling (a share, a
/// percentage).
pub(crate) fn line_chart(
    area: &Area<'_>,
    title: &str,
    (x, y): (&str, &str),
    (xmax, ymax): (f64, Option<f64>),
    lines: &[(String, Vec<(f64, f64)>)],
) -> Drawn {
    let names: Vec<String> = lines.iter().map(|(n, _)| n.clone()).collect();
    let area = with_legend(area, &names, Mark::Line)?;
    let pts = lines.iter().flat_map(|(_, p)| p.iter());
    let ymax = ymax.unwrap_or_else(|| pts.map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.05);
    let mut chart = ChartBuilder::on(&area)
        .caption(title, (FONT, 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(x)
        .y_desc(y)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (_, p)) in lines.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(p.iter().copied(), color(i).stroke_width(2)))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Cumulative shares over a log x axis of seconds.
pub(crate) fn cdf_chart(
    area: &Area<'_>,
    title: &str,
    lines: &[(String, Vec<(f64, f64)>)],
) -> Drawn {
    let names: Vec<String> = lines.iter().map(|(n, _)| n.clone()).collect();
    let area = with_legend(area, &names, Mark::Line)?;
    let xmax = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.0))
        .fold(10.0, f64::max);
    let mut chart = ChartBuilder::on(&area)
        .caption(title, (FONT, 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d((1.0..xmax * 1.5).log_scale(), 0.0..1.0)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("wait (s, log scale; no wait drawn at 1 s)")
        .y_desc("share of jobs")
        .x_label_formatter(&|v| log_tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (_, p)) in lines.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(
                p.iter().map(|&(w, f)| (w.max(1.0), f)),
                color(i).stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Grouped bars: one group per label, one bar per series in each.
pub(crate) fn bar_chart(
    area: &Area<'_>,
    title: &str,
    (x, y): (&str, &str),
    labels: &[String],
    bars: &[(String, Vec<f64>)],
) -> Drawn {
    let names: Vec<String> = bars.iter().map(|(n, _)| n.clone()).collect();
    let area = with_legend(area, &names, Mark::Box)?;
    let n = labels.len().max(1);
    let ymax = bars
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.05;
    let rotate = labels.iter().map(|l| l.chars().count()).sum::<usize>() * 7 > PANEL.0 as usize;
    let label_area = if rotate {
        12 + 7 * labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as u32
    } else {
        40
    };
    let mut chart = ChartBuilder::on(&area)
        .caption(title, (FONT, 16))
        .margin(12)
        .x_label_area_size(label_area)
        .y_label_area_size(56)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..ymax)
        .map_err(|e| e.to_string())?;
    let style = if rotate {
        (FONT, 12).into_font().transform(FontTransform::Rotate90)
    } else {
        (FONT, 12).into_font()
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_style(style)
        .x_label_formatter(&|v| {
            let k = v.round();
            if (v - k).abs() < 1e-6 && k >= 0.0 {
                labels.get(k as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| tick(*v))
        .x_desc(if rotate { "" } else { x })
        .y_desc(y)
        .draw()
        .map_err(|e| e.to_string())?;
    let width = 0.8 / bars.len().max(1) as f64;
    for (i, (_, v)) in bars.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(v.iter().enumerate().map(|(k, &h)| {
                let left = k as f64 - 0.4 + i as f64 * width;
                Rectangle::new([(left, 0.0), (left + width, h)], c.filled())
            }))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The x axis of [`hbar_chart`]: a log scale (bars start at 1, values below 1 drawn at 1),
/// or a linear one from 0, capped at `max` when the quantity has a ceiling.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Scale {
    Log,
    Linear { max: Option<f64> },
}

/// Horizontal grouped bars: one group per label (top to bottom), one bar per series.
pub(crate) fn hbar_chart(
    area: &Area<'_>,
    title: &str,
    labels: &[String],
    label_width: u32,
    bars: &[(String, Vec<f64>)],
    scale: Scale,
) -> Drawn {
    let names: Vec<String> = bars.iter().map(|(n, _)| n.clone()).collect();
    let area = with_legend(area, &names, Mark::Box)?;
    let n = labels.len().max(1);
    let xmax = bars
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(1.0, f64::max);
    let label = |v: &f64| {
        let k = v.round();
        if (v - k).abs() < 1e-6 && k >= 0.0 {
            labels.get(n - 1 - k as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let height = 0.8 / bars.len().max(1) as f64;
    // Group k is drawn at y = n - 1 - k, so that the first run is on top.
    macro_rules! draw {
        ($x:expr, $x0:expr, $fmt:expr) => {{
            let mut chart = ChartBuilder::on(&area)
                .caption(title, (FONT, 16))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(label_width)
                .build_cartesian_2d($x, -0.5..n as f64 - 0.5)
                .map_err(|e| e.to_string())?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(n)
                .y_label_formatter(&label)
                .x_label_formatter(&$fmt)
                .x_desc(title)
                .draw()
                .map_err(|e| e.to_string())?;
            for (i, (_, v)) in bars.iter().enumerate() {
                let c = color(i);
                chart
                    .draw_series(v.iter().enumerate().map(|(k, &w)| {
                        let top = (n - 1 - k) as f64 + 0.4 - i as f64 * height;
                        Rectangle::new([($x0, top), (w.max($x0), top - height)], c.filled())
                    }))
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        }};
    }
    match scale {
        Scale::Log => draw!((1.0..xmax * 1.5).log_scale(), 1.0, |v: &f64| log_tick(*v)),
        Scale::Linear { max } => draw!(0.0..max.unwrap_or(xmax * 1.05), 0.0, |v: &f64| tick(*v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_carry_no_needless_decimals() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(100.0), "100");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(0.126), "0.13");
        assert_eq!(tick(-0.001), "0");
        assert_eq!(tick(9999.0), "9999");
        assert_eq!(tick(25_000.0), "25k");
        assert_eq!(tick(1_500_000.0), "1.5M");
        assert_eq!(tick(3e9), "3G");
    }

    #[test]
    fn log_axes_read_as_powers_of_ten() {
        assert_eq!(log_tick(10.0), "10");
        assert_eq!(log_tick(1000.0), "1000");
        assert_eq!(log_tick(1e7), "10⁷");
        assert_eq!(log_tick(1e10), "10¹⁰");
        assert_eq!(log_tick(2e7), "20M");
    }
}
