//! Faults on fsprof's own mappings: one SIGBUS (and SIGSEGV) handler for
//! the whole process, and the ranges it answers for, each kind with its
//! policy.
//!
//! - **Covered mappings** ([`cover`]): files that the processes fsprof
//!   profiles can write, mapped shared (the control file and its arena,
//!   counter files, trace chunks). Any of those processes can `ftruncate`
//!   such a file, and a load or store past the new end raises SIGBUS, which
//!   would kill fsprof (running as root, holding the profile) on a
//!   program's say-so; no check beforehand closes that race. A SIGBUS
//!   there is answered by mapping a private page of zeros over the
//!   faulting page, and the access is retried: it reads zeros, as if the
//!   process had written them, and the readers already treat every word
//!   as hostile. The pages so replaced are counted ([`replaced_pages`]).
//! - **Touches** ([`guarded`]): the replayer's loads and stores through its
//!   own mappings of replayed files, which can be shorter than the traced
//!   ones. A SIGBUS (or a SIGSEGV: a touch racing another thread's
//!   `munmap` in a hand-made replay file) on the range this thread is
//!   touching gets the same page of zeros, and the touch is reported as
//!   failed to its caller rather than counted.
//!
//! A fault anywhere else, or a signal sent with `kill`, is not fsprof's to
//! catch: the handler gives the signal back the disposition it had before
//! (std's stack-overflow handler, else the default) and the signal takes
//! its course, so fsprof's own bugs still crash it. One handler, because
//! two that each give back "the disposition before" for faults that are
//! not theirs would uninstall each other: the first fault one did not own
//! would leave the other's ranges uncovered.
//!
//! Hand-written: the handler has to be async-signal-safe and allocation
//! free, which rules out the signal crates' dispatchers (they run
//! handlers on a thread, after the faulting access would have been
//! retried and faulted again).

use std::cell::Cell;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

/// Mappings that can be covered at once: fsprof holds one per process
/// that has a counter file of its own or a live trace chunk. A mapping
/// made when all are taken is not covered.
const SLOTS: usize = 4096;

/// (start, end) of each covered mapping; start 0: a free slot.
static RANGES: [(AtomicUsize, AtomicUsize); SLOTS] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; SLOTS];
static REPLACED: AtomicU64 = AtomicU64::new(0);
static PAGE: AtomicUsize = AtomicUsize::new(4096);

thread_local! {
    /// The byte range this thread is touching ([lo, hi); 0, 0: none), and
    /// whether a fault in it was caught. Const-initialised and without a
    /// destructor: read from the signal handler, they are plain
    /// thread-local memory.
    static TOUCH: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    static CAUGHT: Cell<bool> = const { Cell::new(false) };
}

/// A covered mapping; uncovered on drop (before it is unmapped).
pub struct Covered(Option<usize>);

/// Covers `len` bytes at `start` (a live mapping of a shared file).
pub fn cover(start: usize, len: usize) -> Covered {
    if !BUS.install(libc::SIGBUS) {
        return Covered(None);
    }
    let Some(end) = start.checked_add(len) else {
        return Covered(None);
    };
    let free = RANGES.iter().position(|(s, e)| {
        s.compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
            && {
                e.store(end, Ordering::Release);
                true
            }
    });
    Covered(free)
}

impl Covered {
    /// Uncovers the mapping: before it is unmapped, so that a mapping made
    /// later at the same address is never taken for it.
    pub fn release(&mut self) {
        if let Some(k) = self.0.take() {
            // The end first: a handler between the two stores sees no range.
            RANGES[k].1.store(0, Ordering::Release);
            RANGES[k].0.store(0, Ordering::Release);
        }
    }
}

impl Drop for Covered {
    fn drop(&mut self) {
        self.release();
    }
}

/// Pages of covered mappings replaced by zeros since fsprof started.
pub fn replaced_pages() -> u64 {
    REPLACED.load(Ordering::Relaxed)
}

/// Installs the handler for touches (SIGBUS and SIGSEGV), once per
/// process: before the first [`guarded`] touch. False if the kernel
/// refused (touches then fault as they would without fsprof).
pub fn guard_touches() -> bool {
    let bus = BUS.install(libc::SIGBUS);
    SEGV.install(libc::SIGSEGV) && bus
}

/// Runs `f`, which touches `[lo, lo + len)` and nothing else that can
/// fault, with a fault there answered by a page of zeros; false if one
/// was. The handler must be installed ([`guard_touches`]).
pub fn guarded(lo: usize, len: usize, f: impl FnOnce()) -> bool {
    TOUCH.with(|r| r.set((lo, lo.saturating_add(len))));
    CAUGHT.with(|c| c.set(false));
    // The range is set before the touch and cleared after it, as the
    // handler sees them.
    compiler_fence(Ordering::SeqCst);
    f();
    compiler_fence(Ordering::SeqCst);
    TOUCH.with(|r| r.set((0, 0)));
    !CAUGHT.with(Cell::get)
}

/// Our handler's place for one signal: the disposition before it, kept
/// before the handler is installed (a handler that found none would
/// retry the faulting access forever), and whether it is installed.
struct Disposition {
    once: Once,
    before: OnceLock<libc::sigaction>,
    on: AtomicBool,
}

impl Disposition {
    const fn new() -> Disposition {
        Disposition {
            once: Once::new(),
            before: OnceLock::new(),
            on: AtomicBool::new(false),
        }
    }

    /// Installs the handler for `sig` once; whether it is installed.
    fn install(&self, sig: libc::c_int) -> bool {
        self.once.call_once(|| {
            // SAFETY: sysconf has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if page > 0 && (page as usize).is_power_of_two() {
                PAGE.store(page as usize, Ordering::Relaxed);
            }
            // SAFETY: sigaction with valid pointers to plain data; the
            // handler is async-signal-safe (atomics, thread-locals without
            // destructors, mmap, sigaction, raise).
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                    return;
                }
                let _ = self.before.set(old);
                let mut ours: libc::sigaction = std::mem::zeroed();
                ours.sa_sigaction = on_fault as *const () as libc::sighandler_t;
                ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut ours.sa_mask);
                let on = libc::sigaction(sig, &ours, std::ptr::null_mut()) == 0;
                self.on.store(on, Ordering::Release);
            }
        });
        self.on.load(Ordering::Acquire)
    }
}

static BUS: Disposition = Disposition::new();
static SEGV: Disposition = Disposition::new();

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (addr, code) = unsafe { ((*info).si_addr() as usize, (*info).si_code) };
    // A fault (si_code > 0), not a signal sent with kill: the address is
    // the access's.
    if code > 0 && answer(sig, addr) {
        return;
    }
    let before = match sig {
        libc::SIGBUS => BUS.before.get(),
        _ => SEGV.before.get(),
    };
    // SAFETY: async-signal-safe calls, putting back the disposition the
    // signal had before ours (or the default).
    unsafe {
        match before {
            Some(old) => libc::sigaction(sig, old, std::ptr::null_mut()),
            _ => {
                libc::signal(sig, libc::SIG_DFL);
                0
            }
        };
        // A fault is raised again when the access is retried; a sent
        // signal is not, so it is raised again here.
        if code <= 0 {
            libc::raise(sig);
        }
    }
}

/// Answers a fault at `addr` if it is on a range of ours: this thread's
/// touch (either signal: reported to [`guarded`]'s caller), else a
/// covered mapping (SIGBUS only: counted).
fn answer(sig: libc::c_int, addr: usize) -> bool {
    let page = PAGE.load(Ordering::Relaxed);
    let (lo, hi) = TOUCH.with(Cell::get);
    if addr >= lo && addr < hi && zero_page_over(addr, page) {
        CAUGHT.with(|c| c.set(true));
        return true;
    }
    let covered = sig == libc::SIGBUS
        && RANGES.iter().any(|(s, e)| {
            let start = s.load(Ordering::Acquire);
            start != 0 && addr >= start && addr < e.load(Ordering::Acquire)
        });
    if covered && zero_page_over(addr, page) {
        REPLACED.fetch_add(1, Ordering::Relaxed);
        return true;
    }
    false
}

/// Maps a private page of zeros over the page of `page` bytes (a power of
/// two) that holds `addr`; false if the kernel refused. Async-signal-safe.
fn zero_page_over(addr: usize, page: usize) -> bool {
    let base = addr & !(page - 1);
    // SAFETY: the handler passes an address inside a range of fsprof's own
    // that is still mapped; other threads reading that page see zeros,
    // which they are prepared for.
    let p = unsafe {
        libc::mmap(
            base as *mut libc::c_void,
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    p != libc::MAP_FAILED
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmap::SharedMap;
    use std::io::Write;

    /// A file shrunk to nothing under a mapping of two pages reads as
    /// zeros, and the pages are counted; fsprof is not killed.
    #[test]
    fn a_file_shrunk_under_its_mapping_reads_as_zeros() {
        let page = PAGE.load(Ordering::Relaxed).max(4096);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![0xab; 2 * page]).unwrap();
        let m = SharedMap::new_writable(&f, 2 * page).unwrap();
        assert_eq!(m.u64_at(page), 0xabab_abab_abab_abab);
        let before = replaced_pages();
        f.set_len(0).unwrap();
        assert_eq!((m.u64_at(8), m.u64_at(page)), (0, 0));
        m.store_u64(16, 7);
        assert_eq!(m.u64_at(16), 7, "a store lands in the page of zeros");
        assert!(replaced_pages() >= before + 2, "both pages counted");
    }

    /// Forks a child that runs `f` then exits 0: the signal that killed
    /// it, or 0.
    fn killed_by(f: impl FnOnce()) -> i32 {
        // SAFETY: the child makes a few system calls and one access, then
        // exits or is killed: nothing that needs another thread's lock.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            f();
            // SAFETY: ends the forked child without running anything else.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        match libc::WIFSIGNALED(status) {
            true => libc::WTERMSIG(status),
            false => 0,
        }
    }

    /// A SIGBUS outside every covered mapping and touch is not swallowed:
    /// a child that reads past the end of a file it mapped itself dies of
    /// it, with both kinds of range in use; so does one that loads from an
    /// inaccessible page of its own, or stores into a covered mapping that
    /// is read-only (SIGSEGV).
    #[test]
    fn a_sigbus_elsewhere_still_kills() {
        let _covered = cover(0x1000, 0x1000);
        assert!(guard_touches());
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&[1; 64]).unwrap();
        let past_the_end = || {
            use std::os::fd::AsRawFd;
            // SAFETY: a fresh shared read mapping of a file we hold; the
            // read of its second page faults (past the end), in no range
            // of ours.
            unsafe {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    2 * 4096,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    f.as_raw_fd(),
                    0,
                );
                // A touch in progress elsewhere does not own it either.
                guarded(0x3000, 0x1000, || {
                    std::ptr::read_volatile((p as *const u8).add(4096));
                });
            }
        };
        assert_eq!(killed_by(past_the_end), libc::SIGBUS);
        let inaccessible = || {
            // SAFETY: a fresh inaccessible mapping; the load faults.
            unsafe {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                std::ptr::read_volatile(p as *const u8);
            }
        };
        assert_eq!(killed_by(inaccessible), libc::SIGSEGV);
        let m = SharedMap::new(&f, 64).unwrap();
        // A store into a covered mapping fsprof made read-only is fsprof's
        // own bug, not a shrunk file.
        assert_eq!(killed_by(|| m.store_u64(0, 1)), libc::SIGSEGV);
    }
}
