//! `fsprof report FILE`: checks the options, loads the calibration and
//! hands the profile to fsprof-report (text, JSON, CSV) or fsprof-plot
//! (HTML).

use anyhow::{bail, Result};
use fsprof_analysis::correlation::Value;
use fsprof_report::{Extras, Format, ReportOptions, Selection};

use super::analysis::calibration;
use crate::cli::{CorrelateArg, FormatArg, ReportArgs};

pub fn report(a: ReportArgs) -> Result<i32> {
    if a.format == FormatArg::Html && a.output.is_none() {
        bail!("--format html writes a file: add -o report.html");
    }
    let profile = crate::files::read_input(&a.file)?;
    let an = &a.analysis;
    let selection = Selection {
        layers: a.layers,
        ops: a.ops,
    };
    if a.format == FormatArg::Html {
        if an.correlate.is_some() || an.interesting {
            bail!("--format html shows every op with its peaks; --interesting and --correlate are for text, json and csv");
        }
        let cal = calibration(&an.calibration)?;
        let figures = super::bench::report_figures(&a.file);
        let html =
            fsprof_plot::html::report_with_analysis(&profile, selection, cal.as_ref(), figures)?;
        return finish(&html, a.output.as_deref(), a.force);
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
        attribution: a.attribution && a.format == FormatArg::Text,
    };
    let tables = an.peaks as u8 + an.interesting as u8 + an.correlate.is_some() as u8;
    if tables > 1 && matches!(a.format, FormatArg::Csv) {
        bail!("CSV holds one table: use only one of --peaks, --interesting, --correlate with --format csv");
    }
    let opts = ReportOptions {
        format: match a.format {
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
    finish(&text, a.output.as_deref(), a.force)
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
