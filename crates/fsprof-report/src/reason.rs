//! The analysis findings in words: why `compare` flagged an op, why
//! `report --interesting` picked one, what a peak label says. fsprof-analysis
//! returns the facts as data; every sentence about them is made here, so
//! that text, CSV, JSON, HTML and the replay report say the same thing.

use fsprof_analysis::compare::{
    Comparison, Finding, Method, Moved, OpComparison, PeakChange, SeenPeak, Status,
};
use fsprof_analysis::fmt::{bucket_human, pct};
use fsprof_analysis::peak_labels::PeakLabel;
use fsprof_analysis::select::{CorrelatedPeaks, Interesting, PeakRef, TopOp};
use fsprof_core::layer::Unit;
use fsprof_core::units::format_bytes;
use fsprof_core::Resolution;

/// `≈ device read (128 KiB)`, `≈ page-cache hit`.
pub fn peak_label(l: &PeakLabel) -> String {
    match l.size_bytes {
        Some(s) => format!("≈ {} ({})", l.label, format_bytes(s as f64)),
        None => format!("≈ {}", l.label),
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

/// One line for people, starting with the op name: `read: new peak at
/// 2.10ms..4.19ms, 12% of total latency; EMD 1.20 ≥ 0.50; ...`.
pub fn compare_reason(c: &Comparison, o: &OpComparison) -> String {
    let name = &o.op;
    let u = Unit::of(&o.layer);
    let d = match &o.finding {
        Finding::OneSided { counts } => {
            let (side, n, share) = if o.status == Status::Added {
                ("B", o.calls_b, o.latency_share_b)
            } else {
                ("A", o.calls_a, o.latency_share_a)
            };
            let minor = if *counts {
                String::new()
            } else {
                format!(" (under {}: does not count as a change)", pct(c.negligible))
            };
            return format!(
                "{name}: only in {side}, {}, {} of total latency{minor}",
                calls(n),
                pct(share)
            );
        }
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
                pct(c.negligible)
            )
        }
        Finding::Compared(d) => d,
    };
    let mut parts = Vec::new();
    if let Some(l) = &d.lead {
        parts.push(peak_change(l, c.resolution, u));
    }
    if let Some(s) = o.score {
        let cmp = if s >= c.threshold { "≥" } else { "<" };
        let mut line = format!("{} {s:.2} {cmp} {:.2}", method_label(o.method), c.threshold);
        if let Some(shift) = d.shift {
            let dir = direction(u, shift > 0.0);
            line.push_str(&format!(" ({:.2} powers of two {dir})", shift.abs()));
        }
        parts.push(line);
    }
    parts.push(moved(&d.moved, u));
    format!("{name}: {}", parts.join("; "))
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
        assert!(
            r.contains("EMD 3.00 ≥ 0.50 (3.00 powers of two slower)"),
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
            "fcntl: only in B, 11 calls, 0.0% of total latency (under 1.0%: does not count as a change)"
        );
        assert_eq!(reason_of(&c, "read"), "read: identical");
        assert_eq!(
            reason_of(&c, "stat"),
            "stat: too few calls to compare (3 and 4)"
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
}
