use std::io::Write;

use anyhow::{bail, Result};
use fsprof_core::format::{read_profile, write_atomic};
use fsprof_report::{render, Format, ReportOptions, Selection};

use crate::cli::{FormatArg, ReportArgs};

pub fn report(a: ReportArgs) -> Result<i32> {
    if a.format == FormatArg::Html && a.output.is_none() {
        bail!("--format html writes a file: add -o report.html");
    }
    let profile = read_profile(&a.file)?;
    if a.format == FormatArg::Html {
        let opts = fsprof_plot::HtmlOptions {
            selection: Selection {
                layers: a.layers,
                ops: a.ops,
            },
            peaks: super::plot::peak_finder(),
        };
        let html = fsprof_plot::html::report(&profile, &opts)?;
        return finish(&html, a.output.as_deref(), a.force);
    }
    let opts = ReportOptions {
        format: match a.format {
            FormatArg::Text => Format::Text,
            FormatArg::Json => Format::Json,
            FormatArg::Csv => Format::Csv,
            FormatArg::Html => unreachable!("handled above"),
        },
        selection: Selection {
            layers: a.layers,
            ops: a.ops,
        },
        top: a.top,
        processes: a.processes,
    };
    let text = render(&profile, &opts)?;
    finish(&text, a.output.as_deref(), a.force)
}

/// To `-o FILE` (atomically, no partial file on failure) or standard output.
pub fn finish(text: &str, output: Option<&std::path::Path>, force: bool) -> Result<i32> {
    match output {
        Some(path) => {
            write_atomic(path, text.as_bytes(), force)?;
            eprintln!("fsprof: wrote {}", path.display());
        }
        None => write_stdout(text)?,
    }
    Ok(0)
}

/// A closed pipe (`fsprof report p.json | head`) is a normal end, not an error.
pub fn write_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        r => Ok(r?),
    }
}
