//! `fsprof import strace LOG -o TRACE` and `fsprof import fio-iolog LOG -o
//! TRACE`: other tools' logs as fsprof traces (then `trace show`,
//! `compile`, `replay` as for a trace of fsprof's own).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use fsprof_trace::import::{import as run_import, strace::Options, Format};

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// What LOG is
    #[arg(value_enum)]
    pub format: ImportFormat,
    /// The log (for `strace -ff -o LOG`, LOG itself: the LOG.<pid> files are read)
    pub log: PathBuf,
    /// Where to write the trace
    #[arg(short, long, value_name = "TRACE", required = true)]
    pub output: PathBuf,
    /// Skip (and count) lines that do not parse instead of stopping at the first
    #[arg(long)]
    pub lenient: bool,
    /// The traced program's working directory (strace logs do not say; relative paths need it)
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Replace TRACE if it exists
    #[arg(short, long)]
    pub force: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ImportFormat {
    /// `strace -f -ttt -T -y` output (or `-ff -o LOG` per-pid files)
    Strace,
    /// fio's `write_iolog` files, versions 2 and 3
    FioIolog,
}

pub fn import(a: ImportArgs) -> Result<i32> {
    let opts = Options {
        lenient: a.lenient,
        cwd: a
            .cwd
            .as_ref()
            .map(|p| p.as_os_str().as_encoded_bytes().to_vec()),
    };
    let format = match a.format {
        ImportFormat::Strace => Format::Strace,
        ImportFormat::FioIolog => Format::FioIolog,
    };
    let s = run_import(format, &a.log, &a.output, &opts, a.force)?;
    fsprof_sys::diag!(
        "fsprof: imported {} call(s) of {} process image(s) into {}",
        s.calls,
        s.processes,
        a.output.display()
    );
    if s.skipped_lines > 0 {
        fsprof_sys::diag!(
            "fsprof: --lenient skipped {} line(s) that did not parse, e.g. {}",
            s.skipped_lines,
            s.first_skips.join("; ")
        );
    }
    let ignored: u64 = s.ignored.values().sum();
    if ignored > 0 {
        let top: Vec<String> = s
            .ignored
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .take(8)
            .collect();
        fsprof_sys::diag!(
            "fsprof: {ignored} line(s) left out (not file-system calls of the trace vocabulary): {}",
            top.join(", ")
        );
    }
    Ok(0)
}
