//! `fsprof plot FILE --op OP -o FIG.svg|png`: one figure (fsprof-plot).

use anyhow::{bail, Result};
use fsprof_plot::{PlotKind, PlotRequest};

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
    let finder = fsprof_plot::marks::peak_finder(cal.as_ref());
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
