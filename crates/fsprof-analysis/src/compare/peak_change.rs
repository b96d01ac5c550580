//! Phase 2: how an op's peaks changed between A and B.

use fsprof_core::{Histogram, Resolution};
use serde::{Deserialize, Serialize};

use super::{CompareOptions, Side};
use crate::peak_labels::PeakLabel;
use crate::peaks::Peak;

/// A peak of one side, with the calibrated characteristic it is near
/// when a calibration was given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeenPeak {
    #[serde(flatten)]
    pub peak: Peak,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<PeakLabel>,
}

/// A change in an op's peaks. `layer_latency_share` is the share of the
/// layer's total latency the peak holds on its side (B for `new` and
/// `moved`, A for `gone`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PeakChange {
    /// A peak of B over a bucket range where A had less than half its
    /// share of calls (within a power of two).
    New {
        b: SeenPeak,
        layer_latency_share: f64,
        /// Whether it holds enough of the op's latency, with the op's
        /// total moved by enough of it, to be named first (see
        /// [`CompareOptions::peak_change_share`]).
        significant: bool,
        /// Calls of A and of B in the peak's bucket range.
        in_a: u64,
        in_b: u64,
    },
    /// The reverse: a peak of A that B lacks.
    Gone {
        a: SeenPeak,
        layer_latency_share: f64,
        significant: bool,
        in_a: u64,
        in_b: u64,
    },
    /// Matching peaks whose modes are at least two powers of two apart. A
    /// moved peak is phase 3's business (it is what EMD measures), so it
    /// never decides by itself.
    Moved {
        a: SeenPeak,
        b: SeenPeak,
        layer_latency_share: f64,
    },
}

impl PeakChange {
    pub fn significant(&self) -> bool {
        match self {
            PeakChange::New { significant, .. } | PeakChange::Gone { significant, .. } => {
                *significant
            }
            PeakChange::Moved { .. } => false,
        }
    }

    pub fn layer_latency_share(&self) -> f64 {
        match self {
            PeakChange::New {
                layer_latency_share,
                ..
            }
            | PeakChange::Gone {
                layer_latency_share,
                ..
            }
            | PeakChange::Moved {
                layer_latency_share,
                ..
            } => *layer_latency_share,
        }
    }
}

fn overlaps(x: &Peak, y: &Peak) -> bool {
    x.first <= y.last && y.first <= x.last
}

/// Calls of `h` in the buckets `from..=to`.
fn calls_in(h: &Histogram, from: i32, to: i32) -> u64 {
    h.buckets()
        .filter(|(i, _)| (from..=to).contains(i))
        .fold(0u64, |t, (_, c)| t.saturating_add(c))
}

/// Share of `h`'s calls inside `p`'s bucket range widened by one power of
/// two on each side.
fn share_near(h: &Histogram, p: &Peak, res: Resolution) -> f64 {
    let t = h.total();
    if t == 0 {
        return 0.0;
    }
    let r = res.get() as i32;
    calls_in(h, p.first - r, p.last + r) as f64 / t as f64
}

/// The peaks of both sides of one op, and how each is labelled.
pub(super) struct Peaks<'x> {
    pub a: &'x [Peak],
    pub b: &'x [Peak],
    pub layer: &'x str,
}

/// Phase 2. A peak of B is `new` when A had less than half as large a share
/// of its calls in the same bucket range widened by a power of two each
/// side — judged on A's histogram, not on A's peaks, so that it does not
/// depend on how each side's peaks happen to be cut (a straggler of A
/// inside the range, A's mass split differently into peaks at a fine
/// resolution, or a peak drifting by a bucket change nothing). `gone` is
/// the reverse.
/// A peak that is neither, whose biggest overlapping peak on the other side
/// has its mode two or more powers of two away, `moved`.
/// Biggest first, significant ones before the others.
pub(super) fn peak_changes(
    peaks: Peaks<'_>,
    a: &Side,
    b: &Side,
    res: Resolution,
    opts: &CompareOptions,
) -> Vec<PeakChange> {
    let (ha, hb) = (&a.op.histogram, &b.op.histogram);
    // A new (gone) peak counts when it holds enough of the op's latency and
    // the op's total latency grew (shrank) by at least half of what the
    // peak holds: a change in where the time goes, not a few calls that
    // moved between neighbouring buckets of a cheap op.
    let grew = b.op.total_ns as f64 - a.op.total_ns as f64;
    let significant = |p: &Peak, growth: f64| {
        p.latency_share >= opts.peak_change_share && growth >= p.latency_ns / 2.0
    };
    let seen = |p: &Peak, side: &Side| SeenPeak {
        peak: p.clone(),
        label: opts
            .calibration
            .as_ref()
            .and_then(|c| c.label_peak(peaks.layer, &side.op, p, res)),
    };
    let mut out = Vec::new();
    for p in peaks.b {
        if share_near(ha, p, res) < p.count_share / 2.0 {
            out.push(PeakChange::New {
                b: seen(p, b),
                layer_latency_share: p.latency_share * b.latency_share,
                significant: significant(p, grew),
                in_a: calls_in(ha, p.first, p.last),
                in_b: p.count,
            });
        } else if let Some(q) = peaks
            .a
            .iter()
            .filter(|q| overlaps(q, p))
            .max_by_key(|q| q.count)
        {
            if (p.mode - q.mode).abs() >= 2 * res.get() as i32 {
                out.push(PeakChange::Moved {
                    a: seen(q, a),
                    b: seen(p, b),
                    layer_latency_share: p.latency_share * b.latency_share,
                });
            }
        }
    }
    for q in peaks.a {
        if share_near(hb, q, res) < q.count_share / 2.0 {
            out.push(PeakChange::Gone {
                a: seen(q, a),
                layer_latency_share: q.latency_share * a.latency_share,
                significant: significant(q, -grew),
                in_a: q.count,
                in_b: calls_in(hb, q.first, q.last),
            });
        }
    }
    out.sort_by(|x, y| {
        (y.significant(), y.layer_latency_share())
            .partial_cmp(&(x.significant(), x.layer_latency_share()))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    out
}
