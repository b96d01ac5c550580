use anyhow::{anyhow, Context, Result};
use fsprof_analysis::calibrate::{calibrate as measure, CalibrateOptions};
use fsprof_analysis::Calibration;
use fsprof_core::format::write_atomic;
use fsprof_core::units::rfc3339_utc;
use fsprof_sys::host;

use super::report::write_stdout;
use crate::cli::CalibrateArgs;

pub fn calibrate(a: CalibrateArgs) -> Result<i32> {
    let (path, overwrite) = match &a.output {
        Some(p) => (p.clone(), a.force),
        None => (
            Calibration::default_path()
                .ok_or_else(|| anyhow!("neither XDG_CONFIG_HOME nor HOME is set: pass -o FILE"))?,
            true,
        ),
    };
    if path.exists() && !overwrite {
        return Err(anyhow!(
            "{} exists: pass --force to replace it",
            path.display()
        ));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let dir =
        std::fs::canonicalize(&a.dir).with_context(|| format!("--dir {}", a.dir.display()))?;
    let cal = measure(&CalibrateOptions {
        dir,
        host: host::hostname(),
        kernel: host::kernel_release(),
        created: rfc3339_utc(now),
    })?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    write_atomic(&path, cal.to_json().as_bytes(), overwrite)?;
    let text = if a.json {
        cal.to_json()
    } else {
        fsprof_report::calibration::render_text(&cal)
    };
    write_stdout(&text)?;
    for s in &cal.skipped {
        eprintln!("fsprof: not measured: {s}");
    }
    eprintln!("fsprof: calibration written to {}", path.display());
    Ok(0)
}
