//! Charts over elapsed time, from a profile's intervals: the latency
//! distribution of one op per interval as a heat map (FSprof Fig 10 seen
//! from above), and the total latency per interval (FSprof Figs 1/2).

use fsprof_core::units::format_ns;
use std::borrow::Cow;

use fsprof_core::layer::Unit as LayerUnit;
use fsprof_core::{Interval, Layer, OpStats, Resolution};

use crate::axis::{format_value, BucketAxis, Unit, ValueAxis};
use crate::histchart::SERIES_COLOURS;
use crate::svg::{Anchor, Margins, Svg};

/// The figure's size and the margins around its plot area.
const FRAME: Margins = Margins {
    width: 640.0,
    height: 300.0,
    left: 66.0,
    right: 80.0,
    top: 40.0,
    bottom: 46.0,
};

/// More columns than this cannot be told apart at this width, and each
/// costs every op a row of SVG elements: long runs are binned.
pub const MAX_COLUMNS: usize = 300;

/// Merges runs of consecutive intervals so at most `max` remain.
pub fn coarsen(intervals: &[Interval], max: usize) -> Cow<'_, [Interval]> {
    if intervals.len() <= max {
        return Cow::Borrowed(intervals);
    }
    let per = intervals.len().div_ceil(max);
    Cow::Owned(
        intervals
            .chunks(per)
            .map(|chunk| {
                let mut layers: Vec<Layer> = Vec::new();
                for iv in chunk {
                    for l in &iv.layers {
                        match layers.iter_mut().find(|m| m.name == l.name) {
                            Some(m) => m.merge(l),
                            None => layers.push(l.clone()),
                        }
                    }
                }
                Interval {
                    start_ns: chunk[0].start_ns,
                    end_ns: chunk[chunk.len() - 1].end_ns,
                    layers,
                }
            })
            .collect(),
    )
}

fn op_in<'a>(iv: &'a Interval, layer: &str, op: &str) -> Option<&'a OpStats> {
    iv.layers
        .iter()
        .find(|l| l.name == layer)
        .and_then(|l| l.op(op))
}

/// Perceptually ordered colours from few to many calls (viridis stops).
const RAMP: [(u8, u8, u8); 6] = [
    (68, 1, 84),
    (65, 68, 135),
    (42, 120, 142),
    (34, 168, 132),
    (122, 209, 81),
    (253, 231, 37),
];

fn ramp(t: f64) -> String {
    let t = t.clamp(0.0, 1.0) * (RAMP.len() - 1) as f64;
    let k = (t.floor() as usize).min(RAMP.len() - 2);
    let f = t - k as f64;
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    let (a, b) = (RAMP[k], RAMP[k + 1]);
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// Maps elapsed time to x, so a short last interval draws narrow.
struct TimeScale {
    x0: f64,
    w: f64,
    end: f64,
}

impl TimeScale {
    fn new(intervals: &[Interval], x0: f64, w: f64) -> Self {
        let end = intervals
            .iter()
            .map(|iv| iv.end_ns)
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        TimeScale { x0, w, end }
    }

    fn x(&self, ns: u64) -> f64 {
        self.x0 + ns as f64 / self.end * self.w
    }

    /// Left edge and width of an interval's column.
    fn span(&self, iv: &Interval) -> (f64, f64) {
        let (a, b) = (self.x(iv.start_ns), self.x(iv.end_ns));
        (a, (b - a).max(0.5))
    }
}

fn time_axis(svg: &mut Svg, intervals: &[Interval], ts: &TimeScale, base: f64) {
    let n = intervals.len();
    let step = n.div_ceil(8).max(1);
    for k in (0..n).step_by(step) {
        let x = ts.x(intervals[k].start_ns);
        svg.line(x, base, x, base + 4.0, "#333333", 1.0);
        let label = match intervals[k].start_ns {
            0 => "0".into(),
            ns => format_ns(ns as f64),
        };
        svg.text(x, base + 16.0, Anchor::Middle, 10.0, "#444444", &label);
    }
    let (x0, w) = (ts.x0, ts.w);
    svg.text(
        x0 + w / 2.0,
        FRAME.height - 8.0,
        Anchor::Middle,
        11.0,
        "#333333",
        "elapsed time (interval start)",
    );
}

/// Interval × latency bucket, colour = calls (log scale). `None` when the
/// op never appears in any interval.
pub fn heatmap(
    title: &str,
    res: Resolution,
    intervals: &[Interval],
    layer: &str,
    op: &str,
) -> String {
    let intervals = &*coarsen(intervals, MAX_COLUMNS);
    let mut svg = Svg::new(FRAME.width, FRAME.height, "chart timeline heatmap");
    svg.text(FRAME.left, 18.0, Anchor::Start, 13.0, "#111111", title);
    let ops: Vec<Option<&OpStats>> = intervals.iter().map(|iv| op_in(iv, layer, op)).collect();
    let present = ops
        .iter()
        .flatten()
        .filter(|o| !o.histogram.counts.is_empty());
    let lo = present
        .clone()
        .map(|o| o.histogram.offset)
        .min()
        .unwrap_or(0);
    let hi = present
        .map(|o| o.histogram.offset + o.histogram.counts.len() as i32 - 1)
        .max()
        .unwrap_or(0);
    let mut ax = BucketAxis::new(res, false, lo, hi);
    ax.unit = LayerUnit::of(layer);
    let max = ops
        .iter()
        .flatten()
        .flat_map(|o| o.histogram.counts.iter().copied())
        .max()
        .unwrap_or(0);
    let (pw, ph) = (
        FRAME.width - FRAME.left - FRAME.right,
        FRAME.height - FRAME.top - FRAME.bottom,
    );
    let base = FRAME.top + ph;
    let ts = TimeScale::new(intervals, FRAME.left, pw);
    let ch = ph / ax.slots() as f64;
    svg.rect(FRAME.left, FRAME.top, pw, ph, "#f4f4f4", None);
    let lmax = ((max as f64) + 1.0).ln();
    for (k, o) in ops.iter().enumerate() {
        let Some(o) = o else { continue };
        for (i, c) in o.histogram.buckets() {
            let t = ((c as f64) + 1.0).ln() / lmax;
            let y = base - (ax.slot(i) + 1) as f64 * ch;
            let tip = format!(
                "{} – {}: {}: {} calls",
                format_ns(intervals[k].start_ns as f64),
                format_ns(intervals[k].end_ns as f64),
                ax.describe(i),
                format_value(c as f64, Unit::Count)
            );
            let (x, w) = ts.span(&intervals[k]);
            svg.rect(x, y, w + 0.3, ch + 0.3, &ramp(t), Some(&tip));
        }
    }
    svg.line(FRAME.left, base, FRAME.left + pw, base, "#333333", 1.0);
    svg.line(FRAME.left, FRAME.top, FRAME.left, base, "#333333", 1.0);
    for (slot, label) in ax.labels() {
        let y = base - slot as f64 * ch;
        svg.line(FRAME.left - 4.0, y, FRAME.left, y, "#333333", 1.0);
        svg.y_tick_label(FRAME.left, y, &label);
    }
    svg.vtext(14.0, FRAME.top + ph / 2.0, 11.0, ax.unit.quantity());
    time_axis(&mut svg, intervals, &ts, base);

    // Colour key.
    let kx = FRAME.width - FRAME.right + 24.0;
    let steps = 24;
    for s in 0..steps {
        let t = s as f64 / (steps - 1) as f64;
        let y = base - (s + 1) as f64 * ph / steps as f64;
        svg.rect(kx, y, 14.0, ph / steps as f64 + 0.3, &ramp(t), None);
    }
    svg.text(kx + 18.0, base, Anchor::Start, 10.0, "#444444", "1");
    svg.text(
        kx + 18.0,
        FRAME.top + 8.0,
        Anchor::Start,
        10.0,
        "#444444",
        &format_value(max as f64, Unit::Count),
    );
    svg.text(
        kx - 4.0,
        FRAME.top - 6.0,
        Anchor::Start,
        10.0,
        "#444444",
        fsprof_core::layer::entries(layer),
    );
    svg.finish()
}

/// The value axis's title of [`total_per_interval`] for `layer`: what its
/// totals are.
pub fn total_per_interval_title(layer: &str) -> String {
    match LayerUnit::of(layer) {
        LayerUnit::Ns => format!(
            "time in {} per interval",
            fsprof_core::layer::entries(layer)
        ),
        LayerUnit::Bytes => "bytes per interval".into(),
    }
}

/// The layer's totals per interval (the latencies of the calls that
/// returned in it, added up; a byte layer's bytes), stacked by the given
/// ops (the rest as "other"): when the time was spent, and in what.
pub fn total_per_interval(
    title: &str,
    intervals: &[Interval],
    layer: &str,
    top_ops: &[&str],
) -> String {
    let intervals = &*coarsen(intervals, MAX_COLUMNS);
    let mut svg = Svg::new(FRAME.width, FRAME.height, "chart timeline total");
    svg.text(FRAME.left, 18.0, Anchor::Start, 13.0, "#111111", title);
    let stacks = stacks_per_interval(intervals, layer, top_ops);
    let max = stacks
        .iter()
        .map(|s| s.iter().sum::<f64>())
        .fold(0.0, f64::max);
    let vy = ValueAxis::new(max, 1.0, false);
    let (pw, ph) = (
        FRAME.width - FRAME.left - FRAME.right,
        FRAME.height - FRAME.top - FRAME.bottom,
    );
    let base = FRAME.top + ph;
    let ts = TimeScale::new(intervals, FRAME.left, pw);
    let unit = LayerUnit::of(layer);
    let axis_unit = match unit {
        LayerUnit::Ns => Unit::Nanos,
        LayerUnit::Bytes => Unit::Bytes,
    };
    for &t in &vy.ticks {
        let y = base - vy.frac(t) * ph;
        svg.line(FRAME.left, y, FRAME.left + pw, y, "#e6e6e6", 1.0);
        svg.y_tick_label(FRAME.left, y, &format_value(t, axis_unit));
    }
    let colour = |k: usize| {
        if k < top_ops.len() {
            SERIES_COLOURS[k % SERIES_COLOURS.len()]
        } else {
            "#999999"
        }
    };
    let names: Vec<&str> = top_ops.iter().copied().chain(["other"]).collect();
    for (k, parts) in stacks.iter().enumerate() {
        let mut acc = 0.0;
        for (j, &v) in parts.iter().enumerate() {
            if v <= 0.0 {
                continue;
            }
            let y1 = base - vy.frac(acc) * ph;
            acc += v;
            let y2 = base - vy.frac(acc) * ph;
            let tip = format!(
                "{} – {}: {}: {}",
                format_ns(intervals[k].start_ns as f64),
                format_ns(intervals[k].end_ns as f64),
                names[j],
                unit.format(v)
            );
            let (x, w) = ts.span(&intervals[k]);
            let gap = if w > 4.0 { 1.0 } else { 0.0 };
            svg.rect(x + gap / 2.0, y2, w - gap, y1 - y2, colour(j), Some(&tip));
        }
    }
    svg.line(FRAME.left, base, FRAME.left + pw, base, "#333333", 1.0);
    svg.line(FRAME.left, FRAME.top, FRAME.left, base, "#333333", 1.0);
    svg.vtext(
        14.0,
        FRAME.top + ph / 2.0,
        11.0,
        &total_per_interval_title(layer),
    );
    time_axis(&mut svg, intervals, &ts, base);
    legend(&mut svg, &names, colour);
    svg.finish()
}

/// Per interval, the totals of `top_ops` in order, then the rest of the
/// layer's total ("other").
fn stacks_per_interval(intervals: &[Interval], layer: &str, top_ops: &[&str]) -> Vec<Vec<f64>> {
    intervals
        .iter()
        .map(|iv| {
            let l = iv.layers.iter().find(|l| l.name == layer);
            let total = l.map(|l| l.total_ns()).unwrap_or(0) as f64;
            let mut parts: Vec<f64> = top_ops
                .iter()
                .map(|op| l.and_then(|l| l.op(op)).map(|o| o.total_ns).unwrap_or(0) as f64)
                .collect();
            let named: f64 = parts.iter().sum();
            parts.push((total - named).max(0.0));
            parts
        })
        .collect()
}

/// The series' names and colours on the right of the plot, top down.
fn legend(svg: &mut Svg, names: &[&str], colour: impl Fn(usize) -> &'static str) {
    for (j, name) in names.iter().enumerate() {
        let y = FRAME.top + j as f64 * 16.0;
        svg.rect(
            FRAME.width - FRAME.right + 10.0,
            y,
            10.0,
            10.0,
            colour(j),
            None,
        );
        svg.text(
            FRAME.width - FRAME.right + 24.0,
            y + 9.0,
            Anchor::Start,
            10.0,
            "#333333",
            name,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` intervals of 10 ns, each with one `read` of `layer` in bucket
    /// `bucket(k)`.
    fn reads(layer: &str, n: u64, bucket: impl Fn(u64) -> i32) -> Vec<Interval> {
        (0..n)
            .map(|k| {
                let mut l = Layer::new(layer);
                let op = l.op_mut("read");
                (op.pre, op.post) = (1, 1);
                op.histogram.add_to(Some(bucket(k)), 1);
                Interval {
                    start_ns: k * 10,
                    end_ns: (k + 1) * 10,
                    layers: vec![l],
                }
            })
            .collect()
    }

    #[test]
    fn long_runs_are_binned_without_losing_calls() {
        let ivs = reads("user", 1000, |k| (k % 7) as i32);
        let c = coarsen(&ivs, MAX_COLUMNS);
        assert!(c.len() <= MAX_COLUMNS);
        assert_eq!((c[0].start_ns, c[c.len() - 1].end_ns), (0, 10_000));
        let calls: u64 = c
            .iter()
            .map(|iv| iv.layers[0].op("read").unwrap().post)
            .sum();
        assert_eq!(calls, 1000);
        assert!(matches!(coarsen(&ivs[..10], MAX_COLUMNS), Cow::Borrowed(_)));
    }

    /// The block layer's entries are requests, not the program's calls.
    #[test]
    fn the_block_layers_axis_counts_time_in_requests() {
        let ivs = reads("block", 3, |_| 16);
        let title = total_per_interval_title("block");
        assert_eq!(title, "time in requests per interval");
        assert!(total_per_interval("t", &ivs, "block", &["read"]).contains(&title));
        assert_eq!(
            total_per_interval_title("user"),
            "time in calls per interval"
        );
        assert_eq!(total_per_interval_title("block-size"), "bytes per interval");
    }

    #[test]
    fn ramp_runs_dark_to_bright() {
        assert_eq!(ramp(0.0), "#440154");
        assert_eq!(ramp(1.0), "#fde725");
        assert_eq!(ramp(7.0), "#fde725");
    }
}
