//! Files shrunk under fsprof's mappings of them.
//!
//! fsprof maps files that the processes it profiles can write: the
//! control file and its arena, counter files, trace chunks. Any of those
//! processes can `ftruncate` such a file, and a load or store through
//! fsprof's mapping past the new end raises SIGBUS, which would kill
//! fsprof (running as root, holding the profile) on a program's say-so.
//! No check beforehand closes that race: the file can shrink between the
//! check and the access.
//!
//! So a SIGBUS whose address lies in a registered mapping is answered by
//! mapping a private page of zeros over the faulting page, and the access
//! is retried: it reads zeros, as if the process had written them, and
//! the readers already treat every word as hostile. The pages so replaced
//! are counted ([`replaced_pages`]) for the profile's notes. A SIGBUS
//! anywhere else gets the disposition there was before (std's
//! stack-overflow handler, else the default): fsprof's own bugs still
//! crash it.
//!
//! Hand-written: the handler has to be async-signal-safe and allocation
//! free, which rules out the signal crates' dispatchers (they run
//! handlers on a thread, after the faulting access would have been
//! retried and faulted again).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Mappings that can be registered at once: fsprof holds one per process
/// that has a counter file of its own or a live trace chunk. A mapping
/// made when all are taken is not covered (as before this module).
const SLOTS: usize = 4096;

/// (start, end) of each registered mapping; start 0: a free slot.
static RANGES: [(AtomicUsize, AtomicUsize); SLOTS] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; SLOTS];
static REPLACED: AtomicU64 = AtomicU64::new(0);
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// The disposition before ours, given back for a SIGBUS not ours.
static BEFORE: OnceLock<Option<libc::sigaction>> = OnceLock::new();

/// A registered mapping; unregistered on drop (before it is unmapped).
pub struct Covered(Option<usize>);

/// Covers `len` bytes at `start` (a live mapping of a shared file).
pub fn cover(start: usize, len: usize) -> Covered {
    if BEFORE.get_or_init(install).is_none() {
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
    /// Unregisters the mapping: before it is unmapped, so that a mapping
    /// made later at the same address is never taken for it.
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

/// Installs the handler; the disposition it replaced, or None if it could
/// not be installed (nothing is covered then).
fn install() -> Option<libc::sigaction> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        PAGE.store(page as usize, Ordering::Relaxed);
    }
    // SAFETY: sigaction with valid pointers to plain data; the handler is
    // async-signal-safe (atomics, mmap, sigaction, raise).
    unsafe {
        let mut ours: libc::sigaction = std::mem::zeroed();
        ours.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
        ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut ours.sa_mask);
        let mut before: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(libc::SIGBUS, &ours, &mut before) == 0).then_some(before)
    }
}

extern "C" fn on_sigbus(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (addr, code) = unsafe { ((*info).si_addr() as usize, (*info).si_code) };
    let page = PAGE.load(Ordering::Relaxed);
    // A fault (si_code > 0), not a SIGBUS sent with kill: the address is
    // the access's.
    if code > 0 && replace(addr, page) {
        REPLACED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // SAFETY: async-signal-safe calls; BEFORE was set before the handler
    // was installed.
    unsafe {
        if let Some(Some(before)) = BEFORE.get() {
            libc::sigaction(libc::SIGBUS, before, std::ptr::null_mut());
        }
        // A fault is raised again when the access is retried; a sent
        // signal is not, so it is raised again here.
        if code <= 0 {
            libc::raise(libc::SIGBUS);
        }
    }
}

/// Maps a page of zeros over `addr`'s page if it lies in a covered mapping.
fn replace(addr: usize, page: usize) -> bool {
    let covered = page.is_power_of_two()
        && RANGES.iter().any(|(s, e)| {
            let start = s.load(Ordering::Acquire);
            start != 0 && addr >= start && addr < e.load(Ordering::Acquire)
        });
    covered && zero_page_over(addr, page)
}

/// Maps a private page of zeros over the page of `page` bytes (a power of
/// two) that holds `addr`; false if the kernel refused. Async-signal-safe:
/// the answer of this module's handler and of the replayer's touch guard
/// (fsprof-replay's `touch`) to a fault on a page they own.
pub fn zero_page_over(addr: usize, page: usize) -> bool {
    let base = addr & !(page - 1);
    // SAFETY: the callers pass an address inside a mapping of their own
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

    /// A SIGBUS outside every covered mapping is not swallowed: a child
    /// that reads past the end of a file it mapped itself dies of it.
    #[test]
    fn a_sigbus_elsewhere_still_kills() {
        let _covered = cover(0x1000, 0x1000);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&[1; 64]).unwrap();
        // SAFETY: the child makes one system call and one load, then
        // exits or is killed: nothing that needs another thread's lock.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            use std::os::fd::AsRawFd;
            // SAFETY: a fresh private read mapping of a file we hold; the
            // read of its second page faults (past the end).
            unsafe {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    2 * 4096,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    f.as_raw_fd(),
                    0,
                );
                let v = std::ptr::read_volatile((p as *const u8).add(4096));
                libc::_exit(i32::from(v));
            }
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGBUS,
            "status {status:#x}"
        );
    }
}
