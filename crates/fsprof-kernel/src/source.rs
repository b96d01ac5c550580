//! The kernel layers as a capture source: the session attaches once the
//! command (if any) is held before its `execve`, so its first profiled
//! syscall is that `execve`; snapshots read the maps; the end detaches in
//! the background so that fsprof does not wait for the kernel.

use fsprof_capture::{Caps, Ended, Finish, Source, SourceError};
use fsprof_core::profile::{Clock, ClockSource, Layer, Meta};
use fsprof_sys::process::pid_exists;

use crate::session::{Options, Session, Target};

pub struct KernelSource {
    opts: Options,
    session: Option<Session>,
    /// The processes given by pid (`--pid`): when they are all gone, so is
    /// what there was to profile.
    followed: Vec<i32>,
    /// The warning that processes of the tree were not followed, which
    /// the profile keeps among its notes.
    unfollowed: Option<String>,
}

impl KernelSource {
    /// With a command, `opts.target` is replaced by the command's tree.
    pub fn new(opts: Options) -> KernelSource {
        let followed = match &opts.target {
            Target::Tree(pids) => pids.clone(),
            _ => Vec::new(),
        };
        KernelSource {
            opts,
            session: None,
            followed,
            unfollowed: None,
        }
    }

    fn session(&self) -> Result<&Session, SourceError> {
        self.session
            .as_ref()
            .ok_or_else(|| "the kernel session was not started".into())
    }
}

impl Source for KernelSource {
    fn caps(&self) -> Caps {
        Caps {
            needs_command: false,
            hold_command: true,
            upkeep_ns: None,
        }
    }

    /// Without a command, the profile says what it covers (`meta.target`)
    /// instead of recording fsprof's own command line as the command.
    /// Processes not followed are said among its notes.
    fn amend_meta(&mut self, meta: &mut Meta) {
        meta.notes.extend(self.unfollowed.take());
        let command = self.followed.is_empty() && matches!(self.opts.target, Target::Tree(_));
        if !command {
            meta.target = Some(self.opts.target.describe());
            meta.command.clear();
        }
    }

    fn start(&mut self, command: Option<i32>) -> Result<String, SourceError> {
        if let Some(pid) = command {
            self.opts.target = Target::Tree(vec![pid]);
        }
        let s = Session::start(&self.opts)?;
        let what = s.layers.join(", ");
        self.session = Some(s);
        Ok(what)
    }

    fn snapshot(&mut self) -> Result<Vec<Layer>, SourceError> {
        Ok(self.session()?.snapshot(false)?.layers)
    }

    fn ended(&mut self) -> bool {
        !self.followed.is_empty() && !self.followed.iter().any(|&p| pid_exists(p))
    }

    fn finish(&mut self, _how: &Ended) -> Result<Finish, SourceError> {
        self.session()?.stop_recording()?;
        let snap = self.session()?.snapshot(true)?;
        let session = self.session.take().expect("checked above");
        let notes = session.notes.clone();
        let followed_max = session.targets.as_ref().map_or(0, |t| t.entries());
        session.detach_in_background();
        let mut warnings = Vec::new();
        if snap.missed > 0 {
            warnings.push(format!(
                "{} events were missed: the kernel skipped a program already running on the same CPU (an interrupt inside it), so their latencies are not in the profile",
                snap.missed
            ));
        }
        warnings.extend(undelivered_warning(&snap.undelivered));
        if snap.lost > 0 {
            warnings.push(format!(
                "{} observations were counted but not filed in a histogram bucket (a BPF map was full)",
                snap.lost
            ));
        }
        self.unfollowed = crate::follow::unfollowed_warning(
            snap.unfollowed,
            followed_max,
            "their calls are missing from the profile",
        );
        warnings.extend(self.unfollowed.clone());
        Ok(Finish {
            layers: snap.layers,
            clock: Clock {
                source: ClockSource::Kernel,
                tsc_hz: None,
            },
            notes,
            warnings,
            ..Default::default()
        })
    }
}

/// The warning for block requests issued again while fsprof still held
/// them as issued ([`crate::blockrq`]), per op; none when there are none.
fn undelivered_warning(ops: &[(String, u64)]) -> Option<String> {
    if ops.is_empty() {
        return None;
    }
    let ops: Vec<String> = ops.iter().map(|(op, n)| format!("{op} {n}")).collect();
    Some(format!(
        "block requests issued again before fsprof saw them complete ({}): the kernel ran neither fsprof's completion nor its requeue program for them, so they are counted as issued but not completed, with no latency",
        ops.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undelivered_requests_are_named_per_op_or_not_at_all() {
        assert_eq!(undelivered_warning(&[]), None);
        let w =
            undelivered_warning(&[("loop0:flush".into(), 1), ("vda:write".into(), 30)]).unwrap();
        assert!(
            w.starts_with("block requests issued again before fsprof saw them complete (loop0:flush 1, vda:write 30): "),
            "{w}"
        );
    }
}
