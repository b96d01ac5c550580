//! The timing loop: run an operation `n` times, time every iteration, and
//! say what the timing itself cost.
//!
//! Stable API (used by the bench suites, `fsprof discover`'s latency-vs-
//! offset scans and `fsprof calibrate`'s workloads):
//!
//! ```no_run
//! use fsprof_bench::timing::{Clock, TimingLoop};
//! let clock = Clock::best();
//! let samples = TimingLoop::new(clock).warmup(100).run(10_000, |i| {
//!     // one operation; `i` picks the offset, file, ...
//!     let _ = i;
//!     Ok(())
//! })?;
//! let op = samples.op_stats("pread", Default::default()); // the shared log2 histogram
//! let overhead = fsprof_bench::timing::Overhead::measure(clock); // what the loop adds per op
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! How it stays out of the measurement: the clock is read **once per
//! iteration** (the end of one operation is the start of the next), raw
//! tick deltas go into a vector allocated before the loop, and converting
//! ticks to ns and filing them into histogram buckets happens after the
//! loop. Each sample therefore includes one clock read and one store; that
//! cost is measured by timing an empty operation ([`Overhead`]) and is
//! reported, not silently subtracted (a subtraction below the clock's
//! resolution would invent precision). The clock is the cycle counter when
//! the CPU guarantees it ticks at a constant rate, else CLOCK_MONOTONIC.

use std::hint::black_box;
use std::io;

use fsprof_core::buckets::{BucketLayout, Resolution};
use fsprof_core::histogram::{Histogram, OpStats};
use fsprof_core::stats::Summary;
use fsprof_sys::clock::{mono_ns, rdtsc, tsc_is_invariant, TscRate};

/// The clock a loop reads: ticks now, ns afterwards.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    tsc_hz: Option<f64>,
}

impl Clock {
    /// The calibrated cycle counter where it is invariant, else monotonic.
    pub fn best() -> Clock {
        if tsc_is_invariant() {
            Clock {
                tsc_hz: Some(TscRate::calibrate(None).hz),
            }
        } else {
            Clock::monotonic()
        }
    }

    /// `clock_gettime(CLOCK_MONOTONIC)`.
    pub fn monotonic() -> Clock {
        Clock { tsc_hz: None }
    }

    /// Ticks now (cycles or ns).
    #[inline(always)]
    pub fn now(&self) -> u64 {
        if self.tsc_hz.is_some() {
            rdtsc()
        } else {
            mono_ns()
        }
    }

    /// Ticks to ns, rounded.
    #[inline]
    pub fn to_ns(&self, ticks: u64) -> u64 {
        match self.tsc_hz {
            Some(hz) => (ticks as f64 * 1e9 / hz).round() as u64,
            None => ticks,
        }
    }

    /// How the profile's `meta.clock` describes this clock.
    pub fn describe(&self) -> fsprof_core::profile::Clock {
        fsprof_core::profile::Clock {
            source: if self.tsc_hz.is_some() {
                fsprof_core::ClockSource::Tsc
            } else {
                fsprof_core::ClockSource::Monotonic
            },
            tsc_hz: self.tsc_hz,
        }
    }
}

/// What one loop measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples {
    /// Latency of each timed iteration, ns, in order (warm-up excluded).
    pub ns: Vec<u64>,
    /// From the first timed iteration's start to the last one's end, ns.
    pub wall_ns: u64,
}

impl Samples {
    /// The latencies in the shared log2 buckets.
    pub fn histogram(&self, res: Resolution) -> Histogram {
        let layout = BucketLayout::new(res);
        let mut h = Histogram::default();
        for &ns in &self.ns {
            h.add_to(layout.index(ns), 1);
        }
        h
    }

    /// An op of the profile model: `pre = post = n`, total, min, max and
    /// the histogram.
    pub fn op_stats(&self, name: &str, res: Resolution) -> OpStats {
        let n = self.ns.len() as u64;
        OpStats {
            name: name.into(),
            pre: n,
            post: n,
            errors: 0,
            total_ns: self.ns.iter().sum(),
            min_ns: self.ns.iter().min().copied(),
            max_ns: self.ns.iter().max().copied(),
            histogram: self.histogram(res),
            correlations: None,
        }
    }

    /// Statistics of the per-iteration latencies.
    pub fn summary(&self) -> Option<Summary> {
        let xs: Vec<f64> = self.ns.iter().map(|&n| n as f64).collect();
        Summary::of(&xs)
    }

    /// Iterations per second over the timed span.
    pub fn ops_per_sec(&self) -> f64 {
        if self.wall_ns == 0 {
            0.0
        } else {
            self.ns.len() as f64 * 1e9 / self.wall_ns as f64
        }
    }
}

/// Runs and times an operation; see the module doc.
#[derive(Clone, Copy, Debug)]
pub struct TimingLoop {
    clock: Clock,
    warmup: usize,
}

impl TimingLoop {
    pub fn new(clock: Clock) -> TimingLoop {
        TimingLoop { clock, warmup: 0 }
    }

    /// Iterations run first and not timed (their index is passed too:
    /// `0..warmup`, and the timed ones then get `0..n` again).
    pub fn warmup(mut self, iterations: usize) -> TimingLoop {
        self.warmup = iterations;
        self
    }

    /// Runs `op(i)` for `i` in `0..n` and times each call. The first error
    /// ends the loop and is returned: a benchmark whose operation fails
    /// (ENOSPC, EIO) has no result.
    pub fn run<F>(&self, n: usize, mut op: F) -> io::Result<Samples>
    where
        F: FnMut(usize) -> io::Result<()>,
    {
        for i in 0..self.warmup {
            op(i)?;
        }
        let mut ticks: Vec<u64> = Vec::with_capacity(n);
        let clock = self.clock;
        let start = clock.now();
        let mut prev = start;
        for i in 0..n {
            op(i)?;
            let t = clock.now();
            // Capacity was reserved for n entries: this push never
            // reallocates inside the timed region.
            ticks.push(t.wrapping_sub(prev));
            prev = t;
        }
        let wall = prev.wrapping_sub(start);
        Ok(Samples {
            ns: ticks.into_iter().map(|t| clock.to_ns(t)).collect(),
            wall_ns: clock.to_ns(wall),
        })
    }

    /// Times a single call (two clock reads): for operations too slow or
    /// too few to loop over, such as a whole phase.
    pub fn once<T>(&self, op: impl FnOnce() -> io::Result<T>) -> io::Result<(T, u64)> {
        let t0 = self.clock.now();
        let out = op()?;
        let t1 = self.clock.now();
        Ok((out, self.clock.to_ns(t1.wrapping_sub(t0))))
    }
}

/// What the timing loop adds to each operation, measured on this machine
/// with this clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overhead {
    /// Median time of one iteration around an empty operation, ns: the
    /// clock read and the store each timed iteration includes.
    pub per_op_ns: f64,
    /// The smallest non-zero difference seen between two back-to-back
    /// clock reads, ns: no latency below it can be told from zero.
    pub resolution_ns: f64,
}

impl Overhead {
    /// Iterations of the empty loop; ~1 ms of work.
    const ITERATIONS: usize = 20_000;

    pub fn measure(clock: Clock) -> Overhead {
        let lp = TimingLoop::new(clock).warmup(1000);
        let s = lp
            .run(Self::ITERATIONS, |i| {
                black_box(i);
                Ok(())
            })
            .expect("an empty operation cannot fail");
        let mut ns: Vec<f64> = s.ns.iter().map(|&n| n as f64).collect();
        ns.sort_by(f64::total_cmp);
        let per_op_ns = fsprof_core::stats::median(&ns).unwrap_or(0.0);
        let mut resolution = u64::MAX;
        for _ in 0..2000 {
            let a = clock.now();
            let b = clock.now();
            let d = clock.to_ns(b.wrapping_sub(a));
            if d > 0 {
                resolution = resolution.min(d);
            }
        }
        Overhead {
            per_op_ns,
            resolution_ns: if resolution == u64::MAX {
                0.0
            } else {
                resolution as f64
            },
        }
    }

    /// The profile's `meta.overhead` for `calls` timed operations.
    pub fn describe(&self, calls: u64) -> fsprof_core::profile::Overhead {
        fsprof_core::profile::Overhead {
            per_call_ns: self.per_op_ns,
            min_recordable_ns: self.resolution_ns,
            estimated_total_ns: (self.per_op_ns * calls as f64) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_iteration_is_timed_in_order_and_warmup_is_not() {
        let mut calls = Vec::new();
        let s = TimingLoop::new(Clock::best())
            .warmup(3)
            .run(5, |i| {
                calls.push(i);
                Ok(())
            })
            .unwrap();
        assert_eq!(calls, vec![0, 1, 2, 0, 1, 2, 3, 4]);
        assert_eq!(s.ns.len(), 5);
    }

    /// Sleeps are a ground truth the loop did not compute: each iteration
    /// lasts at least the sleep, and the iterations tile the wall time.
    #[test]
    fn sleeps_are_measured_at_least_as_long_and_tile_the_wall_time() {
        for clock in [Clock::best(), Clock::monotonic()] {
            let s = TimingLoop::new(clock)
                .run(4, |i| {
                    std::thread::sleep(Duration::from_millis(2 + i as u64));
                    Ok(())
                })
                .unwrap();
            for (i, &ns) in s.ns.iter().enumerate() {
                let want = (2 + i as u64) * 1_000_000;
                assert!(ns >= want && ns < want + 50_000_000, "{clock:?} {i}: {ns}");
            }
            let sum: u64 = s.ns.iter().sum();
            assert!(sum.abs_diff(s.wall_ns) <= 4, "{sum} vs {}", s.wall_ns);
            let op = s.op_stats("sleep", Resolution::DEFAULT);
            assert_eq!((op.pre, op.post, op.histogram.total()), (4, 4, 4));
            assert_eq!(op.total_ns, sum);
            // Bucket i holds (2^i, 2^(i+1)] ns: computed here with floats.
            for &ns in &s.ns {
                let i = (ns as f64).log2().ceil() as i32 - 1;
                assert!(op.histogram.get(i) >= 1, "{ns} ns not in bucket {i}");
            }
        }
    }

    #[test]
    fn an_error_ends_the_loop_and_is_returned() {
        let mut n = 0;
        let r = TimingLoop::new(Clock::monotonic()).run(10, |i| {
            n += 1;
            if i == 3 {
                Err(io::Error::from_raw_os_error(libc::ENOSPC))
            } else {
                Ok(())
            }
        });
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(n, 4);
    }

    #[test]
    fn overhead_is_positive_and_small_beside_a_syscall() {
        let clock = Clock::best();
        let o = Overhead::measure(clock);
        assert!(o.per_op_ns > 0.0 && o.resolution_ns > 0.0, "{o:?}");
        // A getppid syscall is timed in the same loop: the loop's own cost
        // must be well below it, else no syscall figure could be trusted.
        let s = TimingLoop::new(clock)
            .warmup(100)
            .run(5000, |_| {
                // SAFETY: getppid has no arguments and cannot fail.
                black_box(unsafe { libc::getppid() });
                Ok(())
            })
            .unwrap();
        let sys = s.summary().unwrap().median;
        assert!(o.per_op_ns < sys, "loop {o:?} vs getppid {sys} ns");
        let m = o.describe(10);
        assert_eq!(m.estimated_total_ns, (o.per_op_ns * 10.0) as u64);
    }

    #[test]
    fn once_times_a_single_call() {
        let lp = TimingLoop::new(Clock::best());
        let (v, ns) = lp
            .once(|| {
                std::thread::sleep(Duration::from_millis(3));
                Ok(7)
            })
            .unwrap();
        assert_eq!(v, 7);
        assert!(ns >= 3_000_000, "{ns}");
    }
}
