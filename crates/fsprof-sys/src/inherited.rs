//! The signal state fsprof was started with, which the commands it starts
//! get back: what the user blocked and ignored is blocked and ignored in the
//! command, exactly as without fsprof. So are the standard descriptors the
//! user closed (recorded by fsprof-core's `stdio`).
//!
//! Recorded by an ELF constructor (`.init_array`), which runs before Rust's
//! runtime sets SIGPIPE to ignored and before fsprof blocks its stop signals
//! ([`crate::signals`]); read by [`crate::process`] in the child between
//! `clone` and `execve`. The only other dispositions fsprof's process
//! changes are std's stack-overflow handlers for SIGSEGV and SIGBUS
//! (installed only over a default disposition; the test
//! `run::transparency::fsprof_catches_no_signal_but_the_ones_its_children_reset`
//! holds fsprof to that list).

use std::sync::OnceLock;

/// The signals whose disposition fsprof's own process may differ in from
/// the one it was started with, and which a started command gets back.
pub const CHANGED: [i32; 3] = [libc::SIGPIPE, libc::SIGSEGV, libc::SIGBUS];

/// The mask and the [`CHANGED`] dispositions at start-up.
pub struct Inherited {
    pub mask: libc::sigset_t,
    pub actions: [libc::sigaction; CHANGED.len()],
}

static INHERITED: OnceLock<Inherited> = OnceLock::new();

/// Runs before `main` and before Rust's runtime set-up: the process still
/// has one thread and the state its parent gave it.
extern "C" fn record() {
    // SAFETY: sigset_t and sigaction are plain data; both calls only read
    // the current state into them (a null new mask or action changes
    // nothing).
    let got = unsafe {
        let mut s: Inherited = std::mem::zeroed();
        let mut ok = libc::sigprocmask(libc::SIG_BLOCK, std::ptr::null(), &mut s.mask) == 0;
        for (sig, act) in CHANGED.iter().zip(s.actions.iter_mut()) {
            ok &= libc::sigaction(*sig, std::ptr::null(), act) == 0;
        }
        ok.then_some(s)
    };
    if let Some(s) = got {
        let _ = INHERITED.set(s);
    }
}

#[used]
#[link_section = ".init_array"]
static RECORD: extern "C" fn() = record;

/// The state recorded at start-up; `None` when the constructor did not run
/// (then commands start with nothing blocked and default dispositions).
pub fn inherited() -> Option<&'static Inherited> {
    INHERITED.get()
}

/// Gives the calling process the inherited mask and dispositions (or the
/// defaults), and closes the standard descriptors that were closed at
/// start-up. Async-signal-safe: for the child between `fork`/`clone` and
/// `execve`.
///
/// # Safety
/// Only in a child about to `execve` (it changes the whole process's
/// signal state).
pub unsafe fn restore() {
    // SAFETY: sigaction/sigprocmask with valid pointers to plain data that
    // was initialised before the fork (or here, zeroed: SIG_DFL, empty).
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        let (mask, actions) = match inherited() {
            Some(s) => (&s.mask, &s.actions),
            None => (&none, &[dfl; CHANGED.len()]),
        };
        for (sig, act) in CHANGED.iter().zip(actions.iter()) {
            libc::sigaction(*sig, act, std::ptr::null_mut());
        }
        crate::signals::restore_dispositions();
        libc::sigprocmask(libc::SIG_SETMASK, mask, std::ptr::null_mut());
        // A standard descriptor the user closed (`>&-`) is closed in the
        // command too, not the /dev/null the runtime put there for fsprof.
        for fd in 0..3 {
            if fsprof_core::stdio::closed_at_start(fd) {
                libc::close(fd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The constructor ran in this test binary, before the test harness
    /// (a Rust program) ignored SIGPIPE.
    #[test]
    fn start_up_state_is_recorded_before_rust_ignores_sigpipe() {
        let s = inherited().expect("the .init_array constructor ran");
        // SAFETY: reading the current disposition into plain data.
        let now = unsafe {
            let mut a: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut a);
            a
        };
        assert_eq!(
            now.sa_sigaction,
            libc::SIG_IGN,
            "Rust's runtime ignores SIGPIPE"
        );
        // cargo starts tests with SIGPIPE at its default.
        assert_eq!(s.actions[0].sa_sigaction, libc::SIG_DFL);
    }
}
