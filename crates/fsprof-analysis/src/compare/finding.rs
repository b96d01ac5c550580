//! What was found about one op, as data: the facts its reason is made of.
//! fsprof-report words them (`fsprof_report::analysis::reason`).

use fsprof_core::{OpStats, Resolution};
use serde::{Deserialize, Serialize};

use super::{CompareOptions, Method, PeakChange, Side, Status};
use crate::distance;

/// Why an op is (or is not) interesting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// In one side only (the op's `status` says which).
    OneSided {
        /// Whether it decides: it holds at least the material share of its
        /// layer's latency there (a few cheap calls, a new `fcntl`, are no
        /// change) and is in every run of that side.
        counts: bool,
    },
    /// Same calls, same histogram.
    Identical,
    /// Fewer than [`CompareOptions::min_calls`] calls on both sides.
    TooFewCalls,
    /// Under [`CompareOptions::negligible`] of calls and latency on both
    /// sides.
    Negligible,
    /// Both sides have calls and were scored.
    Compared(Box<Difference>),
}

/// How the two sides of a compared op differ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    /// The peak change worth naming first: the biggest significant new or
    /// gone peak, else the biggest moved one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead: Option<PeakChange>,
    /// For EMD: how far the calls moved, in powers of two, positive when B
    /// is slower (larger, in a byte layer); `None` when under 0.05.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift: Option<f64>,
    /// The figure the method's score is about, on both sides.
    pub moved: Moved,
}

/// The figure of an op that a method measures, A then B: the calls for
/// `count`, the total for `latency`, and for the shape measures the
/// geometric mean, whose change is the signed EMD, so "slower" and the
/// numbers always agree (the arithmetic mean can fall while most calls got
/// slower); a refined EMD's direction is the change of the arithmetic mean
/// itself. Values in the layer's unit (ns, or bytes in a byte layer).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "figure", rename_all = "snake_case")]
pub enum Moved {
    Calls { a: u64, b: u64 },
    Total { a: f64, b: f64 },
    Mean { a: f64, b: f64 },
    GeometricMean { a: f64, b: f64 },
}

/// The finding of an op whose phase 1 decided `status`.
pub(super) fn finding(
    status: Status,
    a: &Side,
    b: &Side,
    changes: &[PeakChange],
    res: Resolution,
    opts: &CompareOptions,
) -> Finding {
    match status {
        Status::Added => Finding::OneSided {
            counts: b.latency_share >= opts.min_share,
        },
        Status::Removed => Finding::OneSided {
            counts: a.latency_share >= opts.min_share,
        },
        Status::Identical => Finding::Identical,
        Status::Negligible if a.op.count() < opts.min_calls && b.op.count() < opts.min_calls => {
            Finding::TooFewCalls
        }
        Status::Negligible => Finding::Negligible,
        Status::Compared => {
            Finding::Compared(Box::new(difference(&a.op, &b.op, changes, res, opts)))
        }
    }
}

fn difference(
    oa: &OpStats,
    ob: &OpStats,
    changes: &[PeakChange],
    res: Resolution,
    opts: &CompareOptions,
) -> Difference {
    let lead = changes
        .first()
        .filter(|c| c.significant())
        .or_else(|| {
            changes
                .iter()
                .find(|c| matches!(c, PeakChange::Moved { .. }))
        })
        .cloned();
    let refined = (opts.method == Method::Emd)
        .then(|| crate::refine::emd(oa, ob, res))
        .flatten();
    let shift = refined
        .map(|r| r.signed / res.get() as f64)
        .filter(|s| s.abs() >= 0.05);
    let calls = Moved::Calls {
        a: oa.count(),
        b: ob.count(),
    };
    let moved = match opts.method {
        Method::Count => calls,
        Method::Latency => Moved::Total {
            a: oa.total_ns as f64,
            b: ob.total_ns as f64,
        },
        Method::Emd if refined.is_some_and(|r| r.refined) => Moved::Mean {
            a: oa.mean_ns(),
            b: ob.mean_ns(),
        },
        _ => match (
            distance::geometric_mean_ns(&oa.histogram, res),
            distance::geometric_mean_ns(&ob.histogram, res),
        ) {
            (Some(a), Some(b)) => Moved::GeometricMean { a, b },
            _ => calls,
        },
    };
    Difference { lead, shift, moved }
}
