//! The clocks fsprof times with. CLOCK_MONOTONIC is the reference every
//! layer shares (the kernel's `ktime_get_ns` is the same clock); the cycle
//! counter (TSC) costs a few ns to read, a third of a vDSO clock_gettime,
//! which matters when the budget per intercepted call is ~25 ns. It is
//! trusted only where the CPU guarantees a constant, non-stop rate, and its
//! rate is measured against CLOCK_MONOTONIC ([`TscRate`]).

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// CLOCK_MONOTONIC in ns.
#[inline]
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall-clock time in ns since the Unix epoch (0 before 1970).
pub fn wall_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The cycle counter; CLOCK_MONOTONIC ns where there is none. Inlined:
/// a call and return would add to every timed iteration of a loop in
/// another crate (fsprof-bench's) what the read itself costs.
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no memory effects and exists on every x86-64 CPU.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The cycle counter; CLOCK_MONOTONIC ns where there is none.
#[cfg(not(target_arch = "x86_64"))]
pub fn rdtsc() -> u64 {
    mono_ns()
}

/// Whether the CPU promises a TSC that ticks at a constant rate and does
/// not stop in idle states (`constant_tsc` and `nonstop_tsc`).
pub fn tsc_is_invariant() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// A (tsc, monotonic ns) pair read as close together as possible: the
/// tightest of several tries bracketed by two clock reads.
pub fn tsc_mono_pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..16 {
        let m0 = mono_ns();
        let t = rdtsc();
        let m1 = mono_ns();
        if m1 - m0 < best.0 {
            best = (m1 - m0, t, m0 + (m1 - m0) / 2);
        }
    }
    (best.1, best.2)
}

/// This boot's id, to key facts that hold until the next reboot.
pub fn boot_id() -> Option<String> {
    // Read once per process: a run asks for it three times (TSC rate,
    // self-cost, saving the rate), each an open-read-close of a proc file.
    static ID: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let id = crate::small_file(Path::new("/proc/sys/kernel/random/boot_id"))?;
        let id = id.trim();
        (!id.is_empty() && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
            .then(|| id.to_string())
    })
    .clone()
}

/// Below this span a re-measurement cannot improve on the start-up
/// calibration (two pair reads are each uncertain by ~100 ns).
const MIN_REFINE_NS: u64 = 50_000_000;

/// A refined rate this close to the one it refines is not written back:
/// 1e-4 is 100 ns in a 1 ms call, below the log2 buckets' resolution,
/// and above what two pair reads (~100 ns each) over MIN_REFINE_NS move.
const REWRITE_DRIFT: f64 = 1e-4;

/// How long the first calibration of a boot watches the two clocks.
const CALIBRATION: Duration = Duration::from_millis(10);

/// The TSC rate, measured against CLOCK_MONOTONIC.
#[derive(Clone, Copy, Debug)]
pub struct TscRate {
    pub hz: f64,
    /// The calibration's reference pair, to refine the rate later.
    start: (u64, u64),
    /// Measured in this run (not taken from the cache): worth keeping.
    /// Rewriting an unchanged rate on every run cost a short run an
    /// open-truncate-write of the cache file (seen taking 25 ms on a busy
    /// machine).
    measured: bool,
}

impl TscRate {
    /// Measures the rate, or takes the one kept in `cache` (a directory)
    /// for this boot, so that only the first run of a boot waits ~10 ms.
    pub fn calibrate(cache: Option<&Path>) -> TscRate {
        if let Some(kept) = cache.and_then(TscRate::kept) {
            return kept;
        }
        let start = tsc_mono_pair();
        std::thread::sleep(CALIBRATION);
        TscRate {
            hz: rate(start, tsc_mono_pair()),
            start,
            measured: true,
        }
    }

    /// Re-measures the rate since the calibration; returns the relative
    /// change (0 when too little time has passed to say).
    pub fn refine(&mut self) -> f64 {
        let b = tsc_mono_pair();
        if b.1 <= self.start.1 + MIN_REFINE_NS {
            return 0.0;
        }
        let old = self.hz;
        self.hz = rate(self.start, b);
        let drift = (self.hz - old) / old;
        // Worth writing back only when it moved the kept rate by more than
        // a calibration's own uncertainty: otherwise every run longer than
        // MIN_REFINE_NS rewrote the cache file (an ext4 write and journal
        // commit per `fsprof run` of a 60 ms grep).
        self.measured |= drift.abs() > REWRITE_DRIFT;
        drift
    }

    /// CLOCK_MONOTONIC ns at TSC reading `ticks`, from the reference
    /// pair at this rate. A reading from before the pair (a hostile
    /// counter file's, or a CPU whose counter lags) is extrapolated back,
    /// never below 0.
    pub fn mono_ns(&self, ticks: u64) -> u64 {
        let (t0, m0) = self.start;
        let ns = |d: u64| (d as f64 * 1e9 / self.hz) as u64;
        if ticks >= t0 {
            m0.saturating_add(ns(ticks - t0))
        } else {
            m0.saturating_sub(ns(t0 - ticks))
        }
    }

    /// Keeps the rate for later runs of this boot, when this run measured
    /// it (a rate read from the cache and not refined is already there).
    pub fn save(&self, cache: &Path) {
        if !self.measured {
            return;
        }
        if let Some(boot) = boot_id() {
            let _ = std::fs::write(cache.join(format!("tsc-{boot}")), format!("{}\n", self.hz));
        }
    }

    /// The rate kept in `cache` for this boot, if there is one. Only a
    /// TSC found invariant is ever calibrated and kept, and CPU flags do
    /// not change within a boot: a kept rate also answers
    /// [`tsc_is_invariant`] without reading `/proc/cpuinfo` (~50 µs of
    /// every `fsprof run` on a VM).
    pub fn kept(cache: &Path) -> Option<TscRate> {
        let hz = read_cached_rate(cache)?;
        Some(TscRate {
            hz,
            start: tsc_mono_pair(),
            measured: false,
        })
    }

    /// Forgets a kept rate that turned out wrong.
    pub fn forget(cache: &Path) {
        if let Some(boot) = boot_id() {
            let _ = std::fs::remove_file(cache.join(format!("tsc-{boot}")));
        }
    }
}

fn rate(a: (u64, u64), b: (u64, u64)) -> f64 {
    (b.0 - a.0) as f64 * 1e9 / (b.1 - a.1) as f64
}

fn read_cached_rate(cache: &Path) -> Option<f64> {
    let text = crate::small_file(&cache.join(format!("tsc-{}", boot_id()?)))?;
    let hz: f64 = text.trim().parse().ok()?;
    (1e6..1e11).contains(&hz).then_some(hz)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TSC reading becomes CLOCK_MONOTONIC ns from the reference pair
    /// at the rate, before the pair as after it, saturating at both ends.
    #[test]
    fn tsc_readings_convert_from_the_reference_pair() {
        let r = TscRate {
            hz: 2e9,
            start: (1_000_000, 5_000),
            measured: false,
        };
        assert_eq!(r.mono_ns(1_000_000), 5_000);
        assert_eq!(r.mono_ns(1_000_000 + 2_000_000_000), 1_000_005_000);
        assert_eq!(r.mono_ns(1_000_000 - 2_000), 4_000);
        assert_eq!(r.mono_ns(0), 0);
        assert!(r.mono_ns(u64::MAX) > u64::MAX / 2 - (1 << 20));
    }

    #[test]
    fn monotonic_clock_advances_with_sleep() {
        let a = mono_ns();
        std::thread::sleep(Duration::from_millis(20));
        let b = mono_ns();
        assert!(b - a >= 20_000_000, "{a} -> {b}");
        assert!(wall_unix_ns() > 1_600_000_000_000_000_000);
    }

    /// The cycle counter's rate: only where the CPU has an invariant TSC
    /// (fsprof times with CLOCK_MONOTONIC elsewhere, and these cannot apply).
    mod needs_invariant_tsc {
        use super::*;

        fn need_tsc() {
            fsprof_testkit::need_machine(
                fsprof_testkit::Machine::InvariantTsc,
                tsc_is_invariant(),
                "",
            );
        }

        #[test]
        #[ignore = "needs an invariant TSC"]
        fn tsc_rate_is_kept_per_boot_and_forgotten() {
            need_tsc();
            let dir = tempfile::tempdir().unwrap();
            let first = TscRate::calibrate(Some(dir.path()));
            assert!((1e8..1e11).contains(&first.hz), "{}", first.hz);
            first.save(dir.path());
            // A kept rate is taken as it is, without a new measurement.
            let fake = TscRate { hz: 1.5e9, ..first };
            fake.save(dir.path());
            let kept = TscRate::calibrate(Some(dir.path()));
            assert_eq!(kept.hz, 1.5e9);
            // A rate taken from the cache (and not refined) is not written
            // back: a short run does no file write for it.
            let file = dir.path().join(format!("tsc-{}", boot_id().unwrap()));
            std::fs::write(&file, "1600000000\n").unwrap();
            kept.save(dir.path());
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "1600000000\n");
            TscRate::forget(dir.path());
            assert_ne!(TscRate::calibrate(Some(dir.path())).hz, 1.5e9);
        }

        /// A run long enough to refine the rate writes it back only when the
        /// refinement moved it: a kept rate off by 10% is replaced, a right
        /// one is left as it is (no file write per run).
        #[test]
        #[ignore = "needs an invariant TSC"]
        fn a_refined_rate_is_written_back_only_when_it_moved() {
            need_tsc();
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join(format!("tsc-{}", boot_id().unwrap()));
            // Over 200 ms, two pair reads (even 1 µs off under load) leave the
            // rate within 1e-5, well inside REWRITE_DRIFT.
            let a = tsc_mono_pair();
            std::thread::sleep(Duration::from_millis(200));
            let real = rate(a, tsc_mono_pair());
            for (kept, rewritten) in [(real * 1.1, true), (real, false)] {
                std::fs::write(&file, format!("{kept}\n")).unwrap();
                let mut r = TscRate::calibrate(Some(dir.path()));
                std::thread::sleep(Duration::from_millis(120));
                let drift = r.refine();
                r.save(dir.path());
                let now: f64 = std::fs::read_to_string(&file)
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap();
                assert_eq!(
                    now != kept,
                    rewritten,
                    "kept {kept}, drift {drift}, file {now}"
                );
            }
        }

        #[test]
        #[ignore = "needs an invariant TSC"]
        fn refining_a_wrong_rate_reports_the_drift() {
            need_tsc();
            let real = TscRate::calibrate(None);
            let mut wrong = TscRate {
                hz: real.hz * 1.1,
                ..real
            };
            std::thread::sleep(Duration::from_millis(60));
            let drift = wrong.refine();
            assert!((drift + 0.09).abs() < 0.02, "drift {drift}");
            assert!((wrong.hz - real.hz).abs() / real.hz < 0.01);
        }
    }
}
