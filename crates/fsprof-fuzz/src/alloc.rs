//! How much a target allocates for one input: a global allocator that
//! counts the bytes live on the calling thread while [`measure`] runs, and
//! refuses outright any single request above [`REFUSED_ABOVE`] (Rust then
//! aborts with "memory allocation of N bytes failed": a length field taken
//! on trust). The test binary installs it:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: fsprof_fuzz::alloc::Counting = fsprof_fuzz::alloc::Counting;
//! ```
//!
//! Per thread, so that tests running side by side under `cargo test` do not
//! count each other's memory; the readers fuzzed here allocate on the
//! calling thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// A single allocation above this while measuring is refused: no input of
/// the fuzzers' sizes honestly needs a gigabyte at once.
pub const REFUSED_ABOVE: usize = 1 << 30;

#[derive(Clone, Copy)]
struct State {
    on: bool,
    live: usize,
    peak: usize,
}

thread_local! {
    static STATE: Cell<State> = const { Cell::new(State { on: false, live: 0, peak: 0 }) };
}

/// The counting allocator (the system's, counted).
pub struct Counting;

fn grew(by: usize) -> bool {
    STATE
        .try_with(|s| {
            let mut st = s.get();
            if !st.on {
                return true;
            }
            if by > REFUSED_ABOVE {
                return false;
            }
            st.live = st.live.saturating_add(by);
            st.peak = st.peak.max(st.live);
            s.set(st);
            true
        })
        .unwrap_or(true)
}

fn shrank(by: usize) {
    let _ = STATE.try_with(|s| {
        let mut st = s.get();
        if st.on {
            // Memory allocated before measuring began may be freed during
            // it: never below zero.
            st.live = st.live.saturating_sub(by);
            s.set(st);
        }
    });
}

// SAFETY: every call is passed on to the system allocator unchanged; the
// bookkeeping only touches a thread-local Cell of plain integers (const
// initialised, no destructor, so it never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !grew(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !grew(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as for alloc.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: ptr came from System with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            if !grew(new_size) {
                return std::ptr::null_mut();
            }
            shrank(layout.size());
        } else {
            shrank(layout.size() - new_size);
        }
        // SAFETY: ptr came from System with this layout; new_size is the
        // caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f`, returning its value and the most bytes it had live at once
/// on this thread (0 unless [`Counting`] is the global allocator).
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    STATE.with(|s| {
        s.set(State {
            on: true,
            live: 0,
            peak: 0,
        })
    });
    // Stop counting whether `f` returns or panics.
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            STATE.with(|s| {
                let mut st = s.get();
                st.on = false;
                s.set(st);
            });
        }
    }
    let off = Off;
    let out = f();
    drop(off);
    (out, STATE.with(|s| s.get().peak))
}

/// Whether the counting allocator is installed (a test of the budget that
/// would pass without it proves nothing).
pub fn counting() -> bool {
    measure(|| std::hint::black_box(vec![0u8; 4096])).1 >= 4096
}
