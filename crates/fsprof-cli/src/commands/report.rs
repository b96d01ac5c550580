use std::io::Write;

use anyhow::Result;
use fsprof_core::format::read_profile;
use fsprof_report::{render, Format, ReportOptions, Selection};

use crate::cli::{FormatArg, ReportArgs};

pub fn report(a: ReportArgs) -> Result<i32> {
    let profile = read_profile(&a.file)?;
    let opts = ReportOptions {
        format: match a.format {
            FormatArg::Text => Format::Text,
            FormatArg::Json => Format::Json,
            FormatArg::Csv => Format::Csv,
        },
        selection: Selection {
            layers: a.layers,
            ops: a.ops,
        },
        top: a.top,
        processes: a.processes,
    };
    let mut text = render(&profile, &opts)?;
    if a.attribution && matches!(a.format, FormatArg::Text) {
        text.push_str(&fsprof_kernel::attribution::render_text(&profile));
    }
    write_stdout(&text)?;
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
