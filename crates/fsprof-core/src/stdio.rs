//! Which standard descriptors (0–2) were closed when fsprof started.
//!
//! Rust's runtime (and fsprof's own C `main`, crates/fsprof-cli/src/rt.rs)
//! opens `/dev/null` on a closed standard descriptor, so that no file
//! fsprof opens becomes its stdout. From then on `fsprof ... >&-` and
//! `fsprof ... >/dev/null` look the same, and what fsprof writes to
//! "standard output" would vanish with a success status. An ELF
//! constructor (`.init_array`) runs before either and records the truth:
//! the output writer refuses a standard descriptor that was closed
//! ([`crate::output`]), and commands fsprof starts get it closed again, as
//! they would have had it without fsprof (fsprof-sys's `inherited`).

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Bit `fd` set: descriptor `fd` (0, 1 or 2) was closed at start-up.
static CLOSED: AtomicU8 = AtomicU8::new(0);

/// Runs before `main` and before Rust's runtime set-up.
extern "C" fn record() {
    for fd in 0..3 {
        // SAFETY: F_GETFD only asks about the descriptor.
        let closed = unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
        if closed {
            CLOSED.fetch_or(1 << fd, Relaxed);
        }
    }
}

#[used]
#[link_section = ".init_array"]
static RECORD: extern "C" fn() = record;

/// Whether standard descriptor `fd` was closed when the process started
/// (always false for descriptors above 2). Async-signal-safe.
pub fn closed_at_start(fd: i32) -> bool {
    (0..3).contains(&fd) && CLOSED.load(Relaxed) & (1 << fd) != 0
}

/// The name of a standard descriptor in messages.
pub fn name(fd: i32) -> String {
    match fd {
        0 => "standard input".into(),
        1 => "standard output".into(),
        2 => "standard error".into(),
        n => format!("descriptor {n}"),
    }
}
