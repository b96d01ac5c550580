//! What a capture source is to the capture loop.

use std::ffi::OsString;
use std::sync::atomic::AtomicU32;

use fsprof_core::profile::{Clock, ExitStatus, Layer, Meta, Overhead, Process};

/// A source's own failure (a probe the kernel refused, a shim that cannot
/// be installed). Shown to the user as it is: one line naming the problem.
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// What a source needs from the loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    /// It can only capture a command it starts (the preload shim).
    pub needs_command: bool,
    /// It sees the command's own system calls: the command is held before
    /// its `execve` until [`Source::start`] has returned, so that the
    /// launcher's calls are not counted and none of the command's is missed.
    pub hold_command: bool,
    /// [`Source::upkeep`] is wanted at least this often (ns).
    pub upkeep_ns: Option<u64>,
}

/// How the capture went, for [`Source::finish`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    /// CLOCK_MONOTONIC at the start of the capture (just before the
    /// command was let go), which the profile's times are relative to.
    pub start_mono_ns: u64,
    pub duration_ns: u64,
    /// How the command ended, if there was one and it did.
    pub exit: Option<ExitStatus>,
}

/// What a source hands over at the end.
#[derive(Clone, Debug, Default)]
pub struct Finish {
    /// The final, cumulative counts.
    pub layers: Vec<Layer>,
    /// Per-process counts, for sources that keep them.
    pub processes: Vec<Process>,
    /// How latencies were timed.
    pub clock: Clock,
    /// The profiler's own cost, when the source measured it.
    pub overhead: Option<Overhead>,
    /// Things the user should know about the capture (one line each).
    pub notes: Vec<String>,
    /// Things that make the profile less trustworthy (one line each).
    pub warnings: Vec<String>,
}

/// A way of capturing a profile. The loop calls, in order: `command_env`
/// (when there is a command), `start`, then `snapshot`/`upkeep`/`ended`
/// while capturing, then `finish` and `amend_meta` once.
pub trait Source {
    fn caps(&self) -> Caps;

    /// Variables added to the command's environment (the shim's
    /// LD_PRELOAD).
    fn command_env(&self) -> Vec<(OsString, OsString)> {
        Vec::new()
    }

    /// Begins capturing; `command` is the pid of the started command, held
    /// before its `execve` if [`Caps::hold_command`]. Returns what is
    /// captured, for the user ("syscall, fs, block").
    fn start(&mut self, command: Option<i32>) -> Result<String, SourceError>;

    /// Everything counted since the start, as cumulative layers.
    fn snapshot(&mut self) -> Result<Vec<Layer>, SourceError>;

    /// Periodic housekeeping (see [`Caps::upkeep_ns`]), and whenever
    /// [`Source::bell`] rings.
    fn upkeep(&mut self) {}

    /// When the next [`Source::upkeep`] is wanted, in ns from the last,
    /// if sooner than [`Caps::upkeep_ns`].
    fn next_upkeep_ns(&self) -> Option<u64> {
        None
    }

    /// A futex word of a shared mapping that others change (and wake)
    /// when an upkeep is wanted at once: the capture sleeps until then or
    /// [`Caps::upkeep_ns`] rather than polling. Written by the profiled
    /// processes: it can only wake the capture early (at most every
    /// [`crate::BELL_GAP`]) or fail to.
    fn bell(&self) -> Option<&AtomicU32> {
        None
    }

    /// True once the source has nothing more to capture: the process it
    /// followed is gone, its workload is done.
    fn ended(&mut self) -> bool {
        false
    }

    /// Stops capturing and hands over the final counts.
    fn finish(&mut self, how: &Ended) -> Result<Finish, SourceError>;

    /// Fills the metadata fields only this source knows; the common ones
    /// (version, tool, command, host, times, clock, overhead, exit) are set.
    fn amend_meta(&mut self, meta: &mut Meta) {
        let _ = meta;
    }
}
