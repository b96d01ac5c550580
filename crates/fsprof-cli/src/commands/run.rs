//! `fsprof run -- CMD`: a capture with the preload shim (fsprof-user)
//! through fsprof-capture's loop, optionally serving live metrics, then the
//! report after it.

use std::sync::{Arc, Mutex};

use anyhow::Result;
use fsprof_capture::{meta, Capture, Plan, Progress};
use fsprof_core::profile::Layer;
use fsprof_core::{Profile, Resolution};
use fsprof_export::serve::{self, MetricsServer};
use fsprof_report::after_capture;
use fsprof_user::{ClockChoice, UserOptions, UserSource};

use super::capture::{exit_status, failed, output, save_and_tell};
use crate::cli::{ClockArg, RunArgs};

pub fn run(a: RunArgs) -> Result<i32> {
    // Refuse an existing -o before running anything: the run may be long.
    let out = output(&a.out);
    out.check()?;
    let resolution = Resolution::new(a.resolution).map_err(anyhow::Error::msg)?;
    // Before the metrics server starts its threads (see Capture::new).
    let capture = Capture::new(Plan {
        tool: "run".into(),
        command: a.command.clone(),
        resolution,
        interval_ns: a.interval,
        duration_ns: None,
        sample_ns: a.serve_metrics.as_ref().map(|_| LIVE_PERIOD_NS),
    });
    let mut live = LiveMetrics::default();
    let server = match &a.serve_metrics {
        Some(addr) => Some(serve_metrics(addr, &a, resolution, &mut live)?),
        None => None,
    };
    let mut source = UserSource::new(&UserOptions {
        resolution,
        clock: match a.clock {
            ClockArg::Auto => ClockChoice::Auto,
            ClockArg::Tsc => ClockChoice::Tsc,
            ClockArg::Monotonic => ClockChoice::Monotonic,
        },
    })?;
    let outcome = match capture.run(&mut source, &mut live) {
        Ok(o) => o,
        Err(e) => return failed(e),
    };
    drop(server);
    let cmd = a.command[0].to_string_lossy();
    let saved = save_and_tell(&outcome, &out, "run", Some(&cmd));
    if outcome.profile.processes.is_empty() && !outcome.profile.meta.unprofiled.is_empty() {
        fsprof_sys::diag!(
            "fsprof: no process of `{cmd}` could be profiled; the notes above say why"
        );
    } else if outcome.profile.processes.is_empty() {
        fsprof_sys::diag!(
            "fsprof: no process of `{cmd}` loaded the preload shim, so no call was seen: statically linked programs \
             (many Go binaries) and setuid ones ignore LD_PRELOAD; profile them at the syscall layer (`fsprof kernel -- {cmd}`)"
        );
    } else if outcome.profile.total_calls() == 0 {
        fsprof_sys::diag!(
            "fsprof: `{cmd}` made no file-system call through libc; calls made inside libc or by io_uring are only \
             visible at the syscall layer (`fsprof kernel -- {cmd}`)"
        );
    } else if !a.quiet {
        fsprof_sys::diag_nonl!("{}", after_capture(&outcome.profile, a.top)?);
    }
    Ok(exit_status(&outcome, &saved))
}

/// Live metrics sampled every --interval, or every second without one.
const LIVE_PERIOD_NS: u64 = 1_000_000_000;

/// Keeps the counts of the last sample for the metrics endpoint.
#[derive(Default)]
struct LiveMetrics {
    layers: Option<Arc<Mutex<Vec<Layer>>>>,
}

impl Progress for LiveMetrics {
    fn sampled(&mut self, _elapsed_ns: u64, layers: &[Layer]) {
        if let Some(live) = &self.layers {
            *live.lock().unwrap_or_else(|e| e.into_inner()) = layers.to_vec();
        }
    }
}

/// Starts the endpoint before the command, so a bad or busy address fails
/// the run up front rather than after a long capture.
fn serve_metrics(
    addr: &str,
    a: &RunArgs,
    resolution: Resolution,
    live: &mut LiveMetrics,
) -> Result<MetricsServer> {
    let addrs = serve::resolve(addr, a.metrics_allow_remote)?;
    let template = Profile::new(meta::describe("run", &a.command, resolution));
    let layers: Arc<Mutex<Vec<Layer>>> = Default::default();
    live.layers = Some(layers.clone());
    let source: serve::Source = Arc::new(move || {
        let mut p = template.clone();
        p.layers = layers.lock().unwrap_or_else(|e| e.into_inner()).clone();
        p
    });
    let render = serve::profile_render(source, Default::default());
    let server = MetricsServer::start(&addrs, render)?;
    fsprof_sys::diag!(
        "fsprof: serving live metrics on http://{}/metrics",
        server.local_addr()
    );
    Ok(server)
}
