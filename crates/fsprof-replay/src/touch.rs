//! Loads and stores through the replayer's own mappings (`mapped_read`,
//! `mapped_write`), and the one hazard they bring: a page beyond the end
//! of the mapped file raises SIGBUS, which would kill the replayer. A
//! replayed file can be shorter than the traced one (a hostile trace, a
//! root that is not the traced state, a truncate another replay thread
//! made first), so every touch runs guarded: a SIGBUS on the page being
//! touched is answered by mapping a zero page over it (the access then
//! completes on that page, and nothing of the file changes), and the
//! touch reports EFAULT, which the replay counts as a difference from the
//! trace (later touches of that page touch the zero page). A SIGSEGV on
//! the page being touched (a hand-made replay file whose touch races
//! another thread's `munmap` of the mapping, without the ordering the
//! compiler gives them) is answered the same way. Either signal anywhere
//! else is not the replayer's to catch: the handler puts back the action
//! that was there before (Rust's own, for a stack overflow) and the
//! signal takes its course.

use std::cell::Cell;
use std::sync::atomic::{compiler_fence, Ordering};
use std::sync::{Once, OnceLock};

const PAGE: usize = 4096;

thread_local! {
    /// The byte range being touched by this thread ([lo, hi); 0, 0: none),
    /// and whether a SIGBUS in it was caught. Const-initialised and
    /// without a destructor: read from the signal handler, they are
    /// plain thread-local memory.
    static RANGE: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    static CAUGHT: Cell<bool> = const { Cell::new(false) };
}

/// The signals caught, and the actions they had before.
const SIGNALS: [libc::c_int; 2] = [libc::SIGBUS, libc::SIGSEGV];
static BEFORE: OnceLock<[libc::sigaction; 2]> = OnceLock::new();

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (lo, hi) = RANGE.with(Cell::get);
    // The page being touched is one of the replayer's own mappings.
    if addr >= lo && addr < hi && fsprof_sys::shrunk::zero_page_over(addr, PAGE) {
        CAUGHT.with(|c| c.set(true));
        return;
    }
    let before = BEFORE
        .get()
        .and_then(|b| SIGNALS.iter().position(|&s| s == sig).map(|i| b[i]));
    // SAFETY: putting back the action the signal had before ours (or the
    // default); the faulting access runs again and the signal is handled
    // as it would have been without us.
    unsafe {
        match before {
            Some(old) => libc::sigaction(sig, &old, std::ptr::null_mut()),
            None => {
                libc::signal(sig, libc::SIG_DFL);
                0
            }
        };
    }
}

/// Installs the handler of SIGBUS and SIGSEGV (once per process).
pub fn guard() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction with our handler, installed with
        // sigaction(2), the previous ones kept; the handler only touches
        // async-signal-safe state.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fault as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut before: [libc::sigaction; 2] = std::mem::zeroed();
            for (i, &sig) in SIGNALS.iter().enumerate() {
                libc::sigaction(sig, std::ptr::null(), &mut before[i]);
            }
            let _ = BEFORE.set(before);
            for sig in SIGNALS {
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
}

/// Runs `f` on `[p, p + len)` with SIGBUS there caught; false if it was.
fn guarded(p: *mut u8, len: usize, f: impl FnOnce()) -> bool {
    RANGE.with(|r| r.set((p as usize, p as usize + len)));
    CAUGHT.with(|c| c.set(false));
    // The range is set before the touch and cleared after it, as the
    // handler sees them.
    compiler_fence(Ordering::SeqCst);
    f();
    compiler_fence(Ordering::SeqCst);
    RANGE.with(|r| r.set((0, 0)));
    !CAUGHT.with(Cell::get)
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
        let none = map(
            PAGE,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
        );
        // SAFETY: the mapping just made (inaccessible: the fault is the test).
        assert!(!unsafe { load(none, 1) }, "SIGSEGV caught");
    }
}
