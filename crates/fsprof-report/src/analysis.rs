//! Text, JSON and CSV renderings of the analysis results (computed by
//! fsprof-analysis): `fsprof compare`, and `fsprof report --peaks`,
//! `--interesting` and `--correlate`.

use std::fmt::Write;

use fsprof_analysis::compare::{
    Check, Comparison, Direction, FailOn, LayerShift, OpComparison, Terms,
};
use fsprof_analysis::correlation::OpValues;
use fsprof_analysis::fmt::{bucket_mid_human, pct};
use fsprof_analysis::peak_table::PeakRow;
use fsprof_analysis::select::Interesting;
use fsprof_core::layer::Unit;
use fsprof_core::units::format_ns;
use fsprof_core::Resolution;
use serde::Serialize;

use crate::fmt::field;
use crate::reason::{
    compare_reason, layer_shift, no_label, p_value, pair_reason, peak_label, peak_label_long,
    test_name, top_reason,
};

/// `fsprof compare`'s text output: how the verdict was reached, the
/// interesting ops with their reasons, then a table of every op.
pub fn comparison_text(c: &Comparison, a_name: &str, b_name: &str) -> String {
    let mut out = String::new();
    let runs = |n: usize| {
        if n == 1 {
            String::new()
        } else {
            format!(" ({n} runs)")
        }
    };
    let _ = writeln!(
        out,
        "A = {a_name}{}\nB = {b_name}{}",
        runs(c.terms.runs_a),
        runs(c.terms.runs_b)
    );
    let _ = writeln!(out, "{}", verdict_rule(c));
    for s in c.layer_shifts.iter().filter_map(|s| layer_shift(c, s)) {
        let _ = writeln!(out, "profile shift {s}");
    }
    let hits: Vec<_> = c.interesting().collect();
    if !c.any_interesting() {
        let _ = writeln!(out, "\nno op changed significantly");
    } else {
        let _ = writeln!(out, "\n{} interesting op(s):", hits.len());
        for o in &hits {
            let _ = writeln!(out, "  {}/{}", o.layer, compare_reason(c, o));
        }
        if let Some(line) = exit_line(c) {
            let _ = writeln!(out, "\n{line}");
        }
    }
    if let Some(caution) = single_run_caution(c) {
        let _ = writeln!(out, "\ncaution: {caution}");
    }
    table(&mut out, c);
    crate::terminal_safe(out)
}

/// Said when one run a side found a change. Identical runs can hold a
/// change as large, in one op, as a slowdown the verdict must find: a mode
/// of the program or the machine that each run falls into. On the
/// benchmarks' VM, where address-space layout randomization put `cat`'s
/// buffer decided whether `munmap` flushed the TLB page by page or whole,
/// and the `close` after it took 2.5x as long, in about one run in twenty;
/// and the whole machine ran 3-11x slower for 6-90 ms at a time, 4-5% of
/// the time, which moves an op whose calls all come in one burst (a shell
/// glob's 573 `readdir` calls, in ~30 us) whole.
/// One run a side cannot tell such a mode from a change; repeated runs
/// measure it as spread. Not said when nothing changed, nor with repeated
/// runs on both sides.
pub fn single_run_caution(c: &Comparison) -> Option<&'static str> {
    let single = c.terms.runs_a == 1 || c.terms.runs_b == 1;
    (single && c.any_interesting()).then_some(
        "one run a side cannot tell a change from a mode that identical runs fall into \
         (one op twice as slow or more in some runs: where address-space layout randomization \
         put a buffer, a cache left cold, a few milliseconds in which the whole machine ran \
         slower); before acting on it, take each side's runs again, alternately, \
         and compare A1 A2 A3 --vs B1 B2 B3",
    )
}

/// Which changes decided the exit status, and which were listed without
/// failing it ([`FailOn`]); `None` when nothing changed.
pub fn exit_line(c: &Comparison) -> Option<String> {
    let changes = c.changes();
    if changes.is_empty() {
        return None;
    }
    let fail_on = c.terms.fail_on;
    let names = |pick: &dyn Fn(Direction) -> bool| {
        changes
            .iter()
            .filter(|(_, d)| pick(*d))
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (slower, faster) = (
        names(&|d| d == Direction::Slower),
        names(&|d| d == Direction::Faster),
    );
    Some(match (fail_on, slower.is_empty(), faster.is_empty()) {
        (FailOn::Any, _, _) => {
            let both: Vec<String> = [("slower", &slower), ("faster", &faster)]
                .iter()
                .filter(|(_, n)| !n.is_empty())
                .map(|(w, n)| format!("{w}: {n}"))
                .collect();
            format!("exit 1, on any change (--fail-on any); {}", both.join("; "))
        }
        (FailOn::Slower, false, true) => format!("exit 1, decided by what got slower: {slower}"),
        (FailOn::Slower, false, false) => format!(
            "exit 1, decided by what got slower: {slower}; faster, listed but not failing: {faster}"
        ),
        (FailOn::Slower, true, _) => format!(
            "exit 0: nothing got slower; faster: {faster} (listed; --fail-on any fails on a change either way)"
        ),
    })
}

/// How compare decided, in two or three lines.
fn verdict_rule(c: &Comparison) -> String {
    let gate = match c.terms.fail_on {
        FailOn::Slower => "exit 1 when a change made it slower (--fail-on slower: one-sided tests)",
        FailOn::Any => "exit 1 on a change either way (--fail-on any)",
    };
    let mut s = format!(
        "an op changed when a test finds it beyond the noise between runs (alpha {}, Holm over all tests) and the change moves at least {} of its layer's latency; {gate}",
        c.terms.alpha,
        pct(c.terms.min_share),
    );
    if c.terms.runs_a == 1 || c.terms.runs_b == 1 {
        let _ = write!(
            s,
            "\none run per side: the spread between runs is assumed (±{:.2} powers of two); give several runs per side (A1 A2 A3 --vs B1 B2 B3) to measure it",
            c.terms.spread
        );
    }
    let _ = write!(
        s,
        "\nscore {}; ops under {} of calls and latency ignored",
        c.terms.method,
        pct(c.terms.negligible)
    );
    s
}

fn table(out: &mut String, c: &Comparison) {
    let w = crate::fmt::name_column(c.ops.iter().map(|o| o.op.as_str()));
    let _ = writeln!(
        out,
        "\n  {:<7} {:<w$} {:>10} {:>10} {:>9} {:>9} {:>8} {:>5} {:>14}  status",
        "layer", "op", "calls A", "calls B", "total A", "total B", "score", "peaks", "test p"
    );
    for o in &c.ops {
        let test = o
            .decided_by()
            .or_else(|| o.nearest())
            .map(|k| format!("{} {}", test_name(k.test), p_value(k.p_value)))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "{} {:<7} {:<w$} {:>10} {:>10} {:>9} {:>9} {:>8} {:>5} {:>14}  {}",
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
            test,
            o.status.name(),
        );
    }
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
    /// Whether a change fails the comparison (exit 1): one in a direction
    /// `fail_on` counts.
    pub fails: bool,
    /// [`single_run_caution`], when it is said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caution: Option<&'static str>,
    pub comparison: ComparisonBody<'a>,
}

/// The comparison as analysis computed it, each op with its reason in
/// words beside the finding.
#[derive(Serialize)]
pub struct ComparisonBody<'a> {
    #[serde(flatten)]
    pub terms: &'a Terms,
    pub ops: Vec<OpJson<'a>>,
    pub layer_shifts: &'a [LayerShift],
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
        fails: c.fails(),
        caution: single_run_caution(c),
        comparison: ComparisonBody {
            terms: &c.terms,
            layer_shifts: &c.layer_shifts,
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
/// `direction` (slower or faster, for a change found) and `fails` (it fails
/// the comparison under its `--fail-on`) come last, so that readers of the
/// earlier columns by position keep working.
pub const COMPARISON_CSV_HEADER: &str = "layer,op,status,interesting,method,score,calls_a,calls_b,total_ns_a,total_ns_b,peaks_a,peaks_b,test,effect,moved,p_value,level,reason,direction,fails";

pub fn comparison_csv(c: &Comparison) -> String {
    let mut out = String::from(COMPARISON_CSV_HEADER);
    out.push('\n');
    for o in &c.ops {
        let k = o.decided_by().or_else(|| o.nearest());
        let num = |f: fn(&Check) -> f64| k.map(|k| format!("{:.6}", f(k))).unwrap_or_default();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
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
            k.map(|k| test_name(k.test)).unwrap_or_default(),
            num(|k| k.effect),
            num(|k| k.moved),
            k.map(|k| format!("{:e}", k.p_value)).unwrap_or_default(),
            k.and_then(|k| k.level)
                .map(|l| format!("{l:e}"))
                .unwrap_or_default(),
            field(&compare_reason(c, o)),
            o.direction.map(|d| d.name()).unwrap_or_default(),
            c.op_fails(o),
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
        let _ = writeln!(out, "  {}", label_column(r));
    }
    out
}

/// A peak row's label with its distance, or why it has none.
pub fn label_column(r: &PeakRow) -> String {
    match (&r.label, &r.no_label) {
        (Some(l), _) => peak_label_long(l),
        (None, Some(n)) => no_label(n),
        (None, None) => String::new(),
    }
}

pub const PEAKS_CSV_HEADER: &str = "layer,op,peak,first_bucket,last_bucket,mode_bucket,lower_ns,upper_ns,mode_ns,count,count_share,latency_ns,latency_share,layer_latency_share,time_start_ns,time_end_ns,label,unit,label_note";

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
            "{},{},{},{},{},{},{:.1},{:.1},{:.1},{},{:.6},{:.1},{:.6},{:.6},{},{},{},{},{}",
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
            r.unit.symbol(),
            field(&match (&r.label, &r.no_label) {
                (Some(l), _) => crate::reason::label_distance(l).unwrap_or_default(),
                (None, Some(n)) => no_label(n),
                (None, None) => String::new(),
            })
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

#[cfg(test)]
mod json_tests {
    use fsprof_analysis::compare::{compare_profiles, CompareOptions};
    use fsprof_testkit::profiles::{op, profile_of};

    /// Every key of the comparison once (a flattened struct with a field of
    /// the same name writes it twice, and readers keep either).
    #[test]
    fn comparison_json_has_each_key_once() {
        let a = profile_of("user", vec![op("read", &[(9, 100)])]);
        let b = profile_of("user", vec![op("read", &[(12, 100)])]);
        let c = compare_profiles(&a, &b, &CompareOptions::default());
        let text = super::comparison_json(&c, "a", "b");
        assert_eq!(text.matches("\n    \"ops\": [").count(), 1, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let read = &v["comparison"]["ops"][0];
        assert!(read["reason"].as_str().unwrap().starts_with("read: "));
        assert_eq!(read["checks"][0]["test"], "shift");
        assert_eq!(v["comparison"]["runs_a"], 1);
    }
}
