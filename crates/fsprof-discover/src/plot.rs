//! Figures of a discovery: each finding's curves as SVG (through
//! fsprof-plot's offset chart, inferred boundaries marked), and one
//! self-contained HTML page with the table, the evidence and every figure.

use std::fmt::Write;

use fsprof_plot::offsets::{render, OffsetChart};
use fsprof_plot::svg::esc;

use crate::finding::{Curve, Finding};
use crate::render::{discovered, kernel_says};
use crate::Report;

/// One curve as an SVG figure.
pub fn svg(c: &Curve) -> String {
    let mut series = vec![(
        if c.y_latency { "min" } else { "value" }.to_string(),
        c.min.as_slice(),
    )];
    if !c.median.is_empty() {
        series.push(("median".to_string(), c.median.as_slice()));
    }
    render(&OffsetChart {
        title: c.title.clone(),
        x_label: c.x_label.clone(),
        x_bytes: c.x_bytes,
        x: &c.x,
        series,
        y_latency: c.y_latency,
        marks: c.marks.iter().map(|m| (m.at, m.label.clone())).collect(),
        threshold: c.threshold,
    })
}

/// File names for a finding's figures: `block-size-1.svg`, ...
pub fn file_names(f: &Finding) -> Vec<String> {
    (1..=f.curves.len())
        .map(|k| format!("{}-{k}.svg", f.parameter.name()))
        .collect()
}

const STYLE: &str = r#"
body { font-family: "DejaVu Sans", Verdana, Arial, sans-serif; margin: 24px auto; max-width: 1100px; color: #111; background: #fafafa; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; background: #fff; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: left; }
th { background: #f0f0f0; }
.finding { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 12px; margin: 14px 0; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
.charts svg { max-width: 100%; height: auto; }
p, li { font-size: 13px; }
.muted { color: #666; }
"#;

/// The discovery as one HTML page (no scripts, nothing fetched).
pub fn html(r: &Report) -> String {
    let mut o = String::new();
    let title = format!("fsprof discover {}", r.target.dir.display());
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    let _ = writeln!(
        o,
        "<p class=\"muted\">{} · host {} · kernel {} · started {} · cold cache: {} ({})</p>",
        esc(&r.target.fs_type),
        esc(&r.host),
        esc(&r.kernel),
        esc(&r.start_time),
        esc(r.cold_cache.name()),
        esc(&r.cold_cache_why)
    );
    if let Some(fb) = &r.cold_cache_fallback {
        let _ = writeln!(o, "<p class=\"muted\">cold cache fallback: {}</p>", esc(fb));
    }
    o.push_str("<table>\n<tr><th>parameter</th><th>discovered</th><th>kernel says</th><th>confidence</th><th>iterations</th></tr>\n");
    for f in &r.findings {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(f.parameter.title()),
            esc(&discovered(f)),
            esc(&kernel_says(f)),
            esc(f.confidence.as_ref().map_or("-", |c| c.level.name())),
            f.iterations
        );
    }
    o.push_str("</table>\n");
    for f in &r.findings {
        let _ = writeln!(
            o,
            "<div class=\"finding\" id=\"{}\">\n<h2>{}: {}</h2>",
            f.parameter.name(),
            esc(f.parameter.title()),
            esc(&discovered(f))
        );
        o.push_str("<ul>\n");
        let mut item = |s: String| {
            let _ = writeln!(o, "<li>{}</li>", esc(&s));
        };
        if let Some(why) = &f.reason {
            item(why.clone());
        }
        item(format!(
            "method: {} ({} of {} iterations per offset)",
            f.method,
            f.summary.name(),
            f.iterations
        ));
        if let Some(c) = &f.confidence {
            item(format!("confidence {}: {}", c.level.name(), c.statement));
        }
        for x in &f.cross_checks {
            item(format!("cross-check, {}: {}", x.method, x.statement));
        }
        for k in &f.kernel {
            item(format!("kernel: {} = {}", k.source, k.value));
        }
        for n in &f.notes {
            item(format!("note: {n}"));
        }
        o.push_str("</ul>\n<div class=\"charts\">\n");
        for c in &f.curves {
            o.push_str(&svg(c));
        }
        o.push_str("</div>\n</div>\n");
    }
    o.push_str("</body>\n</html>\n");
    o
}
