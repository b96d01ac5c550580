//! Classic histograms, where Prometheus stored them (native histograms
//! not enabled): the `_bucket` series' `le` bounds are fsprof's exact
//! upper bounds `2^((i+1)/r)` (ns written in seconds, or bytes), so each
//! bucket's gain goes back to its fsprof bucket exactly.

use std::collections::BTreeMap;

use fsprof_core::layer::Unit;
use fsprof_core::{Histogram, Resolution};

use crate::series::counter_gain;
use crate::{fetch, Fetched, Gains, Options, PullError};

/// The smallest resolution at which `v` (ns or bytes) is a bucket bound.
fn resolution_of(v: f64) -> Option<Resolution> {
    let l = v.log2();
    Resolution::ALLOWED
        .iter()
        .find(|&&r| {
            let x = l * f64::from(r);
            (x - x.round()).abs() < 1e-6
        })
        .and_then(|&r| Resolution::new(r).ok())
}

/// The gains of `metric`'s classic histograms over the range.
pub fn gains(
    http: &ureq::Agent,
    o: &Options,
    metric: &str,
    unit: Unit,
) -> Result<(Gains, Option<Resolution>), PullError> {
    let Fetched::Counter(buckets) = fetch(http, o, &format!("{metric}_bucket"), unit)? else {
        return Ok((Vec::new(), None));
    };
    let Fetched::Counter(sums) = fetch(http, o, &format!("{metric}_sum"), unit)? else {
        return Ok((Vec::new(), None));
    };
    // Per series (labels without `le`): le → cumulative gain.
    let mut cum: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
    for mut s in buckets {
        let Some(le) = s.labels.remove("le") else {
            continue;
        };
        let le: f64 = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap_or(f64::NAN)
        };
        cum.entry(s.labels)
            .or_default()
            .push((le, counter_gain(&s.samples, o.from, o.to)));
    }
    let bound = |le: f64| match unit {
        Unit::Ns => le * 1e9,
        Unit::Bytes => le,
    };
    let res = cum
        .values()
        .flatten()
        .filter(|(le, _)| le.is_finite() && *le > 0.0)
        .filter_map(|(le, _)| resolution_of(bound(*le)))
        .max();
    let r = res.unwrap_or_default();
    let mut out = Vec::new();
    for (labels, mut les) in cum {
        les.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut h = Histogram::default();
        let mut prev = 0.0;
        for (le, c) in les.iter().filter(|(le, _)| le.is_finite()) {
            let n = (c - prev).max(0.0).round() as u64;
            prev = *c;
            match *le {
                x if x <= 0.0 => h.add_to(None, n),
                x => {
                    let i = (bound(x).log2() * f64::from(r.get())).round() as i32 - 1;
                    h.add_to(Some(i), n);
                }
            }
        }
        let sum = sums
            .iter()
            .find(|s| s.labels == labels)
            .map_or(0.0, |s| counter_gain(&s.samples, o.from, o.to));
        out.push((labels, h, sum));
    }
    Ok((out, res))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_tell_their_resolution() {
        assert_eq!(resolution_of(64.0), Resolution::new(1).ok());
        assert_eq!(resolution_of(2f64.powf(6.5)), Resolution::new(2).ok());
        assert_eq!(resolution_of(2f64.powf(6.0625)), Resolution::new(16).ok());
        assert_eq!(resolution_of(100.0), None);
    }
}
