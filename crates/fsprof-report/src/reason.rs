//! The analysis findings in words: why `compare` flagged an op, why
//! `report --interesting` picked one, what a peak label says. fsprof-analysis
//! returns the facts as data; every sentence about them is made here, so
//! that text, CSV, JSON, HTML and the replay report say the same thing.

use fsprof_analysis::compare::{
    judged_with, layer_can_decide, Check, Comparison, Finding, Method, Moved, OpComparison,
    PeakChange, SeenPeak, Spread, Status, TestKind,
};
use fsprof_analysis::fmt::{bucket_human, pct};
use fsprof_analysis::peak_labels::{NoLabel, PeakLabel};
use fsprof_analysis::select::{CorrelatedPeaks, Interesting, PeakRef, TopOp};
use fsprof_core::layer::Unit;
use fsprof_core::units::format_bytes;
use fsprof_core::Resolution;

/// `≈ device read (128 KiB)`, `≈ page-cache hit`.
pub fn peak_label(l: &PeakLabel) -> String {
    format!("≈ {}", cause(l))
}

/// `device read (128 KiB)`, `fsync`.
fn cause(l: &PeakLabel) -> String {
    match l.size_bytes {
        Some(s) => format!("{} ({})", l.label, format_bytes(s as f64)),
        None => l.label.clone(),
    }
}

/// How far a peak is from a cause: `3.7× its calibrated median`, `2.1×
/// faster than its calibrated median`; `None` within 1.41× of it (half a
/// bucket: no better known).
pub fn label_distance(l: &PeakLabel) -> Option<String> {
    if l.ratio >= std::f64::consts::SQRT_2 {
        Some(format!("{:.1}× its calibrated median", l.ratio))
    } else if l.ratio <= std::f64::consts::FRAC_1_SQRT_2 {
        Some(format!(
            "{:.1}× faster than its calibrated median",
            1.0 / l.ratio
        ))
    } else {
        None
    }
}

/// A label with its distance: `≈ device read (32 KiB), 3.7× its
/// calibrated median`.
pub fn peak_label_long(l: &PeakLabel) -> String {
    match label_distance(l) {
        Some(d) => format!("{}, {d}", peak_label(l)),
        None => peak_label(l),
    }
}

/// `device read (4 KiB) at 1.2×`.
fn cause_at(l: &PeakLabel) -> String {
    format!("{} at {:.1}×", cause(l), l.ratio)
}

/// Why a peak got no label, one line: `no label: device read (4 KiB), at
/// 1.2× its median, was unstable during calibration (rounds 2.4× apart):
/// calibrate again on an idle machine`.
pub fn no_label(n: &NoLabel) -> String {
    match n {
        NoLabel::NotCalibrated { names, size_bytes } => {
            let at = size_bytes.map_or(String::new(), |s| {
                format!(" at {}", format_bytes(s as f64))
            });
            format!(
                "no label: the calibration has no {}{at}",
                names.join(" or ").replace('_', " ")
            )
        }
        NoLabel::Unstable { cause: c, spread } => format!(
            "no label: {}, at {:.1}× its median, was unstable during calibration (rounds {spread:.1}× apart): calibrate again on an idle machine",
            cause(c),
            c.ratio
        ),
        NoLabel::Between { a, b } => format!(
            "no label: between {} and {} (medians), too near both to tell",
            cause_at(a),
            cause_at(b)
        ),
        NoLabel::Far { nearest } => {
            let how = if nearest.ratio >= 1.0 {
                format!("{:.1}× slower", nearest.ratio)
            } else {
                format!("{:.1}× faster", 1.0 / nearest.ratio)
            };
            format!(
                "no label: {how} than the nearest calibrated cause, {}",
                cause(nearest)
            )
        }
    }
}

/// How a method's score is named: `EMD`, `chi2`, ...
fn method_label(m: Method) -> &'static str {
    match m {
        Method::Emd => "EMD",
        Method::Chi2 => "chi2",
        Method::Jeffrey => "Jeffrey",
        Method::Count => "count diff",
        Method::Latency => "latency diff",
    }
}

/// Which way values moved: latencies get slower or faster, a byte
/// layer's requests larger or smaller.
fn direction(u: Unit, up: bool) -> &'static str {
    match (u, up) {
        (Unit::Ns, true) => "slower",
        (Unit::Ns, false) => "faster",
        (Unit::Bytes, true) => "larger",
        (Unit::Bytes, false) => "smaller",
    }
}

/// A peak by its mode bucket, with its label: `2.10ms..4.19ms ≈ device read`.
fn seen_peak(p: &SeenPeak, res: Resolution, u: Unit) -> String {
    let mut s = bucket_human(p.peak.mode, res, u);
    if let Some(l) = &p.label {
        s.push(' ');
        s.push_str(&peak_label(l));
    }
    s
}

fn peak_change(c: &PeakChange, res: Resolution, u: Unit) -> String {
    match c {
        PeakChange::New {
            b,
            layer_latency_share,
            ..
        } => format!(
            "new peak at {}, {} of total latency",
            seen_peak(b, res, u),
            pct(*layer_latency_share)
        ),
        PeakChange::Gone {
            a,
            layer_latency_share,
            ..
        } => format!(
            "peak at {} gone (had {} of total latency)",
            seen_peak(a, res, u),
            pct(*layer_latency_share)
        ),
        PeakChange::Moved { a, b, .. } => format!(
            "peak moved from {} to {}",
            seen_peak(a, res, u),
            seen_peak(b, res, u)
        ),
    }
}

fn calls(n: u64) -> String {
    format!("{n} calls")
}

fn moved(m: &Moved, u: Unit) -> String {
    let f = |v: f64| u.format(v);
    match *m {
        Moved::Calls { a, b } => format!("{} → {}", calls(a), calls(b)),
        Moved::Total { a, b } => format!("total {} → {}", f(a), f(b)),
        Moved::Mean { a, b } => format!("mean {} → {}", f(a), f(b)),
        Moved::GeometricMean { a, b } => format!("geometric mean {} → {}", f(a), f(b)),
    }
}

/// A p-value as people read it: `0.0004`, `0.21`, `<1e-6`.
pub fn p_value(p: f64) -> String {
    if p < 1e-6 {
        "<1e-6".into()
    } else if p < 0.001 {
        format!("{p:.1e}")
    } else if p < 0.01 {
        format!("{p:.4}")
    } else {
        format!("{p:.3}")
    }
}

/// `2.01×`, `13.4×`, `1308×`, from a change in powers of two.
fn times(powers: f64) -> String {
    let x = powers.abs().exp2();
    if x < 10.0 {
        format!("{x:.2}×")
    } else if x < 100.0 {
        format!("{x:.1}×")
    } else {
        format!("{x:.0}×")
    }
}

/// What a test found, without its verdict: `calls 2.01× slower`, `time
/// in it 1.30× longer`.
pub fn test_finding(k: &Check, u: Unit) -> String {
    let up = k.effect > 0.0;
    match k.test {
        TestKind::Shift => format!("calls {} {}", times(k.effect), direction(u, up)),
        TestKind::Time => format!(
            "time in it {} {}",
            times(k.effect),
            if up { "longer" } else { "shorter" }
        ),
    }
}

/// How a test's verdict came about: `p 0.0004 ≤ 0.025, spread between
/// runs ±0.12` or why it could not decide.
pub fn test_verdict(c: &Comparison, k: &Check) -> String {
    let spread = match k.spread {
        Spread::Runs { sd, .. } => format!(", spread between runs ±{sd:.2}"),
        Spread::Assumed { sd, .. } => format!(", one run per side: assumed spread ±{sd:.2}"),
    };
    match k.level {
        None => format!(
            "moves {} of the latency, under {}: cannot decide",
            pct(k.moved),
            pct(c.terms.min_share)
        ),
        Some(l) if k.decides => format!(
            "p {} ≤ {}, {}{spread}",
            p_value(k.p_value),
            p_value(l),
            moved_words(k.moved)
        ),
        Some(l) if k.p_value <= l => format!(
            "p {} ≤ {}, but a clearer test failed first (Holm)",
            p_value(k.p_value),
            p_value(l)
        ),
        Some(l) => format!("p {} > {}{spread}", p_value(k.p_value), p_value(l)),
    }
}

/// The share of its layer's latency a change moved: `moves 5.2% of the
/// latency`; a change larger than the whole layer was (an op that became
/// most of it) as a multiple, not as thousands of percent.
fn moved_words(m: f64) -> String {
    if m >= 1.0 {
        format!("adds {m:.1}× the layer's latency")
    } else {
        format!("moves {} of the latency", pct(m))
    }
}

/// The one-line verdict of a compared op: the deciding test, else the
/// nearest one with why it did not decide. Effects are beyond the shift
/// the op's whole layer made, when there was one.
fn verdict(c: &Comparison, o: &OpComparison, u: Unit) -> Option<String> {
    let beyond = c.layer_shifts.iter().any(|s| {
        judged_with(&s.layer) == judged_with(&o.layer) && s.ops >= 3 && s.shift.abs() >= 0.05
    });
    let found = |k: &Check| {
        let mut f = test_finding(k, u);
        if let Some(exe) = &o.process {
            let name = exe.rsplit('/').next().unwrap_or(exe);
            f.push_str(&format!(" beyond its process's shift ({name})"));
        } else if beyond {
            f.push_str(" beyond the profile shift");
        }
        f
    };
    if let Some(k) = o.decided_by() {
        return Some(format!(
            "{} (by {}: {})",
            found(k),
            test_name(k.test),
            test_verdict(c, k)
        ));
    }
    let k = o.nearest()?;
    Some(format!("no change: {}, {}", found(k), test_verdict(c, k)))
}

/// `shift`, `time`.
pub fn test_name(t: TestKind) -> &'static str {
    match t {
        TestKind::Shift => "shift",
        TestKind::Time => "time",
    }
}

/// One line for people, starting with the op name: `read: new peak at
/// 2.10ms..4.19ms, 12% of total latency; time in it 3.10× longer (by time:
/// p 2.1e-5 ≤ 0.025, one run per side: assumed spread ±0.31); EMD 1.20
/// (1.02 powers of two slower); geometric mean 1.2µs → 2.4µs`.
pub fn compare_reason(c: &Comparison, o: &OpComparison) -> String {
    let name = &o.op;
    let u = Unit::of(&o.layer);
    let d = match &o.finding {
        Finding::OneSided { counts } => return one_sided(c, o, *counts),
        Finding::Identical => return format!("{name}: identical"),
        Finding::TooFewCalls => {
            return format!(
                "{name}: too few calls to compare ({} and {})",
                o.calls_a, o.calls_b
            )
        }
        Finding::Negligible => {
            return format!(
                "{name}: negligible (under {} of calls and latency on both sides)",
                pct(c.terms.negligible)
            )
        }
        Finding::Compared(d) => d,
    };
    let mut parts = Vec::new();
    if let Some(l) = &d.lead {
        parts.push(peak_change(l, c.terms.resolution, u));
    }
    parts.extend(verdict(c, o, u));
    if let Some(s) = o.score {
        let mut line = format!("{} {s:.2}", method_label(o.method));
        if let Some(shift) = d.shift {
            let dir = direction(u, shift > 0.0);
            line.push_str(&format!(" ({:.2} powers of two {dir})", shift.abs()));
        }
        parts.push(line);
    }
    parts.push(moved(&d.moved, u));
    format!("{name}: {}", parts.join("; "))
}

fn one_sided(c: &Comparison, o: &OpComparison, counts: bool) -> String {
    let (side, n, share) = if o.status == Status::Added {
        ("B", o.calls_b, o.latency_share_b)
    } else {
        ("A", o.calls_a, o.latency_share_a)
    };
    let minor = if counts {
        String::new()
    } else if share < c.terms.min_share {
        format!(
            " (under {}: does not count as a change)",
            pct(c.terms.min_share)
        )
    } else {
        format!(" (not in every run of {side}: does not count as a change)")
    };
    format!(
        "{}: only in {side}, {}, {} of total latency{minor}",
        o.op,
        calls(n),
        pct(share)
    )
}

/// The profile shift of a layer in words, when there is one worth naming
/// or it decided: `user: every op 1.62× slower in B (the median of 5 ops),
/// taken out before each op is judged; no change: p 0.21 > 0.05, ...`.
pub fn layer_shift(c: &Comparison, s: &fsprof_analysis::compare::LayerShift) -> Option<String> {
    if s.ops < 3 || (s.shift.abs() < 0.05 && !s.decides()) {
        return None;
    }
    let mut line = format!(
        "{}: every op {} {} in B (the median of {} ops), taken out before each op is judged",
        s.layer,
        times(s.shift),
        direction(Unit::of(&s.layer), s.shift > 0.0),
        s.ops
    );
    if let Some(k) = &s.check {
        let verdict = test_verdict(c, k);
        if !layer_can_decide(c.terms.runs_a, c.terms.runs_b, c.terms.shortest_run_ns) {
            line.push_str(&format!(
                "; not judged with one run per side (p {}): a slower machine moves runs under 1 s whole",
                p_value(k.p_value)
            ));
        } else if s.decides() {
            line.push_str(&format!("; a change of the whole layer ({verdict})"));
        } else {
            line.push_str(&format!("; not a change by itself ({verdict})"));
        }
    }
    Some(line)
}

/// Why `report --interesting` picked an op: `read: 62% of user latency, 2
/// peaks; the one at 2.10ms..4.19ms holds 80% of its latency with 12% of
/// its calls`.
pub fn top_reason(i: &Interesting, t: &TopOp) -> String {
    let (res, u) = (i.resolution, Unit::of(&t.layer));
    let mut s = format!("{}: {} of {} latency", t.op, pct(t.latency_share), t.layer);
    let Some(lead) = t.lead.and_then(|k| t.peaks.get(k)) else {
        return s;
    };
    let at = bucket_human(lead.mode, res, u);
    let label = t
        .label
        .as_ref()
        .map(|l| format!(" {}", peak_label(l)))
        .unwrap_or_default();
    match t.peaks.len() {
        1 => s.push_str(&format!(", one peak at {at}{label}")),
        n => s.push_str(&format!(
            ", {n} peaks; the one at {at}{label} holds {} of its latency with {} of its calls",
            pct(lead.latency_share),
            pct(lead.count_share)
        )),
    }
    s
}

/// `fs/lookup peak at 131µs..262µs (300 calls) ≈ fs/read_inode (all 300
/// calls): one may cause the other`.
pub fn pair_reason(i: &Interesting, c: &CorrelatedPeaks) -> String {
    let side = |r: &PeakRef| {
        let p = &r.peak;
        if p.count_share >= 0.95 {
            format!("{}/{} (all {} calls)", r.layer, r.op, p.count)
        } else {
            format!(
                "{}/{} peak at {} ({} calls)",
                r.layer,
                r.op,
                bucket_human(p.mode, i.resolution, Unit::of(&r.layer)),
                p.count
            )
        }
    };
    format!("{} ≈ {}: one may cause the other", side(&c.a), side(&c.b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_analysis::compare::{compare_profiles, CompareOptions};
    use fsprof_analysis::select::{interesting, SelectOptions};
    use fsprof_analysis::Calibration;
    use fsprof_core::Profile;
    use fsprof_testkit::profiles::op;

    fn profile(ops: Vec<fsprof_core::OpStats>) -> Profile {
        fsprof_testkit::profiles::profile_of("user", ops)
    }

    fn reason_of(c: &Comparison, op: &str) -> String {
        compare_reason(c, c.ops.iter().find(|o| o.op == op).unwrap())
    }

    #[test]
    fn a_new_slow_peak_is_named_with_its_share_and_the_score() {
        let a = profile(vec![op("read", &[(9, 1000), (10, 200)])]);
        let b = profile(vec![op("read", &[(9, 1000), (10, 200), (21, 100)])]);
        let c = compare_profiles(&a, &b, &CompareOptions::default());
        let r = reason_of(&c, "read");
        assert!(r.starts_with("read: new peak at 2.10ms..4.19ms, "), "{r}");
        assert!(r.contains("; EMD "), "{r}");
    }

    #[test]
    fn a_shift_says_how_far_and_which_way() {
        let a = profile(vec![op("read", &[(9, 100)])]);
        let b = profile(vec![op("read", &[(12, 100)])]);
        let c = compare_profiles(&a, &b, &CompareOptions::default());
        let r = reason_of(&c, "read");
        assert!(r.contains("EMD 3.00 (3.00 powers of two slower)"), "{r}");
        assert!(
            r.contains("calls 8.00× slower (by shift: p ")
                && r.contains("one run per side: assumed spread ±"),
            "{r}"
        );
        let c = compare_profiles(&b, &a, &CompareOptions::default());
        assert!(reason_of(&c, "read").contains("powers of two faster"));
    }

    #[test]
    fn a_vanished_peak_and_a_labelled_one() {
        let cal =
            Calibration::from_json(fsprof_testkit::profiles::CALIBRATION_DEVICE_READ_3MS).unwrap();
        let a = profile(vec![op("read", &[(9, 1000), (21, 50)])]);
        let b = profile(vec![op("read", &[(9, 1000)])]);
        let o = CompareOptions {
            calibration: Some(cal),
            ..Default::default()
        };
        let c = compare_profiles(&b, &a, &o);
        assert!(
            reason_of(&c, "read").starts_with("read: new peak at 2.10ms..4.19ms ≈ device read, ")
        );
        let c = compare_profiles(&a, &b, &o);
        assert!(reason_of(&c, "read")
            .starts_with("read: peak at 2.10ms..4.19ms ≈ device read gone (had "));
    }

    #[test]
    fn ops_not_compared_say_why() {
        let a = profile(vec![op("read", &[(12, 500)]), op("stat", &[(8, 3)])]);
        let b = profile(vec![
            op("read", &[(12, 500)]),
            op("fcntl", &[(6, 11)]),
            op("stat", &[(8, 4)]),
        ]);
        let c = compare_profiles(&a, &b, &CompareOptions::default());
        assert_eq!(
            reason_of(&c, "fcntl"),
            "fcntl: only in B, 11 calls, 0.0% of total latency (under 3.0%: does not count as a change)"
        );
        assert_eq!(reason_of(&c, "read"), "read: identical");
        assert_eq!(
            reason_of(&c, "stat"),
            "stat: too few calls to compare (3 and 4)"
        );
    }

    /// One run a side: a whole layer 4× slower is printed with its test,
    /// and says why it did not decide; two runs a side decide it.
    #[test]
    fn a_layers_shift_says_one_run_a_side_cannot_judge_it() {
        use fsprof_analysis::compare::compare_runs;
        let at = |d: i32| {
            let names = ["read", "open", "close", "stat"];
            profile(
                names
                    .iter()
                    .map(|n| op(n, &[(9 + d, 500), (10 + d, 500)]))
                    .collect(),
            )
        };
        let c = compare_profiles(&at(0), &at(2), &CompareOptions::default());
        let line = layer_shift(&c, &c.layer_shifts[0]).unwrap();
        assert!(
            line.starts_with("user: every op 4.00× slower in B")
                && line.contains("; not judged with one run per side (p 0.00"),
            "{line}"
        );
        let c = compare_runs(&[at(0), at(0)], &[at(2), at(2)], &CompareOptions::default());
        let line = layer_shift(&c, &c.layer_shifts[0]).unwrap();
        assert!(line.contains("; a change of the whole layer (p "), "{line}");
    }

    /// A deciding test states the share of latency its change moved; an
    /// op judged after its process's shift names the process.
    #[test]
    fn a_decision_states_what_it_moved_and_whose_shift_was_out() {
        let sh = |d: i32| {
            vec![
                op("readdir", &[(5 + d, 573)]),
                op("stat", &[(9, 17)]),
                op("opendir", &[(12, 1)]),
                op("closedir", &[(13, 1)]),
            ]
        };
        let head = vec![op("open", &[(12, 138)]), op("read", &[(11, 139)])];
        let run = |d: i32| {
            let mut p = profile(sh(d).into_iter().chain(head.clone()).collect());
            let process = |exe: &str, ops: Vec<fsprof_core::OpStats>| fsprof_core::Process {
                exe: exe.into(),
                layers: vec![fsprof_core::Layer {
                    name: "user".into(),
                    ops,
                }],
                ..Default::default()
            };
            p.processes = vec![
                process("/bin/sh", sh(d)),
                process("/usr/bin/head", head.clone()),
            ];
            p
        };
        let c = compare_profiles(&run(0), &run(2), &CompareOptions::default());
        let r = reason_of(&c, "readdir");
        assert!(
            r.contains("calls 4.00× slower beyond its process's shift (sh) (by shift: p ")
                && r.contains(", moves 6.2% of the latency, one run per side"),
            "{r}"
        );
    }

    #[test]
    fn interesting_ops_and_pairs_in_words() {
        let mut p = fsprof_core::Profile::new(Default::default());
        p.layer_mut("fs").ops = vec![
            op("lookup", &[(9, 1200), (10, 500), (17, 180), (18, 120)]),
            op("read_inode", &[(16, 200), (17, 100)]),
        ];
        let i = interesting(&p, &SelectOptions::default(), None);
        assert_eq!(
            pair_reason(&i, &i.correlated[0]),
            "fs/lookup peak at 131µs..262µs (300 calls) ≈ fs/read_inode (all 300 calls): one may cause the other"
        );
        let r = top_reason(&i, &i.top[0]);
        assert!(
            r.starts_with("lookup: ") && r.contains(", 2 peaks; the one at 131µs..262µs holds "),
            "{r}"
        );
    }

    #[test]
    fn labels_say_how_far_and_no_labels_say_why() {
        use fsprof_analysis::peak_labels::{NoLabel, PeakLabel};
        let l = |ratio: f64| PeakLabel {
            name: "device_read".into(),
            label: "device read".into(),
            size_bytes: Some(32768),
            ratio,
        };
        assert_eq!(
            peak_label_long(&l(3.66)),
            "≈ device read (32 KiB), 3.7× its calibrated median"
        );
        assert_eq!(peak_label_long(&l(1.1)), "≈ device read (32 KiB)");
        assert_eq!(
            no_label(&NoLabel::Unstable {
                cause: l(1.2),
                spread: 2.4
            }),
            "no label: device read (32 KiB), at 1.2× its median, was unstable during calibration (rounds 2.4× apart): calibrate again on an idle machine"
        );
        assert_eq!(
            no_label(&NoLabel::Far { nearest: l(0.25) }),
            "no label: 4.0× faster than the nearest calibrated cause, device read (32 KiB)"
        );
        assert_eq!(
            no_label(&NoLabel::NotCalibrated {
                names: vec!["page_cache_hit".into(), "device_read".into()],
                size_bytes: Some(1 << 20)
            }),
            "no label: the calibration has no page cache hit or device read at 1 MiB"
        );
    }
}
