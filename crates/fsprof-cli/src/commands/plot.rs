//! `fsprof plot FILE --op OP -o FIG.svg|png`: one figure (fsprof-plot).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use fsprof_plot::{PlotKind, PlotRequest};

use crate::args::CalibrationArgs;

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Profile file
    pub file: PathBuf,
    /// The op to draw
    #[arg(long, value_name = "NAME", required = true)]
    pub op: String,
    /// The op's layer, when several layers have an op of that name
    #[arg(long, alias = "layers", value_name = "NAME")]
    pub layer: Option<String>,
    /// What to draw
    #[arg(long, value_enum, default_value_t = PlotKindArg::Count)]
    pub kind: PlotKindArg,
    /// Logarithmic value axis (count and delay plots)
    #[arg(long)]
    pub log_y: bool,
    /// Output file (`-` for standard output); its extension picks the
    /// format unless --format does
    #[arg(short, long, value_name = "FILE", required = true)]
    pub output: PathBuf,
    /// Image format [default: FILE's extension, .svg or .png]
    #[arg(long, value_enum)]
    pub format: Option<ImageFormatArg>,
    /// Replace FILE if it exists
    #[arg(short, long)]
    pub force: bool,
    /// PNG pixels per SVG unit
    #[arg(long, default_value_t = 2.0, value_name = "X", value_parser = parse_scale)]
    pub scale: f32,
    /// Don't mark the histogram's peaks
    #[arg(long)]
    pub no_peaks: bool,
    #[command(flatten)]
    pub calibration: CalibrationArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ImageFormatArg {
    Svg,
    Png,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PlotKindArg {
    /// Calls per latency bucket
    Count,
    /// Total latency per bucket (calls × bucket mean latency)
    Delay,
    /// Heat map of the latency distribution per interval (needs --interval profiles)
    Timeline,
}

fn parse_scale(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(x) if (0.25..=8.0).contains(&x) => Ok(x),
        _ => Err(format!("{s:?} is not a scale between 0.25 and 8")),
    }
}

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
        crate::png::svg_to_png(&svg, a.scale)?
    } else {
        svg.into_bytes()
    };
    crate::files::write_output(&bytes, Some(&a.output), a.force)?;
    Ok(0)
}
