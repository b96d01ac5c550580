//! Value correlation (issue item 4; FSprof's extended profiles, OSprof's
//! "direct profile and value correlation"): for each latency peak of an op,
//! how the calls in it are distributed over request size or seek distance,
//! e.g. "the slow peak of read is 94% seeks of more than 16 MiB".
//!
//! Reads [`fsprof_core::Correlations`], which the user-level shim records
//! for data ops. The joint histograms are at resolution 1 on both axes; a
//! peak found at a finer resolution is widened to whole powers of two.

use fsprof_core::units::format_bytes;
use fsprof_core::{JointHistogram, OpStats, Profile, Resolution};
use serde::{Deserialize, Serialize};

use crate::fmt::bucket_human;
use crate::peaks::{find_peaks_with, Peak, PeakOptions};

/// Which recorded value to correlate latency with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    Size,
    Seek,
}

impl Value {
    pub fn name(self) -> &'static str {
        match self {
            Value::Size => "size",
            Value::Seek => "seek",
        }
    }
}

/// Calls of one value bucket inside one peak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueBucket {
    /// Resolution-1 index: `(2^i, 2^(i+1)]` bytes; -1 = 1 byte; -2 = 0.
    pub index: i32,
    pub count: u64,
    /// Of the peak's calls that have a value recorded.
    pub share: f64,
}

impl ValueBucket {
    /// Smallest and largest byte count the bucket holds.
    pub fn bounds(&self) -> (u64, u64) {
        match self.index {
            i if i <= JointHistogram::ZERO => (0, 0),
            -1 => (1, 1),
            i => (
                (1u64 << i) + 1,
                1u64.checked_shl(i as u32 + 1).unwrap_or(u64::MAX),
            ),
        }
    }

    /// `0 B`, `2 KiB..4 KiB`.
    pub fn range(&self) -> String {
        let (lo, hi) = self.bounds();
        if lo == hi {
            format_bytes(lo as f64)
        } else {
            format!(
                "{}..{}",
                format_bytes((lo - 1) as f64),
                format_bytes(hi as f64)
            )
        }
    }
}

/// [`correlate`] for one op of a profile, with where it was found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpValues {
    pub layer: String,
    pub op: String,
    pub value: Value,
    pub peaks: Vec<PeakValues>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeakValues {
    pub peak: Peak,
    /// Calls of the peak with a recorded value (calls whose value could not
    /// be known — e.g. the seek distance of a first access — are missing).
    pub calls: u64,
    pub values: Vec<ValueBucket>,
    /// One line, e.g. `peak 2 at 2.10ms..4.19ms: 94% seeks of more than 16 MiB`.
    pub summary: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CorrelationError {
    #[error("op {op:?} has no {value} correlation data: it is recorded by `fsprof run` for data ops (read, write, pread, pwrite, their vector forms, fread, fwrite) only")]
    Missing { op: String, value: &'static str },
    #[error("no op named {op:?} in the profile")]
    NoSuchOp { op: String },
}

/// [`correlate`] for op `op` of the first layer (among `layers`, or all if
/// empty) that has it with recorded values.
pub fn correlate_in(
    p: &Profile,
    layers: &[String],
    op: &str,
    value: Value,
    opts: &PeakOptions,
) -> Result<OpValues, CorrelationError> {
    let mut last = None;
    for l in &p.layers {
        if !layers.is_empty() && !layers.contains(&l.name) {
            continue;
        }
        if let Some(o) = l.op(op) {
            match correlate(o, value, p.resolution(), opts) {
                Ok(peaks) => {
                    return Ok(OpValues {
                        layer: l.name.clone(),
                        op: op.to_string(),
                        value,
                        peaks,
                    })
                }
                Err(e) => last = Some(e),
            }
        }
    }
    Err(last.unwrap_or(CorrelationError::NoSuchOp { op: op.to_string() }))
}

/// Per peak of `op`'s latency histogram, the distribution of `value`.
pub fn correlate(
    op: &OpStats,
    value: Value,
    res: Resolution,
    opts: &PeakOptions,
) -> Result<Vec<PeakValues>, CorrelationError> {
    let joint = op.correlations.as_ref().map(|c| match value {
        Value::Size => &c.size,
        Value::Seek => &c.seek,
    });
    let Some(joint) = joint.filter(|j| !j.is_empty()) else {
        return Err(CorrelationError::Missing {
            op: op.name.clone(),
            value: value.name(),
        });
    };
    let peaks = find_peaks_with(&op.histogram, res, opts);
    Ok(peaks
        .into_iter()
        .enumerate()
        .map(|(k, peak)| {
            let values = peak_values(joint, &peak, res);
            let calls = values.iter().fold(0u64, |t, b| t.saturating_add(b.count));
            // Correlations are recorded for the user layer's calls: times.
            let head = format!(
                "peak {} at {}",
                k + 1,
                bucket_human(peak.mode, res, fsprof_core::layer::Unit::Ns)
            );
            let summary = format!("{head}: {}", describe(&values, value));
            PeakValues {
                peak,
                calls,
                values,
                summary,
            }
        })
        .collect())
}

/// The value buckets of the calls in `peak` (a peak of the op's latency
/// histogram at resolution `res`), smallest value first, with their
/// shares.
pub fn peak_values(joint: &JointHistogram, peak: &Peak, res: Resolution) -> Vec<ValueBucket> {
    let r1 = Resolution::DEFAULT;
    let lo = res.downscale_index(peak.first, r1);
    let hi = res.downscale_index(peak.last, r1);
    // The zero-latency calls sit below every peak; count them with a peak
    // starting at the smallest bucket.
    let in_peak = |l: i32| (lo..=hi).contains(&l) || (l == JointHistogram::ZERO && lo <= -1);
    let mut values: Vec<ValueBucket> = Vec::new();
    for &(l, v, n) in &joint.cells {
        if !in_peak(l) {
            continue;
        }
        match values.iter_mut().find(|b| b.index == v) {
            Some(b) => b.count += n,
            None => values.push(ValueBucket {
                index: v,
                count: n,
                share: 0.0,
            }),
        }
    }
    values.sort_by_key(|b| b.index);
    let calls = values.iter().fold(0u64, |t, b| t.saturating_add(b.count));
    for b in &mut values {
        b.share = b.count as f64 / calls.max(1) as f64;
    }
    values
}

/// The smallest run of value buckets holding at least 80% of the calls,
/// in words.
fn describe(values: &[ValueBucket], value: Value) -> String {
    if values.is_empty() {
        return "no values recorded".into();
    }
    let (noun, zero) = match value {
        Value::Size => ("requests", "empty requests"),
        Value::Seek => ("seeks", "sequential (seek 0)"),
    };
    let mut best = (0, values.len() - 1, 1.0);
    for i in 0..values.len() {
        let mut s = 0.0;
        for (j, v) in values.iter().enumerate().skip(i) {
            s += v.share;
            if s >= 0.8 - 1e-12 {
                if j - i < best.1 - best.0 || (j - i == best.1 - best.0 && s > best.2) {
                    best = (i, j, s);
                }
                break;
            }
        }
    }
    let (i, j, s) = best;
    let pct = format!("{:.0}%", s * 100.0);
    let (a, b) = (values[i].index, values[j].index);
    let upper = |x: i32| format_bytes(upper_bytes(x));
    let lower = |x: i32| format_bytes(upper_bytes(x - 1));
    if a == JointHistogram::ZERO && b == JointHistogram::ZERO {
        format!("{pct} {zero}")
    } else if a == JointHistogram::ZERO {
        format!("{pct} {noun} of at most {}", upper(b))
    } else if j == values.len() - 1 && i > 0 {
        format!("{pct} {noun} of more than {}", lower(a))
    } else if a == b {
        format!("{pct} {noun} of {}..{}", lower(a), upper(a))
    } else {
        format!("{pct} {noun} of {}..{}", lower(a), upper(b))
    }
}

/// Upper bound of value bucket `i`, bytes (0 for the zero bucket).
fn upper_bytes(i: i32) -> f64 {
    if i <= JointHistogram::ZERO {
        0.0
    } else {
        ((i + 1) as f64).exp2()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::Correlations;

    /// Reads: 1000 sequential 4 KiB hits at ~1 µs, 100 random 4 KiB reads
    /// at ~4 ms that seek 16-64 MiB (94) or 1 MiB (6).
    fn read_op() -> OpStats {
        let mut o = OpStats::new("read");
        let mut c = Correlations::default();
        for (lat, n) in [(9, 300u64), (10, 700)] {
            o.histogram.add_to(Some(lat), n);
            c.size.add(lat, 11, n);
            c.seek.add(lat, JointHistogram::ZERO, n);
        }
        o.histogram.add_to(Some(21), 100);
        c.size.add(21, 11, 100);
        c.seek.add(21, 24, 60);
        c.seek.add(21, 25, 34);
        c.seek.add(21, 19, 6);
        o.post = 1100;
        o.correlations = Some(c);
        o
    }

    #[test]
    fn slow_peak_is_explained_by_long_seeks() {
        let of = |v| correlate(&read_op(), v, Resolution::DEFAULT, &PeakOptions::default());
        let r = of(Value::Seek).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].calls, 1000);
        assert_eq!(
            r[0].summary,
            "peak 1 at 1.02µs..2.05µs: 100% sequential (seek 0)"
        );
        assert_eq!(r[1].calls, 100);
        assert_eq!(
            r[1].summary,
            "peak 2 at 2.10ms..4.19ms: 94% seeks of more than 16 MiB"
        );
        let s = of(Value::Size).unwrap();
        assert!(
            s[1].summary.ends_with("100% requests of 2 KiB..4 KiB"),
            "{}",
            s[1].summary
        );
    }

    #[test]
    fn missing_data_is_a_clear_error() {
        let e = correlate(
            &OpStats::new("stat"),
            Value::Size,
            Resolution::DEFAULT,
            &PeakOptions::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("no size correlation data"), "{e}");
    }

    #[test]
    fn value_buckets_print_their_byte_range() {
        let b = |index| ValueBucket {
            index,
            count: 1,
            share: 1.0,
        };
        assert_eq!(b(-2).range(), "0 B");
        assert_eq!(b(-1).range(), "1 B");
        assert_eq!(b(11).range(), "2 KiB..4 KiB");
        assert_eq!(b(11).bounds(), (2049, 4096));
        assert_eq!(b(63).bounds().1, u64::MAX);
    }
}
