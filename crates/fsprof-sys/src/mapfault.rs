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
//!   as hostile. The pages so replaced are counted ([`replaced_pages`]),
//!   and the last [`RECENT`] remembered by address
//!   ([`pages_replaced_since`]): a replaced page stays detached from the
//!   file after the file is made long again, so the owner of a mapping
//!   that is reused (the arena's blocks) must know which pages no longer
//!   show the file.
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
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

/// Mappings a table of ranges holds. fsprof holds one mapping per process
/// that has a counter file of its own or a live trace chunk; when every
/// slot is taken, another table is chained on, so no mapping goes
/// uncovered (one uncovered, cut by its writer, would kill fsprof).
const SLOTS: usize = 1024;

/// (start, end) of each covered mapping; start 0: a free slot. Tables are
/// only ever added, never freed: the handler walks them without a lock.
struct Ranges {
    slots: [(AtomicUsize, AtomicUsize); SLOTS],
    next: AtomicPtr<Ranges>,
}

impl Ranges {
    const fn new() -> Ranges {
        Ranges {
            slots: [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; SLOTS],
            next: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// This table and the ones chained after it.
    fn chain(&'static self) -> impl Iterator<Item = &'static Ranges> {
        std::iter::successors(Some(self), |t| {
            // SAFETY: a chained table is leaked, never freed or moved.
            unsafe { t.next.load(Ordering::Acquire).as_ref() }
        })
    }

    /// The table after this one, chained on if there is none yet.
    fn next_or_new(&'static self) -> &'static Ranges {
        let next = self.next.load(Ordering::Acquire);
        // SAFETY: a chained table is leaked, never freed or moved.
        if let Some(t) = unsafe { next.as_ref() } {
            return t;
        }
        let new = Box::into_raw(Box::new(Ranges::new()));
        match self.next.compare_exchange(
            std::ptr::null_mut(),
            new,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: leaked just now, never freed.
            Ok(_) => unsafe { &*new },
            Err(theirs) => {
                // SAFETY: ours was never published; theirs is leaked.
                unsafe {
                    drop(Box::from_raw(new));
                    &*theirs
                }
            }
        }
    }
}

static RANGES: Ranges = Ranges::new();
static REPLACED: AtomicU64 = AtomicU64::new(0);
/// Pages of covered mappings the handler remembers by address.
pub const RECENT: usize = 64;
/// The addresses of replaced pages: the n-th replaced (from 0) at `n %
/// RECENT`. Written before [`REPLACED`] counts it.
static RECENT_PAGES: [AtomicUsize; RECENT] = [const { AtomicUsize::new(0) }; RECENT];
/// Replacements begun: a slot of [`RECENT_PAGES`] is claimed here, so two
/// handlers at once (two of fsprof's threads) never write one slot.
static BEGUN: AtomicU64 = AtomicU64::new(0);
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
pub struct Covered(Option<&'static (AtomicUsize, AtomicUsize)>);

/// Covers `len` bytes at `start` (a live mapping of a shared file).
pub fn cover(start: usize, len: usize) -> Covered {
    if !BUS.install(libc::SIGBUS) {
        return Covered(None);
    }
    let Some(end) = start.checked_add(len) else {
        return Covered(None);
    };
    let mut table: &'static Ranges = &RANGES;
    loop {
        // A plain load first: a failed compare-exchange on each taken slot
        // would be a locked instruction per live mapping.
        let free = table.slots.iter().find(|(s, _)| {
            s.load(Ordering::Relaxed) == 0
                && s.compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
        });
        if let Some(slot) = free {
            slot.1.store(end, Ordering::Release);
            return Covered(Some(slot));
        }
        table = table.next_or_new();
    }
}

impl Covered {
    /// Uncovers the mapping: before it is unmapped, so that a mapping made
    /// later at the same address is never taken for it.
    pub fn release(&mut self) {
        if let Some((start, end)) = self.0.take() {
            // The end first: a handler between the two stores sees no range.
            end.store(0, Ordering::Release);
            start.store(0, Ordering::Release);
        }
    }

    /// Whether the mapping is covered (the handler could be installed).
    pub fn is_covered(&self) -> bool {
        self.0.is_some()
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

/// The pages of covered mappings replaced since `mark` (a
/// [`replaced_pages`] reading), by address, and the count now, the next
/// mark; no addresses if more were replaced than are remembered (or a
/// handler on another thread is between claiming a slot and counting).
pub fn pages_replaced_since(mark: u64) -> (Option<Vec<usize>>, u64) {
    let now = REPLACED.load(Ordering::Acquire);
    let begun = BEGUN.load(Ordering::Acquire);
    if begun != now || now.saturating_sub(mark) > RECENT as u64 {
        return (None, now);
    }
    let pages = (mark..now)
        .map(|n| RECENT_PAGES[(n % RECENT as u64) as usize].load(Ordering::Acquire))
        .collect();
    // Slots rewritten while they were read (a handler claimed more since)
    // are not the ones counted.
    match BEGUN.load(Ordering::Acquire) == begun {
        true => (Some(pages), now),
        false => (None, now),
    }
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
        && RANGES.chain().any(|t| {
            t.slots.iter().any(|(s, e)| {
                let start = s.load(Ordering::Acquire);
                start != 0 && addr >= start && addr < e.load(Ordering::Acquire)
            })
        });
    if covered && zero_page_over(addr, page) {
        let n = BEGUN.fetch_add(1, Ordering::AcqRel);
        RECENT_PAGES[(n % RECENT as u64) as usize].store(addr & !(page - 1), Ordering::Release);
        REPLACED.fetch_add(1, Ordering::AcqRel);
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
        let _one = REPLACING.lock();
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

    /// The tests that replace pages, one at a time (cargo test runs them
    /// as threads of one process, and each reads the count).
    static REPLACING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// The pages replaced are told by address, the next mark with them; a
    /// mark older than the pages remembered tells none.
    #[test]
    fn the_pages_replaced_are_told_by_address() {
        let _one = REPLACING.lock();
        let page = PAGE.load(Ordering::Relaxed).max(4096);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![0xab; 3 * page]).unwrap();
        let m = SharedMap::new_writable(&f, 3 * page).unwrap();
        let mark = replaced_pages();
        f.set_len(page as u64).unwrap();
        assert_eq!(m.u64_at(2 * page), 0);
        let (pages, now) = pages_replaced_since(mark);
        let base = m.as_ptr() as usize;
        let pages = pages.expect("one page replaced since the mark");
        assert_eq!(pages, [base + 2 * page], "{base:x}");
        assert!(now > mark);
        assert_eq!(pages_replaced_since(now).0, Some(vec![]));
        // More than are remembered since the mark: none told.
        let n = RECENT + 1;
        f.set_len((n * page) as u64).unwrap();
        let many = SharedMap::new_writable(&f, n * page).unwrap();
        f.set_len(0).unwrap();
        (0..n).for_each(|k| assert_eq!(many.u64_at(k * page), 0));
        assert_eq!(pages_replaced_since(now).0, None);
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

    /// More mappings than one table of ranges holds are all covered: a
    /// file cut under a mapping made after them reads as zeros in a child
    /// that holds them all, which is not killed.
    #[test]
    fn mappings_past_one_table_are_covered() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&[0xab; 8192]).unwrap();
        let sig = killed_by(|| {
            let held: Vec<Covered> = (0..SLOTS + 8)
                .map(|k| cover(0x1000_0000 + k * 0x1000, 0x1000))
                .collect();
            let m = SharedMap::new_writable(&f, 8192).unwrap();
            f.set_len(0).unwrap();
            if !held.iter().all(Covered::is_covered) || m.u64_at(4096) != 0 {
                // SAFETY: ends the forked child, as a failure.
                unsafe { libc::abort() };
            }
        });
        assert_eq!(sig, 0, "the child was killed by signal {sig}");
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
