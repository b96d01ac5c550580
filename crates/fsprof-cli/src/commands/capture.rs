//! What `run` and `kernel` share around a capture: the output the user
//! asked for, a command that could not be started, and the lines about
//! the capture printed after it.

use std::path::PathBuf;

use anyhow::Result;
use fsprof_capture::{save, CaptureError, Outcome, Output};

use crate::cli::OutputArgs;

pub fn output(a: &OutputArgs) -> Output {
    Output {
        path: a.output.clone(),
        force: a.force,
    }
}

/// A command that could not be started exits as a shell would (127 not
/// found, 126 not executable), with the shell's one line; anything else
/// is an ordinary error.
pub fn failed(e: CaptureError) -> Result<i32> {
    match e {
        CaptureError::Launch(l) => {
            eprintln!("fsprof: {l}");
            Ok(l.exit_code())
        }
        e => Err(e.into()),
    }
}

/// Writes the profile, then the capture's notes and warnings.
pub fn save_and_tell(
    outcome: &Outcome,
    out: &Output,
    kind: &str,
    program: Option<&str>,
) -> Result<PathBuf> {
    let path = save(&outcome.profile, out, kind, program)?;
    for n in &outcome.notes {
        eprintln!("fsprof: note: {n}");
    }
    for w in &outcome.warnings {
        eprintln!("fsprof: warning: {w}");
    }
    if let Some(sig) = outcome.interrupted {
        eprintln!("fsprof: interrupted by signal {sig}; the profile covers the run until then");
    }
    Ok(path)
}
