//! Automatic selection of what to look at in one profile (issue item 5):
//! the ops that hold most of the latency, and pairs of peaks in different
//! ops with the same number of calls — the signature of one operation
//! causing the other (FSprof §5.1.1: `read_inode` calls = the slow peak of
//! `lookup`; OSprof §6.2: a `readdir` peak = the `readpage` count).

use fsprof_core::{OpStats, Profile, Resolution};
use serde::{Deserialize, Serialize};

use crate::fmt::{bucket_human, pct};
use crate::labels::Calibration;
use crate::peaks::{find_peaks_with, Peak, PeakOptions};

#[derive(Clone, Debug)]
pub struct SelectOptions {
    /// Per layer, take ops by decreasing latency until they cover this share
    /// of the layer's latency. Default 0.8.
    pub cover: f64,
    /// ... but at most this many per layer. Default 5.
    pub max_ops: usize,
    /// Two peaks are correlated when their call counts differ by at most
    /// this fraction of the larger. Default 0.01 (peak boundaries move a
    /// few calls between neighbouring buckets, so exact equality is rare).
    pub count_tolerance: f64,
    /// ... and each has at least this many calls (small counts match by
    /// chance). Default 20.
    pub min_peak_calls: u64,
    /// At most this many correlated pairs are reported. Default 10.
    pub max_pairs: usize,
    pub peaks: PeakOptions,
}

impl Default for SelectOptions {
    fn default() -> Self {
        SelectOptions {
            cover: 0.8,
            max_ops: 5,
            count_tolerance: 0.01,
            min_peak_calls: 20,
            max_pairs: 10,
            peaks: PeakOptions::default(),
        }
    }
}

/// An op picked for holding much of its layer's latency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopOp {
    pub layer: String,
    pub op: String,
    pub calls: u64,
    pub total_ns: u64,
    /// Of the layer's total latency.
    pub latency_share: f64,
    pub peaks: Vec<Peak>,
    /// One line: `read: 62% of user latency, 2 peaks; the one at 2^22 ns (4.19ms) holds 80% of it`.
    pub reason: String,
}

/// One side of a correlated pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeakRef {
    pub layer: String,
    pub op: String,
    /// Position of the peak among the op's peaks, 0 = fastest.
    pub index: usize,
    pub peak: Peak,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CorrelatedPeaks {
    pub a: PeakRef,
    pub b: PeakRef,
    /// `|count_a − count_b| / max`.
    pub count_diff: f64,
    /// One line: `fs/lookup peak at 2^18 ns (262µs) (300 calls) ≈ fs/read_inode (all 300 calls): one may cause the other`.
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interesting {
    pub top: Vec<TopOp>,
    pub correlated: Vec<CorrelatedPeaks>,
}

pub fn interesting(
    p: &Profile,
    opts: &SelectOptions,
    calibration: Option<&Calibration>,
) -> Interesting {
    let res = p.resolution();
    let mut out = Interesting::default();
    // Every (layer, op, peaks) once, for both parts.
    let mut all: Vec<(&str, &OpStats, Vec<Peak>)> = Vec::new();
    for l in &p.layers {
        let total = l.total_ns();
        let mut ops: Vec<&OpStats> = l.ops.iter().filter(|o| o.post > 0).collect();
        ops.sort_by(|a, b| OpStats::by_latency(a, b));
        let mut covered = 0.0;
        for o in &ops {
            let peaks = find_peaks_with(&o.histogram, res, &opts.peaks);
            let share = if total == 0 {
                0.0
            } else {
                o.total_ns as f64 / total as f64
            };
            if covered < opts.cover
                && out.top.iter().filter(|t| t.layer == l.name).count() < opts.max_ops
            {
                covered += share;
                out.top.push(TopOp {
                    layer: l.name.clone(),
                    op: o.name.clone(),
                    calls: o.post,
                    total_ns: o.total_ns,
                    latency_share: share,
                    reason: top_reason(&l.name, o, share, &peaks, res, calibration),
                    peaks: peaks.clone(),
                });
            }
            all.push((&l.name, o, peaks));
        }
    }

    let mut pairs = Vec::new();
    for (x, (la, oa, pa)) in all.iter().enumerate() {
        for (lb, ob, pb) in all.iter().skip(x + 1) {
            // The same op seen at two layers is correlated by construction.
            if oa.name == ob.name {
                continue;
            }
            for (ia, a) in pa.iter().enumerate() {
                for (ib, b) in pb.iter().enumerate() {
                    let (ca, cb) = (a.count, b.count);
                    if ca.min(cb) < opts.min_peak_calls {
                        continue;
                    }
                    let diff = ca.abs_diff(cb) as f64 / ca.max(cb) as f64;
                    // Whole-op vs whole-op (open vs close) is bookkeeping,
                    // not a finding: one side must be a sub-population.
                    let partial = a.count_share < 0.95 || b.count_share < 0.95;
                    if diff <= opts.count_tolerance && partial {
                        pairs.push((
                            diff,
                            -(a.latency_ns + b.latency_ns),
                            CorrelatedPeaks {
                                reason: pair_reason(la, oa, a, lb, ob, b, res),
                                a: PeakRef {
                                    layer: la.to_string(),
                                    op: oa.name.clone(),
                                    index: ia,
                                    peak: a.clone(),
                                },
                                b: PeakRef {
                                    layer: lb.to_string(),
                                    op: ob.name.clone(),
                                    index: ib,
                                    peak: b.clone(),
                                },
                                count_diff: diff,
                            },
                        ));
                    }
                }
            }
        }
    }
    // Closest counts first, then the pairs holding most latency.
    pairs.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)));
    out.correlated = pairs
        .into_iter()
        .take(opts.max_pairs)
        .map(|(_, _, c)| c)
        .collect();
    out
}

fn top_reason(
    layer: &str,
    o: &OpStats,
    share: f64,
    peaks: &[Peak],
    res: Resolution,
    cal: Option<&Calibration>,
) -> String {
    let mut s = format!("{}: {} of {layer} latency", o.name, pct(share));
    match peaks.len() {
        0 => {}
        1 => {
            s.push_str(&format!(
                ", one peak at {}",
                bucket_human(peaks[0].mode, res)
            ));
            if let Some(l) = cal.and_then(|c| c.label_peak(layer, o, &peaks[0], res)) {
                s.push_str(&format!(" {l}"));
            }
        }
        n => {
            let heavy = peaks
                .iter()
                .max_by(|a, b| a.latency_share.total_cmp(&b.latency_share))
                .unwrap();
            s.push_str(&format!(
                ", {n} peaks; the one at {}",
                bucket_human(heavy.mode, res)
            ));
            if let Some(l) = cal.and_then(|c| c.label_peak(layer, o, heavy, res)) {
                s.push_str(&format!(" {l}"));
            }
            s.push_str(&format!(
                " holds {} of its latency with {} of its calls",
                pct(heavy.latency_share),
                pct(heavy.count_share)
            ));
        }
    }
    s
}

fn pair_reason(
    la: &str,
    oa: &OpStats,
    a: &Peak,
    lb: &str,
    ob: &OpStats,
    b: &Peak,
    res: Resolution,
) -> String {
    let side = |l: &str, o: &OpStats, p: &Peak| {
        if p.count_share >= 0.95 {
            format!("{l}/{} (all {} calls)", o.name, p.count)
        } else {
            format!(
                "{l}/{} peak at {} ({} calls)",
                o.name,
                bucket_human(p.mode, res),
                p.count
            )
        }
    };
    format!(
        "{} ≈ {}: one may cause the other",
        side(la, oa, a),
        side(lb, ob, b)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::profile::Meta;
    use fsprof_testkit::profiles::op;

    #[test]
    fn finds_the_slow_lookup_peak_matching_read_inode() {
        // FSprof §5.1.1: 300 of 2000 lookups miss the cache and call read_inode.
        let mut p = Profile::new(Meta::default());
        let l = p.layer_mut("fs");
        l.ops = vec![
            op("lookup", &[(9, 1200), (10, 500), (17, 180), (18, 120)]),
            op("read_inode", &[(16, 200), (17, 100)]),
            op("open", &[(11, 1000)]),
            op("release", &[(8, 1000)]),
        ];
        let got = interesting(&p, &SelectOptions::default(), None);
        assert_eq!(got.correlated.len(), 1, "{:?}", got.correlated);
        let c = &got.correlated[0];
        assert_eq!((c.a.op.as_str(), c.b.op.as_str()), ("lookup", "read_inode"));
        assert_eq!((c.a.index, c.a.peak.count, c.b.peak.count), (1, 300, 300));
        assert_eq!(
            c.reason,
            "fs/lookup peak at 2^18 ns (262µs) (300 calls) ≈ fs/read_inode (all 300 calls): one may cause the other"
        );
        // lookup holds most latency and comes first.
        assert_eq!(got.top[0].op, "lookup");
        assert!(
            got.top[0].reason.contains("2 peaks"),
            "{}",
            got.top[0].reason
        );
    }

    #[test]
    fn top_ops_cover_the_requested_share() {
        let mut p = Profile::new(Meta::default());
        p.layer_mut("user").ops = vec![
            op("read", &[(20, 100)]),
            op("write", &[(19, 100)]),
            op("stat", &[(10, 100)]),
        ];
        let got = interesting(&p, &SelectOptions::default(), None);
        let names: Vec<&str> = got.top.iter().map(|t| t.op.as_str()).collect();
        assert_eq!(names, vec!["read", "write"]);
        assert!(got.correlated.is_empty());
    }
}
