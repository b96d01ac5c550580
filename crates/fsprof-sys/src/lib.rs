//! fsprof's view of the operating system, in one place so that every
//! capture source, benchmark and discovery tool reads the same clocks,
//! launches commands by the same rules and sees the same host facts.
//!
//! - [`clock`]: CLOCK_MONOTONIC and the cycle counter, and the TSC rate
//!   calibrated against it;
//! - [`process`]: starting a command (optionally held before its `execve`),
//!   waiting for it, and the shell's exit-status rules;
//! - [`inherited`]: the signal state fsprof was started with, which the
//!   commands it starts get back;
//! - [`signals`]: the stop signals (Ctrl-C, SIGTERM, ...) taken synchronously
//!   so that a capture can end cleanly and still write its profile;
//! - [`host`]: host name, kernel, CPU, caches, memory, load average and
//!   the frequency governor;
//! - [`proc_status`]: `/proc/<pid>/status` (groups, capabilities);
//! - [`pagecache`]: emptying the page cache and asking what of a file is in
//!   it, for measurements that must control the cache state;
//! - [`mmap`]: read-only shared mappings of files another process writes;
//! - [`mapfault`]: the one SIGBUS/SIGSEGV handler, for faults on fsprof's
//!   own mappings (files a profiled process shrank, the replayer's touches);
//! - [`dir`]: a directory held open and listed again from its start;
//! - [`mountinfo`]: the mount table, which mount a path is on;
//! - [`usage`]: the calling thread's CPU time and involuntary switches;
//! - [`diag`]: diagnostics on standard error that never fail the run;
//! - [`keeper`]: a process that holds fsprof's memory and one file past
//!   fsprof's exit, so that their release is off the user's wait.
//!
//! Everything here is a thin, documented wrapper over a system call or a
//! `/proc`/`/sys` file; no policy about profiles lives here.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

pub mod clock;
pub mod diag;
pub mod dir;
pub mod host;
pub mod inherited;
pub mod keeper;
pub mod mapfault;
pub mod mmap;
pub mod mountinfo;
pub mod pagecache;
pub mod proc_status;
pub mod process;
pub mod signals;
pub mod usage;

pub use process::{Child, LaunchError};
pub use signals::{StopSignal, StopSignals};

/// The text of a small file fsprof keeps for itself or reads from the
/// kernel (the boot id, the kept TSC rate, the shim's kept own cost):
/// open, one `read`, close. `std::fs::read_to_string` also asks the size
/// and reads until a read returns nothing, six system calls where three
/// do (a few of the start-up's microseconds). `None` when the file
/// cannot be read, is not UTF-8, or holds `SMALL_FILE` bytes or more
/// (none of these does).
pub fn small_file(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let mut buf = [0u8; SMALL_FILE];
    let n = std::fs::File::open(path).ok()?.read(&mut buf).ok()?;
    (n < SMALL_FILE)
        .then(|| String::from_utf8(buf[..n].to_vec()).ok())
        .flatten()
}

/// Bytes [`small_file`] reads at most (and what it refuses).
const SMALL_FILE: usize = 256;

/// A size a test sets through the environment variable `name` (the
/// arena's blocks, the followed-process map's entries), read where the
/// real size is chosen; `None` when it is not set or not a number. Each
/// caller bounds it by its real size.
pub fn test_knob(name: &str) -> Option<u32> {
    std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok())
}
