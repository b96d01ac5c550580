//! One stored series, read from a Prometheus range-vector answer, and what
//! it gained between two moments.
//!
//! The gain is exact, not `increase()`'s extrapolation: the last sample at
//! or before `to` minus the last at or before `from` (none: the series
//! started inside the range, and counts from zero, as the agent's series
//! do), bucket by bucket, where a drop in the count between two samples is
//! a counter reset (a restarted agent) and the samples after it count
//! from zero again.

use std::collections::BTreeMap;

use fsprof_core::layer::Unit;
use fsprof_core::{Histogram, Resolution};

/// One sample of a native histogram: fsprof bucket → count (the zero
/// bucket under `None`), the count and the sum in the base unit.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Native {
    pub buckets: BTreeMap<Option<i32>, u64>,
    pub count: u64,
    pub sum: f64,
}

/// A series: its labels and its samples in time order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stored<V> {
    pub labels: BTreeMap<String, String>,
    pub samples: Vec<(f64, V)>,
}

/// What a series gained between `from` and `to` (see the module doc).
pub fn gain<V: Clone + Default>(
    samples: &[(f64, V)],
    from: f64,
    to: f64,
    size: impl Fn(&V) -> f64,
    minus: impl Fn(&V, &V) -> V,
    plus: impl Fn(&V, &V) -> V,
) -> V {
    let inside: Vec<&(f64, V)> = samples.iter().filter(|(t, _)| *t <= to).collect();
    let start = inside.iter().rposition(|(t, _)| *t <= from);
    let mut total = V::default();
    let mut prev: Option<&V> = start.map(|k| &inside[k].1);
    for (_, v) in &inside[start.map_or(0, |k| k + 1)..] {
        let step = match prev {
            Some(p) if size(v) >= size(p) => minus(v, p),
            // A reset (or the series' first sample): all of it is new.
            _ => v.clone(),
        };
        total = plus(&total, &step);
        prev = Some(v);
    }
    total
}

/// [`gain`] of a native histogram.
pub fn native_gain(samples: &[(f64, Native)], from: f64, to: f64) -> Native {
    gain(
        samples,
        from,
        to,
        |v| v.count as f64,
        |a, b| Native {
            buckets: a
                .buckets
                .iter()
                .map(|(k, n)| (*k, n.saturating_sub(b.buckets.get(k).copied().unwrap_or(0))))
                .filter(|(_, n)| *n > 0)
                .collect(),
            count: a.count.saturating_sub(b.count),
            sum: (a.sum - b.sum).max(0.0),
        },
        |a, b| {
            let mut buckets = a.buckets.clone();
            for (k, n) in &b.buckets {
                *buckets.entry(*k).or_default() += n;
            }
            Native {
                buckets,
                count: a.count + b.count,
                sum: a.sum + b.sum,
            }
        },
    )
}

/// [`gain`] of a counter.
pub fn counter_gain(samples: &[(f64, f64)], from: f64, to: f64) -> f64 {
    gain(samples, from, to, |v| *v, |a, b| a - b, |a, b| a + b)
}

/// A native histogram sample from the API's JSON (`{count, sum, buckets:
/// [[rule, lower, upper, count], ...]}`) with its buckets placed as
/// fsprof's; the resolution is read off the buckets' widths. `None` for
/// a histogram whose buckets are not of one of fsprof's resolutions.
pub fn parse_native(h: &serde_json::Value, unit: Unit) -> Option<(Native, Option<Resolution>)> {
    let num = |v: &serde_json::Value| v.as_str().and_then(|s| s.parse::<f64>().ok());
    let mut n = Native {
        count: num(&h["count"])? as u64,
        sum: num(&h["sum"])?,
        ..Default::default()
    };
    let mut res = None;
    for b in h["buckets"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let (lo, hi, c) = (num(&b[1])?, num(&b[2])?, num(&b[3])? as u64);
        if hi <= 0.0 {
            *n.buckets.entry(None).or_default() += c;
            continue;
        }
        let r = (1.0 / (hi / lo).log2()).round() as u32;
        let r = Resolution::new(r).ok()?;
        if res.is_some_and(|x| x != r) {
            return None;
        }
        res = Some(r);
        let j = (hi.log2() * f64::from(r.get())).round() as i32;
        *n.buckets
            .entry(Some(fsprof_export::fsprof_index(j, r, unit)))
            .or_default() += c;
    }
    Some((n, res))
}

/// The histogram a gain holds.
pub fn histogram(n: &Native) -> Histogram {
    let mut h = Histogram::default();
    for (k, c) in &n.buckets {
        h.add_to(*k, *c);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gain_starts_at_the_last_sample_before_from_and_survives_a_reset() {
        let s = [
            (10.0, 5.0),
            (20.0, 7.0),
            (30.0, 9.0),
            (40.0, 2.0),
            (50.0, 4.0),
            (60.0, 100.0),
        ];
        assert_eq!(counter_gain(&s, 20.0, 30.0), 2.0);
        assert_eq!(
            counter_gain(&s, 25.0, 50.0),
            2.0 + 2.0 + 2.0,
            "9 -> reset to 2 -> 4"
        );
        // No sample before from: the series started inside the range.
        assert_eq!(counter_gain(&s, 0.0, 20.0), 7.0);
        assert_eq!(counter_gain(&s, 60.0, 70.0), 0.0);
    }

    #[test]
    fn native_buckets_come_back_as_fsprofs() {
        let res = Resolution::new(1).unwrap();
        let j = fsprof_export::native_index(6, res, Unit::Ns);
        let (lo, hi) = (f64::from(j - 1).exp2(), f64::from(j).exp2());
        let h = serde_json::json!({"count": "5", "sum": "0.001", "buckets": [
            [3, "-0", "0", "1"],
            [0, lo.to_string(), hi.to_string(), "4"],
        ]});
        let (n, r) = parse_native(&h, Unit::Ns).unwrap();
        assert_eq!(r, Some(res));
        assert_eq!(n.buckets, BTreeMap::from([(None, 1), (Some(6), 4)]));
        let later = Native {
            buckets: BTreeMap::from([(None, 1), (Some(6), 9), (Some(7), 2)]),
            count: 12,
            sum: 0.003,
        };
        let g = native_gain(&[(1.0, n), (2.0, later)], 1.0, 2.0);
        assert_eq!(g.buckets, BTreeMap::from([(Some(6), 5), (Some(7), 2)]));
        assert_eq!(histogram(&g).total(), 7);
    }
}
