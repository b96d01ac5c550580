//! Prometheus exposition text (format 0.0.4): each (layer, op) as a classic
//! histogram in base units, so `promtool check metrics` accepts it:
//! latencies as `fsprof_op_latency_seconds`, whose `le` bounds are
//! fsprof's exact bucket upper bounds `2^((i+1)/r)` ns written in seconds,
//! and byte-valued layers (`block-size`) as `fsprof_op_size_bytes`.
//! Native histograms only exist in the protobuf exposition
//! ([`crate::protobuf`]).

use std::fmt::Write;

use fsprof_core::layer::Unit;
use fsprof_core::Profile;

use crate::{base_unit, Exposition, LabelOptions, Series};

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The latency histograms' family.
pub const LATENCY: &str = "fsprof_op_latency_seconds";
/// The byte-valued layers' family.
pub const SIZE: &str = "fsprof_op_size_bytes";
/// The error counters' family.
pub const ERRORS: &str = "fsprof_op_errors_total";

pub const LATENCY_HELP: &str = "Latency of file-system operations in seconds (fsprof log2 buckets: le bounds are 2^(i/r) ns exactly).";
pub const SIZE_HELP: &str =
    "Sizes of block requests in bytes (fsprof log2 buckets, upper bounds 2^(i/r) bytes).";
pub const ERRORS_HELP: &str = "File-system operations that returned an error.";

fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

fn labels(pairs: &[(&str, &str)], le: Option<&str>) -> String {
    let mut s = String::new();
    for (k, v) in pairs.iter().copied().chain(le.map(|le| ("le", le))) {
        if !s.is_empty() {
            s.push(',');
        }
        let _ = write!(s, r#"{k}="{}""#, escape(v));
    }
    s
}

/// Shortest decimal that reads back as the same f64, as Prometheus prints.
pub fn float(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    format!("{v}")
}

fn histogram(out: &mut String, metric: &str, s: &Series, e: &Exposition) {
    let unit = Unit::of(s.layer);
    let h = &s.op.histogram;
    let mut cum = h.zero;
    // A `le="0"` bucket only when 0ns calls exist, so its meaning is plain.
    if h.zero > 0 {
        let _ = writeln!(
            out,
            "{metric}_bucket{{{}}} {cum}",
            labels(&s.labels, Some("0"))
        );
    }
    for (k, c) in h.counts.iter().enumerate() {
        cum = cum.saturating_add(*c);
        let ub = e.resolution.upper_bound(h.offset + k as i32);
        let le = float(base_unit(ub, unit));
        let _ = writeln!(
            out,
            "{metric}_bucket{{{}}} {cum}",
            labels(&s.labels, Some(&le))
        );
    }
    let inf = labels(&s.labels, Some("+Inf"));
    let _ = writeln!(out, "{metric}_bucket{{{inf}}} {cum}");
    let plain = labels(&s.labels, None);
    let sum = float(base_unit(s.op.total_ns as f64, unit));
    let _ = writeln!(out, "{metric}_sum{{{plain}}} {sum}");
    let _ = writeln!(out, "{metric}_count{{{plain}}} {cum}");
}

fn head(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Every family of `e`: latency and size histograms, error counters, then
/// the scalars.
pub fn text(e: &Exposition) -> String {
    let mut out = String::new();
    head(&mut out, LATENCY, LATENCY_HELP, "histogram");
    for s in e.series(Unit::Ns) {
        histogram(&mut out, LATENCY, &s, e);
    }
    if e.has(Unit::Bytes) {
        head(&mut out, SIZE, SIZE_HELP, "histogram");
        for s in e.series(Unit::Bytes) {
            histogram(&mut out, SIZE, &s, e);
        }
    }
    head(&mut out, ERRORS, ERRORS_HELP, "counter");
    for s in e.series(Unit::Ns).chain(e.series(Unit::Bytes)) {
        let _ = writeln!(
            out,
            "{ERRORS}{{{}}} {}",
            labels(&s.labels, None),
            s.op.errors
        );
    }
    for sc in &e.scalars {
        head(
            &mut out,
            &sc.name,
            &sc.help,
            if sc.counter { "counter" } else { "gauge" },
        );
        for (l, v) in &sc.points {
            let pairs: Vec<(&str, &str)> = l.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            let _ = writeln!(out, "{}{{{}}} {}", sc.name, labels(&pairs, None), float(*v));
        }
    }
    out
}

/// All (layer, op) histograms and error counters of a profile.
pub fn render(p: &Profile, opts: &LabelOptions) -> String {
    text(&Exposition::of_profile(p, opts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::profile::{Clock, Meta, RunInfo};

    fn profile() -> Profile {
        let meta = Meta {
            run: RunInfo {
                host: "h\"1".into(),
                ..Default::default()
            },
            command: vec!["/bin/cat".into(), "a\\b".into()],
            clock: Clock::default(),
            ..Default::default()
        };
        crate::test_profile(meta, 5)
    }

    #[test]
    fn buckets_are_cumulative_with_exact_bounds_in_seconds() {
        let text = render(&profile(), &LabelOptions::default());
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("_bucket")).collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].ends_with(r#"le="0"} 1"#), "{}", lines[0]);
        assert!(lines[1].ends_with(r#"le="0.000000064"} 3"#), "{}", lines[1]);
        assert!(lines[2].ends_with(r#"le="0.000000128"} 3"#));
        assert!(lines[3].ends_with(r#"le="0.000000256"} 6"#));
        assert!(lines[4].ends_with(r#"le="+Inf"} 6"#));
        assert!(text.contains(r#"host="h\"1""#));
        assert!(text.contains(r#"command="cat""#), "{text}");
        assert!(text.contains("fsprof_op_latency_seconds_sum{") && text.contains("} 0.0000009\n"));
        let argv = render(&profile(), &LabelOptions { argv: true });
        assert!(argv.contains(r#"command="/bin/cat a\\b""#), "{argv}");
    }
}
