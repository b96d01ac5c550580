//! Per-operation latency histogram and the counters kept beside it.

use serde::{Deserialize, Serialize};

use crate::buckets::{Resolution, MIN_INDEX};

/// Sparse-dense histogram: `counts[k]` is the count of bucket `offset + k`,
/// exactly the `offset` + `bucket_counts` shape of an OpenTelemetry
/// exponential histogram. Latencies of 0 ns are counted in `zero`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    #[serde(default)]
    pub zero: u64,
    #[serde(default)]
    pub offset: i32,
    #[serde(default)]
    pub counts: Vec<u64>,
}

impl Histogram {
    /// Builds a histogram from a dense slot array where slot `j` holds bucket
    /// `j + MIN_INDEX` (the shim's layout).
    pub fn from_slots(zero: u64, slots: &[u64]) -> Self {
        let first = slots.iter().position(|&c| c != 0);
        let Some(first) = first else {
            return Histogram {
                zero,
                ..Default::default()
            };
        };
        let last = slots.iter().rposition(|&c| c != 0).unwrap();
        Histogram {
            zero,
            offset: first as i32 + MIN_INDEX,
            counts: slots[first..=last].to_vec(),
        }
    }

    /// Total number of recorded latencies, zero bucket included.
    pub fn total(&self) -> u64 {
        self.counts
            .iter()
            .fold(self.zero, |t, &c| t.saturating_add(c))
    }

    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// `(bucket index, count)` for every non-empty bucket, ascending.
    pub fn buckets(&self) -> impl Iterator<Item = (i32, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c != 0)
            .map(move |(k, &c)| (self.offset + k as i32, c))
    }

    pub fn get(&self, i: i32) -> u64 {
        let k = i - self.offset;
        if k < 0 {
            return 0;
        }
        self.counts.get(k as usize).copied().unwrap_or(0)
    }

    /// Adds `n` to bucket `i` (`None` = the zero bucket), growing as needed.
    pub fn add_to(&mut self, i: Option<i32>, n: u64) {
        // Counts saturate at u64::MAX rather than wrap: a hand-made profile
        // can hold any count, and a wrapped sum would look plausible.
        let Some(i) = i else {
            self.zero = self.zero.saturating_add(n);
            return;
        };
        if n == 0 {
            return;
        }
        if self.counts.is_empty() {
            self.offset = i;
            self.counts.push(n);
            return;
        }
        if i < self.offset {
            let grow = (self.offset - i) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.offset = i;
        }
        let k = (i - self.offset) as usize;
        if k >= self.counts.len() {
            self.counts.resize(k + 1, 0);
        }
        self.counts[k] = self.counts[k].saturating_add(n);
    }

    pub fn merge(&mut self, other: &Histogram) {
        self.zero = self.zero.saturating_add(other.zero);
        for (i, c) in other.buckets() {
            self.add_to(Some(i), c);
        }
    }

    /// Bucket-wise `self - earlier`, for the interval deltas of a growing
    /// histogram. Buckets that shrank (they cannot, for counters read from
    /// the same process) are clamped at zero.
    pub fn delta_since(&self, earlier: &Histogram) -> Histogram {
        let mut out = Histogram {
            zero: self.zero.saturating_sub(earlier.zero),
            ..Default::default()
        };
        for (i, c) in self.buckets() {
            out.add_to(Some(i), c.saturating_sub(earlier.get(i)));
        }
        out.trim();
        out
    }

    /// Re-expresses the histogram at a coarser resolution (exact).
    pub fn downscale(&self, from: Resolution, to: Resolution) -> Histogram {
        if from == to {
            return self.clone();
        }
        let mut out = Histogram {
            zero: self.zero,
            ..Default::default()
        };
        for (i, c) in self.buckets() {
            out.add_to(Some(from.downscale_index(i, to)), c);
        }
        out
    }

    fn trim(&mut self) {
        while self.counts.last() == Some(&0) {
            self.counts.pop();
        }
        let lead = self.counts.iter().take_while(|&&c| c == 0).count();
        if lead > 0 {
            self.counts.drain(..lead);
            self.offset += lead as i32;
        }
        if self.counts.is_empty() {
            self.offset = 0;
        }
    }

    /// Latency at quantile `q` (0..=1) in ns, interpolated geometrically inside
    /// the bucket that holds it and clamped to the observed `[min, max]`.
    pub fn quantile(&self, q: f64, res: Resolution, min: Option<u64>, max: Option<u64>) -> f64 {
        let total = self.total();
        if total == 0 {
            return 0.0;
        }
        let rank = (q.clamp(0.0, 1.0) * total as f64).max(1.0);
        let mut seen = self.zero as f64;
        let mut value = 0.0;
        if rank > seen {
            for (i, c) in self.buckets() {
                let before = seen;
                seen += c as f64;
                if rank <= seen {
                    let frac = (rank - before) / c as f64;
                    let (lo, hi) = (res.lower_bound(i), res.upper_bound(i));
                    // Rounding must not carry it past the bucket's edge.
                    value = (lo * (hi / lo).powf(frac)).clamp(lo, hi);
                    break;
                }
            }
        }
        let lo = min.map(|m| m as f64).unwrap_or(0.0);
        let hi = max.map(|m| m as f64).unwrap_or(f64::INFINITY);
        value.clamp(lo, hi.max(lo))
    }

    /// Where the value at quantile `q` is known to lie: the bounds of the
    /// bucket that holds it, clamped to the observed `[min, max]` (`(0, 0)`
    /// for the zero bucket). [`Histogram::quantile`]'s estimate is inside.
    pub fn quantile_range(
        &self,
        q: f64,
        res: Resolution,
        min: Option<u64>,
        max: Option<u64>,
    ) -> (f64, f64) {
        let total = self.total();
        let rank = (q.clamp(0.0, 1.0) * total as f64).max(1.0);
        let mut seen = self.zero as f64;
        let mut range = (0.0, 0.0);
        if total > 0 && rank > seen {
            for (i, c) in self.buckets() {
                seen += c as f64;
                if rank <= seen {
                    range = (res.lower_bound(i), res.upper_bound(i));
                    break;
                }
            }
        }
        let lo = min.map(|m| m as f64).unwrap_or(0.0);
        let hi = max.map(|m| m as f64).unwrap_or(f64::INFINITY).max(lo);
        (range.0.clamp(lo, hi), range.1.clamp(lo, hi))
    }
}

/// Everything one layer knows about one operation: FSprof's pre/post counters
/// (calls entered vs. calls returned), errors, latency sum and extremes, and
/// the latency histogram of the returned calls.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpStats {
    pub name: String,
    /// Calls that entered the operation.
    pub pre: u64,
    /// Calls that returned; equals the histogram total in a sound profile.
    pub post: u64,
    /// Returned calls that reported failure (-1/NULL/EOF-with-error ...).
    #[serde(default)]
    pub errors: u64,
    /// Sum of the latencies of the returned calls, ns.
    #[serde(default)]
    pub total_ns: u64,
    /// Not known for interval slices (a minimum can't be differenced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ns: Option<u64>,
    pub histogram: Histogram,
    /// Value correlation (data ops of the user layer): calls counted by
    /// latency and request size / seek distance. Absent in profiles of
    /// layers or versions that don't record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlations: Option<Correlations>,
}

/// The value correlations of one op (FSprof's extended profiles, OSprof's
/// "direct profile and value correlation").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Correlations {
    /// Bytes requested per call (`count` of read, total of an iovec, ...).
    #[serde(default, skip_serializing_if = "JointHistogram::is_empty")]
    pub size: JointHistogram,
    /// `|offset − end offset of the previous data call on the same fd|` in
    /// bytes: 0 for sequential access.
    #[serde(default, skip_serializing_if = "JointHistogram::is_empty")]
    pub seek: JointHistogram,
}

impl Correlations {
    pub fn merge(&mut self, other: &Correlations) {
        self.size.merge(&other.size);
        self.seek.merge(&other.seek);
    }

    pub fn delta_since(&self, earlier: &Correlations) -> Correlations {
        Correlations {
            size: self.size.delta_since(&earlier.size),
            seek: self.seek.delta_since(&earlier.seek),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.size.is_empty() && self.seek.is_empty()
    }
}

/// Sparse 2-D histogram of calls by (latency bucket, value bucket), both at
/// resolution 1 whatever the profile's resolution: index `i` covers
/// `(2^i, 2^(i+1)]` (ns or bytes), index `-1` the value 1, and index
/// [`JointHistogram::ZERO`] (= -2) the value 0. Serialized as
/// `[[latency, value, count], ...]`, sorted, no zero counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JointHistogram {
    pub cells: Vec<(i32, i32, u64)>,
}

impl JointHistogram {
    /// Index standing for the value 0 on either axis.
    pub const ZERO: i32 = -2;

    /// Resolution-1 index of a latency or value (`ZERO` for 0).
    pub fn index(v: u64) -> i32 {
        match v {
            0 => Self::ZERO,
            1 => -1,
            v => 63 - (v - 1).leading_zeros() as i32,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    pub fn total(&self) -> u64 {
        self.cells.iter().fold(0u64, |t, c| t.saturating_add(c.2))
    }

    pub fn add(&mut self, latency: i32, value: i32, n: u64) {
        if n == 0 {
            return;
        }
        match self
            .cells
            .binary_search_by(|c| (c.0, c.1).cmp(&(latency, value)))
        {
            Ok(k) => self.cells[k].2 = self.cells[k].2.saturating_add(n),
            Err(k) => self.cells.insert(k, (latency, value, n)),
        }
    }

    pub fn get(&self, latency: i32, value: i32) -> u64 {
        self.cells
            .binary_search_by(|c| (c.0, c.1).cmp(&(latency, value)))
            .map(|k| self.cells[k].2)
            .unwrap_or(0)
    }

    pub fn merge(&mut self, other: &JointHistogram) {
        for &(l, v, n) in &other.cells {
            self.add(l, v, n);
        }
    }

    /// Cell-wise `self − earlier`, clamped at 0, zero cells dropped.
    pub fn delta_since(&self, earlier: &JointHistogram) -> JointHistogram {
        JointHistogram {
            cells: self
                .cells
                .iter()
                .map(|&(l, v, n)| (l, v, n.saturating_sub(earlier.get(l, v))))
                .filter(|c| c.2 > 0)
                .collect(),
        }
    }
}

impl OpStats {
    pub fn new(name: impl Into<String>) -> Self {
        OpStats {
            name: name.into(),
            ..Default::default()
        }
    }

    /// Number of completed calls.
    pub fn count(&self) -> u64 {
        self.post
    }

    /// Calls that entered but never returned (e.g. the process was killed
    /// inside a blocking call).
    pub fn unfinished(&self) -> u64 {
        self.pre.saturating_sub(self.post)
    }

    pub fn mean_ns(&self) -> f64 {
        if self.post == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.post as f64
        }
    }

    pub fn quantile(&self, q: f64, res: Resolution) -> f64 {
        self.histogram.quantile(q, res, self.min_ns, self.max_ns)
    }

    /// The range [`OpStats::quantile`] is known to lie in (see
    /// [`Histogram::quantile_range`]).
    pub fn quantile_range(&self, q: f64, res: Resolution) -> (f64, f64) {
        self.histogram
            .quantile_range(q, res, self.min_ns, self.max_ns)
    }

    /// The order of every ranked table of ops (FSprof Table 1): most total
    /// latency first; ties by more calls, then by name.
    pub fn by_latency(a: &OpStats, b: &OpStats) -> std::cmp::Ordering {
        b.total_ns
            .cmp(&a.total_ns)
            .then(b.post.cmp(&a.post))
            .then(a.name.cmp(&b.name))
    }

    pub fn is_empty(&self) -> bool {
        self.pre == 0 && self.post == 0
    }

    /// Counts one call that returned after `ns`: what every capture that
    /// sees single latencies (discover, replay, the tests) does per call.
    pub fn record(&mut self, layout: &crate::BucketLayout, ns: u64, failed: bool) {
        self.pre = self.pre.saturating_add(1);
        self.post = self.post.saturating_add(1);
        self.errors = self.errors.saturating_add(u64::from(failed));
        self.total_ns = self.total_ns.saturating_add(ns);
        self.min_ns = Some(self.min_ns.map_or(ns, |m| m.min(ns)));
        self.max_ns = Some(self.max_ns.map_or(ns, |m| m.max(ns)));
        self.histogram.add_to(layout.index(ns), 1);
    }

    /// Adds `other`'s calls; every count saturates at u64::MAX (see
    /// [`Histogram::add_to`]).
    pub fn merge(&mut self, other: &OpStats) {
        self.pre = self.pre.saturating_add(other.pre);
        self.post = self.post.saturating_add(other.post);
        self.errors = self.errors.saturating_add(other.errors);
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.min_ns = match (self.min_ns, other.min_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max_ns = match (self.max_ns, other.max_ns) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.histogram.merge(&other.histogram);
        if let Some(oc) = &other.correlations {
            self.correlations
                .get_or_insert_with(Default::default)
                .merge(oc);
        }
    }

    /// Counter-wise `self - earlier` for interval slices.
    pub fn delta_since(&self, earlier: &OpStats) -> OpStats {
        OpStats {
            name: self.name.clone(),
            pre: self.pre.saturating_sub(earlier.pre),
            post: self.post.saturating_sub(earlier.post),
            errors: self.errors.saturating_sub(earlier.errors),
            total_ns: self.total_ns.saturating_sub(earlier.total_ns),
            min_ns: None,
            max_ns: None,
            histogram: self.histogram.delta_since(&earlier.histogram),
            correlations: match (&self.correlations, &earlier.correlations) {
                (Some(c), Some(e)) => Some(c.delta_since(e)),
                (c, _) => c.clone(),
            },
        }
    }

    pub fn downscale(&mut self, from: Resolution, to: Resolution) {
        self.histogram = self.histogram.downscale(from, to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buckets::BucketLayout;
    use proptest::prelude::*;

    #[test]
    fn from_slots_trims_to_nonempty_range() {
        let h = Histogram::from_slots(2, &[0, 0, 3, 0, 5, 0]);
        assert_eq!(h.offset, 1);
        assert_eq!(h.counts, vec![3, 0, 5]);
        assert_eq!(h.total(), 10);
        assert_eq!(h.get(1), 3);
        assert_eq!(h.get(3), 5);
        assert_eq!(h.get(7), 0);
    }

    proptest! {
        /// The p50 and p99 the reports print are estimates inside a
        /// bucket: the true quantile of the raw samples (nearest rank,
        /// computed here from the samples, not from the histogram) lies in
        /// the range `quantile_range` gives, and so does the estimate.
        #[test]
        fn true_quantiles_lie_in_the_printed_range(
            mut v in proptest::collection::vec(1u64..5_000_000_000, 1..400),
            r in proptest::sample::select(vec![1u32, 2, 4, 16]),
        ) {
            let res = Resolution::new(r).unwrap();
            let layout = BucketLayout::new(res);
            let mut op = OpStats::new("x");
            for &ns in &v {
                op.record(&layout, ns, false);
            }
            v.sort_unstable();
            for q in [0.5, 0.99] {
                let rank = ((q * v.len() as f64).ceil() as usize).max(1);
                let truth = v[rank - 1] as f64;
                let (lo, hi) = op.quantile_range(q, res);
                let est = op.quantile(q, res);
                prop_assert!(lo <= truth && truth <= hi, "q {q}: {truth} not in {lo}..{hi}");
                prop_assert!(lo <= est && est <= hi, "q {q}: estimate {est} not in {lo}..{hi}");
                // One bucket wide at most.
                prop_assert!(hi <= lo * 2f64.powf(1.0 / r as f64) * (1.0 + 1e-9));
            }
        }
    }

    #[test]
    fn quantile_lies_in_the_right_bucket() {
        let res = Resolution::DEFAULT;
        let mut h = Histogram::default();
        h.add_to(Some(9), 99); // (512, 1024]
        h.add_to(Some(19), 1); // (512Ki, 1Mi]
        let p50 = h.quantile(0.5, res, None, None);
        assert!(p50 > 512.0 && p50 <= 1024.0, "{p50}");
        let p100 = h.quantile(1.0, res, None, None);
        assert!(p100 > 524288.0 && p100 <= 1048576.0, "{p100}");
        assert_eq!(h.quantile(1.0, res, Some(600), Some(700_000)), 700_000.0);
    }

    #[test]
    fn delta_of_growing_histogram() {
        let mut a = Histogram::default();
        a.add_to(Some(3), 2);
        let mut b = a.clone();
        b.add_to(Some(5), 4);
        b.add_to(None, 1);
        let d = b.delta_since(&a);
        assert_eq!(d.zero, 1);
        assert_eq!(d.offset, 5);
        assert_eq!(d.counts, vec![4]);
    }

    #[test]
    fn joint_index_is_upper_inclusive_at_resolution_one() {
        let l = BucketLayout::new(Resolution::DEFAULT);
        assert_eq!(JointHistogram::index(0), JointHistogram::ZERO);
        for v in [1u64, 2, 3, 4, 5, 4095, 4096, 4097, 1 << 40, u64::MAX] {
            assert_eq!(Some(JointHistogram::index(v)), l.index(v), "{v}");
        }
    }

    #[test]
    fn correlations_merge_and_difference() {
        let mut a = OpStats::new("read");
        a.correlations = Some(Correlations::default());
        a.correlations.as_mut().unwrap().size.add(10, 11, 3);
        let mut b = a.clone();
        let mut more = OpStats::new("read");
        let mut c = Correlations::default();
        c.size.add(10, 11, 2);
        c.seek.add(20, JointHistogram::ZERO, 1);
        more.correlations = Some(c);
        b.merge(&more);
        let bc = b.correlations.as_ref().unwrap();
        assert_eq!(bc.size.get(10, 11), 5);
        assert_eq!(bc.seek.total(), 1);
        let d = b.delta_since(&a).correlations.unwrap();
        assert_eq!(d.size.cells, vec![(10, 11, 2)]);
        assert_eq!(d.seek.cells, vec![(20, -2, 1)]);
        // Profiles without correlations stay without.
        let plain = OpStats::new("stat");
        let mut m = plain.clone();
        m.merge(&plain);
        assert_eq!(m.correlations, None);
        let json = serde_json::to_string(&b).unwrap();
        assert!(
            json.contains(r#""correlations":{"size":[[10,11,5]],"seek":[[20,-2,1]]}"#),
            "{json}"
        );
        assert!(!serde_json::to_string(&plain)
            .unwrap()
            .contains("correlations"));
    }

    proptest! {
        #[test]
        fn merge_adds_totals_and_buckets(xs in proptest::collection::vec(0u64..1<<40, 0..200),
                                         ys in proptest::collection::vec(0u64..1<<40, 0..200)) {
            let l = BucketLayout::new(Resolution::new(4).unwrap());
            let mut a = Histogram::default();
            let mut b = Histogram::default();
            let mut both = Histogram::default();
            for &x in &xs { a.add_to(l.index(x), 1); both.add_to(l.index(x), 1); }
            for &y in &ys { b.add_to(l.index(y), 1); both.add_to(l.index(y), 1); }
            a.merge(&b);
            prop_assert_eq!(a.total(), (xs.len() + ys.len()) as u64);
            prop_assert_eq!(a.buckets().collect::<Vec<_>>(), both.buckets().collect::<Vec<_>>());
        }

        #[test]
        fn downscale_preserves_total(xs in proptest::collection::vec(0u64..1<<40, 0..200)) {
            let fine = Resolution::new(16).unwrap();
            let l = BucketLayout::new(fine);
            let mut h = Histogram::default();
            for &x in &xs { h.add_to(l.index(x), 1); }
            let d = h.downscale(fine, Resolution::DEFAULT);
            prop_assert_eq!(d.total(), h.total());
        }
    }
}
