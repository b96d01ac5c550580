//! Loads and stores through the replayer's own mappings (`mapped_read`,
//! `mapped_write`), and the one hazard they bring: a page beyond the end
//! of the mapped file raises SIGBUS, which would kill the replayer. A
//! replayed file can be shorter than the traced one (a hostile trace, a
//! root that is not the traced state, a truncate another replay thread
//! made first), so every touch runs guarded: a SIGBUS on the page being
//! touched is answered by mapping a zero page over it (the access then
//! completes on that page, and nothing of the file changes), and the
//! touch reports EFAULT, which the replay counts as a difference from the
//! trace. A SIGBUS anywhere else is not the replayer's to catch: the
//! handler puts the default action back and the signal takes its course.

use std::cell::Cell;
use std::sync::Once;

const PAGE: usize = 4096;

thread_local! {
    /// The byte range being touched by this thread ([lo, hi); 0, 0: none),
    /// and whether a SIGBUS in it was caught. Const-initialised and
    /// without a destructor: read from the signal handler, they are
    /// plain thread-local memory.
    static RANGE: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    static CAUGHT: Cell<bool> = const { Cell::new(false) };
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (lo, hi) = RANGE.with(Cell::get);
    if addr >= lo && addr < hi {
        let page = addr & !(PAGE - 1);
        // SAFETY: replaces one page of the replayer's own mapping, the
        // one being touched, with an anonymous zero page.
        let p = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            CAUGHT.with(|c| c.set(true));
            return;
        }
    }
    // SAFETY: restoring the default action; the faulting access runs again
    // and the signal is delivered as it would have been without us.
    unsafe { libc::signal(sig, libc::SIG_DFL) };
}

/// Installs the SIGBUS handler (once per process).
pub fn guard() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction with our handler, installed with
        // sigaction(2); the handler only touches async-signal-safe state.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigbus as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
        }
    });
}

/// Runs `f` on `[p, p + len)` with SIGBUS there caught; false if it was.
fn guarded(p: *mut u8, len: usize, f: impl FnOnce()) -> bool {
    RANGE.with(|r| r.set((p as usize, p as usize + len)));
    CAUGHT.with(|c| c.set(false));
    f();
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
