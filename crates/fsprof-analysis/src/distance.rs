//! Distances between two latency histograms (OSprof §3.2, phase 3).
//!
//! All bin-by-bin and cross-bin measures compare the *shapes* of the two
//! histograms: each is normalized to sum 1 first, so a run that made twice
//! as many calls with the same latencies is at distance 0. Differences in
//! volume are what [`count_diff`] and [`latency_diff`] measure.
//!
//! Both histograms must be at the same [`fsprof_core::Resolution`]; callers
//! holding profiles at different resolutions downscale the finer one first
//! (`Histogram::downscale`), as [`crate::compare`] does. The zero bucket
//! (latencies of 0 ns) is treated as the bucket just below the smallest one.
//!
//! The shape measures return `None` when exactly one histogram is empty (a
//! shape cannot be compared with nothing) and `Some(0.0)` when both are.
//! No function returns NaN or an infinity.

use fsprof_core::buckets::MIN_INDEX;
use fsprof_core::{Histogram, OpStats};

/// Index used for the zero bucket when aligning histograms.
const ZERO_INDEX: i32 = MIN_INDEX - 1;

/// The two histograms as aligned probability vectors over the union of
/// their bucket ranges, or `None` if exactly one is empty.
fn aligned(a: &Histogram, b: &Histogram) -> Option<(Vec<f64>, Vec<f64>)> {
    let (ta, tb) = (a.total(), b.total());
    match (ta, tb) {
        (0, 0) => return Some((Vec::new(), Vec::new())),
        (0, _) | (_, 0) => return None,
        _ => {}
    }
    let lo = range(a).0.min(range(b).0);
    let hi = range(a).1.max(range(b).1);
    let n = (hi - lo + 1) as usize;
    let dense = |h: &Histogram, t: u64| {
        let mut v = vec![0.0; n];
        if h.zero > 0 {
            v[(ZERO_INDEX - lo) as usize] = h.zero as f64 / t as f64;
        }
        for (i, c) in h.buckets() {
            v[(i - lo) as usize] = c as f64 / t as f64;
        }
        v
    };
    Some((dense(a, ta), dense(b, tb)))
}

/// Lowest and highest occupied index of a non-empty histogram.
fn range(h: &Histogram) -> (i32, i32) {
    let mut it = h.buckets();
    let first = it.next().map(|(i, _)| i);
    let last = h.buckets().last().map(|(i, _)| i);
    let lo = if h.zero > 0 {
        ZERO_INDEX
    } else {
        first.unwrap_or(ZERO_INDEX)
    };
    let hi = last.unwrap_or(ZERO_INDEX);
    (lo, hi)
}

/// Earth Mover's Distance, in buckets: the least average number of buckets
/// each call's latency would have to move to turn one shape into the other.
///
/// For 1-D histograms with unit ground distance this is the L1 distance
/// between the normalized cumulative distributions. Identical shapes give 0;
/// moving all mass `k` buckets up or down gives exactly `k` (so at resolution
/// 1, an EMD of 1 means "one power of two slower or faster on average").
/// Symmetric. `None` if exactly one histogram is empty.
pub fn emd(a: &Histogram, b: &Histogram) -> Option<f64> {
    Some(cdf_gaps(a, b)?.iter().fold(0.0, |d, g| d + g.abs()))
}

/// The EMD, in buckets, that sampling alone puts between two histograms
/// of `a.total()` and `b.total()` calls drawn from one distribution: its
/// expected value, with the distribution estimated by `a` and `b` merged.
/// An op of a few dozen calls spread over several buckets is 0.3–0.4
/// buckets from a second run of itself by chance alone; a difference
/// below this is not one the two histograms can show.
///
/// Each bucket's gap between two empirical cumulative distributions has
/// variance `F(1 − F)(1/na + 1/nb)` and, near enough normal, an expected
/// magnitude `sqrt(2/π)` times its standard deviation; the EMD is their
/// sum. `None` if either histogram is empty.
pub fn emd_noise(a: &Histogram, b: &Histogram) -> Option<f64> {
    let (na, nb) = (a.total(), b.total());
    if na == 0 || nb == 0 {
        return None;
    }
    let mut both = a.clone();
    both.merge(b);
    let (p, _) = aligned(&both, &both)?;
    let var = 1.0 / na as f64 + 1.0 / nb as f64;
    let mut f = 0.0;
    let mut sum = 0.0;
    for x in p {
        f += x;
        let g = f64::clamp(f, 0.0, 1.0);
        sum += (g * (1.0 - g) * var).sqrt();
    }
    Some(sum * (2.0 / std::f64::consts::PI).sqrt())
}

/// Signed EMD: positive when `b` is, on the whole, slower than `a` (its
/// distribution lies to the right), in buckets. `|emd_signed| <= emd`, with
/// equality when one distribution is entirely to one side of the other.
pub fn emd_signed(a: &Histogram, b: &Histogram) -> Option<f64> {
    Some(cdf_gaps(a, b)?.iter().fold(0.0, |d, g| d + g))
}

/// Bucket by bucket, `a`'s normalized cumulative distribution minus `b`'s:
/// what [`emd`] and [`emd_signed`] add up.
fn cdf_gaps(a: &Histogram, b: &Histogram) -> Option<Vec<f64>> {
    let (p, q) = aligned(a, b)?;
    let (mut cp, mut cq) = (0.0, 0.0);
    let gaps = p.iter().zip(&q).map(|(x, y)| {
        cp += x;
        cq += y;
        cp - cq
    });
    Some(gaps.collect())
}

/// The geometric mean latency of a histogram, ns, with every call at its
/// bucket's geometric middle (the zero bucket at the middle of the bucket
/// just below the smallest, as [`emd_signed`] places it). Its change from
/// `a` to `b` is exactly [`emd_signed`] in powers of two
/// (`log2(gmean(b)/gmean(a)) = emd_signed(a, b) / r`), so a reason that
/// prints both cannot contradict itself. `None` for an empty histogram.
pub fn geometric_mean_ns(h: &Histogram, res: fsprof_core::Resolution) -> Option<f64> {
    let total = h.total();
    if total == 0 {
        return None;
    }
    let r = res.get() as f64;
    let pos = |i: i32| (i as f64 + 0.5) / r;
    let mut sum = h.zero as f64 * pos(ZERO_INDEX);
    for (i, c) in h.buckets() {
        sum += c as f64 * pos(i);
    }
    Some((sum / total as f64).exp2())
}

/// Symmetric chi-square distance between the normalized histograms,
/// `Σ (p−q)² / (p+q)` over buckets where `p+q > 0`. Range `[0, 2]`: 0 for
/// identical shapes, 2 for shapes with no bucket in common. Symmetric.
/// Buckets empty on both sides are skipped, so there is no 0/0.
pub fn chi2(a: &Histogram, b: &Histogram) -> Option<f64> {
    let (p, q) = aligned(a, b)?;
    Some(
        p.iter()
            .zip(&q)
            .filter(|(x, y)| **x + **y > 0.0)
            .map(|(x, y)| (x - y) * (x - y) / (x + y))
            .sum(),
    )
}

/// Jeffrey divergence (Puzicha et al.'s symmetric, numerically stable form
/// of Kullback-Leibler): `Σ p·ln(p/m) + q·ln(q/m)` with `m = (p+q)/2`.
/// Unlike plain KL it is finite when a bucket is empty on one side
/// (`0·ln 0 = 0`). Range `[0, 2 ln 2 ≈ 1.386]`; symmetric.
pub fn jeffrey(a: &Histogram, b: &Histogram) -> Option<f64> {
    let (p, q) = aligned(a, b)?;
    let term = |x: f64, m: f64| if x > 0.0 { x * (x / m).ln() } else { 0.0 };
    Some(
        p.iter()
            .zip(&q)
            .filter(|(x, y)| **x + **y > 0.0)
            .map(|(&x, &y)| {
                let m = (x + y) / 2.0;
                term(x, m) + term(y, m)
            })
            .sum::<f64>()
            .max(0.0),
    )
}

/// Normalized difference in completed calls: `|na − nb| / max(na, nb)`,
/// in `[0, 1]`; 0 when both are 0. Symmetric.
pub fn count_diff(a: &OpStats, b: &OpStats) -> f64 {
    normalized_diff(a.count() as f64, b.count() as f64)
}

/// Normalized difference in total latency: `|ta − tb| / max(ta, tb)`,
/// in `[0, 1]`; 0 when both are 0. Symmetric.
pub fn latency_diff(a: &OpStats, b: &OpStats) -> f64 {
    normalized_diff(a.total_ns as f64, b.total_ns as f64)
}

fn normalized_diff(x: f64, y: f64) -> f64 {
    let m = x.max(y);
    if m == 0.0 {
        0.0
    } else {
        (x - y).abs() / m
    }
}

#[cfg(test)]
mod noise_tests {
    use super::*;

    /// Two samples of `n` calls each drawn from `weights` (bucket 10 on),
    /// by a fixed-seed generator.
    fn samples(weights: &[u64], n: u64, seed: &mut u64) -> (Histogram, Histogram) {
        let total: u64 = weights.iter().sum();
        let mut draw = || {
            let mut h = Histogram::default();
            for _ in 0..n {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let mut r = (*seed >> 33) % total;
                let i = weights.iter().position(|&w| {
                    r < w || {
                        r -= w;
                        false
                    }
                });
                h.add_to(Some(10 + i.unwrap() as i32), 1);
            }
            h
        };
        (draw(), draw())
    }

    /// The expected EMD of two samples of one distribution, against the
    /// mean EMD of 2,000 simulated pairs: a few dozen calls (closedir's
    /// 29 in a traced tar) and several hundred.
    #[test]
    fn the_sampling_noise_is_what_simulated_samples_show() {
        let mut seed = 27;
        for (weights, n) in [
            (&[13u64, 10, 4, 0, 1, 1][..], 29),
            (&[600, 180, 8, 1][..], 792),
        ] {
            let (mut sim, mut est) = (0.0, 0.0);
            let pairs = 2000;
            for _ in 0..pairs {
                let (a, b) = samples(weights, n, &mut seed);
                sim += emd(&a, &b).unwrap() / pairs as f64;
                est += emd_noise(&a, &b).unwrap() / pairs as f64;
            }
            assert!(
                (est / sim - 1.0).abs() < 0.1,
                "n {n}: simulated {sim}, expected {est}"
            );
        }
        let one = Histogram::from_slots(0, &[5]);
        assert_eq!(emd_noise(&one, &Histogram::default()), None);
    }
}

#[cfg(test)]
mod gmean_tests {
    use super::*;
    use fsprof_core::Resolution;

    #[test]
    fn the_geometric_mean_moves_as_the_signed_emd_says() {
        for r in [1u32, 4] {
            let res = Resolution::new(r).unwrap();
            let mut a = Histogram::default();
            a.add_to(Some(10), 90);
            a.add_to(Some(20), 10);
            a.zero = 3;
            let mut b = Histogram::default();
            b.add_to(Some(11), 50);
            b.add_to(Some(14), 45);
            b.add_to(Some(3), 5);
            let (ga, gb) = (
                geometric_mean_ns(&a, res).unwrap(),
                geometric_mean_ns(&b, res).unwrap(),
            );
            let signed = emd_signed(&a, &b).unwrap() / r as f64;
            assert!(
                ((gb / ga).log2() - signed).abs() < 1e-9,
                "r={r}: {ga} {gb} {signed}"
            );
        }
        assert_eq!(
            geometric_mean_ns(&Histogram::default(), Resolution::DEFAULT),
            None
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hist(pairs: &[(i32, u64)]) -> Histogram {
        let mut h = Histogram::default();
        for &(i, c) in pairs {
            h.add_to(Some(i), c);
        }
        h
    }

    fn shifted(h: &Histogram, k: i32) -> Histogram {
        let mut out = Histogram {
            zero: 0,
            ..Default::default()
        };
        for (i, c) in h.buckets() {
            out.add_to(Some(i + k), c);
        }
        out
    }

    #[test]
    fn emd_of_a_point_mass_moved_three_buckets_is_three() {
        let a = hist(&[(10, 7)]);
        let b = hist(&[(13, 70)]);
        assert!((emd(&a, &b).unwrap() - 3.0).abs() < 1e-12);
        assert!((emd_signed(&a, &b).unwrap() - 3.0).abs() < 1e-12);
        assert!((emd_signed(&b, &a).unwrap() + 3.0).abs() < 1e-12);
    }

    #[test]
    fn emd_moves_only_the_part_that_moved() {
        // A quarter of the calls became 4 buckets slower: EMD = 1.
        let a = hist(&[(10, 100)]);
        let b = hist(&[(10, 75), (14, 25)]);
        assert!((emd(&a, &b).unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn zero_bucket_sits_below_the_smallest_bucket() {
        let a = Histogram {
            zero: 5,
            ..Default::default()
        };
        let b = hist(&[(MIN_INDEX, 5)]);
        assert!((emd(&a, &b).unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn disjoint_shapes_hit_the_upper_bounds() {
        let a = hist(&[(3, 10)]);
        let b = hist(&[(20, 1)]);
        assert!((chi2(&a, &b).unwrap() - 2.0).abs() < 1e-12);
        assert!((jeffrey(&a, &b).unwrap() - 2.0 * 2f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn empty_sides() {
        let e = Histogram::default();
        let a = hist(&[(3, 10)]);
        assert_eq!(emd(&e, &e), Some(0.0));
        assert_eq!(chi2(&e, &e), Some(0.0));
        assert_eq!(jeffrey(&e, &e), Some(0.0));
        assert_eq!(emd(&a, &e), None);
        assert_eq!(chi2(&e, &a), None);
        assert_eq!(jeffrey(&a, &e), None);
    }

    #[test]
    fn volume_differences() {
        let mut a = OpStats::new("read");
        let mut b = OpStats::new("read");
        assert_eq!(count_diff(&a, &b), 0.0);
        assert_eq!(latency_diff(&a, &b), 0.0);
        a.post = 100;
        a.total_ns = 1000;
        b.post = 50;
        b.total_ns = 4000;
        assert_eq!(count_diff(&a, &b), 0.5);
        assert_eq!(latency_diff(&a, &b), 0.75);
    }

    fn arb_hist() -> impl Strategy<Value = Histogram> {
        (
            0u64..5,
            -1i32..40,
            proptest::collection::vec(prop_oneof![Just(0u64), 0u64..1000], 1..30),
        )
            .prop_map(|(zero, offset, counts)| {
                let mut h = Histogram {
                    zero,
                    ..Default::default()
                };
                for (k, c) in counts.into_iter().enumerate() {
                    h.add_to(Some(offset + k as i32), c);
                }
                h
            })
    }

    proptest! {
        #[test]
        fn identical_histograms_are_at_distance_zero(h in arb_hist(), scale in 1u64..5) {
            let mut g = Histogram { zero: h.zero * scale, ..Default::default() };
            for (i, c) in h.buckets() { g.add_to(Some(i), c * scale); }
            for d in [emd(&h, &g), chi2(&h, &g), jeffrey(&h, &g)] {
                let d = d.unwrap();
                prop_assert!(d.abs() < 1e-9, "{}", d);
            }
        }

        #[test]
        fn shifting_all_mass_by_k_gives_emd_k(h in arb_hist(), k in -20i32..20) {
            let h = Histogram { zero: 0, ..h };
            prop_assume!(!h.is_empty());
            let g = shifted(&h, k);
            let d = emd(&h, &g).unwrap();
            prop_assert!((d - k.abs() as f64).abs() < 1e-9, "k={} emd={}", k, d);
            let s = emd_signed(&h, &g).unwrap();
            prop_assert!((s - k as f64).abs() < 1e-9, "k={} signed={}", k, s);
        }

        #[test]
        fn distances_are_symmetric_finite_and_bounded(a in arb_hist(), b in arb_hist()) {
            prop_assume!(!a.is_empty() && !b.is_empty());
            let pairs = [
                (emd(&a, &b).unwrap(), emd(&b, &a).unwrap(), f64::MAX),
                (chi2(&a, &b).unwrap(), chi2(&b, &a).unwrap(), 2.0 + 1e-9),
                (jeffrey(&a, &b).unwrap(), jeffrey(&b, &a).unwrap(), 2.0 * 2f64.ln() + 1e-9),
            ];
            for (x, y, max) in pairs {
                prop_assert!(x.is_finite() && y.is_finite());
                prop_assert!(x >= 0.0 && x <= max, "{} > {}", x, max);
                prop_assert!((x - y).abs() < 1e-9, "{} vs {}", x, y);
            }
            prop_assert!(emd_signed(&a, &b).unwrap().abs() <= emd(&a, &b).unwrap() + 1e-9);
        }

        #[test]
        fn volume_differences_are_symmetric_and_bounded(na in 0u64..1000, nb in 0u64..1000,
                                                      ta in 0u64..1<<40, tb in 0u64..1<<40) {
            let a = OpStats { post: na, total_ns: ta, ..OpStats::new("x") };
            let b = OpStats { post: nb, total_ns: tb, ..OpStats::new("x") };
            for (x, y) in [(count_diff(&a, &b), count_diff(&b, &a)), (latency_diff(&a, &b), latency_diff(&b, &a))] {
                prop_assert!(x.is_finite() && (0.0..=1.0).contains(&x));
                prop_assert_eq!(x, y);
            }
        }
    }
}
