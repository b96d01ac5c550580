//! The per-peak table (FSprof Table 3): every peak of the chosen ops with
//! its range, mass and share of its layer's latency, ready to render.

use fsprof_core::layer::Unit;
use fsprof_core::{OpStats, Profile};
use serde::{Deserialize, Serialize};

use crate::labels::Calibration;
use crate::peak_labels::{Labelling, NoLabel, PeakLabel};
use crate::peaks::{find_peaks_with, peak_time_range, Peak, PeakOptions};

/// One row of the per-peak table (FSprof Table 3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeakRow {
    pub layer: String,
    pub op: String,
    /// 1-based position among the op's peaks, fastest first.
    pub number: usize,
    pub peak: Peak,
    /// Exclusive lower bound of the first bucket and inclusive upper bound
    /// of the last, ns.
    pub lower_ns: f64,
    pub upper_ns: f64,
    pub mode_ns: f64,
    /// What `lower_ns`, `upper_ns`, `mode_ns` and the peak's `latency_ns`
    /// count: `ns`, or `bytes` in a byte-valued layer (`block-size`).
    #[serde(default)]
    pub unit: Unit,
    /// Of the layer's total latency.
    pub layer_latency_share: f64,
    /// First and last moment (from the profile start, ns) an interval had
    /// calls in the peak; only for profiles recorded with `--interval`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_range_ns: Option<(u64, u64)>,
    /// The calibrated characteristic the peak is near, with a calibration.
    #[serde(
        rename = "characteristic",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub label: Option<PeakLabel>,
    /// Why a peak of an op the calibration could explain got no label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_label: Option<NoLabel>,
}

/// Peak rows for the ops of `p` accepted by `keep(layer, op)`, each layer's
/// ops by decreasing total latency.
pub fn peak_rows(
    p: &Profile,
    keep: impl Fn(&str, &str) -> bool,
    calibration: Option<&Calibration>,
    opts: &PeakOptions,
) -> Vec<PeakRow> {
    let res = p.resolution();
    let mut rows = Vec::new();
    for l in &p.layers {
        let total = l.total_ns();
        let mut ops: Vec<_> = l
            .ops
            .iter()
            .filter(|o| o.post > 0 && keep(&l.name, &o.name))
            .collect();
        ops.sort_by(|a, b| OpStats::by_latency(a, b));
        for o in ops {
            let op_share = if total == 0 {
                0.0
            } else {
                o.total_ns as f64 / total as f64
            };
            for (k, pk) in find_peaks_with(&o.histogram, res, opts)
                .into_iter()
                .enumerate()
            {
                let labelling = calibration.and_then(|c| c.peak_labelling(&l.name, o, &pk, res));
                rows.push(PeakRow {
                    layer: l.name.clone(),
                    op: o.name.clone(),
                    number: k + 1,
                    lower_ns: pk.lower_ns(res),
                    upper_ns: pk.upper_ns(res),
                    mode_ns: pk.mode_ns(res),
                    unit: Unit::of(&l.name),
                    layer_latency_share: pk.latency_share * op_share,
                    time_range_ns: peak_time_range(&p.intervals, &l.name, &o.name, &pk),
                    label: labelling.clone().and_then(Labelling::label),
                    no_label: match labelling {
                        Some(Labelling::NoLabel(n)) => Some(n),
                        _ => None,
                    },
                    peak: pk,
                });
            }
        }
    }
    rows
}
