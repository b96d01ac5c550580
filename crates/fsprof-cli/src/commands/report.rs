//! `fsprof report FILE`: checks the options, loads the calibration and
//! hands the profile to fsprof-report (text, JSON, CSV) or fsprof-plot
//! (HTML).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use fsprof_analysis::correlation::Value;
use fsprof_report::{Extras, Format, ReportOptions, Selection};

use super::analysis::calibration;
use crate::args::{pick_format, CalibrationArgs, FormatArg, ToFileArgs};

pub const HELP: &str = "\
p50 and p99 are estimates: a profile keeps only how many calls fell in each
log2 bucket, so a quantile is interpolated geometrically inside the bucket
that holds it and clamped to the op's smallest and largest call. The true
value lies in that bucket, which each histogram's heading gives (\"p50 in
512ns..1.02µs\"), as do p50_range_ns and p99_range_ns in --format json.
Every figure of a byte-valued layer (block-size) is in bytes.";

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Profile file
    pub file: PathBuf,
    /// How to print it [default: -o FILE's extension (.json, .csv, .html), else text]
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Ops that get a histogram in the text report
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
    /// Only this op (repeatable)
    #[arg(long = "op", value_name = "NAME")]
    pub ops: Vec<String>,
    /// Only these layers (repeatable, or comma-separated; also --layers)
    #[arg(
        long = "layer",
        alias = "layers",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub layers: Vec<String>,
    /// Also list the profiled processes
    #[arg(long)]
    pub processes: bool,
    /// Also attribute upper-layer latency to lower layers (text format)
    #[arg(long)]
    pub attribution: bool,
    #[command(flatten)]
    pub to: ToFileArgs,
    #[command(flatten)]
    pub analysis: ReportAnalysisArgs,
}

#[derive(Debug, Args)]
pub struct ReportAnalysisArgs {
    /// Add a per-peak table (bucket and time range, calls, latency share)
    #[arg(long)]
    pub peaks: bool,
    /// Add the ops holding most latency and the peaks with matching counts
    #[arg(long)]
    pub interesting: bool,
    /// Per latency peak of the --op, the distribution of request size or seek distance
    #[arg(long, value_enum, value_name = "VALUE")]
    pub correlate: Option<CorrelateArg>,
    #[command(flatten)]
    pub calibration: CalibrationArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CorrelateArg {
    /// Bytes requested per call
    Size,
    /// |offset - end offset of the previous call on the same fd|, bytes
    Seek,
}

pub fn report(a: ReportArgs) -> Result<i32> {
    let format = pick_format(a.format, a.to.output.as_deref(), FormatArg::Text);
    if format == FormatArg::Html && a.to.output.is_none() {
        bail!("--format html writes a file: add -o report.html");
    }
    let crate::files::Document { profile, bench } = crate::files::read_document(&a.file)?;
    let an = &a.analysis;
    let selection = Selection {
        layers: a.layers,
        ops: a.ops,
    };
    if format == FormatArg::Html {
        if an.correlate.is_some() || an.interesting {
            bail!("--format html shows every op with its peaks; --interesting and --correlate are for text, json and csv");
        }
        let cal = calibration(&an.calibration)?;
        let figures = bench
            .as_ref()
            .map(fsprof_bench::figure::report_figures)
            .unwrap_or_default();
        let html =
            fsprof_plot::html::report_with_analysis(&profile, selection, cal.as_ref(), figures)?;
        return finish(&html, a.to.output.as_deref(), a.to.force);
    }
    if an.correlate.is_some() && selection.ops.len() != 1 {
        bail!("--correlate needs exactly one --op, e.g. --correlate seek --op read");
    }
    let extras = Extras {
        peaks: an.peaks,
        interesting: an.interesting,
        correlate: an.correlate.map(|v| match v {
            CorrelateArg::Size => Value::Size,
            CorrelateArg::Seek => Value::Seek,
        }),
        attribution: a.attribution && format == FormatArg::Text,
    };
    let tables = an.peaks as u8 + an.interesting as u8 + an.correlate.is_some() as u8;
    if tables > 1 && matches!(format, FormatArg::Csv) {
        bail!("CSV holds one table: use only one of --peaks, --interesting, --correlate with --format csv");
    }
    let opts = ReportOptions {
        format: match format {
            FormatArg::Text => Format::Text,
            FormatArg::Json => Format::Json,
            FormatArg::Csv => Format::Csv,
            FormatArg::Html => unreachable!("handled above"),
        },
        selection,
        top: a.top,
        processes: a.processes,
        extras,
    };
    let cal = match tables {
        0 => None,
        _ => calibration(&an.calibration)?,
    };
    let text = fsprof_report::render(&profile, &opts, cal.as_ref())?;
    finish(&text, a.to.output.as_deref(), a.to.force)
}

/// To `-o FILE` (atomically, no partial file on failure) or standard output.
pub fn finish(text: &str, output: Option<&std::path::Path>, force: bool) -> Result<i32> {
    finish_bytes(text.as_bytes(), output, force)
}

pub fn finish_bytes(bytes: &[u8], output: Option<&std::path::Path>, force: bool) -> Result<i32> {
    crate::files::write_output(bytes, output, force)?;
    Ok(0)
}

/// A closed pipe (`fsprof report p.json | head`) is a normal end, not an error.
pub fn write_stdout(text: &str) -> Result<()> {
    crate::files::write_stdout(text.as_bytes())
}
