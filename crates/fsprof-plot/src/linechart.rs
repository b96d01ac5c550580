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

// A few lines over the length lint: axes, lines and legend of one chart
// (its owner may split it as histchart::render is).
#[allow(clippy::too_many_lines)]
pub fn render(c: &LineChart) -> String {
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
    let pw = W - L - R;
    let ph = H - T - B;
    let px = |x: f64| L + (x.log2() - lx0) / (lx1 - lx0) * pw;
    let py = |y: f64| T + ph - (y / ymax).clamp(0.0, 1.0) * ph;
    let mut s = Svg::new(W, H, "fsprof-linechart");
    s.text(W / 2.0, 22.0, Anchor::Middle, 14.0, "#222222", &c.title);
    s.line(L, T + ph, L + pw, T + ph, "#333333", 1.0);
    s.line(L, T, L, T + ph, "#333333", 1.0);
    for k in 0..=5 {
        let y = ymax * k as f64 / 5.0;
        s.line(L - 4.0, py(y), L, py(y), "#333333", 1.0);
        s.line(L, py(y), L + pw, py(y), "#eeeeee", 1.0);
        s.text(
            L - 6.0,
            py(y) + 4.0,
            Anchor::End,
            10.0,
            "#333333",
            &format!("{y:.0}"),
        );
    }
    let mut e = lx0.ceil() as i32;
    while (e as f64) <= lx1 {
        let x = 2f64.powi(e);
        s.line(px(x), T + ph, px(x), T + ph + 4.0, "#333333", 1.0);
        s.text(
            px(x),
            T + ph + 16.0,
            Anchor::Middle,
            10.0,
            "#333333",
            &(c.x_format)(x),
        );
        e += 2;
    }
    s.text(
        L + pw / 2.0,
        H - 10.0,
        Anchor::Middle,
        12.0,
        "#333333",
        &c.x_label,
    );
    s.vtext(18.0, T + ph / 2.0, 12.0, &c.y_label);
    for (x, label) in &c.markers {
        if !xs.is_empty() && x.log2() >= lx0 && x.log2() <= lx1 {
            s.dashed(px(*x), T, px(*x), T + ph, "#888888");
            // Near the right edge the label goes left of its line, clear
            // of the legend.
            let (lx, anchor) = if px(*x) > L + 0.8 * pw {
                (px(*x) - 3.0, Anchor::End)
            } else {
                (px(*x) + 3.0, Anchor::Start)
            };
            s.text(
                lx,
                T + 10.0,
                anchor,
                10.0,
                "#555555",
                label,
            );
        }
    }
    for (k, l) in c.lines.iter().enumerate() {
        let col = COLORS[k % COLORS.len()];
        let pts: Vec<(f64, f64)> = l.points.iter().map(|p| (px(p.0), py(p.1))).collect();
        for w in pts.windows(2) {
            s.line(w[0].0, w[0].1, w[1].0, w[1].1, col, 1.8);
        }
        for (p, &(x, y)) in l.points.iter().zip(&pts) {
            s.line(x, py(p.1 - p.2), x, py(p.1 + p.2), col, 1.0);
            s.rect(
                x - 2.5,
                y - 2.5,
                5.0,
                5.0,
                col,
                Some(&format!(
                    "{} at {}: {:.1} ± {:.1}",
                    l.name,
                    (c.x_format)(p.0),
                    p.1,
                    p.2
                )),
            );
        }
        let ly = T + 14.0 + k as f64 * 18.0;
        s.line(W - R + 12.0, ly - 4.0, W - R + 32.0, ly - 4.0, col, 2.0);
        s.text(W - R + 36.0, ly, Anchor::Start, 11.0, "#222222", &l.name);
    }
    s.finish()
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
}
