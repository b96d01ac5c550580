//! Exact geometric bucket boundaries.
//!
//! Bucket `i` (the OpenTelemetry exponential-histogram index) holds latencies
//! in `(2^(i/r), 2^((i+1)/r)]` ns. Latencies are integers, so a latency `ns`
//! is in a bucket above `i` exactly when `ns > floor(2^(i/r))`. The floors are
//! computed with integer arithmetic, so the boundaries are exact for every
//! resolution, not just approximately right in floating point; the preload
//! shim receives the same table and therefore files every call in the bucket
//! the analysis and the exports assume.

use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// Buckets per power of two: one of 1, 2, 4, 8, 16.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct Resolution(u32);

/// Smallest bucket index: `(2^(-1/r), 1]`, which holds the 1 ns latencies.
pub const MIN_INDEX: i32 = -1;

impl Resolution {
    pub const ALLOWED: [u32; 5] = [1, 2, 4, 8, 16];
    pub const DEFAULT: Resolution = Resolution(1);

    pub fn new(r: u32) -> Result<Self, UnsupportedResolution> {
        if Self::ALLOWED.contains(&r) {
            Ok(Resolution(r))
        } else {
            Err(UnsupportedResolution(r))
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }

    /// OpenTelemetry exponential histogram scale: `r = 2^scale`.
    pub fn scale(self) -> i32 {
        self.0.trailing_zeros() as i32
    }

    /// Largest bucket index: the bucket whose upper bound is 2^64 ns.
    pub fn max_index(self) -> i32 {
        64 * self.0 as i32 - 1
    }

    /// Number of bucket slots a dense array covering every u64 latency needs.
    pub fn slots(self) -> usize {
        (self.max_index() - MIN_INDEX + 1) as usize
    }

    /// Lower (exclusive) bound of bucket `i` in ns.
    pub fn lower_bound(self, i: i32) -> f64 {
        (i as f64 / self.0 as f64).exp2()
    }

    /// Upper (inclusive) bound of bucket `i` in ns.
    pub fn upper_bound(self, i: i32) -> f64 {
        self.lower_bound(i + 1)
    }

    /// Index of bucket `i` once this histogram is expressed at the coarser
    /// resolution `to`. Exact because boundaries of coarser resolutions are a
    /// subset of finer ones.
    pub fn downscale_index(self, i: i32, to: Resolution) -> i32 {
        let factor = (self.0 / to.0) as i32;
        i.div_euclid(factor)
    }
}

impl Default for Resolution {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A resolution other than 1, 2, 4, 8 or 16 buckets per power of two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("resolution {0} is not supported: use one of 1, 2, 4, 8, 16 buckets per power of two")]
pub struct UnsupportedResolution(pub u32);

impl TryFrom<u32> for Resolution {
    type Error = UnsupportedResolution;
    fn try_from(r: u32) -> Result<Self, UnsupportedResolution> {
        Resolution::new(r)
    }
}

impl From<Resolution> for u32 {
    fn from(r: Resolution) -> u32 {
        r.0
    }
}

impl fmt::Display for Resolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The integer thresholds that place a latency in its bucket.
///
/// `thresholds[j] = floor(2^((j-1)/r))`, so slot `j` (bucket index `j-1`) is
/// the largest `j` with `ns > thresholds[j]`.
#[derive(Clone, Debug)]
pub struct BucketLayout {
    resolution: Resolution,
    thresholds: Vec<u64>,
}

impl BucketLayout {
    pub fn new(resolution: Resolution) -> Self {
        // The exact computation costs milliseconds at r = 16; every layout
        // of a resolution is the same, so it is done once per process.
        static TABLES: [OnceLock<Vec<u64>>; 5] = [const { OnceLock::new() }; 5];
        let r = resolution.get();
        let table = TABLES[resolution.scale() as usize].get_or_init(|| {
            (0..resolution.slots())
                .map(|j| floor_pow2_frac(j as i64 - 1, r))
                .collect()
        });
        BucketLayout {
            resolution,
            thresholds: table.clone(),
        }
    }

    pub fn resolution(&self) -> Resolution {
        self.resolution
    }

    /// The table handed to the preload shim (one entry per slot).
    pub fn thresholds(&self) -> &[u64] {
        &self.thresholds
    }

    /// Bucket index of a latency of `ns` nanoseconds, `None` for 0 ns (the
    /// zero bucket). Same search as the shim's: start at the first bucket of
    /// the power of two and step through at most `r` sub-buckets.
    pub fn index(&self, ns: u64) -> Option<i32> {
        if ns == 0 {
            return None;
        }
        let r = self.resolution.get() as usize;
        let p = 63 - ns.leading_zeros() as usize;
        let mut j = p * r;
        while j + 1 < self.thresholds.len() && ns > self.thresholds[j + 1] {
            j += 1;
        }
        Some(j as i32 + MIN_INDEX)
    }
}

/// `floor(2^(i/r))` for `-1 <= i < 64r`, exactly.
fn floor_pow2_frac(i: i64, r: u32) -> u64 {
    if i < 0 {
        return 0;
    }
    let mut n = (i as f64 / r as f64).exp2().floor().min(u64::MAX as f64) as u64;
    // The float estimate is off by at most a few units; settle it exactly:
    // n = floor(2^(i/r)) iff n^r <= 2^i < (n+1)^r.
    while n > 0 && !pow_le_pow2(n, r, i as u32) {
        n -= 1;
    }
    while n < u64::MAX && pow_le_pow2(n + 1, r, i as u32) {
        n += 1;
    }
    n
}

/// Whether `n^r <= 2^e`, computed with multi-word integers.
///
/// The limbs live on the stack: `n < 2^64`, so `n^r` has at most `r` of
/// them, and `r` is at most 16 (`Resolution::ALLOWED`). With a `Vec`
/// each of the ~130 calls for a `fsprof run`'s bucket table allocated and
/// freed: `BucketLayout::new` took 36.5k of the 426k instructions of `run
/// -q -- true`, 15.1k without (docs/benchmarks/history.md, reloc12).
fn pow_le_pow2(n: u64, r: u32, e: u32) -> bool {
    let mut limbs = [0u64; 17];
    limbs[0] = 1;
    let mut len = 1;
    for _ in 0..r {
        let mut carry: u128 = 0;
        for limb in &mut limbs[..len] {
            let v = (*limb as u128) * (n as u128) + carry;
            *limb = v as u64;
            carry = v >> 64;
        }
        if carry > 0 {
            limbs[len] = carry as u64;
            len += 1;
        }
    }
    while len > 1 && limbs[len - 1] == 0 {
        len -= 1;
    }
    let top = limbs[len - 1];
    if top == 0 {
        return true;
    }
    let bits = (len as u32 - 1) * 64 + (64 - top.leading_zeros());
    let power_of_two = top.is_power_of_two() && limbs[..len - 1].iter().all(|&l| l == 0);
    // 2^e has e+1 bits; anything shorter is smaller, equal length only if equal.
    bits < e + 1 || (bits == e + 1 && power_of_two)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn layout(r: u32) -> BucketLayout {
        BucketLayout::new(Resolution::new(r).unwrap())
    }

    #[test]
    fn resolution_one_is_power_of_two_buckets() {
        let l = layout(1);
        assert_eq!(l.index(0), None);
        assert_eq!(l.index(1), Some(-1));
        assert_eq!(l.index(2), Some(0));
        assert_eq!(l.index(3), Some(1));
        assert_eq!(l.index(4), Some(1));
        assert_eq!(l.index(5), Some(2));
        assert_eq!(l.index(1024), Some(9));
        assert_eq!(l.index(1025), Some(10));
        assert_eq!(l.index(u64::MAX), Some(63));
    }

    #[test]
    fn exact_powers_sit_at_upper_inclusive_edges() {
        for r in Resolution::ALLOWED {
            let l = layout(r);
            // From 2^5 on, 2^p + 1 is below the next boundary even at r = 16.
            for p in 5..63u32 {
                let v = 1u64 << p;
                // 2^p is the upper bound of bucket p*r - 1 ...
                assert_eq!(l.index(v), Some((p * r) as i32 - 1), "r={r} p={p}");
                // ... and one more is in the next bucket.
                assert_eq!(l.index(v + 1), Some((p * r) as i32), "r={r} p={p}");
            }
        }
    }

    #[test]
    fn thresholds_are_exact_floors() {
        // 2^(1/2) = 1.414.., 2^(41/2) = 1482910.4..
        let l = layout(2);
        assert_eq!(l.thresholds()[1 + 1], 1);
        assert_eq!(l.thresholds()[41 + 1], 1_482_910);
        let l = layout(16);
        // 2^(1000/16) = 2^62.5 = 6521908912666391106.8..
        assert_eq!(l.thresholds()[1000 + 1], 6_521_908_912_666_391_106);
    }

    #[test]
    fn rejects_unsupported_resolution() {
        assert!(Resolution::new(3).is_err());
        assert!(Resolution::new(0).is_err());
        assert!(Resolution::new(32).is_err());
    }

    proptest! {
        #[test]
        fn index_matches_definition(ns in 1u64..u64::MAX, ri in 0usize..5) {
            let r = Resolution::ALLOWED[ri];
            let res = Resolution::new(r).unwrap();
            let i = layout(r).index(ns).unwrap();
            // (2^(i/r), 2^((i+1)/r)] in floating point, allowing for f64 rounding.
            let x = ns as f64;
            let lo = res.lower_bound(i);
            let hi = res.upper_bound(i);
            prop_assert!(x > lo * (1.0 - 1e-12) && x <= hi * (1.0 + 1e-12),
                "ns={} i={} lo={} hi={}", ns, i, lo, hi);
        }

        #[test]
        fn downscale_agrees_with_coarser_layout(ns in 1u64..(1u64 << 50), ri in 0usize..5, rj in 0usize..5) {
            let (a, b) = (Resolution::ALLOWED[ri], Resolution::ALLOWED[rj]);
            let (fine, coarse) = if a >= b { (a, b) } else { (b, a) };
            let (fr, cr) = (Resolution::new(fine).unwrap(), Resolution::new(coarse).unwrap());
            let i = layout(fine).index(ns).unwrap();
            prop_assert_eq!(fr.downscale_index(i, cr), layout(coarse).index(ns).unwrap());
        }
    }
}
