//! Timing one system call: CLOCK_MONOTONIC read before and after (the
//! vDSO clock costs ~20 ns, far below the microsecond effects discovery
//! looks for, and needs no calibration).

// TODO(bench): switch to the shared timing loop of fsprof-bench once it is on main.

/// Runs `f` and returns its result with the elapsed ns.
#[inline]
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let a = fsprof_sys::clock::mono_ns();
    let r = f();
    let b = fsprof_sys::clock::mono_ns();
    (r, b.saturating_sub(a))
}
