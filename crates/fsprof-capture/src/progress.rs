//! How a capture tells its caller what is happening. The caller owns the
//! terminal (and anything else that shows progress, such as a live metrics
//! endpoint); the capture only reports events.

use fsprof_core::profile::Layer;

pub trait Progress {
    /// The source is attached and the command (if any) let go; `what`
    /// says what is captured.
    fn started(&mut self, what: &str) {
        let _ = what;
    }

    /// The cumulative counts, `elapsed_ns` after the start: at every
    /// interval or sample period, and once more with the final counts.
    fn sampled(&mut self, elapsed_ns: u64, layers: &[Layer]) {
        let _ = (elapsed_ns, layers);
    }
}

/// Progress of work counted in steps rather than in time: bench runs,
/// discovery phases, replayed commands. The CLI draws it as a bar.
pub trait Steps {
    /// A new phase of `steps` steps begins; `what` names it.
    fn phase(&mut self, what: &str, steps: u64) {
        let _ = (what, steps);
    }

    /// `n` more steps of the phase are done.
    fn advance(&mut self, n: u64) {
        let _ = n;
    }

    /// A line the user must see even with no progress shown (`--quiet`):
    /// something the work is about to do beyond what it measures, such as
    /// emptying the whole machine's page cache. Standard error by default;
    /// a bar prints it above itself.
    fn note(&mut self, line: &str) {
        fsprof_sys::diag!("{line}");
    }
}

/// Reports no progress (notes still go to standard error).
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl Progress for Silent {}

impl Steps for Silent {}
