//! Loads and stores through the replayer's own mappings (`mapped_read`,
//! `mapped_write`), and the one hazard they bring: a page beyond the end
//! of the mapped file raises SIGBUS, which would kill the replayer. A
//! replayed file can be shorter than the traced one (a hostile trace, a
//! root that is not the traced state, a truncate another replay thread
//! made first), so every touch runs guarded by fsprof's one fault handler
//! ([`fsprof_sys::mapfault::guarded`]): a SIGBUS on the page being touched
//! is answered by mapping a zero page over it (the access then completes
//! on that page, and nothing of the file changes), and the touch reports
//! EFAULT, which the replay counts as a difference from the trace (later
//! touches of that page touch the zero page). A SIGSEGV on the page being
//! touched (a hand-made replay file whose touch races another thread's
//! `munmap` of the mapping, without the ordering the compiler gives them)
//! is answered the same way. Either signal anywhere else is not the
//! replayer's to catch, and takes the course it had before.

use fsprof_sys::mapfault;

const PAGE: usize = 4096;

/// Installs the fault handler for touches (once per process).
pub fn guard() {
    mapfault::guard_touches();
}

/// Runs `f` on `[p, p + len)` with a fault there caught; false if one was.
fn guarded(p: *mut u8, len: usize, f: impl FnOnce()) -> bool {
    mapfault::guarded(p as usize, len, f)
}

/// A load from each page of `[p, p + len)`.
///
/// # Safety
/// The range is inside a mapping of the caller's, readable.
pub unsafe fn load(p: *mut u8, len: usize) -> bool {
    guarded(p, len, || {
        let mut at = 0;
        while at < len {
            // SAFETY: inside the range the caller vouches for.
            unsafe { std::ptr::read_volatile(p.add(at)) };
            at += PAGE - (p as usize + at) % PAGE;
        }
    })
}

/// A store of `bytes` at `p`, or (None) of each page's first byte as it
/// is: the page is written, its contents stay.
///
/// # Safety
/// `[p, p + len)` is inside a writable mapping of the caller's, and
/// `bytes` (when given) holds `len` bytes.
pub unsafe fn store(p: *mut u8, len: usize, bytes: Option<&[u8]>) -> bool {
    guarded(p, len, || match bytes {
        // SAFETY: as the caller vouches; the source is a buffer of ours.
        Some(b) => unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, len.min(b.len())) },
        None => {
            let mut at = 0;
            while at < len {
                // SAFETY: as above.
                unsafe {
                    let q = p.add(at);
                    std::ptr::write_volatile(q, std::ptr::read_volatile(q));
                }
                at += PAGE - (p as usize + at) % PAGE;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(len: usize, prot: i32, flags: i32, fd: i32) -> *mut u8 {
        // SAFETY: a fresh mapping of the test's own.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        assert_ne!(p, libc::MAP_FAILED);
        p as *mut u8
    }

    /// A page of its own that a touch faults on (SIGSEGV).
    fn inaccessible() -> *mut u8 {
        let anonymous = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        map(PAGE, libc::PROT_NONE, anonymous, -1)
    }

    /// A page past the end of the mapped file (SIGBUS) and a page the
    /// mapping may not be touched at (SIGSEGV) are caught on the page
    /// touched, reported, and leave the replayer running; a good page is
    /// touched as asked.
    #[test]
    fn faults_on_the_touched_page_are_caught_and_reported() {
        guard();
        let f = tempfile::tempfile().unwrap();
        f.set_len(PAGE as u64).unwrap();
        use std::os::fd::AsRawFd;
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let p = map(2 * PAGE, rw, libc::MAP_SHARED, f.as_raw_fd());
        // SAFETY: both pages are of the mapping just made.
        unsafe {
            assert!(store(p, 4, Some(b"abcd")));
            assert!(load(p, PAGE));
            assert!(!load(p.add(PAGE), 1), "past the end of the file");
            assert!(
                store(p.add(PAGE), 1, None),
                "the zero page put there takes it"
            );
        }
        let mut back = [0u8; 4];
        use std::os::unix::fs::FileExt;
        f.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back, b"abcd");
        assert_eq!(
            f.metadata().unwrap().len(),
            PAGE as u64,
            "the file did not grow"
        );
        let none = inaccessible();
        // SAFETY: the mapping just made (inaccessible: the fault is the test).
        assert!(!unsafe { load(none, 1) }, "SIGSEGV caught");
    }

    /// Both kinds of range of fsprof's one fault handler in one process,
    /// their faults taking turns: a fault in a mapping `fsprof run` covers
    /// (a shared file a process shrank) is counted and the touches stay
    /// guarded; a fault on a touch is reported to it, not counted, and the
    /// covered mappings stay covered.
    #[test]
    fn covered_mappings_and_touches_keep_their_policies_in_one_process() {
        use fsprof_sys::mapfault::replaced_pages;
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![0xab; 2 * PAGE]).unwrap();
        let covered = fsprof_sys::mmap::SharedMap::new(&f, 2 * PAGE).unwrap();
        guard();
        let g = tempfile::tempfile().unwrap();
        g.set_len(PAGE as u64).unwrap();
        let t = map(2 * PAGE, libc::PROT_READ, libc::MAP_SHARED, g.as_raw_fd());
        f.set_len(0).unwrap();
        let before = replaced_pages();
        assert_eq!(covered.u64_at(0), 0, "a covered fault first");
        assert_eq!(replaced_pages(), before + 1);
        // SAFETY: both pages are of the mapping `t`.
        let past = unsafe { t.add(PAGE) };
        // SAFETY: as above.
        assert!(!unsafe { load(past, 1) }, "then a touch past the end");
        assert_eq!(
            replaced_pages(),
            before + 1,
            "a touch's fault is not counted"
        );
        assert_eq!(covered.u64_at(PAGE), 0, "a covered fault again");
        assert_eq!(replaced_pages(), before + 2);
        // SAFETY: as above.
        let both = unsafe { load(t, PAGE) && load(past, 1) };
        assert!(both, "a good page, then the zero page");
        let none = inaccessible();
        // SAFETY: the mapping just made (inaccessible: the fault is the test).
        assert!(!unsafe { load(none, 1) }, "a SIGSEGV on the page touched");
        assert_eq!(replaced_pages(), before + 2);
    }
}
