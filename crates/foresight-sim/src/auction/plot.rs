//! The sweep's figure: mean response per priority level and dispatcher participation
//! against α, each point with its 95 % confidence interval.

use super::sweep::SweepReport;
use crate::plot::{color, figure, tick, with_legend, Area, Drawn, Mark, PlotError, FONT};
use plotters::prelude::*;
use std::path::Path;

/// One line of a panel: its name and its points (α, mean, half-width of the interval).
type Line = (String, Vec<(f64, f64, f64)>);

/// Writes the two-panel SVG figure of `report` to `path`.
pub fn write_alpha_figure(path: &Path, report: &SweepReport) -> Result<(), PlotError> {
    let levels = report.rows.first().map_or(0, |r| r.response.len());
    let response: Vec<Line> = (0..levels)
        .rev()
        .map(|p| {
            let pts = report
                .rows
                .iter()
                .map(|r| (r.alpha, r.response[p].mean, r.response[p].half_width))
                .filter(|(_, m, _)| m.is_finite())
                .collect();
            (format!("priority {p}"), pts)
        })
        .collect();
    let pct = |e: &super::Estimate| (100.0 * e.mean, 100.0 * e.half_width);
    let share: Vec<Line> = vec![
        (
            "every auction".into(),
            report
                .rows
                .iter()
                .map(|r| (r.alpha, pct(&r.participation).0, pct(&r.participation).1))
                .collect(),
        ),
        (
            "auctions that sold".into(),
            report
                .rows
                .iter()
                .map(|r| {
                    let (m, h) = pct(&r.participation_sold);
                    (r.alpha, m, h)
                })
                .collect(),
        ),
    ];
    figure(
        path,
        "English auction: duration α (mean runtimes)",
        2,
        |k, area| {
            if k == 0 {
                chart(
                    area,
                    "mean response per priority",
                    "mean response (mean runtimes)",
                    &response,
                )
            } else {
                chart(
                    area,
                    "participation per auction",
                    "dispatchers bidding (%)",
                    &share,
                )
            }
        },
    )
}

fn chart(area: &Area<'_>, title: &str, y: &str, lines: &[Line]) -> Drawn {
    let names: Vec<String> = lines.iter().map(|(n, _)| n.clone()).collect();
    let area = with_legend(area, &names, Mark::Line)?;
    let pts = lines.iter().flat_map(|(_, p)| p.iter());
    let xmax = pts.clone().map(|p| p.0).fold(0.0, f64::max) * 1.05 + 1e-9;
    let ymax = pts
        .map(|p| if p.2.is_finite() { p.1 + p.2 } else { p.1 })
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        * 1.1
        + 1e-9;
    let mut c = ChartBuilder::on(&area)
        .caption(title, (FONT, 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        .map_err(|e| e.to_string())?;
    c.configure_mesh()
        .x_desc("α")
        .y_desc(y)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (_, p)) in lines.iter().enumerate() {
        let col = color(i);
        c.draw_series(LineSeries::new(
            p.iter().map(|q| (q.0, q.1)),
            col.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?;
        // Error bars: the interval as a vertical segment with a dot at the mean.
        c.draw_series(
            p.iter().filter(|q| q.2.is_finite()).map(|&(x, m, h)| {
                PathElement::new(vec![(x, m - h), (x, m + h)], col.stroke_width(1))
            }),
        )
        .map_err(|e| e.to_string())?;
        c.draw_series(
            p.iter()
                .map(|&(x, m, _)| Circle::new((x, m), 3, col.filled())),
        )
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}
