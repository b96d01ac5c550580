use anyhow::{bail, Result};
use fsprof_core::format::{read_profile, write_atomic};
use fsprof_plot::{PeakFinder, PlotKind, PlotRequest};

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
    let svg = fsprof_plot::plot_svg(&profile, &req, peak_finder())?;
    let bytes = if png {
        fsprof_plot::svg_to_png(&svg, a.scale)?
    } else {
        svg.into_bytes()
    };
    write_atomic(&a.output, &bytes, a.force)?;
    eprintln!("fsprof: wrote {}", a.output.display());
    Ok(0)
}

/// Peaks to mark on histograms; none until an analysis crate provides them.
pub fn peak_finder() -> Option<PeakFinder<'static>> {
    None
}
