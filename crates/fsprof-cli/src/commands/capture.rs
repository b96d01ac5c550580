//! What `run` and `kernel` share around a capture: the output the user
//! asked for, a command that could not be started, and the lines about
//! the capture printed after it.

use anyhow::Result;
use fsprof_capture::{save_into, CaptureError, Made, Outcome, Output, Saved};

use crate::args::OutputArgs;

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
            fsprof_sys::diag!("fsprof: {l}");
            Ok(l.exit_code())
        }
        e => Err(e.into()),
    }
}

/// Writes the profile, then the capture's notes and warnings. A profile
/// that could not go where it was asked to, and went to the temporary
/// directory instead, is said so here; callers print where it went.
/// `made`: the profile's file made before the end
/// ([`fsprof_capture::save_into`]).
pub fn save_and_tell(
    outcome: &Outcome,
    out: &Output,
    kind: &str,
    program: Option<&str>,
    made: Made,
) -> Result<Saved> {
    let saved = save_into(&outcome.profile, out, kind, program, made);
    for n in &outcome.notes {
        fsprof_sys::diag!("fsprof: note: {}", fsprof_core::printable::field(n));
    }
    for w in &outcome.warnings {
        fsprof_sys::diag!("fsprof: warning: {}", fsprof_core::printable::field(w));
    }
    if let Some(sig) = outcome.interrupted {
        fsprof_sys::diag!(
            "fsprof: interrupted by signal {sig}; the profile covers the run until then"
        );
    }
    let saved = saved?;
    if let Some(why) = &saved.fallback_from {
        fsprof_sys::diag!(
            "fsprof: warning: {why}; the profile went to {} instead",
            saved.display()
        );
    }
    Ok(saved)
}

/// The end of a capture of a command: its exit status, except that a
/// profile that could not be written anywhere (`saved` is an error: the
/// fallback to $TMPDIR failed too, or standard output did) turns a success
/// into 2 — the run's product is gone, and a 0 would hide it. A command
/// that failed keeps its own status, which says more than 2 would.
pub fn exit_status(outcome: &Outcome, saved: &Result<Saved>) -> i32 {
    match saved {
        Ok(s) => fsprof_sys::diag!("fsprof: profile written to {}", s.display()),
        Err(e) => fsprof_sys::diag!("fsprof: {}", crate::one_line(e)),
    }
    match (saved, &outcome.exit, outcome.exit_code()) {
        (Err(_), None, _) | (Err(_), Some(_), 0) => 2,
        (_, _, code) => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::{Meta, Profile};

    fn outcome(exit: Option<fsprof_core::profile::ExitStatus>) -> Outcome {
        Outcome {
            profile: Profile::new(Meta::default()),
            exit,
            interrupted: None,
            notes: vec![],
            warnings: vec![],
        }
    }

    /// A profile that could not be written anywhere does not replace a
    /// failed command's exit status; after a success, or without a
    /// command, it is an error (2).
    #[test]
    fn a_lost_profile_keeps_a_failed_commands_status() {
        let lost: Result<Saved> = Err(anyhow::anyhow!("the profile is lost"));
        let code = fsprof_core::profile::ExitStatus::Code(7);
        assert_eq!(exit_status(&outcome(Some(code.clone())), &lost), 7);
        let ok = fsprof_core::profile::ExitStatus::Code(0);
        assert_eq!(exit_status(&outcome(Some(ok)), &lost), 2);
        assert_eq!(exit_status(&outcome(None), &lost), 2);
        let saved = Ok(Saved {
            path: None,
            fallback_from: None,
        });
        assert_eq!(exit_status(&outcome(Some(code.clone())), &saved), 7);
        assert_eq!(exit_status(&outcome(None), &saved), 0);
    }
}
