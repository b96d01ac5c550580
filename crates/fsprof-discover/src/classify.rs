//! Telling two kinds of latency apart (a cache hit from a device read, a
//! write into an allocated block from one that allocates), and finding
//! where along the file one kind gives way to the other.
//!
//! Latencies spread multiplicatively, so both are done on log latency. The
//! two levels are the exact two-means split of the sorted values (a 1-D
//! k-means with k = 2 has an optimal solution among the n−1 cuts); how
//! clearly they are apart is Ashman's D (> 2: the two groups barely
//! overlap). A boundary is the cut of a step model (low before, high after)
//! that the fewest offsets contradict, so that a few noisy offsets cannot
//! move it.

use serde::{Deserialize, Serialize};

/// Two latency levels found in a set of values.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Levels {
    /// Geometric mean of the low group, ns.
    pub low_ns: f64,
    /// Geometric mean of the high group, ns.
    pub high_ns: f64,
    /// Values at or above this are "high" (the geometric midpoint), ns.
    pub threshold_ns: f64,
    /// Ashman's D of the two groups in log space (capped at 99).
    pub separation: f64,
    /// How many values fell in the low group.
    pub low_count: usize,
    pub high_count: usize,
}

impl Levels {
    /// High over low.
    pub fn ratio(&self) -> f64 {
        self.high_ns / self.low_ns.max(1.0)
    }

    pub fn is_high(&self, v: f64) -> bool {
        v >= self.threshold_ns
    }
}

fn mean_var(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    (m, v)
}

/// Splits `values` (ns, > 0) into a low and a high group; `None` with
/// fewer than two values.
pub fn two_levels(values: &[f64]) -> Option<Levels> {
    let mut logs: Vec<f64> = values.iter().map(|v| v.max(1.0).ln()).collect();
    if logs.len() < 2 {
        return None;
    }
    logs.sort_by(|a, b| a.total_cmp(b));
    let n = logs.len();
    // Prefix sums make each cut's within-group sum of squares O(1).
    let (mut s, mut s2) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    for (i, x) in logs.iter().enumerate() {
        s[i + 1] = s[i] + x;
        s2[i + 1] = s2[i] + x * x;
    }
    let sse = |a: usize, b: usize| {
        let k = (b - a) as f64;
        let sum = s[b] - s[a];
        (s2[b] - s2[a]) - sum * sum / k
    };
    let cut = (1..n)
        .min_by(|&a, &b| (sse(0, a) + sse(a, n)).total_cmp(&(sse(0, b) + sse(b, n))))
        .unwrap_or(1);
    let (lo, hi) = logs.split_at(cut);
    let (m1, v1) = mean_var(lo);
    let (m2, v2) = mean_var(hi);
    let d = if v1 + v2 > 0.0 {
        (2f64.sqrt() * (m2 - m1).abs() / (v1 + v2).sqrt()).min(99.0)
    } else if m2 > m1 {
        99.0
    } else {
        0.0
    };
    Some(Levels {
        low_ns: m1.exp(),
        high_ns: m2.exp(),
        threshold_ns: ((m1 + m2) / 2.0).exp(),
        separation: d,
        low_count: lo.len(),
        high_count: hi.len(),
    })
}

/// The best "low, then high" step along a sequence of classifications.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// Index of the first "high" position (`len` when all are low).
    pub at: usize,
    /// Positions that contradict the step: high before it, low after it.
    pub errors: usize,
}

/// Fits a step to `high[i]`: the cut with the fewest contradictions; ties
/// go to the earliest cut.
pub fn step_up(high: &[bool]) -> Step {
    let total_low = high.iter().filter(|h| !**h).count();
    let mut best = Step {
        at: 0,
        errors: total_low,
    };
    let (mut high_before, mut low_before) = (0, 0);
    for (i, h) in high.iter().enumerate() {
        if *h {
            high_before += 1;
        } else {
            low_before += 1;
        }
        let errors = high_before + (total_low - low_before);
        if errors < best.errors {
            best = Step { at: i + 1, errors };
        }
    }
    best
}

/// How much to trust a finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Low,
    Medium,
    High,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Low => "low",
            Level::Medium => "medium",
            Level::High => "high",
        }
    }
}

/// A confidence grade with the evidence behind it in words.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Confidence {
    pub level: Level,
    pub statement: String,
}

/// Grades a two-level boundary: how far apart the levels are (`ratio`,
/// Ashman's D) and how many of `n` offsets disagree with it.
pub fn grade(levels: &Levels, errors: usize, n: usize, min_ratio: f64) -> Level {
    let r = levels.ratio();
    let d = levels.separation;
    if r >= 2.0 * min_ratio && d >= 3.0 && errors * 20 <= n {
        Level::High
    } else if r >= min_ratio && d >= 2.0 && errors * 10 <= n {
        Level::Medium
    } else {
        Level::Low
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_clear_levels_are_found_whatever_their_sizes() {
        let mut v = vec![500.0, 480.0, 520.0, 510.0, 495.0];
        v.extend([60_000.0, 75_000.0, 58_000.0]);
        let l = two_levels(&v).unwrap();
        assert_eq!((l.low_count, l.high_count), (5, 3));
        assert!((450.0..550.0).contains(&l.low_ns), "{l:?}");
        assert!((55_000.0..80_000.0).contains(&l.high_ns), "{l:?}");
        assert!(l.separation > 10.0);
        assert!(l.is_high(10_000.0) && !l.is_high(2_000.0));
    }

    #[test]
    fn one_level_with_noise_separates_poorly() {
        let v: Vec<f64> = (0..50).map(|i| 1000.0 + (i * 37 % 100) as f64).collect();
        let l = two_levels(&v).unwrap();
        assert!(l.ratio() < 1.2, "{l:?}");
        assert_eq!(grade(&l, 0, v.len(), 1.3), Level::Low);
    }

    #[test]
    fn a_step_ignores_isolated_contradictions() {
        let h = [
            false, false, true, false, false, false, true, true, false, true, true,
        ];
        assert_eq!(step_up(&h), Step { at: 6, errors: 2 });
        assert_eq!(step_up(&[false, false]), Step { at: 2, errors: 0 });
        assert_eq!(step_up(&[true, true]), Step { at: 0, errors: 0 });
        assert_eq!(step_up(&[]), Step { at: 0, errors: 0 });
    }

    #[test]
    fn grades_need_contrast_and_agreement() {
        let l = Levels {
            low_ns: 500.0,
            high_ns: 50_000.0,
            threshold_ns: 5_000.0,
            separation: 20.0,
            low_count: 90,
            high_count: 10,
        };
        assert_eq!(grade(&l, 0, 100, 2.0), Level::High);
        assert_eq!(grade(&l, 8, 100, 2.0), Level::Medium);
        assert_eq!(grade(&l, 30, 100, 2.0), Level::Low);
    }
}
