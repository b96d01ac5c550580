//! Axes: the log2 latency axis labelled in human time units, and linear or
//! logarithmic value axes with "nice" ticks.

use fsprof_core::layer::Unit as LayerUnit;
use fsprof_core::units::format_ns;
use fsprof_core::Resolution;

/// What the numbers on a value axis are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Count,
    Nanos,
    Bytes,
}

pub fn format_value(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Nanos => {
            if v == 0.0 {
                "0".into()
            } else {
                format_ns(v)
            }
        }
        Unit::Bytes => {
            if v == 0.0 {
                "0".into()
            } else {
                fsprof_core::units::format_bytes(v)
            }
        }
        Unit::Count => {
            let a = v.abs();
            if a >= 1e9 {
                format!("{}G", trim(v / 1e9))
            } else if a >= 1e6 {
                format!("{}M", trim(v / 1e6))
            } else if a >= 1e3 {
                format!("{}k", trim(v / 1e3))
            } else {
                trim(v)
            }
        }
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// A value axis: maps values to [0, 1] of the plot height.
#[derive(Clone, Debug)]
pub struct ValueAxis {
    pub log: bool,
    pub lo: f64,
    pub hi: f64,
    pub ticks: Vec<f64>,
}

impl ValueAxis {
    /// Covers 0..=max (linear) or the decades around the positive values (log).
    pub fn new(max: f64, min_positive: f64, log: bool) -> Self {
        if log {
            let lo_exp = min_positive.max(1e-9).log10().floor();
            let hi_exp = max.max(min_positive).log10().ceil().max(lo_exp + 1.0);
            let (lo, hi) = (10f64.powf(lo_exp), 10f64.powf(hi_exp));
            let span = (hi_exp - lo_exp) as i32;
            let step = (span + 5) / 6;
            let ticks = (0..=span)
                .step_by(step.max(1) as usize)
                .map(|k| 10f64.powf(lo_exp + k as f64))
                .collect();
            ValueAxis {
                log: true,
                lo,
                hi,
                ticks,
            }
        } else {
            let max = if max > 0.0 { max } else { 1.0 };
            let raw = max / 5.0;
            let mag = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 2.5, 5.0, 10.0]
                .iter()
                .map(|m| m * mag)
                .find(|s| *s >= raw)
                .unwrap_or(10.0 * mag);
            let n = (max / step).ceil() as usize;
            let ticks = (0..=n).map(|k| k as f64 * step).collect();
            ValueAxis {
                log: false,
                lo: 0.0,
                hi: n as f64 * step,
                ticks,
            }
        }
    }

    /// Fraction of the axis height at which `v` lies; values below a log
    /// axis's floor map to 0 (no bar).
    pub fn frac(&self, v: f64) -> f64 {
        if self.log {
            if v <= 0.0 {
                return 0.0;
            }
            ((v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())).clamp(0.0, 1.0)
        } else {
            (v / self.hi).clamp(0.0, 1.0)
        }
    }
}

/// The latency axis: one slot per log2 bucket from `lo` to `hi` (inclusive),
/// plus a leading slot for the zero bucket when it is used.
#[derive(Clone, Debug)]
pub struct BucketAxis {
    pub res: Resolution,
    /// What the buckets hold: latencies, or bytes in a byte-valued layer.
    pub unit: LayerUnit,
    pub zero_slot: bool,
    pub lo: i32,
    pub hi: i32,
}

/// Narrow histograms look like a wall of one bar; show at least this many buckets.
const MIN_SLOTS: i32 = 8;

impl BucketAxis {
    pub fn new(res: Resolution, zero_slot: bool, lo: i32, hi: i32) -> Self {
        let (mut lo, mut hi) = (lo.min(hi), hi.max(lo));
        let min_slots = MIN_SLOTS * res.get() as i32 / 2 + MIN_SLOTS / 2;
        while hi - lo + 1 < min_slots {
            if lo > fsprof_core::buckets::MIN_INDEX {
                lo -= 1;
            }
            if hi - lo + 1 < min_slots && hi < res.max_index() {
                hi += 1;
            }
        }
        BucketAxis {
            res,
            unit: LayerUnit::Ns,
            zero_slot,
            lo,
            hi,
        }
    }

    pub fn slots(&self) -> usize {
        (self.hi - self.lo + 1) as usize + usize::from(self.zero_slot)
    }

    /// Slot number of bucket `i`.
    pub fn slot(&self, i: i32) -> usize {
        (i - self.lo) as usize + usize::from(self.zero_slot)
    }

    /// Boundaries to label: (slot position of the boundary, label). The
    /// lower bound of bucket `i` sits at the left edge of its slot; only
    /// powers of two are labelled, thinned so at most ~9 labels fit.
    pub fn labels(&self) -> Vec<(usize, String)> {
        let r = self.res.get() as i32;
        let powers: Vec<i32> = (self.lo..=self.hi + 1).filter(|i| i % r == 0).collect();
        let step = powers.len().div_ceil(9).max(1);
        let mut out: Vec<(usize, String)> = powers
            .iter()
            .step_by(step)
            .map(|&i| (self.slot(i), self.unit.format(self.res.lower_bound(i))))
            .collect();
        if self.zero_slot {
            out.insert(0, (0, "0".into()));
        }
        out
    }

    /// `(lo, hi]` of bucket `i` in human units, for tooltips.
    pub fn describe(&self, i: i32) -> String {
        format!(
            "{} – {}",
            self.unit.format(self.res.lower_bound(i)),
            self.unit.format(self.res.upper_bound(i))
        )
    }
}

/// Mean latency of a bucket assuming calls spread evenly inside it (the
/// midpoint); the zero bucket contributes nothing.
pub fn bucket_mean_ns(res: Resolution, i: i32) -> f64 {
    (res.lower_bound(i) + res.upper_bound(i)) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_cover_the_maximum() {
        let a = ValueAxis::new(6913.0, 1.0, false);
        assert!(a.hi >= 6913.0);
        assert!(a.ticks.len() <= 7, "{:?}", a.ticks);
        assert_eq!(a.ticks[1], 2000.0);
    }

    #[test]
    fn log_axis_spans_whole_decades() {
        let a = ValueAxis::new(6913.0, 3.0, true);
        assert_eq!((a.lo, a.hi), (1.0, 10000.0));
        assert_eq!(a.frac(100.0), 0.5);
        assert_eq!(a.frac(0.0), 0.0);
    }

    #[test]
    fn bucket_labels_are_human_times_at_powers_of_two() {
        let ax = BucketAxis::new(Resolution::DEFAULT, false, 6, 18);
        let labels: Vec<String> = ax.labels().into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels.first().unwrap(), "64ns");
        assert!(labels.contains(&"1.02µs".to_string()), "{labels:?}");
        assert!(labels.iter().any(|l| l.ends_with("µs")));
    }

    #[test]
    fn narrow_histograms_get_a_minimum_width() {
        let ax = BucketAxis::new(Resolution::DEFAULT, false, 10, 10);
        assert!(ax.slots() >= 8);
        assert!(ax.lo <= 10 && ax.hi >= 10);
    }

    #[test]
    fn counts_print_compactly() {
        assert_eq!(format_value(1500.0, Unit::Count), "1.5k");
        assert_eq!(format_value(2e6, Unit::Count), "2M");
        assert_eq!(format_value(7.0, Unit::Count), "7");
        assert_eq!(format_value(2500.0, Unit::Nanos), "2.50µs");
    }
}
