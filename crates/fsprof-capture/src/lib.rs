//! One capture session, shared by every way fsprof records a profile.
//!
//! A capture is a [`Source`] (the preload shim of `fsprof run`, the eBPF
//! programs of `fsprof kernel`; later a FUSE daemon, a benchmark runner, a
//! trace recorder) driven by one loop ([`Capture::run`]): start the command
//! if there is one, attach, sample the counts into intervals, stop on the
//! command's exit, a deadline, the source's own end or a stop signal, and
//! assemble the profile and its [`fsprof_core::Meta`] in one place. The
//! caller owns the terminal: it hears about the capture through
//! [`Progress`], and writes the result with [`save()`].
//!
//! ```text
//! Capture::new(plan)        blocks the stop signals (before any thread starts)
//! source = XSource::new(..) prepares, without attaching
//! capture.run(&mut source, &mut progress)
//!   launch the command, held before execve when the source asks
//!   source.start(pid)       attach; Progress::started
//!   loop: snapshot at each interval / sample, upkeep, signals, deadline
//!   source.finish(..)       final counts, processes, clock, notes
//!   -> Outcome { profile, exit, interrupted, notes, warnings }
//! save(&outcome.profile, &output, kind, program)
//! ```

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

pub mod meta;
mod progress;
mod save;
mod session;
mod source;
pub mod testing;

pub use progress::{Progress, Silent, Steps};
pub use save::{
    default_name, first_free, is_stdio, name_part, name_stamp, save, save_into, Made, Output,
    SaveError, Saved,
};
pub use session::{Capture, CaptureError, Outcome, Plan, BELL_GAP};
pub use source::{Caps, Ended, Finish, Source, SourceError};
