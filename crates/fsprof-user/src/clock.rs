//! The clock the shim times calls with. The cycle counter costs a few ns to
//! read, a third of a vDSO clock_gettime, which matters when the budget per
//! intercepted call is ~25 ns; it is used only where the CPU guarantees a
//! constant, non-stop rate, and converted to ns with a factor calibrated
//! against CLOCK_MONOTONIC.

use std::path::Path;

use fsprof_core::profile::{Clock, ClockSource};
use fsprof_shim::abi;
use fsprof_sys::clock::{tsc_is_invariant, TscRate};

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
    /// The calibration, to refine the rate at the end.
    rate: Option<TscRate>,
}

const SHIFT: u32 = abi::TICK_SHIFT;

/// A clock that cannot time calls on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    #[error("--clock tsc: this CPU does not report an invariant TSC (constant_tsc and nonstop_tsc); use --clock monotonic")]
    NoInvariantTsc,
}

/// A TSC rate that changed by more than this over a run is reported and
/// not kept for later runs.
pub const MAX_DRIFT: f64 = 0.005;

impl ClockParams {
    pub fn monotonic() -> Self {
        ClockParams {
            kind: abi::CLOCK_MONOTONIC,
            mult: 1 << SHIFT,
            shift: SHIFT,
            tsc_hz: None,
            rate: None,
        }
    }

    /// `cache` is a directory where the TSC rate measured for this boot is
    /// kept, so that only the first run of a boot waits for a calibration.
    pub fn choose(choice: ClockChoice, cache: Option<&Path>) -> Result<Self, ClockError> {
        // A rate kept for this boot says the TSC passed the check below.
        if choice != ClockChoice::Monotonic {
            if let Some(kept) = cache.and_then(TscRate::kept) {
                return Ok(Self::tsc(kept));
            }
        }
        match choice {
            ClockChoice::Monotonic => Ok(Self::monotonic()),
            ClockChoice::Tsc => {
                if !tsc_is_invariant() {
                    return Err(ClockError::NoInvariantTsc);
                }
                Ok(Self::tsc(TscRate::calibrate(cache)))
            }
            ClockChoice::Auto if tsc_is_invariant() => Ok(Self::tsc(TscRate::calibrate(cache))),
            ClockChoice::Auto => Ok(Self::monotonic()),
        }
    }

    fn tsc(rate: TscRate) -> Self {
        ClockParams {
            kind: abi::CLOCK_TSC,
            mult: mult_for(rate.hz),
            shift: SHIFT,
            tsc_hz: Some(rate.hz),
            rate: Some(rate),
        }
    }

    /// Stores the (refined) rate for later runs of this boot.
    pub fn save_rate(&self, cache: &Path) {
        if let Some(r) = &self.rate {
            r.save(cache);
        }
    }

    /// Forgets a stored rate that turned out wrong.
    pub fn forget_rate(cache: &Path) {
        TscRate::forget(cache);
    }

    /// Re-measures the TSC rate over the whole run; returns the relative
    /// difference to the rate the shim used (0 for the monotonic clock).
    pub fn refine(&mut self) -> f64 {
        let Some(r) = &mut self.rate else {
            return 0.0;
        };
        let drift = r.refine();
        self.tsc_hz = Some(r.hz);
        drift
    }

    /// CLOCK_MONOTONIC ns at a reading `ticks` of the shim's clock: under
    /// the TSC, from the calibration's reference pair at the rate refined
    /// over the run (so converted at the run's end); under the monotonic
    /// clock, the reading itself.
    pub fn mono_ns(&self, ticks: u64) -> u64 {
        match &self.rate {
            Some(r) if self.kind == abi::CLOCK_TSC => r.mono_ns(ticks),
            _ => ticks,
        }
    }

    pub fn describe(&self) -> Clock {
        Clock {
            source: if self.kind == abi::CLOCK_TSC {
                ClockSource::Tsc
            } else {
                ClockSource::Monotonic
            },
            tsc_hz: self.tsc_hz,
        }
    }
}

fn mult_for(hz: f64) -> u64 {
    ((1e9 / hz) * (1u64 << SHIFT) as f64).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_sys::clock::{mono_ns, rdtsc};
    use std::time::Duration;

    /// A rate kept for this boot is taken as it is (no /proc/cpuinfo, no
    /// calibration) unless the monotonic clock is asked for.
    #[test]
    fn a_rate_kept_for_this_boot_is_used_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let boot = fsprof_sys::clock::boot_id().expect("a boot id");
        std::fs::write(dir.path().join(format!("tsc-{boot}")), "1234567890\n").unwrap();
        for choice in [ClockChoice::Auto, ClockChoice::Tsc] {
            let p = ClockParams::choose(choice, Some(dir.path())).unwrap();
            assert_eq!((p.kind, p.tsc_hz), (abi::CLOCK_TSC, Some(1234567890.0)));
            assert_eq!(p.mult, mult_for(1234567890.0));
        }
        let p = ClockParams::choose(ClockChoice::Monotonic, Some(dir.path())).unwrap();
        assert_eq!((p.kind, p.tsc_hz), (abi::CLOCK_MONOTONIC, None));
    }

    /// The calibration itself: only where the CPU has an invariant TSC
    /// (elsewhere fsprof times with CLOCK_MONOTONIC and this cannot apply).
    mod needs_invariant_tsc {
        use super::*;

        #[test]
        #[ignore = "needs an invariant TSC"]
        fn tsc_calibration_converts_to_ns() {
            fsprof_testkit::need_machine(
                fsprof_testkit::Machine::InvariantTsc,
                fsprof_sys::clock::tsc_is_invariant(),
                "",
            );
            let p = ClockParams::choose(ClockChoice::Tsc, None).unwrap();
            assert_eq!(p.kind, abi::CLOCK_TSC);
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
}
