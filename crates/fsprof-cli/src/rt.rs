//! fsprof's C `main` (the crate is `no_main`): the parts of Rust's runtime
//! set-up fsprof relies on, without the rest.
//!
//! Why: std's set-up before `main` also installs the stack-overflow
//! handler, whose guard-page lookup for the main thread
//! (`pthread_getattr_np`) reads and parses `/proc/self/maps`, then maps an
//! alternate signal stack: ~45 µs of every `fsprof run` in this VM, ~3% of
//! its start-up (docs/benchmarks.md, "Start-up, fourth session"). What
//! is kept, as std does it:
//! - standard descriptors 0–2 that are closed are opened on `/dev/null`,
//!   so no file fsprof opens (a profile, a counter file) can become its
//!   stdout or stderr;
//! - SIGPIPE is ignored: writing to a closed pipe is an `EPIPE` error
//!   fsprof reports, not a silent death;
//! - a panic prints its message (std's hook) and exits with status 101.
//!
//! It also reads the umask while fsprof is still one thread, for the
//! permission bits of the files it writes (`fsprof_core::output`), which
//! otherwise reads it from `/proc/self/status` when it writes a profile.
//!
//! What is given up: a stack overflow ends fsprof with SIGSEGV instead of
//! std's "has overflowed its stack" message and SIGABRT.
//! `std::env::args_os` works without std's set-up because glibc hands
//! argc/argv to std's own `.init_array` function; other C libraries do
//! not, so this `main` is glibc's only (`main.rs`).

use std::ffi::{c_char, c_int};

#[no_mangle]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    standard_fds_open();
    // SAFETY: umask only swaps the process's mask and cannot fail; fsprof
    // has one thread here, so no file is created between the two calls.
    let mask = unsafe {
        let mask = libc::umask(0o077);
        libc::umask(mask);
        mask
    };
    fsprof_core::output::note_umask(mask);
    // SAFETY: setting a signal's disposition to SIG_IGN has no
    // preconditions; no handler runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let _ = std::panic::catch_unwind(|| crate::run());
    // Only a panic gets here (`run` exits); std's hook has printed it.
    std::process::exit(101)
}

/// Opens `/dev/null` on each of descriptors 0–2 that is closed (std's
/// `sanitize_standard_fds`); aborts if that is impossible, as std does.
fn standard_fds_open() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `fds` is a valid array of 3 pollfd; a zero timeout returns at once.
    let polled = unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } != -1;
    for pfd in fds {
        let closed = if polled {
            pfd.revents & libc::POLLNVAL != 0
        } else {
            // SAFETY: F_GETFD only queries the descriptor.
            let flags = unsafe { libc::fcntl(pfd.fd, libc::F_GETFD) };
            flags == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF)
        };
        // SAFETY: a constant NUL-terminated path; open returns the lowest
        // free descriptor, which is this closed one (the lower ones are open).
        if closed && unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) } == -1 {
            std::process::abort();
        }
    }
}
