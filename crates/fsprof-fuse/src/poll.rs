//! `fsprof mount --poll[=WINDOW]`: after each request the worker keeps
//! reading /dev/fuse without blocking for a short window, so that the next
//! request of a sequential workload finds it awake instead of having the
//! kernel wake it.
//!
//! Why: a blocked daemon is woken on whichever CPU the scheduler picks,
//! often the idle one; on a VM whose idle vCPUs halt at once (this one:
//! `haltpoll.guest_halt_poll_ns=0`), waking a halted vCPU costs tens of
//! microseconds, several times the whole round trip when the application
//! and the daemon share a CPU (docs/benchmarks.md, "where a FUSE round
//! trip's time goes"). A polling worker is never asleep, so the request
//! half of the round trip needs no wake-up; the reply half still wakes the
//! application. The price is CPU: the worker spins for the window after
//! every request (the profile and the report say `poll`).
//!
//! How, without a patched fuser: fuser 0.18 reads /dev/fuse in its own
//! loop and gives no hook around the read, but it retries EAGAIN at once.
//! So the window is opened by setting O_NONBLOCK on the device (its open
//! file description, which our duplicate shares with fuser's descriptor)
//! when a request arrives, and closed by a per-thread POSIX timer whose
//! signal handler clears the flag: fuser's next read then blocks as usual.
//! Per request that is one `timer_settime` (and an `fcntl` when the window
//! had closed). One worker only: the flag belongs to the descriptor every
//! worker would share.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The device descriptor (our duplicate), or -1 while polling is off.
static FD: AtomicI32 = AtomicI32::new(-1);
/// The device's file status flags without O_NONBLOCK.
static BLOCKING_FLAGS: AtomicI32 = AtomicI32::new(0);
static WINDOW_NS: AtomicU64 = AtomicU64::new(0);
/// O_NONBLOCK is set (the window is open).
static OPEN: AtomicBool = AtomicBool::new(false);

/// The signal the window's timer sends; its handler only clears a flag.
fn signal() -> libc::c_int {
    libc::SIGRTMIN() + 1
}

/// Turns polling on for the device `dev` (the session's /dev/fuse
/// descriptor, after the handshake): requests from now on open a window
/// of `window`.
pub fn start(dev: BorrowedFd<'_>, window: Duration) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller lends us.
    let fd = unsafe { libc::fcntl(dev.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl on our new descriptor.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: sigaction is plain data; the handler is async-signal-safe
    // (atomics and fcntl). SA_RESTART: a request's own system calls on
    // LOWER, and a blocked read of the device, restart after the handler.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = close_window as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(signal(), &sa, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    BLOCKING_FLAGS.store(flags & !libc::O_NONBLOCK, Relaxed);
    WINDOW_NS.store(window.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
    // Descriptor last: `arm` does nothing until it is there. Kept for the
    // life of the process (a late timer signal may still use it).
    FD.store(fd, Relaxed);
    Ok(())
}

/// Opens (or extends) the window: called as each request arrives, in the
/// worker that serves it. Does nothing unless polling was started.
#[inline]
pub fn arm() {
    let fd = FD.load(Relaxed);
    if fd >= 0 {
        arm_in_thread(fd);
    }
}

fn arm_in_thread(fd: libc::c_int) {
    let Some(timer) = TIMER.with(WindowTimer::get) else {
        return;
    };
    if !OPEN.swap(true, Relaxed) {
        set_flags(fd, BLOCKING_FLAGS.load(Relaxed) | libc::O_NONBLOCK);
    }
    let ns = WINDOW_NS.load(Relaxed);
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: a timer of this thread and a valid itimerspec.
    unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) };
}

/// The window's end (signal handler, in the worker): fuser's next read
/// blocks. A request that comes in between re-opens it.
extern "C" fn close_window(_sig: libc::c_int) {
    let fd = FD.load(Relaxed);
    if fd >= 0 {
        OPEN.store(false, Relaxed);
        set_flags(fd, BLOCKING_FLAGS.load(Relaxed));
    }
}

fn set_flags(fd: libc::c_int, flags: libc::c_int) {
    // SAFETY: F_SETFL on our descriptor; async-signal-safe.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags) };
}

/// A POSIX timer that signals the thread that created it.
struct WindowTimer(Cell<Option<libc::timer_t>>);

thread_local! {
    static TIMER: WindowTimer = const { WindowTimer(Cell::new(None)) };
}

impl WindowTimer {
    /// This thread's timer, created at its first request (None if the
    /// kernel refuses one: that thread then never polls).
    fn get(&self) -> Option<libc::timer_t> {
        if let Some(t) = self.0.get() {
            return Some(t);
        }
        // SAFETY: sigevent is plain data.
        let mut ev: libc::sigevent = unsafe { std::mem::zeroed() };
        ev.sigev_notify = libc::SIGEV_THREAD_ID;
        ev.sigev_signo = signal();
        // SAFETY: gettid has no arguments.
        ev.sigev_notify_thread_id = unsafe { libc::gettid() };
        let mut t: libc::timer_t = std::ptr::null_mut();
        // SAFETY: a valid sigevent and out-pointer.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut ev, &mut t) } != 0 {
            return None;
        }
        self.0.set(Some(t));
        Some(t)
    }
}

impl Drop for WindowTimer {
    fn drop(&mut self) {
        if let Some(t) = self.0.get() {
            // SAFETY: our timer, deleted once.
            unsafe { libc::timer_delete(t) };
        }
    }
}
