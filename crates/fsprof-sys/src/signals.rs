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
//!
//! [`StopSignals::wait_bell`] also wakes on a futex word of a shared
//! mapping (`fsprof run`'s low water, rung by the shim): `sigtimedwait`
//! cannot wait on a futex, so there the signals are let through to
//! handlers on the waiting thread for the length of a `futex_waitv` on the
//! word and on a private word the handlers bump (a signal that comes
//! between the unblock and the wait changes that word, and the wait
//! returns at once). The handlers are installed at the first such wait,
//! after the command has started; a command started after that gets the
//! dispositions they replaced back ([`restore_dispositions`]).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The signals [`StopSignals`] takes: the four that ask to stop, and
/// SIGCHLD, which only wakes the waiter.
pub const TAKEN: [i32; 5] = [
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
    /// The word given to [`StopSignals::wait_bell`] changed.
    Bell,
}

/// TAKEN's signals delivered to [`on_signal`] and not yet returned by
/// [`StopSignals::wait_bell`], a bit each.
static PENDING: AtomicU32 = AtomicU32::new(0);
/// Of those, the ones the terminal sent (`si_code` SI_KERNEL).
static FROM_TERMINAL: AtomicU32 = AtomicU32::new(0);
/// Bumped by every delivery: a private futex word `wait_bell` waits on.
static DELIVERED: AtomicU32 = AtomicU32::new(0);
/// Whether [`on_signal`] is installed for TAKEN.
static HANDLERS: AtomicBool = AtomicBool::new(false);
/// TAKEN's dispositions before [`on_signal`] replaced them.
static BEFORE: OnceLock<[libc::sigaction; TAKEN.len()]> = OnceLock::new();

/// Gives TAKEN the dispositions they had before `wait_bell` installed its
/// handlers, if it has (an ignored SIGHUP under `nohup` stays ignored in a
/// command started after; a handler would be reset to the default by its
/// `execve`). Async-signal-safe: for a child between `clone` and `execve`
/// ([`crate::inherited::restore`]), which, sharing fsprof's memory, must
/// not run fsprof's handlers.
///
/// # Safety
/// Only in a child about to `execve`, with every signal blocked.
pub unsafe fn restore_dispositions() {
    let Some(before) = BEFORE.get() else {
        return;
    };
    for (g, act) in TAKEN.iter().zip(before) {
        // SAFETY: a disposition read by sigaction itself.
        unsafe { libc::sigaction(*g, act, std::ptr::null_mut()) };
    }
}

/// Runs on the waiting thread only (every other thread blocks TAKEN), and
/// in nothing but atomics: async-signal-safe.
extern "C" fn on_signal(signo: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let Some(bit) = 1u32.checked_shl(signo as u32) else {
        return;
    };
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let terminal = !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL;
    if terminal {
        FROM_TERMINAL.fetch_or(bit, Ordering::SeqCst);
    } else {
        FROM_TERMINAL.fetch_and(!bit, Ordering::SeqCst);
    }
    PENDING.fetch_or(bit, Ordering::SeqCst);
    DELIVERED.fetch_add(1, Ordering::SeqCst);
}

/// One signal [`on_signal`] took and nobody was told of: the stop
/// signals first.
fn take_pending() -> Option<Wake> {
    let pending = PENDING.load(Ordering::SeqCst);
    let signo = TAKEN.into_iter().find(|&g| pending & (1 << g) != 0)?;
    PENDING.fetch_and(!(1 << signo), Ordering::SeqCst);
    Some(match signo {
        libc::SIGCHLD => Wake::Child,
        signo => Wake::Stop(StopSignal {
            signo,
            from_terminal: FROM_TERMINAL.load(Ordering::SeqCst) & (1 << signo) != 0,
        }),
    })
}

/// `struct futex_waitv` (linux/futex.h; not in the libc crate).
#[repr(C)]
struct FutexWaitv {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

const FUTEX2_SIZE_U32: u32 = 0x02;
const FUTEX2_PRIVATE: u32 = 128;

/// Waits until `words` (word, value it must still hold, shared) stop
/// holding their values, or `timeout`: `Some(true)` when woken or one
/// changed, `Some(false)` at the timeout or on a signal, `None` when the
/// kernel has no `futex_waitv` (before 5.16).
fn futex_waitv(words: &[(&AtomicU32, u32, bool)], timeout: Duration) -> Option<bool> {
    let list: Vec<FutexWaitv> = words
        .iter()
        .map(|&(w, val, shared)| FutexWaitv {
            val: val as u64,
            uaddr: w.as_ptr() as u64,
            flags: FUTEX2_SIZE_U32 | if shared { 0 } else { FUTEX2_PRIVATE },
            reserved: 0,
        })
        .collect();
    let end =
        crate::clock::mono_ns().saturating_add(timeout.as_nanos().min(u64::MAX as u128) as u64);
    let ts = libc::timespec {
        tv_sec: (end / 1_000_000_000) as libc::time_t,
        tv_nsec: (end % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: every address is a live aligned word (the caller's borrows),
    // the list and the absolute timeout outlive the call; the kernel only
    // reads them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex_waitv,
            list.as_ptr(),
            list.len() as libc::c_uint,
            0,
            &ts as *const libc::timespec,
            libc::CLOCK_MONOTONIC,
        )
    };
    if r >= 0 {
        return Some(true);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOSYS) => None,
        Some(libc::EAGAIN) => Some(true),
        _ => Some(false),
    }
}

/// How often a wait on a kernel without `futex_waitv` looks at the word:
/// the tick `fsprof run` kept before it slept on its low water.
const NO_WAITV_TICK: Duration = Duration::from_millis(10);

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

impl StopSignals {
    /// [`StopSignals::wait`], and also waking with [`Wake::Bell`] once
    /// `bell`'s word (a word of a shared file mapping, written by other
    /// processes) no longer holds the value given, or is woken. On a kernel
    /// without `futex_waitv` the word is looked at every 10 ms instead.
    pub fn wait_bell(&self, timeout: Duration, bell: Option<(&AtomicU32, u32)>) -> Wake {
        self.install();
        if let Some(w) = take_pending() {
            return w;
        }
        let delivered = DELIVERED.load(Ordering::SeqCst);
        let mut words = vec![(&DELIVERED, delivered, false)];
        words.extend(bell.map(|(w, v)| (w, v, true)));
        self.mask(libc::SIG_UNBLOCK);
        let woken = futex_waitv(&words, timeout);
        self.mask(libc::SIG_BLOCK);
        if let Some(w) = take_pending() {
            return w;
        }
        let rang = bell.is_some_and(|(w, v)| w.load(Ordering::Acquire) != v);
        match woken {
            Some(_) if rang => Wake::Bell,
            Some(_) => Wake::Timeout,
            None => match self.wait(timeout.min(NO_WAITV_TICK)) {
                Wake::Timeout if bell.is_some() => Wake::Bell,
                w => w,
            },
        }
    }

    fn mask(&self, how: libc::c_int) {
        // SAFETY: a valid set; the old mask is not wanted.
        unsafe { libc::pthread_sigmask(how, &self.set, std::ptr::null_mut()) };
    }

    /// [`on_signal`] for TAKEN, once (commands are started on this
    /// thread: none starts between the handlers and [`BEFORE`]).
    fn install(&self) {
        if HANDLERS.swap(true, Ordering::SeqCst) {
            return;
        }
        // SAFETY: sigaction is plain data; the handler is async-signal-safe
        // and takes SA_SIGINFO's arguments; the signals are blocked here.
        let before = TAKEN.map(|g| unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            act.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut act.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(g, &act, &mut old);
            old
        });
        let _ = BEFORE.set(before);
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

    /// `wait_bell` wakes when another thread changes and wakes the word,
    /// returns at once when the word changed before it slept, times out
    /// otherwise, and still takes the signals: one sent before the wait
    /// (pending while blocked, delivered to the handler at the unblock),
    /// and one sent while it sleeps.
    #[test]
    fn a_bell_or_a_signal_wakes_the_waiter() {
        use std::sync::Arc;
        let sigs = StopSignals::block();
        let word = Arc::new(AtomicU32::new(7));
        let short = Duration::from_millis(20);
        assert_eq!(sigs.wait_bell(short, Some((&word, 7))), Wake::Timeout);
        assert_eq!(sigs.wait_bell(short, Some((&word, 6))), Wake::Bell);
        let w = word.clone();
        let rung = soon(&sigs, &word, 7, move || {
            w.fetch_add(1, Ordering::SeqCst);
            // SAFETY: a live aligned word; FUTEX_WAKE reads no memory.
            unsafe { libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAKE, 1, 0, 0, 0) };
        });
        assert_eq!(rung, Wake::Bell);
        // SAFETY: signalling this thread, where SIGTERM is blocked.
        unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGTERM) };
        let stop = Wake::Stop(StopSignal {
            signo: libc::SIGTERM,
            from_terminal: false,
        });
        assert_eq!(
            sigs.wait_bell(Duration::from_secs(10), Some((&word, 8))),
            stop
        );
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() } as usize;
        let kicked = soon(&sigs, &word, 8, move || {
            // SAFETY: the main test thread, alive in its wait.
            unsafe { libc::pthread_kill(me as libc::pthread_t, libc::SIGCHLD) };
        });
        assert_eq!(kicked, Wake::Child);
    }

    /// What a 10 s `wait_bell` on `word` holding `v` wakes for when
    /// another thread does `f` 50 ms into it (well before the 10 s).
    fn soon(
        sigs: &StopSignals,
        word: &AtomicU32,
        v: u32,
        f: impl FnOnce() + Send + 'static,
    ) -> Wake {
        let t = std::time::Instant::now();
        let other = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            f();
        });
        let got = sigs.wait_bell(Duration::from_secs(10), Some((word, v)));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        other.join().unwrap();
        got
    }
}
