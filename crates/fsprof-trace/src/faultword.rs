//! The page-fault programs of `fsprof trace`, attached when a traced
//! process first maps a file rather than before the command starts.
//!
//! Attached, the programs run on every page fault of the machine, and their
//! filter's lookup on each fault of every followed process: ~10 µs of CPU
//! for each short process that maps no file (a shell loop of `cat`), and
//! the attach itself (~0.6 ms of the kernel's patching of the tracepoints
//! and the software events of each CPU) held the command's start. So the
//! map of followed processes and the fork and exit followers are made
//! before the command is let go (the tree must be followed from its first
//! fork), the fault programs' own maps and event ring are made and the
//! programs loaded (verified) on a thread of their own while the command
//! starts, the start and fault-around programs attached then too, behind
//! a closed gate (fsprof-kernel's `FaultProgs`: the kernel's patching of
//! the tracepoints, ~0.4 ms, was most of a first mapping's wait), and the
//! gate opened and the end programs' events enabled only once a process
//! asks, through the
//! control file's `faults` word (`shim/abi.h`, enum fsprof_faults): the
//! shim's `mmap` wrapper, before a process's first file mapping, moves it
//! from ARMED to REQUESTED, wakes this thread (a futex on the shared
//! mapping) and waits, bounded, for ATTACHED. Faults of a mapping come
//! after its `mmap` returns, so none is missed by waiting there.
//!
//! The word is written by the traced processes too: a request is only a
//! request (the programs are attached once, whatever the word says next),
//! and what the shim counts in `faults_late` is only a count for a note.
//! Futexes by hand (`libc::syscall`): no crate waits on a word of a shared
//! file mapping with a timeout, and std's own futex is private to it.

use std::fs::File;
use std::mem::offset_of;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fsprof_kernel::faults::{FaultProgs, FaultSession, FaultsAttached};
use fsprof_shim::abi::{self, ControlHeader};
use fsprof_sys::mmap::SharedMap;

/// Where the word is in the control file.
pub const WORD: usize = offset_of!(ControlHeader, faults);
/// Where the shim counts the process images that stopped waiting.
pub const LATE: usize = offset_of!(ControlHeader, faults_late);

/// How long the attaching thread waits on the word before it looks at
/// whether the capture is over (it is woken for that too; this bounds a
/// lost wake-up).
const POLL: Duration = Duration::from_millis(100);

/// `futex(FUTEX_WAIT)` on `w` while it holds `cur`, for at most `timeout`.
/// Shared (not private): the shim's processes map the same file.
fn futex_wait(w: &AtomicU32, cur: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `w` is a live aligned word; the kernel only reads it and ts.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            w.as_ptr(),
            libc::FUTEX_WAIT,
            cur,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0,
        );
    }
}

/// Wakes every waiter on `w`.
pub fn futex_wake(w: &AtomicU32) {
    // SAFETY: as in `futex_wait`; FUTEX_WAKE reads no memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            w.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            0,
            0,
            0,
        );
    }
}

/// The word in `map` (a mapping of the control file from its start).
pub fn word(map: &SharedMap) -> &AtomicU32 {
    &map.u32_words(WORD, 1)[0]
}

/// The process images the shim counted as having gone on without the
/// programs (hostile: any number, reported as such).
pub fn late(map: &SharedMap) -> u32 {
    map.u32_words(LATE, 1)[0].load(Ordering::Relaxed)
}

/// What the attaching thread hands back when the capture is over.
pub type Attached = Result<Option<FaultsAttached>, String>;

/// What the capture hands the attaching thread to close at its end.
pub type Closing = Box<dyn Send>;

/// How long the fault programs, attached behind their closed gate and
/// their end programs' events opened disabled with their load (the
/// kernel's patching of their call sites done then, not while a process
/// waits), stay so without a request: they cost every page fault of the
/// machine (fsprof-kernel's `FaultProgs::close_waiting`), and a program
/// that maps files does so at its start (the 256 MiB scan ~1 ms after its
/// exec, SQLite a few ms), while one that never does (a shell loop of
/// `cat`) would pay it on every fault of its run. Then detached and
/// closed, attached and opened again on request. The test knob
/// `FSPROF_TEST_EVENTS_OPEN_MS` sets it.
fn events_open_for() -> Duration {
    const EVENTS_OPEN_FOR: Duration = Duration::from_millis(100);
    fsprof_sys::test_knob("FSPROF_TEST_EVENTS_OPEN_MS")
        .map_or(EVENTS_OPEN_FOR, |ms| Duration::from_millis(ms.into()))
}

/// The attaching thread: [`attach_on_request`], its outcome sent on
/// `done`; then it closes what comes on `later` (the capture's fault
/// programs and maps at its end: their closes wait for the kernel, not on
/// fsprof's main thread) and ends.
pub fn attacher(
    made: std::sync::mpsc::Sender<Result<FaultSession, String>>,
    control: std::sync::mpsc::Receiver<Option<File>>,
    stop: Arc<AtomicBool>,
    done: std::sync::mpsc::Sender<Attached>,
    later: std::sync::mpsc::Receiver<Closing>,
) {
    let (attached, unused) = attach_on_request(made, control, stop);
    let sent = done.send(attached).is_ok();
    // Programs never asked for, detached after the capture has its
    // answer: their links' closes are the kernel's patching again.
    drop(unused);
    if sent {
        drop(later.recv());
    }
}

/// The attaching thread's side: once `session` is made (sent on `made`,
/// the command held until then), loads the fault programs, then waits for
/// the control file (`control`: None if the capture has none, and then
/// attaches at once) and for a request on its word, or for `stop`.
/// Returns the attached programs (None: never asked for), and the
/// programs loaded and never asked for, to be closed once that is sent.
fn attach_on_request(
    made: std::sync::mpsc::Sender<Result<FaultSession, String>>,
    control: std::sync::mpsc::Receiver<Option<File>>,
    stop: Arc<AtomicBool>,
) -> (Attached, Option<FaultProgs>) {
    // A test knob fails the session as a kernel that lacks what it needs
    // does: the capture goes on without the faults.
    let session = if fsprof_sys::test_knob("FSPROF_TEST_FAULT_SESSION_FAILS").is_some_and(|n| n > 0)
    {
        Err("made to fail by FSPROF_TEST_FAULT_SESSION_FAILS".to_string())
    } else {
        FaultSession::prepare().map_err(|e| e.to_string())
    };
    let load = session
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|s| s.fault_load().map_err(|e| e.to_string()));
    if made.send(session).is_err() {
        return (Ok(None), None);
    }
    // The end programs' events opened with it, disabled: enabled on
    // request.
    let mut progs = load.and_then(|l| l.load().map_err(|e| e.to_string()));
    if let (false, Ok(p)) = (stop.load(Ordering::Acquire), progs.as_mut()) {
        p.attach_waiting();
    }
    let control = control.recv().ok().flatten();
    let map = control
        .as_ref()
        .and_then(|f| SharedMap::new_writable(f, LATE + 4).ok());
    let Some(map) = map else {
        // Nowhere to be asked: attached at once (the capture waits).
        return (progs.and_then(|p| attach(p).map(Some)), None);
    };
    let w = word(&map);
    // A test knob attaches as soon as loaded, without waiting for a
    // request: the variant measured against this one (docs/benchmarks.md).
    let eager = fsprof_sys::test_knob("FSPROF_TEST_FAULTS_EAGER").is_some_and(|n| n > 0);
    let close_events_at = std::time::Instant::now() + events_open_for();
    loop {
        let cur = w.load(Ordering::Acquire);
        if stop.load(Ordering::Acquire) {
            return match progs {
                Ok(p) => (Ok(None), Some(p)),
                Err(e) => (Err(e), None),
            };
        }
        // Before the request is looked at: a request at the deadline has
        // them attached and opened again (`FSPROF_TEST_EVENTS_OPEN_MS=0`
        // tests that).
        let left = close_events_at.saturating_duration_since(std::time::Instant::now());
        let open = progs.as_ref().is_ok_and(|p| p.waiting());
        if let (true, true, Ok(p)) = (open, left.is_zero(), progs.as_mut()) {
            p.close_waiting();
        }
        if eager || (cur != abi::FAULTS_NONE && cur != abi::FAULTS_ARMED) {
            break;
        }
        let wait = if open && !left.is_zero() {
            left.min(POLL)
        } else {
            POLL
        };
        futex_wait(w, cur, wait);
    }
    // A test's slow attach: the first mapping must wait for it, up to the
    // shim's bound.
    if let Some(ms) = fsprof_sys::test_knob("FSPROF_TEST_ATTACH_DELAY_MS") {
        std::thread::sleep(Duration::from_millis(ms.min(5000).into()));
    }
    // The waiting processes are woken as soon as the programs keep
    // faults; the ring's reader is started after.
    let wake = |state| {
        w.store(state, Ordering::Release);
        futex_wake(w);
    };
    let attached = progs.and_then(|p| {
        p.attach_then(|| wake(abi::FAULTS_ATTACHED))
            .map_err(|e| e.to_string())
    });
    if attached.is_err() {
        wake(abi::FAULTS_FAILED);
    }
    (attached.map(Some), None)
}

fn attach(p: FaultProgs) -> Result<FaultsAttached, String> {
    p.attach().map_err(|e| e.to_string())
}
