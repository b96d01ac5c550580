//! `fsprof mount`: a pass-through FUSE file system over any directory that
//! times every request it serves — FSprof's stackable profiler (§3.4), on
//! today's Linux as FUSE.
//!
//! ```text
//! MountSource::new(opts)       check LOWER/MOUNTPOINT, open LOWER (O_PATH),
//!                              measure the timing's own cost
//! Capture::run(source)         (fsprof-capture)
//!   source.start()             mount (fuser), workers serve PassFs
//!     PassFs handler           Recorder::timed(op, lower work) → reply,
//!                              then a busy poll for the next (`poll`)
//!   source.snapshot()          per-thread counters added up (no locks
//!                              on the request path: see `stats`)
//!   source.ended()             the mount went away (fsprof umount)
//!   source.finish()            unmount (if a signal stopped us), counts
//! ```
//!
//! Beside the capture: the control file `.fsprof` (live profile, reset),
//! [`remote`] (its client: `fsprof stat`, `fsprof umount`), [`dump`]
//! (SIGUSR1) and [`daemon`] (going to the background).
//!
//! The FUSE protocol is spoken by the fuser crate; this crate only maps
//! requests onto LOWER and times them.

mod attr;
mod control;
mod creds;
pub mod daemon;
pub mod dump;
mod fs;
mod inodes;
pub mod live;
pub mod mountinfo;
pub mod opcodes;
pub mod poll;
pub mod remote;
mod source;
pub mod stats;
mod sys;

pub use control::NAME as CONTROL_FILE;
pub use fs::Mode;
pub use source::{check_paths, MountError, MountOptions, MountSource};
pub use stats::LAYER;
