//! What one run says about one op, for the tests of [`super::verdict`]:
//! where its calls sit on the log2 axis and how much time they took, each
//! with the sampling noise a histogram of `n` calls carries.

use fsprof_core::buckets::MIN_INDEX;
use fsprof_core::{Histogram, OpStats, Profile, Resolution};

/// One op in one run: its calls' first and second moments, on the log2
/// axis and in ns, from which [`super::verdict`] takes both the run's
/// statistic and, pooled over the runs, the sampling noise a histogram of
/// `calls` calls carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunStat {
    /// Calls in the histogram.
    pub calls: u64,
    /// Mean log2 latency (log2 ns), each call at the log-middle of its
    /// bucket: what the signed EMD and the geometric mean measure.
    pub log_mean: f64,
    /// Mean squared log2 latency, a bucket's calls spread evenly over it.
    pub log_sq: f64,
    /// The op's total latency, ns.
    pub total: f64,
    /// The total without its slowest call, ns: what the op holds of its
    /// layer when one call was preempted for milliseconds.
    pub trimmed: f64,
    /// Mean squared latency (ns²), from the buckets' middles and widths.
    pub lat_sq: f64,
    /// The op's share of its layer's total latency in this run.
    pub share: f64,
}

impl RunStat {
    /// `None` for an op without calls or time in this run: it has no
    /// position to compare.
    pub fn of(op: &OpStats, from: Resolution, at: Resolution, layer_ns: u64) -> Option<RunStat> {
        let h = op.histogram.downscale(from, at);
        let n = h.total();
        if n == 0 || op.total_ns == 0 {
            return None;
        }
        let (log_mean, log_sq) = log_moments(&h, at);
        let total = op.total_ns as f64;
        Some(RunStat {
            calls: n,
            log_mean,
            log_sq,
            total,
            trimmed: op.total_ns.saturating_sub(op.max_ns.unwrap_or(0)) as f64,
            lat_sq: latency_sq(&h, at),
            share: if layer_ns == 0 {
                0.0
            } else {
                total / layer_ns as f64
            },
        })
    }
}

/// Where bucket `i` sits on the log2 axis: its log-middle (the zero bucket
/// one bucket below the lowest).
fn position(i: i32, res: Resolution) -> f64 {
    (i as f64 + 0.5) / res.get() as f64
}

/// Mean and mean square of the calls' log2 latency.
fn log_moments(h: &Histogram, res: Resolution) -> (f64, f64) {
    let cells = || {
        std::iter::once((MIN_INDEX - 1, h.zero))
            .chain(h.buckets())
            .filter(|&(_, c)| c > 0)
    };
    let n = h.total() as f64;
    let width = 1.0 / res.get() as f64;
    let mean = cells()
        .map(|(i, c)| c as f64 * position(i, res))
        .sum::<f64>()
        / n;
    let sq = cells()
        .map(|(i, c)| c as f64 * (position(i, res).powi(2) + width * width / 12.0))
        .sum::<f64>()
        / n;
    (mean, sq)
}

/// Mean squared latency: each bucket's calls spread evenly over it (the
/// zero bucket at 0).
fn latency_sq(h: &Histogram, res: Resolution) -> f64 {
    let n = h.total() as f64;
    let mut ss = 0.0;
    for (i, c) in h.buckets() {
        let (lo, hi) = (res.lower_bound(i), res.upper_bound(i));
        ss += c as f64 * (lo * lo + lo * hi + hi * hi) / 3.0;
    }
    ss / n
}

/// The sampling variance of one call's log2 latency and of its latency,
/// pooled over `runs`: what the calls spread over when nothing changed
/// between the runs (the null hypothesis every test starts from).
pub fn pooled_variances(runs: &[RunStat]) -> (f64, f64) {
    let n: f64 = runs.iter().map(|r| r.calls as f64).sum();
    let w = |f: fn(&RunStat) -> f64| runs.iter().map(|r| r.calls as f64 * f(r)).sum::<f64>() / n;
    let log_var = w(|r| r.log_sq) - w(|r| r.log_mean).powi(2);
    let mean = runs.iter().map(|r| r.total).sum::<f64>() / n;
    let lat_var = w(|r| r.lat_sq) - mean * mean;
    (log_var.max(0.0), lat_var.max(0.0))
}

/// Each run's statistics of op `op` of layer `layer` at resolution `res`;
/// `None` where the run lacks the op (or its layer).
pub fn per_run(runs: &[Profile], layer: &str, op: &str, res: Resolution) -> Vec<Option<RunStat>> {
    runs.iter()
        .map(|p| {
            let l = p.layer(layer)?;
            RunStat::of(l.op(op)?, p.resolution(), res, l.total_ns())
        })
        .collect()
}

/// How far each run's ops sit from their mean over all runs, in the
/// median: the shift a run shares with every op (a busier or slower
/// machine), which [`super::verdict`] takes out before it judges an op.
/// `stats[op][run]`; ops missing from a run are left out of it; `skip`:
/// an op left out of every run (the one being judged: see
/// [`shifts_for`]). Zero without three ops to take a median of: with two,
/// a change of one would be half the "common" shift.
pub fn common_shifts(stats: &[Vec<Option<RunStat>>], runs: usize, skip: Option<usize>) -> Vec<f64> {
    let means: Vec<Option<f64>> = stats
        .iter()
        .map(|s| {
            let xs: Vec<f64> = s.iter().flatten().map(|r| r.log_mean).collect();
            (xs.len() == runs).then(|| xs.iter().sum::<f64>() / runs as f64)
        })
        .collect();
    (0..runs)
        .map(|r| {
            let devs: Vec<f64> = stats
                .iter()
                .zip(&means)
                .enumerate()
                .filter(|&(k, _)| Some(k) != skip)
                .filter_map(|(_, (s, m))| Some(s[r]?.log_mean - (*m)?))
                .collect();
            if devs.len() < 2 || (skip.is_none() && devs.len() < 3) {
                0.0
            } else {
                fsprof_core::stats::median(&devs).unwrap_or(0.0)
            }
        })
        .collect()
}

/// The profile shift each of `stats`' ops is judged after: the median of
/// the *other* ops' (with three ops or more in all). Its own change must
/// not move the shift it is measured from: with five ops, a `close` made
/// 2× slower became the median of its run often enough that its change,
/// the shift taken out, came to 0.6 powers of two, or to nothing.
pub fn shifts_for(stats: &[Vec<Option<RunStat>>], runs: usize) -> Vec<Vec<f64>> {
    if stats.len() < 3 {
        return vec![vec![0.0; runs]; stats.len()];
    }
    (0..stats.len())
        .map(|k| common_shifts(stats, runs, Some(k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_testkit::profiles::op;

    #[test]
    fn log_mean_is_the_calls_mean_position() {
        let res = Resolution::DEFAULT;
        let o = op("read", &[(9, 300), (11, 100)]);
        let s = RunStat::of(&o, res, res, o.total_ns * 2).unwrap();
        assert_eq!(s.calls, 400);
        assert!((s.log_mean - 10.0).abs() < 1e-12, "{s:?}");
        // 3/4 at 9.5, 1/4 at 11.5: variance 0.75, plus a bucket's 1/12.
        let (log_var, _) = pooled_variances(&[s]);
        assert!((log_var - (0.75 + 1.0 / 12.0)).abs() < 1e-9, "{log_var}");
        assert!((s.share - 0.5).abs() < 1e-12);
        assert_eq!(s.total, o.total_ns as f64);
    }

    /// Calls spread evenly over (1024, 2048] ns: mean square
    /// (lo² + lo·hi + hi²) / 3; all in one bucket, the variance is that
    /// bucket's width² / 12 (the op's own mean being the bucket's middle).
    #[test]
    fn latency_variance_is_a_buckets_width() {
        let res = Resolution::DEFAULT;
        let o = op("read", &[(10, 100)]);
        let s = RunStat::of(&o, res, res, 1).unwrap();
        let (_, lat_var) = pooled_variances(&[s]);
        assert!((lat_var - 1024.0 * 1024.0 / 12.0).abs() < 1e-3, "{lat_var}");
        // Pooled with a run of one call 1,000 times slower, the calls
        // spread far wider.
        let slow = op("read", &[(20, 1)]);
        let t = RunStat::of(&slow, res, res, 1).unwrap();
        let (_, wide) = pooled_variances(&[s, t]);
        assert!(wide > 1e9, "{wide}");
    }

    #[test]
    fn common_shift_is_the_median_ops_shift() {
        let at = |m: f64| {
            Some(RunStat {
                calls: 1,
                log_mean: m,
                log_sq: m * m,
                total: 1.0,
                trimmed: 1.0,
                lat_sq: 1.0,
                share: 0.0,
            })
        };
        // Run 1 is 0.5 slower on every op but the third, which is 2 slower.
        let stats = vec![
            vec![at(10.0), at(10.5)],
            vec![at(12.0), at(12.5)],
            vec![at(8.0), at(10.0)],
        ];
        let c = common_shifts(&stats, 2, None);
        assert!((c[1] - c[0] - 0.5).abs() < 1e-12, "{c:?}");
        // With two ops there is no median to speak of.
        assert_eq!(common_shifts(&stats[..2], 2, None), vec![0.0, 0.0]);
        // The third op is judged after the others' shift alone: 0.5, which
        // leaves it 1.5 slower; the first after the second's and third's.
        let each = shifts_for(&stats, 2);
        assert!((each[2][1] - each[2][0] - 0.5).abs() < 1e-12, "{each:?}");
        assert!((each[0][1] - each[0][0] - 1.25).abs() < 1e-12, "{each:?}");
        assert_eq!(shifts_for(&stats[..2], 2), vec![vec![0.0; 2]; 2]);
    }
}
