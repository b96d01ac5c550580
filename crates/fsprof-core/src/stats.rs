//! Statistics over repeated measurements: the numbers a benchmark prints
//! about its runs and the tests that decide whether a result can be trusted.
//!
//! Stable API (used by `fsprof bench`, `fsprof discover`, `fsprof trace`'s
//! replay fidelity and `fsprof calibrate`):
//!
//! - [`mean`], [`stddev`] (sample, `n − 1`), [`quantile`] (linear
//!   interpolation between closest ranks: R's type 7, numpy's default),
//!   [`median`], [`mad`] (median absolute deviation, unscaled);
//! - [`t_quantile`] and [`confidence_interval`]: the mean's Student-t
//!   interval, `mean ± t(1 − α/2, n − 1) · s / √n`. The t quantile comes
//!   from `statrs` rather than a hand-copied table, so any level and any
//!   number of runs are exact;
//! - [`t_test_p`] and [`binomial_test_p`]: two-sided p-values of a
//!   Student-t statistic and of a count among trials (exact binomial),
//!   what `compare` decides a change with;
//! - [`mad_scores`] and [`outliers`]: robust outlier flags as hyperfine
//!   raises them — `|x − median| / MAD` above [`OUTLIER_THRESHOLD`]
//!   (ten robust standard deviations, `1.4826 · MAD` being the normal
//!   consistent estimate of σ);
//! - [`Summary::of`]: all of the above for one sample, serializable, the
//!   shape bench results carry per phase.
//!
//! Every function takes the sample as it is (any order) and returns `None`
//! for a sample too small to say anything (empty; fewer than two values for
//! a spread or an interval) rather than a NaN that would travel into a
//! report. Non-finite inputs are the caller's bug and are not filtered.

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, ContinuousCDF, DiscreteCDF, StudentsT};

/// hyperfine's outlier rule: a value is flagged when it lies more than this
/// many MADs from the median (= 10 × 1.4826, ten robust σ).
pub const OUTLIER_THRESHOLD: f64 = 14.826;

/// The usual confidence level of a benchmark's interval.
pub const LEVEL_95: f64 = 0.95;

/// Arithmetic mean.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (Bessel's `n − 1`); `None` below two values.
pub fn stddev(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// Quantile `q` (clamped to 0..=1) by linear interpolation between the
/// closest ranks of the sorted sample (type 7): `q = 0.5` of an even sample
/// is the mean of its two middle values.
pub fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    Some(quantile_sorted(&sorted(xs), q))
}

fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    let h = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

pub fn median(xs: &[f64]) -> Option<f64> {
    quantile(xs, 0.5)
}

/// Median absolute deviation from the median (unscaled: multiply by 1.4826
/// for a normal-consistent σ).
pub fn mad(xs: &[f64]) -> Option<f64> {
    let m = median(xs)?;
    let dev: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    median(&dev)
}

/// The `p` quantile of Student's t distribution with `df` degrees of
/// freedom (`t_quantile(0.975, 9)` = 2.2622); `None` for `df < 1` or `p`
/// outside (0, 1).
pub fn t_quantile(p: f64, df: f64) -> Option<f64> {
    // Written so that a NaN df or p fails the test too.
    let usable = df >= 1.0 && p > 0.0 && p < 1.0;
    if !usable {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(t.inverse_cdf(p))
}

/// The two-sided p-value of a Student-t statistic `t` with `df` degrees of
/// freedom: the chance of a `|T| ≥ |t|` when there is no difference. `None`
/// for `df` not above 0 or a NaN `t`.
pub fn t_test_p(t: f64, df: f64) -> Option<f64> {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return None;
    }
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((2.0 * dist.sf(t.abs())).min(1.0))
}

/// The two-sided p-value of `k` successes in `n` trials of chance `p`
/// (exact binomial, doubled smaller tail): whether `k` is further from
/// `n·p` than chance would put it. `None` for `k > n` or `p` outside
/// `[0, 1]`.
pub fn binomial_test_p(k: u64, n: u64, p: f64) -> Option<f64> {
    if k > n || !(0.0..=1.0).contains(&p) {
        return None;
    }
    let dist = Binomial::new(p, n).ok()?;
    let below = dist.cdf(k);
    let above = if k == 0 { 1.0 } else { dist.sf(k - 1) };
    Some((2.0 * below.min(above)).min(1.0))
}

/// A two-sided confidence interval for the mean.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfidenceInterval {
    /// Confidence level, e.g. 0.95.
    pub level: f64,
    pub low: f64,
    pub high: f64,
    /// `(high − low) / 2`: what `±` prints.
    pub half_width: f64,
}

impl ConfidenceInterval {
    /// Half-width relative to the centre (`0.05` = ±5 %); `None` when the
    /// centre is 0.
    pub fn relative(&self) -> Option<f64> {
        let centre = (self.low + self.high) / 2.0;
        (centre != 0.0).then(|| self.half_width / centre.abs())
    }

    /// Whether two intervals share no point: the usual conservative test of
    /// a change ("the means differ beyond both intervals").
    pub fn disjoint(&self, other: &ConfidenceInterval) -> bool {
        self.high < other.low || other.high < self.low
    }
}

/// The mean's Student-t interval at `level` (e.g. [`LEVEL_95`]); `None`
/// below two values or for a level outside (0, 1).
pub fn confidence_interval(xs: &[f64], level: f64) -> Option<ConfidenceInterval> {
    let n = xs.len();
    let s = stddev(xs)?;
    let m = mean(xs)?;
    let t = t_quantile(1.0 - (1.0 - level) / 2.0, (n - 1) as f64)?;
    let half = t * s / (n as f64).sqrt();
    Some(ConfidenceInterval {
        level,
        low: m - half,
        high: m + half,
        half_width: half,
    })
}

/// `|x − median| / MAD` per value (hyperfine's modified z-score). With a
/// MAD of 0 (more than half the values equal), values at the median score
/// 0 and every other value scores infinity: it differs from a majority
/// that agrees exactly.
pub fn mad_scores(xs: &[f64]) -> Vec<f64> {
    let (Some(m), Some(d)) = (median(xs), mad(xs)) else {
        return Vec::new();
    };
    xs.iter()
        .map(|x| {
            let dev = (x - m).abs();
            if dev == 0.0 {
                0.0
            } else if d == 0.0 {
                f64::INFINITY
            } else {
                dev / d
            }
        })
        .collect()
}

/// Indices of the values whose [`mad_scores`] exceed `threshold` (use
/// [`OUTLIER_THRESHOLD`] for hyperfine's rule), ascending.
pub fn outliers(xs: &[f64], threshold: f64) -> Vec<usize> {
    mad_scores(xs)
        .iter()
        .enumerate()
        .filter(|(_, &z)| z > threshold)
        .map(|(i, _)| i)
        .collect()
}

/// One sample described: what a benchmark phase reports about its runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Absent below two values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stddev: Option<f64>,
    pub mad: f64,
    /// The mean's 95 % Student-t interval; absent below two values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<ConfidenceInterval>,
    /// Indices (into the sample as given) of MAD outliers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outliers: Vec<usize>,
}

impl Summary {
    /// `None` for an empty sample.
    pub fn of(xs: &[f64]) -> Option<Summary> {
        let v = sorted(xs);
        Some(Summary {
            n: xs.len(),
            mean: mean(xs)?,
            median: quantile_sorted(&v, 0.5),
            min: *v.first()?,
            max: *v.last()?,
            stddev: stddev(xs),
            mad: mad(xs)?,
            ci95: confidence_interval(xs, LEVEL_95),
            outliers: outliers(xs, OUTLIER_THRESHOLD),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    /// p-values against printed tables: t = 2.776 at 4 df and 2.228 at 10
    /// df are the two-sided 5 % points; 9 heads of 10 fair tosses or more
    /// (or 1 or fewer) happen with chance 22/1024 = 0.02148.
    #[test]
    fn p_values_match_printed_tables() {
        assert!(close(t_test_p(2.776, 4.0).unwrap(), 0.05, 1e-3));
        assert!(close(t_test_p(-2.228, 10.0).unwrap(), 0.05, 1e-3));
        assert_eq!(t_test_p(0.0, 3.0), Some(1.0));
        assert_eq!(t_test_p(1.0, 0.0), None);
        assert!(close(binomial_test_p(9, 10, 0.5).unwrap(), 0.021_484, 1e-4));
        assert!(close(binomial_test_p(1, 10, 0.5).unwrap(), 0.021_484, 1e-4));
        assert_eq!(binomial_test_p(5, 10, 0.5), Some(1.0));
        assert_eq!(binomial_test_p(11, 10, 0.5), None);
    }

    /// Two-sided 95 % critical values from a printed t table (NIST/SEMATECH
    /// e-Handbook 1.3.6.7.2), i.e. not computed by this code.
    #[test]
    fn t_quantiles_match_a_printed_table() {
        for (df, t) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (4.0, 2.776),
            (9.0, 2.262),
            (29.0, 2.045),
            (100.0, 1.984),
        ] {
            let got = t_quantile(0.975, df).unwrap();
            assert!((got - t).abs() < 0.0015, "df {df}: {got} vs {t}");
        }
        // 99 % two-sided, df 9: 3.250.
        assert!((t_quantile(0.995, 9.0).unwrap() - 3.250).abs() < 0.0015);
        assert_eq!(t_quantile(0.975, 0.0), None);
        assert_eq!(t_quantile(1.0, 9.0), None);
    }

    /// R: `t.test(1:10)` prints `3.334149 7.665851`; `sd(1:10)` = 3.02765.
    #[test]
    fn interval_of_one_to_ten_matches_r() {
        let xs: Vec<f64> = (1..=10).map(f64::from).collect();
        let ci = confidence_interval(&xs, LEVEL_95).unwrap();
        assert!(close(ci.low, 3.334149, 1e-6), "{ci:?}");
        assert!(close(ci.high, 7.665851, 1e-6), "{ci:?}");
        assert!(close(stddev(&xs).unwrap(), 3.0276504, 1e-6));
        assert!(close(ci.relative().unwrap(), 2.165851 / 5.5, 1e-6));
    }

    /// R: `quantile(c(7, 1, 3, 10, 4), c(.1, .25, .5, .9))` (type 7) =
    /// 1.8 3.0 4.0 8.8; `mad(c(7, 1, 3, 10, 4), constant = 1)` = 3.
    #[test]
    fn quantiles_and_mad_match_r() {
        let xs = [7.0, 1.0, 3.0, 10.0, 4.0];
        for (q, want) in [(0.1, 1.8), (0.25, 3.0), (0.5, 4.0), (0.9, 8.8)] {
            assert!(close(quantile(&xs, q).unwrap(), want, 1e-12), "q {q}");
        }
        assert_eq!(median(&[1.0, 2.0, 3.0, 4.0]), Some(2.5));
        assert_eq!(mad(&xs), Some(3.0));
        assert_eq!(quantile(&xs, 0.0), Some(1.0));
        assert_eq!(quantile(&xs, 1.0), Some(10.0));
    }

    #[test]
    fn small_samples_say_nothing_rather_than_nan() {
        assert_eq!(mean(&[]), None);
        assert_eq!(median(&[]), None);
        assert_eq!(stddev(&[1.0]), None);
        assert_eq!(confidence_interval(&[1.0], LEVEL_95), None);
        assert!(Summary::of(&[]).is_none());
        let one = Summary::of(&[3.0]).unwrap();
        assert_eq!((one.n, one.mean, one.median, one.mad), (1, 3.0, 3.0, 0.0));
        assert!(one.ci95.is_none() && one.stddev.is_none() && one.outliers.is_empty());
    }

    #[test]
    fn a_far_value_is_flagged_and_ordinary_spread_is_not() {
        let mut xs = vec![100.0, 101.0, 99.0, 102.0, 98.0, 100.5, 99.5, 101.5, 98.5];
        assert!(outliers(&xs, OUTLIER_THRESHOLD).is_empty());
        xs.push(400.0);
        // median 100.25, MAD 1.25: 400 scores ~240, the rest at most 2.
        assert_eq!(outliers(&xs, OUTLIER_THRESHOLD), vec![9]);
        // A majority that agrees exactly: anything else is an outlier.
        assert_eq!(outliers(&[5.0, 5.0, 5.0, 6.0], OUTLIER_THRESHOLD), vec![3]);
        assert!(outliers(&[5.0, 5.0, 5.0], OUTLIER_THRESHOLD).is_empty());
    }

    #[test]
    fn disjoint_intervals_are_told_apart_from_overlapping_ones() {
        let ci = |low, high| ConfidenceInterval {
            level: 0.95,
            low,
            high,
            half_width: (high - low) / 2.0,
        };
        assert!(ci(1.0, 2.0).disjoint(&ci(2.5, 3.0)));
        assert!(ci(2.5, 3.0).disjoint(&ci(1.0, 2.0)));
        assert!(!ci(1.0, 2.0).disjoint(&ci(1.5, 3.0)));
    }

    proptest! {
        #[test]
        fn summary_is_ordered_and_contains_the_mean(
            xs in proptest::collection::vec(-1e6f64..1e6, 2..60)
        ) {
            let s = Summary::of(&xs).unwrap();
            prop_assert!(s.min <= s.median && s.median <= s.max);
            prop_assert!(s.min <= s.mean + 1e-6 && s.mean <= s.max + 1e-6);
            let ci = s.ci95.unwrap();
            prop_assert!(ci.low <= s.mean && s.mean <= ci.high);
            prop_assert!((ci.high - ci.low - 2.0 * ci.half_width).abs() < 1e-6 * (1.0 + ci.half_width));
        }

        #[test]
        fn quantiles_rise_with_q(xs in proptest::collection::vec(-1e6f64..1e6, 1..60),
                                 a in 0.0f64..1.0, b in 0.0f64..1.0) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(quantile(&xs, lo).unwrap() <= quantile(&xs, hi).unwrap());
        }

        /// Shifting and scaling the data moves mean, median and interval
        /// with it and leaves the outlier flags alone.
        #[test]
        fn statistics_follow_affine_changes(
            xs in proptest::collection::vec(1.0f64..1000.0, 3..40),
            shift in -100.0f64..100.0, scale in 0.5f64..4.0
        ) {
            let ys: Vec<f64> = xs.iter().map(|x| x * scale + shift).collect();
            let (a, b) = (Summary::of(&xs).unwrap(), Summary::of(&ys).unwrap());
            prop_assert!(close(b.mean, a.mean * scale + shift, 1e-9));
            prop_assert!(close(b.median, a.median * scale + shift, 1e-9));
            prop_assert!(close(b.ci95.unwrap().half_width, a.ci95.unwrap().half_width * scale, 1e-9));
            prop_assert!(close(b.mad, a.mad * scale, 1e-9));
            prop_assert_eq!(a.outliers, b.outliers);
        }

        /// The interval's coverage of the true mean, checked against the
        /// definition: the half-width is t · s / √n for the table's t.
        #[test]
        fn half_width_is_t_times_standard_error(xs in proptest::collection::vec(0.0f64..10.0, 10..11)) {
            let ci = confidence_interval(&xs, LEVEL_95).unwrap();
            let se = stddev(&xs).unwrap() / (10f64).sqrt();
            prop_assert!((ci.half_width - 2.262157 * se).abs() <= 1e-5 * (1.0 + se));
        }
    }
}
