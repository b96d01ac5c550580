//! `fsprof calibrate`: measures this machine's characteristic latencies
//! (the workloads are fsprof-bench's) and writes the calibration file
//! (fsprof-analysis's format) that labels peaks.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use fsprof_analysis::Calibration;
use fsprof_bench::calibrate::{calibrate as measure, CalibrateOptions};
use fsprof_core::format::write_atomic;
use fsprof_core::units::rfc3339_utc;
use fsprof_sys::host;

use super::report::write_stdout;
use crate::args::{TargetDirArgs, TextOrJson};

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Where to store the calibration (`-` for standard output)
    /// [default: $XDG_CONFIG_HOME/fsprof/calibration.json or ~/.config/fsprof/calibration.json]
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace the calibration file if it exists (also the default one)
    #[arg(short, long)]
    pub force: bool,
    #[command(flatten)]
    pub dir: TargetDirArgs,
    /// How to print the calibration: a table, or the JSON that is stored
    #[arg(long, value_enum, default_value_t = TextOrJson::Text)]
    pub format: TextOrJson,
    /// Measure every characteristic this many times, interleaved; one
    /// whose rounds (all but the one farthest out) disagree by more than a
    /// power of two labels nothing
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=20))]
    pub rounds: u32,
}

pub fn calibrate(a: CalibrateArgs) -> Result<i32> {
    let path = match &a.output {
        Some(p) => p.clone(),
        None => Calibration::default_path()
            .ok_or_else(|| anyhow!("neither XDG_CONFIG_HOME nor HOME is set: pass -o FILE"))?,
    };
    let to_stdout = fsprof_capture::is_stdio(&path);
    // Before measuring (seconds): a calibration is the user's, default or
    // not. Its directory may not exist yet (it is made below).
    let dir_exists = path
        .parent()
        .is_none_or(|d| d.as_os_str().is_empty() || d.is_dir());
    if !to_stdout && dir_exists {
        match fsprof_core::output::check_output(&path, a.force) {
            Err(fsprof_core::format::FormatError::Exists { .. }) => {
                return Err(anyhow!(
                    "{} already exists; pass --force to replace it or -o to write another file",
                    path.display()
                ))
            }
            r => r?,
        };
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let dir = a.dir.get();
    let dir = std::fs::canonicalize(&dir).with_context(|| format!("{}", dir.display()))?;
    let cal = measure(&CalibrateOptions {
        dir,
        host: host::hostname(),
        kernel: host::kernel_release(),
        created: rfc3339_utc(now),
        rounds: a.rounds,
    })?;
    if to_stdout {
        // The stored form on stdout; the table, if asked for, on stderr.
        write_stdout(&cal.to_json())?;
        if a.format == TextOrJson::Text {
            fsprof_sys::diag_nonl!("{}", fsprof_report::calibration::render_text(&cal));
        }
        skipped(&cal);
        return Ok(0);
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    write_atomic(&path, cal.to_json().as_bytes(), a.force)?;
    let text = match a.format {
        TextOrJson::Json => cal.to_json(),
        TextOrJson::Text => fsprof_report::calibration::render_text(&cal),
    };
    write_stdout(&text)?;
    skipped(&cal);
    fsprof_sys::diag!("fsprof: calibration written to {}", path.display());
    Ok(0)
}

fn skipped(cal: &Calibration) {
    for s in &cal.skipped {
        fsprof_sys::diag!("fsprof: not measured: {s}");
    }
}
