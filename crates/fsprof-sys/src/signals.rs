//! The signals that ask fsprof to stop (Ctrl-C, Ctrl-\, SIGTERM, SIGHUP),
//! and SIGCHLD, taken synchronously with `sigtimedwait` instead of by
//! handlers: the capture loop sleeps in [`StopSignals::wait`] and wakes on
//! whichever comes first, its next deadline, a child's exit or a request to
//! stop, so that an interrupted capture still writes its profile.
//!
//! The signals must be blocked in every thread, or the kernel may deliver
//! one to a thread that does not block it and the default action ends
//! fsprof: [`StopSignals::block`] must run before fsprof starts threads
//! (threads inherit the mask). They stay blocked for the rest of the
//! process, so that a second Ctrl-C cannot cut the writing of the profile
//! short. Commands started by [`crate::process`] unblock them.

use std::time::Duration;

/// The signals [`StopSignals`] takes: the four that ask to stop, and
/// SIGCHLD, which only wakes the waiter.
const TAKEN: [i32; 5] = [
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGCHLD,
];

/// A stop request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopSignal {
    pub signo: i32,
    /// Sent by the terminal (Ctrl-C, Ctrl-\, hang-up) to the whole
    /// foreground process group, so a command in that group has got it too.
    pub from_terminal: bool,
}

/// What [`StopSignals::wait`] woke up for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The timeout passed.
    Timeout,
    /// A child changed state (SIGCHLD).
    Child,
    Stop(StopSignal),
}

/// Proof that the stop signals are blocked in this thread.
#[derive(Debug)]
pub struct StopSignals {
    set: libc::sigset_t,
}

impl StopSignals {
    /// Blocks the stop signals and SIGCHLD in the calling thread and every
    /// thread it starts from now on.
    pub fn block() -> StopSignals {
        // SAFETY: sigset_t is plain data, initialised by sigemptyset.
        let set = unsafe {
            let mut s: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut s);
            for g in TAKEN {
                libc::sigaddset(&mut s, g);
            }
            s
        };
        // SAFETY: a valid set; the old mask is not wanted.
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        StopSignals { set }
    }

    /// Waits at most `timeout` for one of the signals.
    pub fn wait(&self, timeout: Duration) -> Wake {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: siginfo_t is plain data the kernel fills in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid set, info and timeout.
        let s = unsafe { libc::sigtimedwait(&self.set, &mut info, &ts) };
        match s {
            s if s <= 0 => Wake::Timeout,
            libc::SIGCHLD => Wake::Child,
            signo => Wake::Stop(StopSignal {
                signo,
                // The terminal driver signals its foreground group from
                // the kernel; kill(2) and sigqueue(3) say SI_USER/SI_QUEUE.
                from_terminal: info.si_code == libc::SI_KERNEL,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_sent_to_us_is_taken_not_delivered() {
        let sigs = StopSignals::block();
        assert_eq!(sigs.wait(Duration::from_millis(10)), Wake::Timeout);
        // SAFETY: signalling this thread, where SIGTERM is blocked.
        unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGTERM) };
        let got = sigs.wait(Duration::from_secs(5));
        assert_eq!(
            got,
            Wake::Stop(StopSignal {
                signo: libc::SIGTERM,
                from_terminal: false
            })
        );
        // SAFETY: as above; SIGCHLD is blocked too.
        unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGCHLD) };
        assert_eq!(sigs.wait(Duration::from_secs(5)), Wake::Child);
    }
}
