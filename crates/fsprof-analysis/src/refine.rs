//! `compare`'s EMD refined inside the buckets by the ops' exact means.
//!
//! A histogram only knows which bucket a call fell in, so the plain EMD
//! moves in whole buckets: at resolution 1 a narrow peak shifted by 0.38
//! powers of two scores 0 or 1 depending on where the bucket boundaries
//! happen to fall (the issue saw 0.17 against 0.64 for the same shift).
//! Two facts bound and locate it better:
//!
//! - **Bounds.** Wherever the calls sit inside their buckets, the EMD lies
//!   between [`bounds`]' lower and upper value (pointwise, each cumulative
//!   distribution is known only to a bucket's mass); the plain EMD is one
//!   point in between.
//! - **Location.** Every op records its exact total latency. When an op is
//!   one peak holding (≥ 95%) all its calls and its latency on both sides,
//!   the shift of that peak is the change of the log of the mean,
//!   `log2(mean B / mean A)`, exact for a peak that moved without changing
//!   shape, whatever the bucket boundaries.
//!
//! [`emd`] is that shift clamped to the bounds when both ops qualify, and
//! the plain EMD otherwise (several peaks, or a tail holding latency: the
//! mean would then follow the tail, not the peak). The test
//! `refined_emd_follows_a_narrow_shift_smoothly` checks it against the
//! shift of the samples themselves.

use fsprof_core::buckets::MIN_INDEX;
use fsprof_core::{Histogram, OpStats, Resolution};

use crate::distance;
use crate::peaks::find_peaks;

/// Share of an op's calls and latency its single peak must hold.
pub const SINGLE_PEAK_SHARE: f64 = 0.95;

/// An EMD and how it was found, in buckets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Refined {
    /// Unsigned distance.
    pub emd: f64,
    /// Positive when B is slower: the change of the log of the mean (when
    /// refined) or of the mean bucket (plain), in buckets.
    pub signed: f64,
    /// Whether the exact means located the peaks.
    pub refined: bool,
}

/// Cumulative share of calls through each bucket of the union of both
/// histograms' ranges (the zero bucket first).
fn cumulative(h: &Histogram, lo: i32, hi: i32) -> Vec<f64> {
    let t = h.total().max(1) as f64;
    let mut c = 0.0;
    (lo..=hi)
        .map(|i| {
            c += if i == MIN_INDEX - 1 { h.zero } else { h.get(i) } as f64 / t;
            c
        })
        .collect()
}

fn span(h: &Histogram) -> Option<(i32, i32)> {
    let first = if h.zero > 0 {
        Some(MIN_INDEX - 1)
    } else {
        h.buckets().next().map(|b| b.0)
    };
    Some((first?, h.buckets().last().map_or(MIN_INDEX - 1, |b| b.0)))
}

/// The smallest and largest EMD (in buckets) consistent with the two
/// histograms, wherever their calls sit inside their buckets (pointwise
/// bounds of the cumulative distributions).
pub fn bounds(a: &Histogram, b: &Histogram) -> Option<(f64, f64)> {
    let (sa, sb) = (span(a)?, span(b)?);
    let (lo, hi) = (sa.0.min(sb.0), sa.1.max(sb.1));
    let (ca, cb) = (cumulative(a, lo, hi), cumulative(b, lo, hi));
    let (mut min, mut max) = (0.0, 0.0);
    for k in 0..ca.len() {
        let (a_lo, a_hi) = (if k == 0 { 0.0 } else { ca[k - 1] }, ca[k]);
        let (b_lo, b_hi) = (if k == 0 { 0.0 } else { cb[k - 1] }, cb[k]);
        min += f64::max(0.0, f64::max(a_lo - b_hi, b_lo - a_hi));
        max += f64::max((a_hi - b_lo).abs(), (a_lo - b_hi).abs());
    }
    Some((min, max))
}

/// Whether `op` is one peak holding nearly all of its calls and latency,
/// with a total its buckets allow (a hand-made or damaged profile whose
/// total lies outside them says nothing about where the calls are), and
/// no far tail holding its latency ([`TAIL_POWERS`]).
fn single_peak(op: &OpStats, res: Resolution) -> bool {
    let peaks = find_peaks(&op.histogram, res);
    if peaks.len() == 1 && far_tail_share(op, peaks[0].mode, res) >= 1.0 - SINGLE_PEAK_SHARE {
        return false;
    }
    let (lo, hi) = op.histogram.buckets().fold((0.0, 0.0), |(l, h), (i, n)| {
        (
            l + n as f64 * res.lower_bound(i),
            h + n as f64 * res.upper_bound(i),
        )
    });
    let t = op.total_ns as f64;
    peaks.len() == 1
        && peaks[0].count_share >= SINGLE_PEAK_SHARE
        && peaks[0].latency_share >= SINGLE_PEAK_SHARE
        && op.count() > 0
        && t > 0.0
        && lo <= t
        && t <= hi
}

/// How far above its mode (powers of two) a call is in the far tail.
pub const TAIL_POWERS: u32 = 2;

/// The least share of `op`'s exact latency its calls more than
/// [`TAIL_POWERS`] above the mode hold (each at its bucket's lower bound).
/// A peak finder gives a scattering of slow calls too few for a peak of
/// their own to the peak beside them (a trace taken under load: 8 opens
/// of 2–12 ms among 9,504 of ~1.5 µs made one peak over buckets 9–23),
/// yet they hold most of the latency, and the mean follows them: the
/// refined EMD of that op against the same calls without them read 1.08
/// where the histograms are 0.08 apart.
fn far_tail_share(op: &OpStats, mode: i32, res: Resolution) -> f64 {
    let cut = mode + (TAIL_POWERS * res.get()) as i32;
    let tail: f64 = op
        .histogram
        .buckets()
        .filter(|&(i, _)| i > cut)
        .map(|(i, n)| n as f64 * res.lower_bound(i))
        .sum();
    if op.total_ns == 0 {
        return 0.0;
    }
    tail / op.total_ns as f64
}

/// The EMD between two ops (see the module doc), in buckets; `None` if
/// exactly one has no calls.
pub fn emd(a: &OpStats, b: &OpStats, res: Resolution) -> Option<Refined> {
    let (ha, hb) = (&a.histogram, &b.histogram);
    let plain = distance::emd(ha, hb)?;
    let plain_signed = distance::emd_signed(ha, hb)?;
    let unrefined = Refined {
        emd: plain,
        signed: plain_signed,
        refined: false,
    };
    if !(single_peak(a, res) && single_peak(b, res)) {
        return Some(unrefined);
    }
    let Some((min, max)) = bounds(ha, hb) else {
        return Some(unrefined);
    };
    let shift = res.get() as f64 * (b.mean_ns() / a.mean_ns()).log2();
    if !shift.is_finite() {
        return Some(unrefined);
    }
    Some(Refined {
        emd: shift.abs().clamp(min, max),
        signed: shift.clamp(-max, max),
        refined: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::BucketLayout;

    /// An op recorded from these latencies (ns), as the shim would.
    fn op_of(lat: &[u64], res: Resolution) -> OpStats {
        let layout = BucketLayout::new(res);
        let mut o = OpStats::new("read");
        for &ns in lat {
            o.histogram.add_to(layout.index(ns), 1);
        }
        o.post = lat.len() as u64;
        o.pre = o.post;
        o.total_ns = lat.iter().sum();
        o
    }

    /// A narrow peak: `2^(centre + 0.15·u)` for u spread evenly over [-1, 1].
    fn narrow(centre: f64, n: usize) -> Vec<u64> {
        (0..n)
            .map(|k| {
                let u = 2.0 * k as f64 / (n - 1) as f64 - 1.0;
                (centre + 0.15 * u).exp2().round() as u64
            })
            .collect()
    }

    #[test]
    fn refined_emd_follows_a_narrow_shift_smoothly() {
        // Peaks at many places relative to the bucket boundaries, shifted
        // by 0 to 1.5 powers of two: the samples' own shift is the truth.
        for r in [1u32, 4] {
            let res = Resolution::new(r).unwrap();
            let mut worst_plain: f64 = 0.0;
            for start in [13.05, 13.3, 13.55, 13.8] {
                let a = op_of(&narrow(start, 400), res);
                for step in 0..=30 {
                    let shift = step as f64 * 0.05;
                    let b = op_of(&narrow(start + shift, 400), res);
                    let got = emd(&a, &b, res).unwrap();
                    let rf = r as f64;
                    assert!(got.refined);
                    assert!(
                        (got.emd / rf - shift).abs() <= 0.02
                            && (got.signed / rf - shift).abs() <= 0.02,
                        "r={r} start {start} shift {shift}: {got:?}"
                    );
                    let plain = distance::emd(&a.histogram, &b.histogram).unwrap() / rf;
                    worst_plain = worst_plain.max((plain - shift).abs());
                }
            }
            // What the plain bucket EMD does with the same data at
            // resolution 1 (at 4, this peak spans several buckets).
            assert!(r > 1 || worst_plain > 0.1, "r={r}: {worst_plain}");
        }
    }

    #[test]
    fn a_slow_tail_keeps_the_plain_emd() {
        let res = Resolution::DEFAULT;
        let a = op_of(&narrow(10.3, 1000), res);
        let mut lat = narrow(10.3, 1000);
        lat.push(100_000_000);
        let b = op_of(&lat, res);
        let got = emd(&a, &b, res).unwrap();
        assert!(!got.refined, "{got:?}");
        assert!(got.emd < 0.05, "one call in a thousand moved: {got:?}");
    }

    /// A few far slow calls that no peak of their own holds (a trace
    /// taken under load) own most of the latency: the mean follows them,
    /// so the plain EMD is kept.
    #[test]
    fn a_scattered_far_tail_keeps_the_plain_emd() {
        let res = Resolution::DEFAULT;
        // The opens of a traced tar, merged over 11 replays: (ns, calls).
        let body = [
            (700, 800),
            (1_500, 5_526),
            (3_000, 2_069),
            (5_000, 266),
            (10_000, 36),
            (20_000, 14),
        ];
        let lat = |parts: &[(u64, usize)]| -> Vec<u64> {
            parts
                .iter()
                .flat_map(|&(ns, n)| std::iter::repeat_n(ns, n))
                .collect()
        };
        let a = op_of(&lat(&body), res);
        // The same, with the far slow calls of 12 traces taken under load.
        let tail = [
            (40_000, 4),
            (300_000, 1),
            (3_000_000, 4),
            (6_000_000, 3),
            (10_000_000, 1),
        ];
        let b = op_of(&lat(&[&body[..], &tail[..]].concat()), res);
        assert_eq!(
            find_peaks(&b.histogram, res).len(),
            1,
            "one peak with its tail"
        );
        let got = emd(&a, &b, res).unwrap();
        assert!(!got.refined, "{got:?}");
        assert!(got.emd < 0.05, "13 calls in 8,700 moved: {got:?}");
    }

    #[test]
    fn bounds_hold_every_placement() {
        let res = Resolution::DEFAULT;
        let a = op_of(&narrow(10.5, 100), res);
        let b = op_of(&narrow(12.2, 100), res);
        let (lo, hi) = bounds(&a.histogram, &b.histogram).unwrap();
        let plain = distance::emd(&a.histogram, &b.histogram).unwrap();
        assert!(
            lo <= 1.7 && 1.7 <= hi && lo <= plain && plain <= hi,
            "{lo} {hi} {plain}"
        );
        assert!(emd(&a, &OpStats::new("x"), res).is_none());
    }
}
