//! Peaks (modes) of a latency histogram: OSprof §3.1's "each peak is a
//! different code path", found automatically.
//!
//! The histogram is cut into hills at every valley (a bucket lower than
//! the buckets on both sides, or a run of empty buckets). Then:
//!
//! 1. two adjacent hills whose valley is not clearly lower than the smaller
//!    of the two tops (`valley > (1 − min_dip) × top`) are one peak — a
//!    single code path spread over two log2 buckets is not bimodal;
//! 2. hills that are *insignificant* — fewer than `min_calls` calls, or both
//!    under `min_count_share` of the calls and under `min_latency_share` of
//!    the latency — are folded into an adjacent hill, or, when separated
//!    from every other hill by empty buckets, left out as outliers (a hill
//!    just past a much bigger one, across at most `tail_gap` empty powers
//!    of two, is folded into it: its tail). This is
//!    what keeps sparse tails (a few scattered slow calls) from being
//!    reported as dozens of one-call peaks, while a small group of calls
//!    that carries much of the latency (2% of reads that go to disk and
//!    take 80% of the time) is still a peak.
//!
//! Latency mass is estimated from the buckets (count × bucket midpoint),
//! since a histogram does not keep exact sums per bucket; shares are
//! relative to the same estimate over the whole histogram, so they add up
//! to at most 1 (less when outliers were left out).

use fsprof_core::{Histogram, Interval, Resolution};
use serde::{Deserialize, Serialize};

/// One peak of a histogram. Bucket indices are the profile's bucket indices
/// (bucket `i` holds latencies in `(2^(i/r), 2^((i+1)/r)]` ns); use
/// [`Peak::lower_ns`], [`Peak::upper_ns`] and [`Peak::mode_ns`] for times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    /// First (lowest) bucket index of the peak, inclusive.
    pub first: i32,
    /// Last (highest) bucket index of the peak, inclusive.
    pub last: i32,
    /// Bucket index with the most calls inside `first..=last` (the lowest
    /// such bucket on a tie).
    pub mode: i32,
    /// Calls in `first..=last`.
    pub count: u64,
    /// `count` / all calls of the histogram (zero bucket included), 0..=1.
    pub count_share: f64,
    /// Estimated latency in the peak, ns: Σ count × bucket midpoint.
    pub latency_ns: f64,
    /// `latency_ns` / the same estimate over the whole histogram, 0..=1.
    /// Multiply by the op's share of a layer's total to get the peak's share
    /// of the layer.
    pub latency_share: f64,
}

impl Peak {
    /// Exclusive lower bound of the peak's first bucket, ns.
    pub fn lower_ns(&self, res: Resolution) -> f64 {
        res.lower_bound(self.first)
    }

    /// Inclusive upper bound of the peak's last bucket, ns.
    pub fn upper_ns(&self, res: Resolution) -> f64 {
        res.upper_bound(self.last)
    }

    /// Geometric middle of the mode bucket, ns: the "typical" latency of
    /// the peak, e.g. for labelling it with a calibrated characteristic.
    pub fn mode_ns(&self, res: Resolution) -> f64 {
        crate::fmt::bucket_mid(self.mode, res)
    }

    /// Whether bucket `i` is inside the peak.
    pub fn contains(&self, i: i32) -> bool {
        (self.first..=self.last).contains(&i)
    }
}

/// Tuning of [`find_peaks_with`]; [`PeakOptions::default`] is what
/// [`find_peaks`], `fsprof report` and `fsprof compare` use.
#[derive(Clone, Debug, PartialEq)]
pub struct PeakOptions {
    /// How far below the smaller of two neighbouring tops the valley between
    /// them must dip, as a fraction of that top, for them to be two peaks.
    /// Default 0.4 (valley at most 60% of the smaller top).
    pub min_dip: f64,
    /// A peak has at least this many calls. Default 3.
    pub min_calls: u64,
    /// ... and at least this share of the calls ... Default 0.01.
    pub min_count_share: f64,
    /// ... or at least this share of the latency, unless it trails a peak
    /// (see `tail_gap`). Default 0.05.
    pub min_latency_share: f64,
    /// A small hill at most this many powers of two of empty buckets away
    /// from a neighbour with `tail_ratio` times its calls is that peak's
    /// tail, not a peak. Default 2.
    pub tail_gap: usize,
    /// Default 10.
    pub tail_ratio: u64,
}

impl Default for PeakOptions {
    fn default() -> Self {
        PeakOptions {
            min_dip: 0.4,
            min_calls: 3,
            min_count_share: 0.01,
            min_latency_share: 0.05,
            tail_gap: 2,
            tail_ratio: 10,
        }
    }
}

/// The peaks of `h` with default options, lowest latency first. Empty for
/// an empty histogram. The zero bucket never forms a peak (it still counts
/// in `count_share`'s denominator).
pub fn find_peaks(h: &Histogram, res: Resolution) -> Vec<Peak> {
    find_peaks_with(h, res, &PeakOptions::default())
}

/// [`find_peaks`] with explicit tuning.
pub fn find_peaks_with(h: &Histogram, res: Resolution, opts: &PeakOptions) -> Vec<Peak> {
    if h.total() == 0 || h.counts.iter().all(|&x| x == 0) {
        return Vec::new();
    }
    let shape = Shape::new(h, res, opts);
    let mut hills = hills(&h.counts);
    // 1: merge hills whose valley does not dip enough.
    merge_shallow_valleys(&mut hills, &h.counts, opts.min_dip);
    // 2: fold or drop the insignificant ones.
    shape.fold_insignificant(&mut hills);
    hills.iter().map(|r| shape.peak(r)).collect()
}

/// A hill: the first and last index into the histogram's counts.
type Hill = (usize, usize);

/// One histogram's counts with what judging its hills needs.
struct Shape<'a> {
    h: &'a Histogram,
    /// Each bucket's middle, ns.
    mids: Vec<f64>,
    total_calls: u64,
    /// Estimated latency of all calls: Σ count × middle.
    total_lat: f64,
    opts: &'a PeakOptions,
    /// `tail_gap` in buckets.
    max_gap: usize,
}

impl<'a> Shape<'a> {
    fn new(h: &'a Histogram, res: Resolution, opts: &'a PeakOptions) -> Self {
        let mids: Vec<f64> = (0..h.counts.len())
            .map(|k| {
                let i = h.offset + k as i32;
                (res.lower_bound(i) + res.upper_bound(i)) / 2.0
            })
            .collect();
        let total_lat = h.counts.iter().zip(&mids).map(|(&x, m)| x as f64 * m).sum();
        Shape {
            h,
            mids,
            total_calls: h.total(),
            total_lat,
            opts,
            max_gap: opts.tail_gap * res.get() as usize,
        }
    }

    /// Calls and estimated latency of a hill.
    fn stats(&self, r: &Hill) -> (u64, f64) {
        let c = &self.h.counts[r.0..=r.1];
        let count = c.iter().fold(0u64, |t, &x| t.saturating_add(x));
        let lat = c
            .iter()
            .zip(&self.mids[r.0..=r.1])
            .map(|(&x, m)| x as f64 * m)
            .sum();
        (count, lat)
    }

    /// Empty buckets between two hills, left then right.
    fn gap(l: &Hill, r: &Hill) -> usize {
        r.0 - l.1 - 1
    }

    /// Whether hill `k` trails a neighbour: at most `tail_gap` powers of
    /// two of empty buckets away from one with `tail_ratio` times its
    /// calls, the stragglers of that peak.
    fn trails(&self, hills: &[Hill], k: usize) -> bool {
        let own = self.stats(&hills[k]).0;
        let near = |j: usize, g: usize| {
            g <= self.max_gap && self.stats(&hills[j]).0 >= self.opts.tail_ratio * own
        };
        (k > 0 && near(k - 1, Self::gap(&hills[k - 1], &hills[k])))
            || (k + 1 < hills.len() && near(k + 1, Self::gap(&hills[k], &hills[k + 1])))
    }

    fn significant(&self, hills: &[Hill], k: usize) -> bool {
        let o = self.opts;
        let (count, lat) = self.stats(&hills[k]);
        count >= o.min_calls
            && (count as f64 / self.total_calls as f64 >= o.min_count_share
                || (self.total_lat > 0.0
                    && lat / self.total_lat >= o.min_latency_share
                    && !self.trails(hills, k)))
    }

    /// Folds insignificant hills into an adjacent hill, smallest first;
    /// drops isolated ones.
    fn fold_insignificant(&self, hills: &mut Vec<Hill>) {
        loop {
            let weakest = (0..hills.len())
                .filter(|&k| !self.significant(hills, k))
                .min_by_key(|&k| self.stats(&hills[k]).0);
            let Some(k) = weakest else { break };
            match self.fold_into(hills, k) {
                Some(true) => hills[k + 1].0 = hills[k].0,
                Some(false) => hills[k - 1].1 = hills[k].1,
                None => {}
            }
            hills.remove(k);
        }
    }

    /// Where hill `k` folds: `Some(true)` into its right neighbour,
    /// `Some(false)` its left, `None` nowhere (an outlier).
    fn fold_into(&self, hills: &[Hill], k: usize) -> Option<bool> {
        let own = self.stats(&hills[k]).0;
        let c = &self.h.counts;
        // Candidate neighbours: adjacent ones always; across a short gap
        // only one that dwarfs this hill (don't chain stragglers together).
        let take = |j: usize, g: usize| {
            g == 0 || (g <= self.max_gap && self.stats(&hills[j]).0 >= self.opts.tail_ratio * own)
        };
        let left = (k > 0)
            .then(|| (k - 1, Self::gap(&hills[k - 1], &hills[k])))
            .filter(|&(j, g)| take(j, g))
            .map(|(_, g)| (g, c[hills[k].0]));
        let right = (k + 1 < hills.len())
            .then(|| (k + 1, Self::gap(&hills[k], &hills[k + 1])))
            .filter(|&(j, g)| take(j, g))
            .map(|(_, g)| (g, c[hills[k].1]));
        // The nearer neighbour; on a tie the one joined by the higher edge.
        match (left, right) {
            (Some((lg, lv)), Some((rg, rv))) => Some(rg < lg || (rg == lg && rv > lv)),
            (None, Some(_)) => Some(true),
            (Some(_), None) => Some(false),
            (None, None) => None,
        }
    }

    fn peak(&self, r: &Hill) -> Peak {
        let c = &self.h.counts;
        let (count, lat) = self.stats(r);
        // Lowest bucket among the tallest.
        let mode = (r.0..=r.1).rev().max_by_key(|&k| c[k]).unwrap_or(r.0);
        let at = |k: usize| self.h.offset + k as i32;
        Peak {
            first: at(r.0),
            last: at(r.1),
            mode: at(mode),
            count,
            count_share: count as f64 / self.total_calls as f64,
            latency_ns: lat,
            latency_share: if self.total_lat > 0.0 {
                lat / self.total_lat
            } else {
                0.0
            },
        }
    }
}

/// Merges adjacent hills of `c` whose valley dips less than `min_dip`
/// below the lower of their tops, shallowest valley first.
fn merge_shallow_valleys(hills: &mut Vec<(usize, usize)>, c: &[u64], min_dip: f64) {
    let top = |r: &(usize, usize)| c[r.0..=r.1].iter().copied().max().unwrap_or(0);
    let adjacent = |l: &(usize, usize), r: &(usize, usize)| r.0 == l.1 + 1;
    loop {
        let mut best: Option<(usize, f64)> = None;
        for k in 0..hills.len().saturating_sub(1) {
            let (l, r) = (&hills[k], &hills[k + 1]);
            if !adjacent(l, r) {
                continue;
            }
            let valley = c[l.1].min(c[r.0]) as f64;
            let ratio = valley / top(l).min(top(r)) as f64;
            if ratio > 1.0 - min_dip && best.is_none_or(|(_, b)| ratio > b) {
                best = Some((k, ratio));
            }
        }
        let Some((k, _)) = best else { break };
        hills[k].1 = hills[k + 1].1;
        hills.remove(k + 1);
    }
}

/// Maximal runs of non-empty buckets cut at every valley: `(start, end)`
/// positions into `c`, inclusive, ascending. A valley bucket goes to the
/// hill on its left.
fn hills(c: &[u64]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut open: Option<(usize, bool)> = None; // (start, descending)
    for j in 0..c.len() {
        if c[j] == 0 {
            if let Some((s, _)) = open.take() {
                out.push((s, j - 1));
            }
            continue;
        }
        match open {
            None => open = Some((j, false)),
            Some((s, desc)) => {
                if c[j] > c[j - 1] && desc {
                    out.push((s, j - 1));
                    open = Some((j, false));
                } else if c[j] < c[j - 1] {
                    open = Some((s, true));
                }
            }
        }
    }
    if let Some((s, _)) = open {
        out.push((s, c.len() - 1));
    }
    out
}

/// When a peak was active: the start of the first and the end of the last
/// interval in which the op (in `layer`) had calls inside the peak's bucket
/// range, as offsets from the profile start in ns. `None` when the profile
/// has no intervals or no interval has such calls.
pub fn peak_time_range(
    intervals: &[Interval],
    layer: &str,
    op: &str,
    peak: &Peak,
) -> Option<(u64, u64)> {
    let active = |iv: &&Interval| {
        iv.layers
            .iter()
            .find(|l| l.name == layer)
            .and_then(|l| l.op(op))
            .is_some_and(|o| o.histogram.buckets().any(|(i, _)| peak.contains(i)))
    };
    let first = intervals.iter().find(active)?;
    let last = intervals.iter().rev().find(active)?;
    Some((first.start_ns, last.end_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::BucketLayout;

    const R1: Resolution = Resolution::DEFAULT;

    fn hist(offset: i32, counts: &[u64]) -> Histogram {
        let mut h = Histogram::default();
        for (k, &c) in counts.iter().enumerate() {
            h.add_to(Some(offset + k as i32), c);
        }
        h
    }

    fn modes(p: &[Peak]) -> Vec<i32> {
        p.iter().map(|p| p.mode).collect()
    }

    #[test]
    fn empty_histogram_has_no_peaks() {
        assert!(find_peaks(&Histogram::default(), R1).is_empty());
        let z = Histogram {
            zero: 9,
            ..Default::default()
        };
        assert!(find_peaks(&z, R1).is_empty());
    }

    #[test]
    fn one_code_path_over_two_buckets_is_one_peak() {
        let h = hist(8, &[20, 100, 70, 80, 5]);
        let p = find_peaks(&h, R1);
        assert_eq!(modes(&p), vec![9]);
        assert_eq!((p[0].first, p[0].last, p[0].count), (8, 12, 275));
        assert!((p[0].count_share - 1.0).abs() < 1e-12);
    }

    #[test]
    fn three_known_modes_are_found_with_their_mass() {
        // Cache hit ~1 µs, device read ~100 µs, a seek-heavy ~8 ms path.
        let mut h = hist(
            8,
            &[50, 400, 60, 0, 0, 0, 5, 40, 90, 30, 0, 0, 0, 0, 3, 20, 8],
        );
        h.zero = 2;
        let p = find_peaks(&h, R1);
        assert_eq!(modes(&p), vec![9, 16, 23]);
        assert_eq!(
            p.iter().map(|p| p.count).collect::<Vec<_>>(),
            vec![510, 165, 31]
        );
        assert_eq!((p[1].first, p[1].last), (14, 17));
        let total: u64 = h.total();
        assert!((p[0].count_share - 510.0 / total as f64).abs() < 1e-12);
        // The rare slow path dominates the latency.
        assert!(p[2].latency_share > 0.5, "{:?}", p[2]);
        let shares: f64 = p.iter().map(|p| p.latency_share).sum();
        assert!((shares - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_valley_that_dips_enough_separates_neighbouring_peaks() {
        let p = find_peaks(&hist(10, &[100, 30, 90]), R1);
        assert_eq!(modes(&p), vec![10, 12]);
        let p = find_peaks(&hist(10, &[100, 80, 90]), R1);
        assert_eq!(modes(&p), vec![10]);
    }

    #[test]
    fn sparse_tail_is_not_a_crowd_of_peaks() {
        // 10,000 fast calls and single slow stragglers spread far apart.
        let mut h = hist(9, &[3000, 7000, 800]);
        for i in [15, 18, 21, 25, 30] {
            h.add_to(Some(i), 1);
        }
        let p = find_peaks(&h, R1);
        assert_eq!(modes(&p), vec![10]);
        assert_eq!((p[0].first, p[0].last), (9, 11));
    }

    #[test]
    fn few_calls_carrying_most_latency_are_a_peak() {
        // 1% of calls at ~4 ms take far more time than 99% at ~1 µs.
        let p = find_peaks(&hist(9, &[0, 990, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10]), R1);
        assert_eq!(modes(&p), vec![10, 21]);
        assert!(p[1].count_share < 0.02 && p[1].latency_share > 0.9);
    }

    #[test]
    fn stragglers_just_past_a_device_peak_are_its_tail() {
        // Direct reads: 513 around 50 µs, 5 at ~1.5 ms after an empty bucket.
        // The 5 hold ~20% of the latency but are the peak's tail.
        let p = find_peaks(
            &hist(8, &[400, 600, 30, 0, 0, 0, 0, 315, 154, 29, 12, 0, 5]),
            R1,
        );
        assert_eq!(modes(&p), vec![9, 15]);
        assert_eq!((p[1].first, p[1].last, p[1].count), (15, 20, 515));
    }

    #[test]
    fn adjacent_small_hill_is_folded_into_its_neighbour() {
        let p = find_peaks(&hist(9, &[1000, 10, 12, 3]), R1);
        assert_eq!(modes(&p), vec![9]);
        assert_eq!(p[0].last, 12);
    }

    proptest::proptest! {
        #[test]
        fn peaks_are_ordered_disjoint_and_account_for_at_most_everything(
            zero in 0u64..5,
            offset in -1i32..50,
            counts in proptest::collection::vec(proptest::prop_oneof![proptest::strategy::Just(0u64), 0u64..5000], 0..40),
            ri in 0usize..5,
        ) {
            let res = Resolution::new(Resolution::ALLOWED[ri]).unwrap();
            let mut h = Histogram { zero, ..Default::default() };
            for (k, &c) in counts.iter().enumerate() {
                h.add_to(Some(offset + k as i32), c);
            }
            let p = find_peaks(&h, res);
            let (mut calls, mut share, mut lat) = (0u64, 0.0, 0.0);
            for (k, pk) in p.iter().enumerate() {
                proptest::prop_assert!(pk.first <= pk.mode && pk.mode <= pk.last);
                proptest::prop_assert!(h.get(pk.mode) > 0);
                if k > 0 {
                    proptest::prop_assert!(p[k - 1].last < pk.first);
                }
                let inside = (pk.first..=pk.last).fold(0u64, |t, i| t.saturating_add(h.get(i)));
                proptest::prop_assert_eq!(inside, pk.count);
                proptest::prop_assert!(pk.count >= PeakOptions::default().min_calls);
                proptest::prop_assert!(pk.latency_share.is_finite() && pk.count_share.is_finite());
                calls += pk.count;
                share += pk.count_share;
                lat += pk.latency_share;
            }
            proptest::prop_assert!(calls <= h.total());
            proptest::prop_assert!(share <= 1.0 + 1e-9 && lat <= 1.0 + 1e-9);
            // Something with most of the calls in one bucket always has a peak.
            if let Some(&m) = counts.iter().max() {
                if m >= 3 && m * 2 > h.total() {
                    proptest::prop_assert!(!p.is_empty());
                }
            }
        }
    }

    #[test]
    fn time_range_spans_the_intervals_with_calls_in_the_peak() {
        use fsprof_core::Layer;
        let slice = |start: u64, buckets: &[(i32, u64)]| {
            let mut l = Layer::new("user");
            let o = l.op_mut("read");
            for &(i, c) in buckets {
                o.histogram.add_to(Some(i), c);
            }
            Interval {
                start_ns: start,
                end_ns: start + 1_000_000_000,
                layers: vec![l],
            }
        };
        let intervals = vec![
            slice(0, &[(9, 100)]),
            slice(1_000_000_000, &[(9, 80), (21, 5)]),
            slice(2_000_000_000, &[(21, 7)]),
            slice(3_000_000_000, &[(9, 90)]),
        ];
        let p = find_peaks(&hist(9, &[270, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12]), R1);
        assert_eq!(modes(&p), vec![9, 21]);
        assert_eq!(
            peak_time_range(&intervals, "user", "read", &p[0]),
            Some((0, 4_000_000_000))
        );
        assert_eq!(
            peak_time_range(&intervals, "user", "read", &p[1]),
            Some((1_000_000_000, 3_000_000_000))
        );
        assert_eq!(peak_time_range(&intervals, "user", "write", &p[1]), None);
        assert_eq!(peak_time_range(&[], "user", "read", &p[1]), None);
    }

    #[test]
    fn finer_resolutions_find_the_same_modes() {
        // Samples from two log-normal-ish clusters at r=4.
        let r4 = Resolution::new(4).unwrap();
        let l = BucketLayout::new(r4);
        let mut h = Histogram::default();
        for k in 0..2000u64 {
            let jitter = 1.0 + (k % 17) as f64 / 17.0;
            h.add_to(l.index((900.0 * jitter) as u64), 1);
            if k % 4 == 0 {
                h.add_to(l.index((200_000.0 * jitter) as u64), 1);
            }
        }
        let p = find_peaks(&h, r4);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].mode_ns(r4) > 800.0 && p[0].mode_ns(r4) < 2000.0);
        assert!(p[1].mode_ns(r4) > 190_000.0 && p[1].mode_ns(r4) < 420_000.0);
        assert_eq!(p[1].count, 500);
    }
}
