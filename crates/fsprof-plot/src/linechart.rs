//! A line chart over a log2 x axis with error bars and labelled vertical
//! markers: throughput against file size with the CPU cache sizes marked
//! (`fsprof bench sweep --plot`). Generic in what the numbers mean, so it
//! needs nothing from the bench crate.

use crate::svg::{Anchor, Svg};

/// One line: points `(x, y, ± error)`.
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64, f64)>,
}

pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
    /// Vertical dashed lines at `x`, labelled (e.g. `L2 4 MiB`).
    pub markers: Vec<(f64, String)>,
    /// Formats an x value for tick labels.
    pub x_format: fn(f64) -> String,
}

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];
const W: f64 = 760.0;
const H: f64 = 420.0;
const L: f64 = 70.0;
const R: f64 = 150.0;
const T: f64 = 40.0;
const B: f64 = 50.0;

/// The plot area's scales: log2 x from `lx0` to `lx1`, linear y from 0 to
/// `ymax`, and whether there is anything to draw at all.
struct Frame {
    lx0: f64,
    lx1: f64,
    ymax: f64,
    empty: bool,
}

const PW: f64 = W - L - R;
const PH: f64 = H - T - B;

impl Frame {
    fn of(c: &LineChart) -> Frame {
        let xs: Vec<f64> = c
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .filter(|x| *x > 0.0)
            .collect();
        let (xmin, xmax) = xs
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        let (lx0, lx1) = if xs.is_empty() {
            (0.0, 1.0)
        } else {
            (xmin.log2(), xmax.log2().max(xmin.log2() + 1.0))
        };
        let ymax = c
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1 + p.2))
            .fold(0.0f64, f64::max)
            .max(1e-9)
            * 1.08;
        Frame {
            lx0,
            lx1,
            ymax,
            empty: xs.is_empty(),
        }
    }

    fn px(&self, x: f64) -> f64 {
        L + (x.log2() - self.lx0) / (self.lx1 - self.lx0) * PW
    }

    fn py(&self, y: f64) -> f64 {
        T + PH - (y / self.ymax).clamp(0.0, 1.0) * PH
    }
}

pub fn render(c: &LineChart) -> String {
    let f = Frame::of(c);
    let mut s = Svg::new(W, H, "fsprof-linechart");
    s.text(W / 2.0, 22.0, Anchor::Middle, 14.0, "#222222", &c.title);
    axes(&mut s, c, &f);
    markers(&mut s, c, &f);
    for (k, l) in c.lines.iter().enumerate() {
        line(&mut s, c, &f, k, l);
    }
    s.finish()
}

/// Axes, y grid with 5 ticks, x ticks at every other power of two, titles.
fn axes(s: &mut Svg, c: &LineChart, f: &Frame) {
    s.line(L, T + PH, L + PW, T + PH, "#333333", 1.0);
    s.line(L, T, L, T + PH, "#333333", 1.0);
    for k in 0..=5 {
        let y = f.ymax * k as f64 / 5.0;
        s.line(L - 4.0, f.py(y), L, f.py(y), "#333333", 1.0);
        s.line(L, f.py(y), L + PW, f.py(y), "#eeeeee", 1.0);
        let label = format!("{y:.0}");
        s.text(L - 6.0, f.py(y) + 4.0, Anchor::End, 10.0, "#333333", &label);
    }
    let mut e = f.lx0.ceil() as i32;
    while f64::from(e) <= f.lx1 {
        let x = 2f64.powi(e);
        s.line(f.px(x), T + PH, f.px(x), T + PH + 4.0, "#333333", 1.0);
        let label = (c.x_format)(x);
        s.text(
            f.px(x),
            T + PH + 16.0,
            Anchor::Middle,
            10.0,
            "#333333",
            &label,
        );
        e += 2;
    }
    s.text(
        L + PW / 2.0,
        H - 10.0,
        Anchor::Middle,
        12.0,
        "#333333",
        &c.x_label,
    );
    s.vtext(18.0, T + PH / 2.0, 12.0, &c.y_label);
}

/// Dashed vertical markers inside the x range, each labelled.
fn markers(s: &mut Svg, c: &LineChart, f: &Frame) {
    for (x, label) in &c.markers {
        if f.empty || x.log2() < f.lx0 || x.log2() > f.lx1 {
            continue;
        }
        s.dashed(f.px(*x), T, f.px(*x), T + PH, "#888888");
        // Near the right edge the label goes left of its line, clear of the
        // legend.
        let (lx, anchor) = if f.px(*x) > L + 0.8 * PW {
            (f.px(*x) - 3.0, Anchor::End)
        } else {
            (f.px(*x) + 3.0, Anchor::Start)
        };
        s.text(lx, T + 10.0, anchor, 10.0, "#555555", label);
    }
}

/// Line `k`: segments, error bars, a square per point with its value as a
/// tooltip, and its legend entry.
fn line(s: &mut Svg, c: &LineChart, f: &Frame, k: usize, l: &Line) {
    let col = COLORS[k % COLORS.len()];
    let pts: Vec<(f64, f64)> = l.points.iter().map(|p| (f.px(p.0), f.py(p.1))).collect();
    for w in pts.windows(2) {
        s.line(w[0].0, w[0].1, w[1].0, w[1].1, col, 1.8);
    }
    for (p, &(x, y)) in l.points.iter().zip(&pts) {
        s.line(x, f.py(p.1 - p.2), x, f.py(p.1 + p.2), col, 1.0);
        let tip = format!(
            "{} at {}: {:.1} ± {:.1}",
            l.name,
            (c.x_format)(p.0),
            p.1,
            p.2
        );
        s.rect(x - 2.5, y - 2.5, 5.0, 5.0, col, Some(&tip));
    }
    let ly = T + 14.0 + k as f64 * 18.0;
    s.line(W - R + 12.0, ly - 4.0, W - R + 32.0, ly - 4.0, col, 2.0);
    s.text(W - R + 36.0, ly, Anchor::Start, 11.0, "#222222", &l.name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_inside_the_range_are_drawn_and_labelled() {
        let c = LineChart {
            title: "t".into(),
            x_label: "file size".into(),
            y_label: "MB/s".into(),
            lines: vec![Line {
                name: "seq_read".into(),
                points: vec![(4096.0, 100.0, 5.0), (65536.0, 80.0, 2.0)],
            }],
            markers: vec![
                (32768.0, "L1d 32 KiB".into()),
                (1e12, "off the chart".into()),
            ],
            x_format: |x| format!("{x:.0}"),
        };
        let svg = render(&c);
        assert!(svg.contains("L1d 32 KiB"));
        assert!(!svg.contains("off the chart"));
        assert!(svg.contains("seq_read at 4096: 100.0 ± 5.0"));
        assert_eq!(svg.matches("stroke-dasharray").count(), 1);
    }

    /// A marker in the right fifth of the plot is labelled to the left of
    /// its line (text-anchor end), one further left to the right of it.
    #[test]
    fn marker_labels_near_the_right_edge_turn_left() {
        let c = LineChart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            lines: vec![Line {
                name: "a".into(),
                points: vec![(1.0, 1.0, 0.0), (1024.0, 2.0, 0.0)],
            }],
            // log2 positions 1 and 9 of 0..10: 10% and 90% of the width.
            markers: vec![(2.0, "left one".into()), (512.0, "right one".into())],
            x_format: |x| format!("{x:.0}"),
        };
        let svg = render(&c);
        let anchor_of = |label: &str| {
            let end = svg.find(&format!(">{label}<")).unwrap();
            let start = svg[..end].rfind("<text").unwrap();
            svg[start..end].to_string()
        };
        assert!(anchor_of("left one").contains("text-anchor=\"start\""));
        assert!(anchor_of("right one").contains("text-anchor=\"end\""));
        // Plot width 540 from x=70: 10% is 124, 90% is 556; labels 3 px off.
        assert!(anchor_of("left one").contains("x=\"127.0\""));
        assert!(anchor_of("right one").contains("x=\"553.0\""));
    }
}
