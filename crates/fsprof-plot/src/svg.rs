//! A minimal SVG writer. Coordinates are printed with one decimal so the
//! output is byte-for-byte deterministic (snapshot tests and diffs of
//! committed figures depend on it).

use std::fmt::Write;

pub const FONT: &str = "DejaVu Sans, Verdana, Arial, sans-serif";

pub struct Svg {
    out: String,
}

/// Escapes text for use in SVG/HTML text and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

#[derive(Clone, Copy)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

impl Svg {
    pub fn new(width: f64, height: f64, class: &str) -> Self {
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="{}" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}" font-family="{FONT}" font-size="11">"#,
            esc(class),
            w = width,
            h = height
        );
        // An opaque background: PNGs and dark-mode viewers show the same figure.
        let _ = write!(
            out,
            r##"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="#ffffff"/>"##
        );
        Svg { out }
    }

    /// A rectangle with an optional tooltip (`<title>`, shown on hover in browsers).
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tip: Option<&str>) {
        let _ = write!(
            self.out,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{fill}""#,
            w.max(0.0),
            h.max(0.0)
        );
        match tip {
            Some(t) => {
                let _ = write!(self.out, "><title>{}</title></rect>", esc(t));
            }
            None => self.out.push_str("/>"),
        }
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, width: f64) {
        let _ = write!(
            self.out,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}" stroke-width="{width:.1}"/>"#
        );
    }

    pub fn dashed(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str) {
        let _ = write!(
            self.out,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}" stroke-width="1.0" stroke-dasharray="4 3"/>"#
        );
    }

    pub fn text(&mut self, x: f64, y: f64, anchor: Anchor, size: f64, fill: &str, s: &str) {
        let _ = write!(
            self.out,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{}" font-size="{size:.0}" fill="{fill}">{}</text>"#,
            anchor.as_str(),
            esc(s)
        );
    }

    /// A y-axis tick label, right-aligned just left of `axis_x` at
    /// height `y` (every chart's value and row labels).
    pub fn y_tick_label(&mut self, axis_x: f64, y: f64, s: &str) {
        let _ = write!(
            self.out,
            r##"<text class="ytick" x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" fill="#444444">{}</text>"##,
            axis_x - 6.0,
            y + 4.0,
            esc(s)
        );
    }

    /// Text rotated by -90° around its anchor point (y-axis titles).
    pub fn vtext(&mut self, x: f64, y: f64, size: f64, s: &str) {
        let _ = write!(
            self.out,
            r##"<text class="ytitle" x="{x:.1}" y="{y:.1}" text-anchor="middle" font-size="{size:.0}" fill="#333333" transform="rotate(-90 {x:.1} {y:.1})">{}</text>"##,
            esc(s)
        );
    }

    /// The plot area's left and bottom edges (`left`..`left + width`,
    /// `top`..`base`) and the x-axis title centred under them at `title_y`.
    pub fn axes_and_x_title(
        &mut self,
        (left, top, width, base): (f64, f64, f64, f64),
        title_y: f64,
        title: &str,
    ) {
        self.line(left, base, left + width, base, "#333333", 1.0);
        self.line(left, top, left, base, "#333333", 1.0);
        self.text(
            left + width / 2.0,
            title_y,
            Anchor::Middle,
            11.0,
            "#333333",
            title,
        );
    }

    pub fn polygon(&mut self, points: &[(f64, f64)], fill: &str) {
        self.out.push_str(r#"<polygon points=""#);
        for (k, (x, y)) in points.iter().enumerate() {
            if k > 0 {
                self.out.push(' ');
            }
            let _ = write!(self.out, "{x:.1},{y:.1}");
        }
        let _ = write!(self.out, r#"" fill="{fill}"/>"#);
    }

    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// A figure's size and the margins around its plot area, in SVG units.
#[derive(Clone, Copy, Debug)]
pub struct Margins {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_in_text() {
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let mut s = Svg::new(10.0, 10.0, "c");
        s.text(1.0, 2.0, Anchor::Start, 11.0, "#000", "</svg><script>");
        let out = s.finish();
        assert!(!out.contains("<script>"));
        assert_eq!(out.matches("</svg>").count(), 1);
    }
}
