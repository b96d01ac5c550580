//! The calling thread's own resource usage (`getrusage(RUSAGE_THREAD)`):
//! how often the scheduler took its CPU away and how much CPU it used —
//! what a replay thread reports as preemption and the FUSE daemon's busy
//! poll watches to give way to other tasks; and how long it waited on a
//! run queue for a CPU (`/proc/thread-self/schedstat`), which tells the
//! time a timed loop spent preempted from the time it spent blocked.

/// One reading of the calling thread's usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadUsage {
    /// Involuntary context switches so far (`ru_nivcsw`).
    pub involuntary_switches: u64,
    /// Voluntary context switches so far (`ru_nvcsw`): the thread blocked
    /// (I/O, a lock, a sleep).
    pub voluntary_switches: u64,
    /// User and system CPU time so far.
    pub cpu_ns: u64,
}

/// The calling thread's usage so far (zeros where the kernel refuses).
pub fn this_thread() -> ThreadUsage {
    // SAFETY: an all-zero rusage is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer; RUSAGE_THREAD is Linux's per-thread usage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let ns = |t: libc::timeval| {
        (t.tv_sec.max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_usec.max(0) as u64 * 1000)
    };
    ThreadUsage {
        involuntary_switches: ru.ru_nivcsw.max(0) as u64,
        voluntary_switches: ru.ru_nvcsw.max(0) as u64,
        cpu_ns: ns(ru.ru_utime).saturating_add(ns(ru.ru_stime)),
    }
}

/// The calling thread's CPU time, ns (`CLOCK_THREAD_CPUTIME_ID`; one
/// call, where [`this_thread`] gives µs among much else); None where the
/// clock is refused.
pub fn thread_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (r == 0).then(|| {
        (ts.tv_sec.max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec.max(0) as u64)
    })
}

/// How long the calling thread has waited on a run queue, runnable but
/// not running (the second field of `/proc/thread-self/schedstat`), ns;
/// `None` where the kernel keeps no schedstats.
pub fn runqueue_wait_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work_done_on_this_thread() {
        let before = this_thread();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = this_thread();
        assert!(after.cpu_ns > before.cpu_ns, "{before:?} -> {after:?}");
        assert!(after.involuntary_switches >= before.involuntary_switches);
    }

    /// A sleep is a voluntary switch and no run-queue wait; two threads
    /// spinning on one CPU wait for it in turn (the scheduler's ground
    /// truth: one of them is always runnable and not running).
    #[test]
    fn sleeps_are_voluntary_and_sharing_a_cpu_is_run_queue_wait() {
        let before = this_thread();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(this_thread().voluntary_switches > before.voluntary_switches);
        let Some(w0) = runqueue_wait_ns() else {
            return;
        };
        let pin = || {
            // SAFETY: a zeroed cpu_set_t is empty; CPU 0 is in bounds.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let rival = std::thread::spawn(move || {
            pin();
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        pin();
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(200) {
            std::hint::spin_loop();
        }
        let waited = runqueue_wait_ns().unwrap() - w0;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        rival.join().unwrap();
        assert!(
            waited > 20_000_000,
            "waited {waited} ns of 200 ms beside a spinner"
        );
    }
}
