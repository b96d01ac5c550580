//! The timing loop: run an operation `n` times, time every iteration, and
//! say what the timing itself cost.
//!
//! Stable API (used by the bench suites, `fsprof discover`'s latency-vs-
//! offset scans and `fsprof calibrate`'s workloads):
//!
//! ```no_run
//! use fsprof_measure::timing::{Clock, TimingLoop};
//! let clock = Clock::best();
//! let samples = TimingLoop::new(clock).warmup(100).run(10_000, |i| {
//!     // one operation; `i` picks the offset, file, ...
//!     let _ = i;
//!     Ok(())
//! })?;
//! let op = samples.op_stats("pread", Default::default()); // the shared log2 histogram
//! let overhead = fsprof_measure::timing::Overhead::measure(clock); // what the loop adds per op
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! How it stays out of the measurement: the clock is read **once per
//! iteration** (the end of one operation is the start of the next), raw
//! tick deltas go into a vector allocated *and written* before the loop
//! (so no page fault of the sample buffer lands in a timed iteration), and
//! converting ticks to ns and filing them into histogram buckets happens
//! after the loop. Each sample therefore includes one clock read and one
//! store; that cost is measured by timing an empty operation ([`Overhead`])
//! and is reported, not silently subtracted (a subtraction below the
//! clock's resolution would invent precision). The clock is the cycle
//! counter when the CPU guarantees it ticks at a constant rate, else
//! CLOCK_MONOTONIC. `bench/bench_harness.sh` checks the loop against a C
//! loop doing the same calls (docs/benchmarks.md has the figures).
//!
//! The loop also reads the thread's CPU-time clock before and after (not
//! per iteration): [`Samples::on_cpu`] says which share of the wall time
//! the thread was actually running. On a loaded machine a cached-read loop
//! spends most of its wall time preempted, and per-op medians stay honest
//! while wall-time rates do not.

use std::hint::black_box;
use std::io;
use std::sync::OnceLock;

use fsprof_core::buckets::{BucketLayout, Resolution};
use fsprof_core::histogram::{Histogram, OpStats};
use fsprof_core::stats::Summary;
use fsprof_sys::clock::{mono_ns, rdtsc, tsc_is_invariant, TscRate};
use fsprof_sys::usage::{runqueue_wait_ns, this_thread, thread_cpu_ns};

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

    /// [`Clock::best`], chosen and calibrated once per process: every
    /// measurement of one run (a discovery's methods, its profile's
    /// `meta.clock`) then reads the same clock at the same rate.
    pub fn process() -> Clock {
        static CLOCK: OnceLock<Clock> = OnceLock::new();
        *CLOCK.get_or_init(Clock::best)
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
    /// CPU time the calling thread used over the same span, ns (user +
    /// system; 0 where the clock is missing). `wall_ns - cpu_ns` was spent
    /// waiting: blocked in I/O or preempted.
    pub cpu_ns: u64,
    /// Of the wait, the time the thread was runnable but waited on a run
    /// queue for a CPU (other tasks ran), ns; `None` without schedstats.
    /// The rest of the wait it was blocked (I/O, a lock).
    pub runqueue_ns: Option<u64>,
    /// Times the thread blocked (voluntary switches) and was preempted
    /// (involuntary) over the span.
    pub voluntary: u64,
    pub involuntary: u64,
    /// With [`TimingLoop::watch_others`]: the commands of other processes
    /// that used the most CPU over the span, with their CPU time, ns, most
    /// first (at most [`OTHERS`]), then every kernel thread that used any
    /// (`[jbd2/vda1-8]`, `[kdamond.0]`: the ones whose work can stall a
    /// file-system call).
    pub others: Vec<(String, u64)>,
}

/// How many of the other processes' commands [`Samples::others`] names.
pub const OTHERS: usize = 3;

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

    /// Share of the wall time the thread was on a CPU, in [0, 1]; `None`
    /// for an empty span or a missing CPU clock.
    pub fn on_cpu(&self) -> Option<f64> {
        (self.wall_ns > 0 && self.cpu_ns > 0)
            .then(|| (self.cpu_ns as f64 / self.wall_ns as f64).min(1.0))
    }

    /// Share of the wall time the thread waited for a CPU, in [0, 1].
    pub fn runqueue(&self) -> Option<f64> {
        let q = self.runqueue_ns?;
        (self.wall_ns > 0).then(|| (q as f64 / self.wall_ns as f64).min(1.0))
    }

    /// Share of the wall time the thread was blocked (neither on a CPU nor
    /// waiting for one), in [0, 1].
    pub fn blocked(&self) -> Option<f64> {
        let on = self.on_cpu()?;
        Some((1.0 - on - self.runqueue()?).max(0.0))
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
    watch_others: bool,
}

impl TimingLoop {
    pub fn new(clock: Clock) -> TimingLoop {
        TimingLoop {
            clock,
            warmup: 0,
            watch_others: false,
        }
    }

    /// Also note which other processes used the CPUs during the loop
    /// ([`Samples::others`]): a reading of every process's CPU time before
    /// and after (a few ms each, outside the timed region), so that a loop
    /// that waited for a CPU can say who had it.
    pub fn watch_others(mut self, on: bool) -> TimingLoop {
        self.watch_others = on;
        self
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
        // Written now, not merely reserved: a fresh allocation's pages are
        // faulted in on first store, and those faults would land in the
        // timed iterations (one every 512 samples).
        let mut ticks: Vec<u64> = vec![1; n];
        let clock = self.clock;
        let others0 = self
            .watch_others
            .then(fsprof_sys::host::cpu_time_by_process);
        let (use0, q0) = (this_thread(), runqueue_wait_ns());
        let cpu0 = thread_cpu_ns();
        // The clock is chosen once, not tested per iteration.
        let wall = if clock.tsc_hz.is_some() {
            timed_loop(&mut ticks, &mut op, rdtsc)?
        } else {
            timed_loop(&mut ticks, &mut op, mono_ns)?
        };
        let cpu1 = thread_cpu_ns();
        let (use1, q1) = (this_thread(), runqueue_wait_ns());
        let others = others0.map_or_else(Vec::new, |before| busiest_since(&before));
        Ok(Samples {
            ns: ticks.into_iter().map(|t| clock.to_ns(t)).collect(),
            wall_ns: clock.to_ns(wall),
            cpu_ns: match (cpu0, cpu1) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => 0,
            },
            runqueue_ns: q0.zip(q1).map(|(a, b)| b.saturating_sub(a)),
            voluntary: use1
                .voluntary_switches
                .saturating_sub(use0.voluntary_switches),
            involuntary: use1
                .involuntary_switches
                .saturating_sub(use0.involuntary_switches),
            others,
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

/// The timed region and nothing else: per iteration the operation, one
/// clock read and one store into `ticks` (already written, so no page
/// fault). Returns the span in ticks. Never inlined so that profilers
/// (`valgrind --tool=callgrind --toggle-collect='*timed_loop*'`, as
/// `bench/bench_harness.sh` does) can count exactly what it executes.
#[inline(never)]
fn timed_loop<F, N>(ticks: &mut [u64], op: &mut F, now: N) -> io::Result<u64>
where
    F: FnMut(usize) -> io::Result<()>,
    N: Fn() -> u64,
{
    let start = now();
    let mut prev = start;
    for (i, slot) in ticks.iter_mut().enumerate() {
        op(i)?;
        let t = now();
        *slot = t.wrapping_sub(prev);
        prev = t;
    }
    Ok(prev.wrapping_sub(start))
}

/// The commands whose CPU time grew most since `before` (by pid, summed
/// by the command's name now), most first.
fn busiest_since(before: &std::collections::BTreeMap<u32, (String, u64)>) -> Vec<(String, u64)> {
    let mut by_comm: std::collections::BTreeMap<String, u64> = Default::default();
    for (pid, (comm, t)) in fsprof_sys::host::cpu_time_by_process() {
        let was = before.get(&pid).map_or(0, |(_, w)| *w);
        *by_comm.entry(comm).or_insert(0) += t.saturating_sub(was);
    }
    let mut grew: Vec<(String, u64)> = by_comm.into_iter().filter(|(_, d)| *d > 0).collect();
    grew.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut kernel: Vec<(String, u64)> = grew
        .iter()
        .skip(OTHERS)
        .filter(|(c, _)| c.starts_with('['))
        .cloned()
        .collect();
    grew.truncate(OTHERS);
    grew.append(&mut kernel);
    grew
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

    /// [`Overhead::measure`] of [`Clock::process`], measured once per
    /// process.
    pub fn process() -> Overhead {
        static OVERHEAD: OnceLock<Overhead> = OnceLock::new();
        *OVERHEAD.get_or_init(|| Overhead::measure(Clock::process()))
    }

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
            sampled: None,
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

    /// The thread's CPU time over the loop against getrusage(RUSAGE_THREAD),
    /// a different interface the loop does not use: an op that burns 4 ms
    /// of CPU is on the CPU, an op that sleeps 4 ms is not.
    #[test]
    fn cpu_time_is_the_threads_own_and_a_sleep_is_off_cpu() {
        fn thread_rusage_ns() -> u64 {
            // SAFETY: rusage is plain data the call fills in.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: a valid out-pointer.
            assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) }, 0);
            let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
            tv(ru.ru_utime) + tv(ru.ru_stime)
        }
        let burn = 4_000_000;
        let before = thread_rusage_ns();
        let s = TimingLoop::new(Clock::best())
            .run(3, |_| {
                let t0 = thread_rusage_ns();
                while thread_rusage_ns() - t0 < burn {
                    black_box(0);
                }
                Ok(())
            })
            .unwrap();
        let used = thread_rusage_ns() - before;
        // getrusage has µs granularity; the loop's clock ns.
        assert!(s.cpu_ns >= 3 * burn - 3_000, "{} < {}", s.cpu_ns, 3 * burn);
        assert!(s.cpu_ns <= used + 1_000, "{} > {used}", s.cpu_ns);
        // Two clocks (the thread's CPU clock, read around the loop, and the
        // TSC or monotonic clock inside it): at idle, with nothing else to
        // run, CPU time equals wall time up to the reads that enclose the
        // loop and the clocks' rate difference (4 us over 20 ms seen at
        // idle), so the bound allows 0.1% plus 50 us, not 1 us.
        assert!(s.cpu_ns <= s.wall_ns + s.wall_ns / 1000 + 50_000, "{s:?}");
        assert!(s.on_cpu().unwrap() > 0.0 && s.on_cpu().unwrap() <= 1.0);
        let s = TimingLoop::new(Clock::best())
            .run(3, |_| {
                std::thread::sleep(Duration::from_millis(4));
                Ok(())
            })
            .unwrap();
        assert!(s.wall_ns >= 12_000_000, "{s:?}");
        assert!(s.on_cpu().unwrap() < 0.5, "a sleep counted as CPU: {s:?}");
        assert_eq!(Samples::default().on_cpu(), None);
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
