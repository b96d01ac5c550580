//! The calling thread's own resource usage (`getrusage(RUSAGE_THREAD)`):
//! how often the scheduler took its CPU away and how much CPU it used —
//! what a replay thread reports as preemption and the FUSE daemon's busy
//! poll watches to give way to other tasks.

/// One reading of the calling thread's usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadUsage {
    /// Involuntary context switches so far (`ru_nivcsw`).
    pub involuntary_switches: u64,
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
        cpu_ns: ns(ru.ru_utime).saturating_add(ns(ru.ru_stime)),
    }
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
}
