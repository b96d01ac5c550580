//! Automatic selection of what to look at in one profile (issue item 5):
//! the ops that hold most of the latency, and pairs of peaks in different
//! ops with the same number of calls — the signature of one operation
//! causing the other (FSprof §5.1.1: `read_inode` calls = the slow peak of
//! `lookup`; OSprof §6.2: a `readdir` peak = the `readpage` count).

use fsprof_core::{OpStats, Profile, Resolution};
use serde::{Deserialize, Serialize};

use crate::labels::Calibration;
use crate::peak_labels::PeakLabel;
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
    /// The peak worth naming: the only one, or the one holding most of the
    /// op's latency (an index into `peaks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead: Option<usize>,
    /// The calibrated characteristic the lead peak is near.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<PeakLabel>,
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
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interesting {
    /// The resolution the peaks' bucket indices are at.
    pub resolution: Resolution,
    pub top: Vec<TopOp>,
    pub correlated: Vec<CorrelatedPeaks>,
}

pub fn interesting(
    p: &Profile,
    opts: &SelectOptions,
    calibration: Option<&Calibration>,
) -> Interesting {
    let res = p.resolution();
    let mut out = Interesting {
        resolution: res,
        ..Default::default()
    };
    // Every (layer, op, peaks) once, for both parts.
    let mut all: Vec<(&str, &OpStats, Vec<Peak>)> = Vec::new();
    for l in &p.layers {
        let total = l.total_ns();
        let mut ops: Vec<&OpStats> = l.ops.iter().filter(|o| o.post > 0).collect();
        ops.sort_by(|a, b| OpStats::by_latency(a, b));
        let mut covered = 0.0;
        let mut taken = 0;
        for o in &ops {
            let peaks = find_peaks_with(&o.histogram, res, &opts.peaks);
            let share = if total == 0 {
                0.0
            } else {
                o.total_ns as f64 / total as f64
            };
            if covered < opts.cover && taken < opts.max_ops {
                covered += share;
                taken += 1;
                let lead = peaks
                    .iter()
                    .enumerate()
                    .max_by(|(_, a), (_, b)| a.latency_share.total_cmp(&b.latency_share))
                    .map(|(k, _)| k);
                out.top.push(TopOp {
                    layer: l.name.clone(),
                    op: o.name.clone(),
                    calls: o.post,
                    total_ns: o.total_ns,
                    latency_share: share,
                    lead,
                    label: lead.and_then(|k| calibration?.label_peak(&l.name, o, &peaks[k], res)),
                    peaks: peaks.clone(),
                });
            }
            all.push((&l.name, o, peaks));
        }
    }

    out.correlated = correlated(&all, opts);
    out
}

/// Peaks compared for a correlation with one peak: those next in count
/// order, within the tolerance, at most this many. Real profiles never
/// come near it (a few thousand peaks in all); a profile of 100k
/// look-alike ops would otherwise make the search quadratic.
const PAIR_WINDOW: usize = 512;

/// Pairs of peaks in different ops with the same number of calls (within
/// the tolerance), closest counts first, then the pairs holding most
/// latency.
fn correlated(all: &[(&str, &OpStats, Vec<Peak>)], opts: &SelectOptions) -> Vec<CorrelatedPeaks> {
    let peak_ref = |x: usize, i: usize| PeakRef {
        layer: all[x].0.to_string(),
        op: all[x].1.name.clone(),
        index: i,
        peak: all[x].2[i].clone(),
    };
    best_pairs(all, opts)
        .into_iter()
        .map(|(diff, _, x, i, y, j)| CorrelatedPeaks {
            a: peak_ref(x, i),
            b: peak_ref(y, j),
            count_diff: diff,
        })
        .collect()
}

/// A candidate pair: (count difference, -latency, op x, peak i, op y,
/// peak j); ties keep the order of a scan over ops x < y, then peaks i, j.
type PairKey = (f64, f64, usize, usize, usize, usize);

/// The best `max_pairs` pairs. Peaks are sorted by count, so each is
/// compared only with the ones after it up to `count / (1 - tolerance)`.
fn best_pairs(all: &[(&str, &OpStats, Vec<Peak>)], opts: &SelectOptions) -> Vec<PairKey> {
    let mut peaks: Vec<(u64, usize, usize)> = all
        .iter()
        .enumerate()
        .flat_map(|(x, (_, _, ps))| ps.iter().enumerate().map(move |(i, p)| (p.count, x, i)))
        .filter(|&(c, _, _)| c >= opts.min_peak_calls)
        .collect();
    peaks.sort_unstable();
    // Op names as small numbers: the inner loop compares them for every
    // candidate pair.
    let mut ids: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let name_id: Vec<usize> = all
        .iter()
        .map(|(_, o, _)| {
            let n = ids.len();
            *ids.entry(&o.name[..]).or_insert(n)
        })
        .collect();
    let limit = |c: u64| {
        if opts.count_tolerance >= 1.0 {
            f64::INFINITY
        } else {
            c as f64 / (1.0 - opts.count_tolerance)
        }
    };
    let mut best: Vec<PairKey> = Vec::new();
    let keep = |best: &mut Vec<PairKey>| {
        best.sort_by(|p, q| {
            p.0.total_cmp(&q.0)
                .then(p.1.total_cmp(&q.1))
                .then((p.2, p.4, p.3, p.5).cmp(&(q.2, q.4, q.3, q.5)))
        });
        best.truncate(opts.max_pairs);
    };
    for (k, &(ca, xa, ia)) in peaks.iter().enumerate() {
        for &(cb, xb, ib) in peaks[k + 1..].iter().take(PAIR_WINDOW) {
            if cb as f64 > limit(ca) * (1.0 + 1e-9) {
                break;
            }
            let diff = (cb - ca) as f64 / cb as f64;
            // The same op seen at two layers is correlated by construction.
            if diff > opts.count_tolerance || name_id[xa] == name_id[xb] {
                continue;
            }
            let ((x, i), (y, j)) = if (xa, ia) < (xb, ib) {
                ((xa, ia), (xb, ib))
            } else {
                ((xb, ib), (xa, ia))
            };
            let (a, b) = (&all[x].2[i], &all[y].2[j]);
            // Whole-op vs whole-op (open vs close) is bookkeeping, not a
            // finding: one side must be a sub-population.
            if a.count_share >= 0.95 && b.count_share >= 0.95 {
                continue;
            }
            best.push((diff, -(a.latency_ns + b.latency_ns), x, i, y, j));
            if best.len() > 8 * opts.max_pairs.max(8) {
                keep(&mut best);
            }
        }
    }
    keep(&mut best);
    best
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
        assert_eq!((c.a.peak.mode, c.b.peak.count_share), (17, 1.0));
        // lookup holds most latency and comes first; of its 2 peaks the
        // slow one holds most of its latency.
        let top = &got.top[0];
        assert_eq!(
            (top.op.as_str(), top.peaks.len(), top.lead),
            ("lookup", 2, Some(1))
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

    /// Every pair of peaks in different ops, as `interesting` once looked
    /// at them (quadratic): the reference the count-sorted search must
    /// match wherever no count has more than `PAIR_WINDOW` neighbours.
    fn correlated_by_scan(
        all: &[(&str, &OpStats, Vec<Peak>)],
        opts: &SelectOptions,
    ) -> Vec<(usize, usize, usize, usize)> {
        let mut pairs = Vec::new();
        for (x, (_, oa, pa)) in all.iter().enumerate() {
            for (y, (_, ob, pb)) in all.iter().enumerate().skip(x + 1) {
                if oa.name == ob.name {
                    continue;
                }
                for (i, a) in pa.iter().enumerate() {
                    for (j, b) in pb.iter().enumerate() {
                        let (ca, cb) = (a.count, b.count);
                        if ca.min(cb) < opts.min_peak_calls {
                            continue;
                        }
                        let diff = ca.abs_diff(cb) as f64 / ca.max(cb) as f64;
                        let partial = a.count_share < 0.95 || b.count_share < 0.95;
                        if diff <= opts.count_tolerance && partial {
                            pairs.push((diff, -(a.latency_ns + b.latency_ns), (x, y, i, j)));
                        }
                    }
                }
            }
        }
        pairs.sort_by(|p, q| p.0.total_cmp(&q.0).then(p.1.total_cmp(&q.1)));
        pairs
            .into_iter()
            .take(opts.max_pairs)
            .map(|p| p.2)
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn count_sorted_search_finds_what_a_full_scan_finds(
            ops in proptest::collection::vec(
                (0usize..3, 0usize..4, proptest::collection::vec((5i32..30, 1u64..60), 1..6)),
                2..12,
            ),
            tolerance in 0.0f64..0.3,
        ) {
            let names = ["read", "write", "stat", "open"];
            let mut p = Profile::new(Meta::default());
            for (layer, name, buckets) in &ops {
                let l = p.layer_mut(["user", "fs", "block"][*layer]);
                if l.op(names[*name]).is_none() {
                    l.ops.push(op(names[*name], buckets));
                }
            }
            let opts = SelectOptions { count_tolerance: tolerance, min_peak_calls: 5, ..Default::default() };
            let res = p.resolution();
            let peak_opts = &opts.peaks;
            let all: Vec<(&str, &OpStats, Vec<Peak>)> = p
                .layers
                .iter()
                .flat_map(|l| {
                    l.ops.iter().filter(|o| o.post > 0).map(move |o| {
                        (l.name.as_str(), o, find_peaks_with(&o.histogram, res, peak_opts))
                    })
                })
                .collect();
            let got: Vec<(usize, usize, usize, usize)> = correlated(&all, &opts)
                .iter()
                .map(|c| {
                    let at = |r: &PeakRef| all.iter().position(|(l, o, _)| *l == r.layer && o.name == r.op).unwrap();
                    (at(&c.a), at(&c.b), c.a.index, c.b.index)
                })
                .collect();
            proptest::prop_assert_eq!(got, correlated_by_scan(&all, &opts));
        }
    }
}
