use anyhow::{bail, Result};
use fsprof_core::format::{read_profile, write_atomic};
use fsprof_plot::{PlotKind, PlotRequest};

use crate::cli::{PlotArgs, PlotKindArg};

pub fn plot(a: PlotArgs) -> Result<i32> {
    let ext = a
        .output
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let png = match ext.as_deref() {
        Some("svg") => false,
        Some("png") => true,
        _ => bail!(
            "cannot tell the image format of {}: name it *.svg or *.png",
            a.output.display()
        ),
    };
    if a.output.exists() && !a.force {
        return Err(fsprof_core::format::FormatError::Exists { path: a.output }.into());
    }
    let profile = read_profile(&a.file)?;
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
    let finder = fsprof_plot::marks::peak_finder(cal.as_ref());
    let peaks: Option<fsprof_plot::PeakFinder> = (!a.no_peaks).then_some(&finder);
    let svg = fsprof_plot::plot_svg(&profile, &req, peaks)?;
    let bytes = if png {
        fsprof_plot::svg_to_png(&svg, a.scale)?
    } else {
        svg.into_bytes()
    };
    write_atomic(&a.output, &bytes, a.force)?;
    eprintln!("fsprof: wrote {}", a.output.display());
    Ok(0)
}
