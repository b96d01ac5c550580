//! Latency histograms as bar charts (FSprof Figs 4–9): calls per log2
//! bucket, or total delay per bucket; several profiles overlaid side by
//! side (FSprof Fig 14); peaks marked.

use fsprof_core::layer::Unit as LayerUnit;
use fsprof_core::{Histogram, Resolution};

use crate::axis::{bucket_mean_ns, format_value, BucketAxis, Unit, ValueAxis};
use crate::svg::{Anchor, Margins, Svg};

/// Colours of overlaid series, distinguishable in print and for the common
/// colour-vision deficiencies (Okabe–Ito).
pub const SERIES_COLOURS: [&str; 4] = ["#0072b2", "#e69f00", "#009e73", "#cc79a7"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Calls per bucket.
    Count,
    /// Calls × the bucket's mean latency: where the time went.
    Delay,
}

/// A peak to mark: buckets `lo..=hi`, highest at `mode`.
#[derive(Clone, Debug, PartialEq)]
pub struct PeakMark {
    pub lo: i32,
    pub hi: i32,
    pub mode: i32,
    pub label: String,
}

#[derive(Clone, Debug)]
pub struct Series<'a> {
    pub label: String,
    pub hist: &'a Histogram,
}

#[derive(Clone, Debug)]
pub struct HistogramChart<'a> {
    pub title: String,
    pub res: Resolution,
    /// What the op's buckets hold (the layer's unit): latencies, or bytes.
    pub unit: LayerUnit,
    pub kind: Kind,
    pub series: Vec<Series<'a>>,
    pub log_y: bool,
    /// Marked on the first series.
    pub peaks: Vec<PeakMark>,
}

/// The figure's size and the margins around its plot area.
const FRAME: Margins = Margins {
    width: 640.0,
    height: 280.0,
    left: 66.0,
    right: 16.0,
    top: 40.0,
    bottom: 46.0,
};

fn value(h: &Histogram, res: Resolution, kind: Kind, bucket: Option<i32>) -> f64 {
    match (bucket, kind) {
        (None, Kind::Count) => h.zero as f64,
        (None, Kind::Delay) => 0.0,
        (Some(i), Kind::Count) => h.get(i) as f64,
        (Some(i), Kind::Delay) => h.get(i) as f64 * bucket_mean_ns(res, i),
    }
}

pub fn render(c: &HistogramChart) -> String {
    let class = match c.kind {
        Kind::Count => "chart hist count",
        Kind::Delay => "chart hist delay",
    };
    let mut svg = Svg::new(FRAME.width, FRAME.height, class);
    svg.text(FRAME.left, 18.0, Anchor::Start, 13.0, "#111111", &c.title);
    let f = Frame::new(c);
    f.grid(&mut svg);
    f.peak_bands(&mut svg, c);
    f.bars(&mut svg, c);
    f.peak_markers(&mut svg, c);
    f.axes(&mut svg, c);
    legend(&mut svg, c);
    svg.finish()
}

/// The plot area, its axes and the values of every series per slot.
struct Frame {
    ax: BucketAxis,
    /// The bucket of each slot; `None` is the 0 ns slot.
    buckets: Vec<Option<i32>>,
    /// Per series, per slot.
    values: Vec<Vec<f64>>,
    unit: Unit,
    vy: ValueAxis,
    pw: f64,
    ph: f64,
    base: f64,
    slot_w: f64,
}

impl Frame {
    fn new(c: &HistogramChart) -> Frame {
        let nonempty: Vec<&Histogram> = c
            .series
            .iter()
            .map(|s| s.hist)
            .filter(|h| !h.counts.is_empty())
            .collect();
        let lo = nonempty.iter().map(|h| h.offset).min().unwrap_or(0);
        let hi = nonempty
            .iter()
            .map(|h| h.offset + h.counts.len() as i32 - 1)
            .max()
            .unwrap_or(0);
        let zero_slot = c.kind == Kind::Count && c.series.iter().any(|s| s.hist.zero > 0);
        let mut ax = BucketAxis::new(c.res, zero_slot, lo, hi);
        ax.unit = c.unit;
        let buckets: Vec<Option<i32>> = (0..ax.slots())
            .map(|s| {
                if zero_slot && s == 0 {
                    None
                } else {
                    Some(ax.lo + s as i32 - i32::from(zero_slot))
                }
            })
            .collect();
        let unit = match (c.kind, c.unit) {
            (Kind::Count, _) => Unit::Count,
            (Kind::Delay, LayerUnit::Ns) => Unit::Nanos,
            (Kind::Delay, LayerUnit::Bytes) => Unit::Bytes,
        };
        let values: Vec<Vec<f64>> = c
            .series
            .iter()
            .map(|s| {
                buckets
                    .iter()
                    .map(|&b| value(s.hist, c.res, c.kind, b))
                    .collect()
            })
            .collect();
        let vy = value_axis(c, &values, unit);
        let (pw, ph) = (
            FRAME.width - FRAME.left - FRAME.right,
            FRAME.height - FRAME.top - FRAME.bottom,
        );
        let slot_w = pw / ax.slots() as f64;
        Frame {
            ax,
            buckets,
            values,
            unit,
            vy,
            pw,
            ph,
            base: FRAME.top + ph,
            slot_w,
        }
    }

    fn xs(&self, slot: usize) -> f64 {
        FRAME.left + slot as f64 * self.slot_w
    }

    fn ys(&self, v: f64) -> f64 {
        self.base - self.vy.frac(v) * self.ph
    }

    /// Grid and value labels.
    fn grid(&self, svg: &mut Svg) {
        for &t in &self.vy.ticks {
            let y = self.ys(t);
            svg.line(FRAME.left, y, FRAME.left + self.pw, y, "#e6e6e6", 1.0);
            svg.y_tick_label(FRAME.left, y, &format_value(t, self.unit));
        }
    }

    /// Peak bands sit under the bars; alternating tints tell adjacent
    /// peaks apart.
    fn peak_bands(&self, svg: &mut Svg, c: &HistogramChart) {
        let ax = &self.ax;
        for (k, p) in c.peaks.iter().enumerate() {
            if p.hi < ax.lo || p.lo > ax.hi {
                continue;
            }
            let (a, b) = (ax.slot(p.lo.max(ax.lo)), ax.slot(p.hi.min(ax.hi)) + 1);
            let tint = if k % 2 == 0 { "#fff4d6" } else { "#e6f0fa" };
            svg.rect(
                self.xs(a),
                FRAME.top,
                self.xs(b) - self.xs(a),
                self.ph,
                tint,
                None,
            );
        }
    }

    fn bars(&self, svg: &mut Svg, c: &HistogramChart) {
        let n = c.series.len().max(1) as f64;
        let bar_w = (self.slot_w - 2.0).max(1.0) / n;
        for (k, s) in c.series.iter().enumerate() {
            let colour = SERIES_COLOURS[k % SERIES_COLOURS.len()];
            for (slot, (&b, &v)) in self.buckets.iter().zip(&self.values[k]).enumerate() {
                if v <= 0.0 || (self.vy.log && v < self.vy.lo) {
                    continue;
                }
                let range = match b {
                    None if c.unit == LayerUnit::Bytes => "0 B".to_string(),
                    None => "0ns (below the clock's resolution)".to_string(),
                    Some(i) => self.ax.describe(i),
                };
                let what = match c.kind {
                    Kind::Count => format!("{} calls", format_value(v, Unit::Count)),
                    Kind::Delay => format!("{} {}", c.unit.format(v), c.unit.total_phrase()),
                };
                let tip = if c.series.len() > 1 {
                    format!("{}: {range}: {what}", s.label)
                } else {
                    format!("{range}: {what}")
                };
                let x = self.xs(slot) + 1.0 + k as f64 * bar_w;
                let y = self.ys(v);
                svg.rect(x, y, bar_w, self.base - y, colour, Some(&tip));
            }
        }
    }

    /// Peak markers above the mode bar.
    fn peak_markers(&self, svg: &mut Svg, c: &HistogramChart) {
        let ax = &self.ax;
        for (n, p) in c.peaks.iter().enumerate() {
            if p.mode < ax.lo || p.mode > ax.hi || c.series.is_empty() {
                continue;
            }
            let v = value(c.series[0].hist, c.res, c.kind, Some(p.mode));
            let cx = self.xs(ax.slot(p.mode)) + self.slot_w / 2.0;
            let y = self.ys(v).min(self.base) - 4.0;
            svg.polygon(
                &[(cx - 5.0, y - 8.0), (cx + 5.0, y - 8.0), (cx, y)],
                "#d55e00",
            );
            let label = if p.label.is_empty() {
                format!("peak {}", n + 1)
            } else {
                p.label.clone()
            };
            // Keep the label inside the plot: a peak at either end would push
            // half of it past the edge (~6px per character at this size).
            let half = 3.0 * label.chars().count() as f64;
            let lx = cx.clamp(
                FRAME.left + half,
                (FRAME.left + self.pw - half).max(FRAME.left + half),
            );
            svg.text(
                lx,
                (y - 11.0).max(FRAME.top - 2.0),
                Anchor::Middle,
                10.0,
                "#d55e00",
                &label,
            );
        }
    }

    /// Axes, latency labels and axis titles.
    fn axes(&self, svg: &mut Svg, c: &HistogramChart) {
        let (pw, base) = (self.pw, self.base);
        svg.line(FRAME.left, base, FRAME.left + pw, base, "#333333", 1.0);
        svg.line(FRAME.left, FRAME.top, FRAME.left, base, "#333333", 1.0);
        for (slot, label) in self.ax.labels() {
            let x = self.xs(slot);
            svg.line(x, base, x, base + 4.0, "#333333", 1.0);
            // The rightmost label would spill over the edge if centred.
            let anchor = if x > FRAME.width - FRAME.right - 20.0 {
                Anchor::End
            } else {
                Anchor::Middle
            };
            svg.text(x, base + 16.0, anchor, 10.0, "#444444", &label);
        }
        let xtitle = format!(
            "{} (log2 buckets, {} per 2x)",
            c.unit.quantity(),
            c.res.get()
        );
        svg.text(
            FRAME.left + pw / 2.0,
            FRAME.height - 8.0,
            Anchor::Middle,
            11.0,
            "#333333",
            &xtitle,
        );
        let ytitle = match (c.kind, c.log_y) {
            (Kind::Count, false) => "calls",
            (Kind::Count, true) => "calls (log)",
            (Kind::Delay, false) if c.unit == LayerUnit::Bytes => "total bytes",
            (Kind::Delay, true) if c.unit == LayerUnit::Bytes => "total bytes (log)",
            (Kind::Delay, false) => "total latency",
            (Kind::Delay, true) => "total latency (log)",
        };
        svg.vtext(14.0, FRAME.top + self.ph / 2.0, 11.0, ytitle);
    }
}

/// The value axis: up to the tallest bar, with room above it for a peak's
/// marker and label.
fn value_axis(c: &HistogramChart, values: &[Vec<f64>], unit: Unit) -> ValueAxis {
    let max = values.iter().flatten().copied().fold(0.0, f64::max);
    let min_pos = values
        .iter()
        .flatten()
        .copied()
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let headroom = match (c.peaks.is_empty(), c.log_y) {
        (true, _) => 1.0,
        (false, false) => 1.25,
        (false, true) => 4.0,
    };
    // Calls are whole: no 0.2-call grid lines for a histogram of one call.
    let max = if unit == Unit::Count {
        max.max(5.0)
    } else {
        max
    };
    ValueAxis::new(
        max * headroom,
        if min_pos.is_finite() { min_pos } else { 1.0 },
        c.log_y,
    )
}

/// Which colour is which series, top right, when there are several.
fn legend(svg: &mut Svg, c: &HistogramChart) {
    if c.series.len() < 2 {
        return;
    }
    let mut x = FRAME.width - FRAME.right;
    for (k, s) in c.series.iter().enumerate().rev() {
        let w = 14.0 + 6.5 * s.label.chars().count() as f64;
        x -= w + 10.0;
        svg.rect(
            x,
            26.0,
            10.0,
            10.0,
            SERIES_COLOURS[k % SERIES_COLOURS.len()],
            None,
        );
        svg.text(x + 14.0, 35.0, Anchor::Start, 10.0, "#333333", &s.label);
    }
}
