//! The clock the shim times calls with. The cycle counter costs a few ns to
//! read, a third of a vDSO clock_gettime, which matters when the budget per
//! intercepted call is ~25 ns; it is used only where the CPU guarantees a
//! constant, non-stop rate, and converted to ns with a factor calibrated
//! against CLOCK_MONOTONIC.

use std::path::Path;
use std::time::Duration;

use fsprof_core::profile::Clock;
use fsprof_shim::abi;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockChoice {
    Auto,
    Tsc,
    Monotonic,
}

/// Parameters handed to the shim: `ns = ticks * mult >> shift`.
#[derive(Clone, Copy, Debug)]
pub struct ClockParams {
    pub kind: u32,
    pub mult: u64,
    pub shift: u32,
    pub tsc_hz: Option<f64>,
    /// The calibration's reference point, to refine the rate at the end.
    start: Option<(u64, u64)>,
}

const SHIFT: u32 = 32;

impl ClockParams {
    pub fn monotonic() -> Self {
        ClockParams {
            kind: abi::CLOCK_MONOTONIC,
            mult: 1 << SHIFT,
            shift: SHIFT,
            tsc_hz: None,
            start: None,
        }
    }

    /// `cache` is a directory where the TSC rate measured for this boot is
    /// kept, so that only the first run of a boot waits for a calibration.
    pub fn choose(choice: ClockChoice, cache: Option<&Path>) -> Result<Self, String> {
        match choice {
            ClockChoice::Monotonic => Ok(Self::monotonic()),
            ClockChoice::Tsc => {
                if !tsc_is_invariant() {
                    return Err("--clock tsc: this CPU does not report an invariant TSC (constant_tsc and nonstop_tsc); use --clock monotonic".into());
                }
                Ok(Self::calibrate_tsc(cache))
            }
            ClockChoice::Auto if tsc_is_invariant() => Ok(Self::calibrate_tsc(cache)),
            ClockChoice::Auto => Ok(Self::monotonic()),
        }
    }

    fn calibrate_tsc(cache: Option<&Path>) -> Self {
        let a = tsc_mono_pair();
        let hz = match cache.and_then(read_cached_rate) {
            Some(hz) => hz,
            None => {
                std::thread::sleep(Duration::from_millis(10));
                let b = tsc_mono_pair();
                (b.0 - a.0) as f64 * 1e9 / (b.1 - a.1) as f64
            }
        };
        ClockParams {
            kind: abi::CLOCK_TSC,
            mult: mult_for(hz),
            shift: SHIFT,
            tsc_hz: Some(hz),
            start: Some(a),
        }
    }

    /// Stores the (refined) rate for later runs of this boot.
    pub fn save_rate(&self, cache: &Path) {
        if let (Some(hz), Some(boot)) = (self.tsc_hz, boot_id()) {
            let _ = std::fs::write(cache.join(format!("tsc-{boot}")), format!("{hz}\n"));
        }
    }

    /// Forgets a stored rate that turned out wrong.
    pub fn forget_rate(cache: &Path) {
        if let Some(boot) = boot_id() {
            let _ = std::fs::remove_file(cache.join(format!("tsc-{boot}")));
        }
    }

    /// Re-measures the TSC rate over the whole run; returns the relative
    /// difference to the rate the shim used (0 for the monotonic clock).
    pub fn refine(&mut self) -> f64 {
        let (Some(a), Some(old)) = (self.start, self.tsc_hz) else {
            return 0.0;
        };
        let b = tsc_mono_pair();
        if b.1 <= a.1 + 50_000_000 {
            return 0.0; // too short to improve on the start-up calibration
        }
        let hz = (b.0 - a.0) as f64 * 1e9 / (b.1 - a.1) as f64;
        self.tsc_hz = Some(hz);
        (hz - old) / old
    }

    pub fn describe(&self) -> Clock {
        Clock {
            source: if self.kind == abi::CLOCK_TSC {
                "tsc"
            } else {
                "monotonic"
            }
            .into(),
            tsc_hz: self.tsc_hz,
        }
    }
}

fn mult_for(hz: f64) -> u64 {
    ((1e9 / hz) * (1u64 << SHIFT) as f64).round() as u64
}

pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(target_arch = "x86_64")]
fn rdtsc() -> u64 {
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtsc() -> u64 {
    mono_ns()
}

/// A (tsc, monotonic ns) pair read as close together as possible: the
/// tightest of several tries bracketed by two clock reads.
fn tsc_mono_pair() -> (u64, u64) {
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

pub(crate) fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty() && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
        .then(|| id.to_string())
}

fn read_cached_rate(cache: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(cache.join(format!("tsc-{}", boot_id()?))).ok()?;
    let hz: f64 = text.trim().parse().ok()?;
    (1e6..1e11).contains(&hz).then_some(hz)
}

fn tsc_is_invariant() -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_calibration_converts_to_ns() {
        let p = ClockParams::choose(ClockChoice::Auto, None).unwrap();
        if p.kind != abi::CLOCK_TSC {
            // Not a failure: this CPU has no invariant TSC, so fsprof uses
            // CLOCK_MONOTONIC and there is no calibration to check.
            eprintln!("SKIPPED LOUDLY: no invariant TSC on this CPU; the TSC calibration is not exercised");
            return;
        }
        let t0 = rdtsc();
        let m0 = mono_ns();
        std::thread::sleep(Duration::from_millis(30));
        let t1 = rdtsc();
        let m1 = mono_ns();
        let ns = (((t1 - t0) as u128 * p.mult as u128) >> p.shift) as f64;
        let real = (m1 - m0) as f64;
        assert!(
            (ns - real).abs() / real < 0.01,
            "tsc says {ns} ns, clock says {real} ns"
        );
    }
}
