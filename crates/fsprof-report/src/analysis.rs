//! Text, JSON and CSV renderings of the analysis results (computed by
//! fsprof-analysis): `fsprof compare`, and `fsprof report --peaks`,
//! `--interesting` and `--correlate`.

use std::fmt::Write;

use fsprof_analysis::compare::{Comparison, OpComparison};
use fsprof_analysis::correlation::OpValues;
use fsprof_analysis::fmt::{bucket_mid_human, pct};
use fsprof_analysis::peak_table::PeakRow;
use fsprof_analysis::select::Interesting;
use fsprof_core::layer::Unit;
use fsprof_core::units::format_ns;
use fsprof_core::Resolution;
use serde::Serialize;

use crate::fmt::field;
use crate::reason::{compare_reason, pair_reason, peak_label, top_reason};

/// `fsprof compare`'s text output: the interesting ops with their reasons,
/// then a table of every op.
pub fn comparison_text(c: &Comparison, a_name: &str, b_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A = {a_name}\nB = {b_name}\nmethod {} (threshold {:.2}), ops under {} of calls and latency ignored",
        c.method,
        c.threshold,
        pct(c.negligible)
    );
    let hits: Vec<_> = c.interesting().collect();
    if hits.is_empty() {
        let _ = writeln!(out, "\nno op changed significantly");
    } else {
        let _ = writeln!(out, "\n{} interesting op(s):", hits.len());
        for o in &hits {
            let _ = writeln!(out, "  {}/{}", o.layer, compare_reason(c, o));
        }
    }
    let w = crate::fmt::name_column(c.ops.iter().map(|o| o.op.as_str()));
    let _ = writeln!(
        out,
        "\n  {:<7} {:<w$} {:>10} {:>10} {:>9} {:>9} {:>8} {:>5}  status",
        "layer", "op", "calls A", "calls B", "total A", "total B", "score", "peaks"
    );
    for o in &c.ops {
        let _ = writeln!(
            out,
            "{} {:<7} {:<w$} {:>10} {:>10} {:>9} {:>9} {:>8} {:>5}  {}",
            if o.interesting { "*" } else { " " },
            o.layer,
            o.op,
            o.calls_a,
            o.calls_b,
            Unit::of(&o.layer).format(o.total_ns_a as f64),
            Unit::of(&o.layer).format(o.total_ns_b as f64),
            o.score
                .map(|s| format!("{s:.3}"))
                .unwrap_or_else(|| "-".into()),
            format!("{}→{}", o.peaks_a.len(), o.peaks_b.len()),
            o.status.name(),
        );
    }
    crate::terminal_safe(out)
}

/// `fsprof compare --format json`.
#[derive(Serialize)]
pub struct ComparisonJson<'a> {
    /// Always `fsprof-compare`.
    pub report: &'static str,
    pub fsprof_version: &'static str,
    pub a: &'a str,
    pub b: &'a str,
    pub interesting: bool,
    pub comparison: ComparisonBody<'a>,
}

/// The comparison as analysis computed it, each op with its reason in
/// words beside the finding.
#[derive(Serialize)]
pub struct ComparisonBody<'a> {
    #[serde(flatten)]
    pub comparison: &'a Comparison,
    pub ops: Vec<OpJson<'a>>,
}

#[derive(Serialize)]
pub struct OpJson<'a> {
    #[serde(flatten)]
    pub op: &'a OpComparison,
    /// The finding in words, as the text report prints it.
    pub reason: String,
}

pub fn comparison_json(c: &Comparison, a_name: &str, b_name: &str) -> String {
    crate::json::pretty(&ComparisonJson {
        report: "fsprof-compare",
        fsprof_version: env!("CARGO_PKG_VERSION"),
        a: a_name,
        b: b_name,
        interesting: c.any_interesting(),
        comparison: ComparisonBody {
            comparison: c,
            ops: c
                .ops
                .iter()
                .map(|o| OpJson {
                    op: o,
                    reason: compare_reason(c, o),
                })
                .collect(),
        },
    })
}

/// Every CSV here, like the text, is passed through [`crate::terminal_safe`]
/// itself: it is printed to a terminal as often as to a file, and a caller
/// that prints it directly (`compare`) must not have to remember to.
pub const COMPARISON_CSV_HEADER: &str = "layer,op,status,interesting,method,score,calls_a,calls_b,total_ns_a,total_ns_b,peaks_a,peaks_b,reason";

pub fn comparison_csv(c: &Comparison) -> String {
    let mut out = String::from(COMPARISON_CSV_HEADER);
    out.push('\n');
    for o in &c.ops {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            field(&o.layer),
            field(&o.op),
            o.status.name(),
            o.interesting,
            o.method,
            o.score.map(|s| format!("{s:.6}")).unwrap_or_default(),
            o.calls_a,
            o.calls_b,
            o.total_ns_a,
            o.total_ns_b,
            o.peaks_a.len(),
            o.peaks_b.len(),
            field(&compare_reason(c, o))
        );
    }
    crate::terminal_safe(out)
}

pub fn peaks_text(rows: &[PeakRow], res: Resolution) -> String {
    let mut out = String::from("\npeaks (FSprof Table 3):\n");
    if rows.is_empty() {
        out.push_str("  (no peaks)\n");
        return out;
    }
    let w = crate::fmt::name_column(rows.iter().map(|r| r.op.as_str()));
    let timed = rows.iter().any(|r| r.time_range_ns.is_some());
    let _ = write!(
        out,
        "  {:<7} {:<w$} {:>2} {:>21} {:>9} {:>10} {:>6} {:>7} {:>7}",
        "layer", "op", "#", "range", "mode", "calls", "calls%", "op lat%", "latency%"
    );
    if timed {
        let _ = write!(out, " {:>17}", "time");
    }
    out.push_str("  label\n");
    for r in rows {
        let u = Unit::of(&r.layer);
        let range = format!("{}..{}", u.format(r.lower_ns), u.format(r.upper_ns));
        let _ = write!(
            out,
            "  {:<7} {:<w$} {:>2} {:>21} {:>9} {:>10} {:>6} {:>7} {:>8}",
            r.layer,
            r.op,
            r.number,
            range,
            bucket_mid_human(r.peak.mode, res, u),
            r.peak.count,
            pct(r.peak.count_share),
            pct(r.peak.latency_share),
            pct(r.layer_latency_share),
        );
        if timed {
            let t = r
                .time_range_ns
                .map(|(a, b)| format!("{}..{}", format_ns(a as f64), format_ns(b as f64)))
                .unwrap_or_else(|| "-".into());
            let _ = write!(out, " {t:>17}");
        }
        let _ = writeln!(
            out,
            "  {}",
            r.label.as_ref().map(peak_label).unwrap_or_default()
        );
    }
    out
}

pub const PEAKS_CSV_HEADER: &str = "layer,op,peak,first_bucket,last_bucket,mode_bucket,lower_ns,upper_ns,mode_ns,count,count_share,latency_ns,latency_share,layer_latency_share,time_start_ns,time_end_ns,label,unit";

pub fn peaks_csv(rows: &[PeakRow]) -> String {
    let mut out = String::from(PEAKS_CSV_HEADER);
    out.push('\n');
    for r in rows {
        let p = &r.peak;
        let (ts, te) = r
            .time_range_ns
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{:.1},{:.1},{:.1},{},{:.6},{:.1},{:.6},{:.6},{},{},{},{}",
            field(&r.layer),
            field(&r.op),
            r.number,
            p.first,
            p.last,
            p.mode,
            r.lower_ns,
            r.upper_ns,
            r.mode_ns,
            p.count,
            p.count_share,
            p.latency_ns,
            p.latency_share,
            r.layer_latency_share,
            ts,
            te,
            field(
                r.label
                    .as_ref()
                    .map(peak_label)
                    .unwrap_or_default()
                    .trim_start_matches("≈ ")
            ),
            r.unit.symbol()
        );
    }
    crate::terminal_safe(out)
}

pub fn interesting_text(i: &Interesting) -> String {
    let mut out = String::from("\ninteresting ops (most latency):\n");
    for t in &i.top {
        let _ = writeln!(out, "  {}/{}", t.layer, top_reason(i, t));
    }
    out.push_str("\ncorrelated peaks (same number of calls):\n");
    if i.correlated.is_empty() {
        out.push_str("  (none)\n");
    }
    for c in &i.correlated {
        let _ = writeln!(out, "  {}", pair_reason(i, c));
    }
    out
}

pub const INTERESTING_CSV_HEADER: &str =
    "kind,layer,op,peak,other_layer,other_op,other_peak,calls,latency_share,reason";

pub fn interesting_csv(i: &Interesting) -> String {
    let mut out = String::from(INTERESTING_CSV_HEADER);
    out.push('\n');
    for t in &i.top {
        let _ = writeln!(
            out,
            "top,{},{},,,,,{},{:.6},{}",
            field(&t.layer),
            field(&t.op),
            t.calls,
            t.latency_share,
            field(&top_reason(i, t))
        );
    }
    for c in &i.correlated {
        let _ = writeln!(
            out,
            "correlated,{},{},{},{},{},{},{},,{}",
            field(&c.a.layer),
            field(&c.a.op),
            c.a.index + 1,
            field(&c.b.layer),
            field(&c.b.op),
            c.b.index + 1,
            c.a.peak.count,
            field(&pair_reason(i, c))
        );
    }
    crate::terminal_safe(out)
}

/// `report --correlate`: per peak its summary line, then the value buckets.
pub fn correlation_text(c: &OpValues) -> String {
    let mut out = format!(
        "\n{}/{} latency peaks by {}:\n",
        c.layer,
        c.op,
        c.value.name()
    );
    for p in &c.peaks {
        let _ = writeln!(out, "  {}", p.summary);
        for b in &p.values {
            let _ = writeln!(
                out,
                "      {:>20} {:>9} {:>5.1}%",
                b.range(),
                b.count,
                b.share * 100.0
            );
        }
    }
    out
}

pub const CORRELATION_CSV_HEADER: &str =
    "layer,op,value,peak,value_bucket,value_lower,value_upper,count,share";

pub fn correlation_csv(c: &OpValues) -> String {
    let mut out = String::from(CORRELATION_CSV_HEADER);
    out.push('\n');
    for (k, p) in c.peaks.iter().enumerate() {
        for b in &p.values {
            let (lo, hi) = b.bounds();
            let _ = writeln!(
                out,
                "{},{},{},{},{},{lo},{hi},{},{:.6}",
                field(&c.layer),
                field(&c.op),
                c.value.name(),
                k + 1,
                b.index,
                b.count,
                b.share
            );
        }
    }
    crate::terminal_safe(out)
}

#[cfg(test)]
mod tests {
    use fsprof_analysis::select::{Interesting, TopOp};

    const ESC: &str = "re\x1b]0;pwned\x07\u{202e}ad";

    /// Each CSV renderer escapes control characters itself, whoever calls it.
    #[test]
    fn csv_renderers_escape_control_characters() {
        let i = Interesting {
            top: vec![TopOp {
                layer: "user".into(),
                op: ESC.into(),
                calls: 1,
                total_ns: 1,
                latency_share: 1.0,
                peaks: Vec::new(),
                lead: None,
                label: None,
            }],
            ..Default::default()
        };
        let csv = super::interesting_csv(&i);
        assert!(
            !csv.chars()
                .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
            "{csv:?}"
        );
        assert!(csv.contains("re\\x1b]0;pwned\\x07\\u{202e}ad"), "{csv:?}");
    }
}
