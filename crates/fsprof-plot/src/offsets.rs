//! Latency against file offset (fsdisco Figs 2–6): one point per offset
//! for each summary (the minimum and the median across iterations), a
//! logarithmic latency axis, and the inferred boundaries marked as dashed
//! vertical lines. Also draws a plain value (bytes) against a size, for
//! fsdisco's Fig 4 (read-ahead extent against the initial read size).

use fsprof_core::units::format_bytes;

use crate::axis::{format_value, Unit, ValueAxis};
use crate::histchart::SERIES_COLOURS;
use crate::svg::{Anchor, Svg};

pub const WIDTH: f64 = 640.0;
pub const HEIGHT: f64 = 300.0;
const LEFT: f64 = 66.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 46.0;

#[derive(Clone, Debug)]
pub struct OffsetChart<'a> {
    pub title: String,
    pub x_label: String,
    /// x values are byte counts (labelled KiB/MiB), else plain numbers.
    pub x_bytes: bool,
    pub x: &'a [f64],
    /// Labelled y series over `x` (latencies in ns, or bytes).
    pub series: Vec<(String, &'a [f64])>,
    /// y values are latencies (log axis), else bytes (linear axis).
    pub y_latency: bool,
    /// Dashed vertical lines at x, with labels.
    pub marks: Vec<(f64, String)>,
    /// A dotted horizontal line (the threshold between two levels).
    pub threshold: Option<f64>,
}

/// Ticks for `lo..=hi`: steps of a power of two for bytes (offsets are
/// block and page multiples), of 1/2/5×10^k otherwise.
fn x_ticks(lo: f64, hi: f64, bytes: bool) -> Vec<f64> {
    let span = (hi - lo).max(1.0);
    let raw = span / 6.0;
    let step = if bytes {
        2f64.powf(raw.log2().ceil()).max(1.0)
    } else {
        let mag = 10f64.powf(raw.log10().floor());
        [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag)
            .max(1.0)
    };
    let first = (lo / step).ceil() * step;
    (0..)
        .map(|k| first + k as f64 * step)
        .take_while(|t| *t <= hi + 1e-9)
        .collect()
}

/// A linear axis over 0..=max bytes with ticks a power of two apart.
fn byte_axis(max: f64) -> ValueAxis {
    let step = 2f64.powf((max.max(1.0) / 5.0).log2().ceil()).max(1.0);
    let n = (max / step).ceil().max(1.0) as usize;
    ValueAxis {
        log: false,
        lo: 0.0,
        hi: n as f64 * step,
        ticks: (0..=n).map(|k| k as f64 * step).collect(),
    }
}

/// Grid, tick labels and axis titles.
fn axes(svg: &mut Svg, c: &OffsetChart, vy: &ValueAxis, (xlo, xhi): (f64, f64)) {
    let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let base = TOP + ph;
    let xs = |x: f64| LEFT + (x - xlo) / (xhi - xlo) * pw;
    let ys = |v: f64| base - vy.frac(v) * ph;
    for t in &vy.ticks {
        let y = ys(*t);
        svg.line(LEFT, y, LEFT + pw, y, "#e6e6e6", 1.0);
        let label = if c.y_latency {
            format_value(*t, Unit::Nanos)
        } else {
            format_bytes(*t)
        };
        svg.text(LEFT - 6.0, y + 4.0, Anchor::End, 10.0, "#555555", &label);
    }
    for t in x_ticks(xlo, xhi, c.x_bytes) {
        let x = xs(t);
        svg.line(x, base, x, base + 4.0, "#555555", 1.0);
        let label = if c.x_bytes {
            format_bytes(t)
        } else {
            format!("{t:.0}")
        };
        svg.text(x, base + 16.0, Anchor::Middle, 10.0, "#555555", &label);
    }
    svg.axes_and_x_title((LEFT, TOP, pw, base), HEIGHT - 8.0, &c.x_label);
    svg.vtext(
        14.0,
        TOP + ph / 2.0,
        11.0,
        if c.y_latency { "latency" } else { "bytes" },
    );
}

pub fn render(c: &OffsetChart) -> String {
    let mut svg = Svg::new(WIDTH, HEIGHT, "chart offsets");
    svg.text(LEFT, 18.0, Anchor::Start, 13.0, "#111111", &c.title);
    let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let base = TOP + ph;
    let xlo = c.x.iter().copied().fold(f64::INFINITY, f64::min);
    let xhi = c.x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (xlo, xhi) = if xlo.is_finite() {
        (xlo, xhi.max(xlo + 1.0))
    } else {
        (0.0, 1.0)
    };
    let xs = |x: f64| LEFT + (x - xlo) / (xhi - xlo) * pw;
    let all = c.series.iter().flat_map(|(_, v)| v.iter().copied());
    let max = all
        .clone()
        .fold(0.0, f64::max)
        .max(c.threshold.unwrap_or(0.0));
    let min_pos = all.filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    let vy = if c.y_latency {
        ValueAxis::new(max, if min_pos.is_finite() { min_pos } else { 1.0 }, true)
    } else {
        byte_axis(max)
    };
    let ys = |v: f64| base - vy.frac(v) * ph;

    axes(&mut svg, c, &vy, (xlo, xhi));

    if let Some(t) = c.threshold {
        let y = ys(t);
        svg.dashed(LEFT, y, LEFT + pw, y, "#999999");
    }
    // The median first, so the minimum (what inference mostly uses) is on top.
    for (k, (label, values)) in c.series.iter().enumerate().rev() {
        let colour = SERIES_COLOURS[k % SERIES_COLOURS.len()];
        for (x, v) in c.x.iter().zip(values.iter()) {
            if *v <= 0.0 && c.y_latency {
                continue;
            }
            let (px, py) = (xs(*x), ys(*v));
            svg.rect(px - 1.5, py - 1.5, 3.0, 3.0, colour, None);
        }
        let ly = TOP - 8.0;
        let lx = LEFT + pw - 150.0 + 75.0 * k as f64;
        svg.rect(lx, ly - 7.0, 8.0, 8.0, colour, None);
        svg.text(lx + 11.0, ly, Anchor::Start, 10.0, "#333333", label);
    }
    for (k, (at, label)) in c.marks.iter().enumerate() {
        let x = xs(*at);
        svg.dashed(x, TOP, x, base, "#d55e00");
        if !label.is_empty() {
            let y = TOP + 12.0 + 12.0 * (k % 3) as f64;
            let anchor = if x > LEFT + pw * 0.7 {
                Anchor::End
            } else {
                Anchor::Start
            };
            let dx = if matches!(anchor, Anchor::End) {
                -3.0
            } else {
                3.0
            };
            svg.text(x + dx, y, anchor, 10.0, "#d55e00", label);
        }
    }
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_points_and_labels_are_drawn() {
        let x: Vec<f64> = (0..32).map(|k| k as f64 * 512.0).collect();
        let min: Vec<f64> = (0..32)
            .map(|k| if k % 2 == 0 { 2000.0 } else { 600.0 })
            .collect();
        let med: Vec<f64> = min.iter().map(|v| v * 1.2).collect();
        let s = render(&OffsetChart {
            title: "Write latency".into(),
            x_label: "file offset".into(),
            x_bytes: true,
            x: &x,
            series: vec![("min".into(), &min), ("median".into(), &med)],
            y_latency: true,
            marks: vec![(1024.0, "block 1 KiB".into())],
            threshold: Some(1100.0),
        });
        assert!(s.starts_with("<svg"));
        assert!(s.contains("block 1 KiB"));
        assert!(s.contains("stroke-dasharray"));
        assert_eq!(s.matches("width=\"3.0\"").count(), 64);
        assert!(s.contains("KiB"));
        assert!(s.contains("µs"), "latency labels");
    }

    #[test]
    fn byte_ticks_are_powers_of_two_apart() {
        let t = x_ticks(0.0, 16384.0, true);
        assert_eq!(t[1] - t[0], 4096.0);
        assert_eq!(format_bytes(196608.0), "192 KiB");
        assert_eq!(format_bytes(1536.0 * 1024.0), "1.5 MiB");
        let a = byte_axis(4.5 * 1048576.0);
        assert_eq!(a.ticks[1], 1048576.0);
        assert!(a.hi >= 4.5 * 1048576.0);
    }
}
