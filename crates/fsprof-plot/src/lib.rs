//! fsprof's figures: latency histograms (count and total delay per log2
//! bucket), timelines over a profile's intervals, overlaid comparisons and
//! latency against file offset (`fsprof discover`),
//! as deterministic SVG, PNG (rasterized in pure Rust) and one
//! self-contained HTML report.

pub mod axis;
pub mod blockwait;
pub mod histchart;
pub mod html;
pub mod linechart;
pub mod marks;
pub mod offsets;
mod png;
pub mod svg;
pub mod timeline;

use fsprof_core::{OpStats, Profile};
use fsprof_report::ReportError;

pub use histchart::{Kind, PeakMark};
pub use html::{CompareRow, HtmlOptions, PeakFinder};
pub use png::svg_to_png;

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error(transparent)]
    Select(#[from] ReportError),
    #[error("op {op:?} is in several layers ({layers}); choose one with --layer")]
    AmbiguousOp { op: String, layers: String },
    #[error("the profile has no intervals, so there is no timeline to plot; record one with `fsprof run --interval 1s ...`")]
    NoIntervals,
    #[error("cannot render the PNG: {0}")]
    Png(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotKind {
    Count,
    Delay,
    Timeline,
}

#[derive(Clone, Debug)]
pub struct PlotRequest {
    pub op: String,
    pub layer: Option<String>,
    pub kind: PlotKind,
    pub log_y: bool,
}

/// Finds the op a plot is about: by name, in the given layer or in the only
/// layer that has it.
pub fn find_op<'a>(
    p: &'a Profile,
    op: &str,
    layer: Option<&str>,
) -> Result<(&'a str, &'a OpStats), PlotError> {
    let sel = fsprof_report::Selection {
        layers: layer.map(|l| vec![l.to_string()]).unwrap_or_default(),
        ops: vec![op.to_string()],
    };
    // Reuses the report's checks so unknown names get the same message.
    fsprof_report::Summary::build(p, &sel)?;
    let found: Vec<(&str, &OpStats)> = p
        .layers
        .iter()
        .filter(|l| layer.is_none_or(|n| l.name == n))
        .filter_map(|l| l.op(op).map(|o| (l.name.as_str(), o)))
        .collect();
    match found.as_slice() {
        [one] => Ok(*one),
        _ => Err(PlotError::AmbiguousOp {
            op: op.to_string(),
            layers: found.iter().map(|(l, _)| *l).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// One figure as SVG, for papers and slides.
pub fn plot_svg(
    p: &Profile,
    req: &PlotRequest,
    peaks: Option<PeakFinder>,
) -> Result<String, PlotError> {
    let (layer, op) = find_op(p, &req.op, req.layer.as_deref())?;
    let res = p.resolution();
    match req.kind {
        PlotKind::Timeline => {
            if p.intervals.is_empty() {
                return Err(PlotError::NoIntervals);
            }
            Ok(timeline::heatmap(
                &format!(
                    "{layer}/{}: {} over time",
                    op.name,
                    fsprof_core::layer::Unit::of(layer).quantity()
                ),
                res,
                &p.intervals,
                layer,
                &op.name,
            ))
        }
        PlotKind::Count | PlotKind::Delay => {
            let unit = fsprof_core::layer::Unit::of(layer);
            let (kind, what) = match (req.kind == PlotKind::Count, unit) {
                (true, fsprof_core::layer::Unit::Bytes) => (Kind::Count, "calls per size bucket"),
                (true, _) => (Kind::Count, "calls per latency bucket"),
                (false, fsprof_core::layer::Unit::Bytes) => (Kind::Delay, "total bytes per bucket"),
                (false, _) => (Kind::Delay, "total latency per bucket"),
            };
            Ok(histchart::render(&histchart::HistogramChart {
                title: format!("{layer}/{}: {what}", op.name),
                res,
                unit,
                kind,
                series: vec![histchart::Series {
                    label: op.name.clone(),
                    hist: &op.histogram,
                }],
                log_y: req.log_y,
                peaks: peaks.map(|f| f(layer, op, res)).unwrap_or_default(),
            }))
        }
    }
}
