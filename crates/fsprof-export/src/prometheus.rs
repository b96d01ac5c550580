//! Prometheus exposition text (format 0.0.4): each (layer, op) as a classic
//! histogram whose `le` bounds are fsprof's bucket upper bounds. The unit is
//! nanoseconds, not Prometheus' customary seconds, because only in
//! nanoseconds do the bounds stay powers of two (2^(i/r)): the same series
//! then line up exactly with native histograms of schema log2 r. A
//! byte-valued layer (`block-size`) is its own metric,
//! `fsprof_op_size_bytes`, in bytes.

use std::fmt::Write;

use fsprof_core::layer::Unit;
use fsprof_core::{OpStats, Profile, Resolution};

use crate::{command_label, host_label, series, Labels};

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

fn labels(l: &Labels, extra: Option<(&str, &str)>) -> String {
    let mut s = format!(
        r#"host="{}",layer="{}",op="{}",command="{}""#,
        escape(l.host),
        escape(l.layer),
        escape(l.op),
        escape(l.command)
    );
    if let Some((k, v)) = extra {
        let _ = write!(s, r#",{k}="{v}""#);
    }
    s
}

/// Shortest decimal that reads back as the same f64, as Prometheus prints.
fn float(v: f64) -> String {
    if v.is_infinite() {
        return "+Inf".into();
    }
    format!("{v}")
}

fn histogram(out: &mut String, l: &Labels, op: &OpStats, res: Resolution) {
    let metric = match Unit::of(l.layer) {
        Unit::Ns => "fsprof_op_latency_nanoseconds",
        Unit::Bytes => "fsprof_op_size_bytes",
    };
    let h = &op.histogram;
    let mut cum = h.zero;
    // A `le="0"` bucket only when 0ns calls exist, so its meaning is plain.
    if h.zero > 0 {
        let _ = writeln!(
            out,
            "{metric}_bucket{{{}}} {cum}",
            labels(l, Some(("le", "0")))
        );
    }
    for (k, c) in h.counts.iter().enumerate() {
        cum += c;
        let le = float(res.upper_bound(h.offset + k as i32));
        let _ = writeln!(
            out,
            "{metric}_bucket{{{}}} {cum}",
            labels(l, Some(("le", &le)))
        );
    }
    let _ = writeln!(
        out,
        "{metric}_bucket{{{}}} {cum}",
        labels(l, Some(("le", "+Inf")))
    );
    let _ = writeln!(out, "{metric}_sum{{{}}} {}", labels(l, None), op.total_ns);
    let _ = writeln!(out, "{metric}_count{{{}}} {cum}", labels(l, None));
}

/// All (layer, op) histograms and error counters of a profile.
pub fn render(p: &Profile) -> String {
    let command = command_label(p);
    let host = host_label(p);
    let res = p.resolution();
    let mut out = String::new();
    out.push_str("# HELP fsprof_op_latency_nanoseconds Latency of file-system operations (fsprof log2 buckets, upper bounds 2^(i/r) ns).\n");
    out.push_str("# TYPE fsprof_op_latency_nanoseconds histogram\n");
    for (l, op) in series(p, &host, &command).filter(|(l, _)| Unit::of(l.layer) == Unit::Ns) {
        histogram(&mut out, &l, op, res);
    }
    let mut sizes = series(p, &host, &command)
        .filter(|(l, _)| Unit::of(l.layer) == Unit::Bytes)
        .peekable();
    if sizes.peek().is_some() {
        out.push_str("# HELP fsprof_op_size_bytes Sizes of block requests (byte-valued layers; fsprof log2 buckets, upper bounds 2^(i/r) bytes).\n");
        out.push_str("# TYPE fsprof_op_size_bytes histogram\n");
        for (l, op) in sizes {
            histogram(&mut out, &l, op, res);
        }
    }
    out.push_str("# HELP fsprof_op_errors_total File-system operations that returned an error.\n");
    out.push_str("# TYPE fsprof_op_errors_total counter\n");
    for (l, op) in series(p, &host, &command) {
        let _ = writeln!(
            out,
            "fsprof_op_errors_total{{{}}} {}",
            labels(&l, None),
            op.errors
        );
    }
    out
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
            command: vec!["cat".into(), "a\\b".into()],
            clock: Clock::default(),
            ..Default::default()
        };
        crate::test_profile(meta, 5)
    }

    #[test]
    fn buckets_are_cumulative_with_power_of_two_bounds() {
        let text = render(&profile());
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("_bucket")).collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].ends_with(r#"le="0"} 1"#), "{}", lines[0]);
        assert!(lines[1].ends_with(r#"le="64"} 3"#), "{}", lines[1]);
        assert!(lines[2].ends_with(r#"le="128"} 3"#));
        assert!(lines[3].ends_with(r#"le="256"} 6"#));
        assert!(lines[4].ends_with(r#"le="+Inf"} 6"#));
        assert!(text.contains(r#"host="h\"1""#));
        assert!(text.contains(r#"command="cat a\\b""#));
    }
}
