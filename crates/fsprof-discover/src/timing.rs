//! Timing through fsprof-bench's timing loop (one clock read per timed
//! operation, samples stored in a vector reserved before the loop), on one
//! clock per process: the invariant TSC where there is one, else
//! CLOCK_MONOTONIC. The loop's own cost per operation is measured once and
//! reported with the findings, not subtracted.

use std::io;
use std::sync::OnceLock;

use fsprof_bench::timing::{Clock, Overhead, TimingLoop};

/// The clock every measurement of this process uses.
pub fn clock() -> Clock {
    static CLOCK: OnceLock<Clock> = OnceLock::new();
    *CLOCK.get_or_init(Clock::best)
}

/// What the timing loop adds to each timed operation here.
pub fn overhead() -> Overhead {
    static OVERHEAD: OnceLock<Overhead> = OnceLock::new();
    *OVERHEAD.get_or_init(|| Overhead::measure(clock()))
}

/// Times `op(i)` for `i` in `0..n`: one latency per call, in order.
pub fn run(n: usize, op: impl FnMut(usize) -> io::Result<()>) -> io::Result<Vec<u64>> {
    Ok(TimingLoop::new(clock()).run(n, op)?.ns)
}
