//! Timing through fsprof-measure's timing loop (one clock read per timed
//! operation, samples stored in a vector written before the loop), on one
//! clock per process ([`Clock::process`]): the invariant TSC where there is
//! one, else CLOCK_MONOTONIC. The loop's own cost per operation is measured
//! once ([`Overhead::process`]) and reported with the findings, not
//! subtracted.

use std::io;

pub use fsprof_measure::timing::{Clock, Overhead, TimingLoop};

/// Times `op(i)` for `i` in `0..n`: one latency per call, in order.
pub fn run(n: usize, op: impl FnMut(usize) -> io::Result<()>) -> io::Result<Vec<u64>> {
    Ok(TimingLoop::new(Clock::process()).run(n, op)?.ns)
}
