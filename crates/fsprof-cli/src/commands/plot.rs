use anyhow::{bail, Result};
use fsprof_analysis::find_peaks;
use fsprof_analysis::Calibration;
use fsprof_core::units::format_ns;
use fsprof_core::{Histogram, Resolution};
use fsprof_plot::{PeakMark, PlotKind, PlotRequest};

use crate::cli::{ImageFormatArg, PlotArgs, PlotKindArg};

pub fn plot(a: PlotArgs) -> Result<i32> {
    let ext = a
        .output
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let png = match (a.format, ext.as_deref()) {
        (Some(f), _) => f == ImageFormatArg::Png,
        (None, Some("svg")) => false,
        (None, Some("png")) => true,
        _ => bail!(
            "cannot tell the image format of {}: name it *.svg or *.png, or pass --format svg|png",
            a.output.display()
        ),
    };
    crate::files::check_output(Some(&a.output), a.force)?;
    let profile = crate::files::read_input(&a.file)?;
    let req = PlotRequest {
        op: a.op,
        layer: a.layer,
        kind: match a.kind {
            PlotKindArg::Count => PlotKind::Count,
            PlotKindArg::Delay => PlotKind::Delay,
            PlotKindArg::Timeline => PlotKind::Timeline,
        },
        log_y: a.log_y,
    };
    let cal = super::analysis::calibration(&a.calibration)?;
    let finder = peak_finder(cal.as_ref());
    let peaks: Option<fsprof_plot::PeakFinder> = (!a.no_peaks).then_some(&finder);
    let svg = fsprof_plot::plot_svg(&profile, &req, peaks)?;
    let bytes = if png {
        fsprof_plot::svg_to_png(&svg, a.scale)?
    } else {
        svg.into_bytes()
    };
    crate::files::write_output(&bytes, Some(&a.output), a.force)?;
    Ok(0)
}

/// Marks fsprof-analysis's peaks, labelled with the machine's
/// characteristic latency they match (from `fsprof calibrate`) or else with
/// their mode, and their share of the calls.
pub fn peak_finder(
    cal: Option<&Calibration>,
) -> impl Fn(&Histogram, Resolution) -> Vec<PeakMark> + '_ {
    move |h, res| {
        let peaks = find_peaks(h, res);
        // One mode is not worth a marker: the chart shows it plainly.
        if peaks.len() < 2 {
            return Vec::new();
        }
        peaks
            .iter()
            .map(|p| {
                let what = cal
                    .and_then(|c| c.label(p.mode_ns(res)))
                    .unwrap_or_else(|| format!("~{}", format_ns(p.mode_ns(res))));
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
