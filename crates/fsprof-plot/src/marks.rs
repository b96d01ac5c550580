//! The peak markers of the figures: fsprof-analysis's peaks, labelled with
//! the machine's characteristic latency they match (from `fsprof
//! calibrate`) or else with their mode, and their share of the calls.

use fsprof_analysis::{find_peaks, Calibration};
use fsprof_core::layer::Unit;
use fsprof_core::{OpStats, Resolution};

use crate::histchart::PeakMark;

/// A [`crate::PeakFinder`] backed by fsprof-analysis.
pub fn peak_finder(
    cal: Option<&Calibration>,
) -> impl Fn(&str, &OpStats, Resolution) -> Vec<PeakMark> + '_ {
    move |layer, op, res| {
        let peaks = find_peaks(&op.histogram, res);
        // One mode is not worth a marker: the chart shows it plainly.
        if peaks.len() < 2 {
            return Vec::new();
        }
        peaks
            .iter()
            .map(|p| {
                let what = cal
                    .and_then(|c| c.label_peak(layer, op, p, res))
                    .map(|l| fsprof_report::reason::peak_label(&l))
                    .unwrap_or_else(|| format!("~{}", Unit::of(layer).format(p.mode_ns(res))));
                PeakMark {
                    lo: p.first,
                    hi: p.last,
                    mode: p.mode,
                    label: format!("{what}, {:.0}%", p.count_share * 100.0),
                }
            })
            .collect()
    }
}
