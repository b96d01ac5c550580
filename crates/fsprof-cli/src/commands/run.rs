//! `fsprof run -- CMD`: a capture with the preload shim (fsprof-user)
//! through fsprof-capture's loop, optionally serving live metrics, then the
//! report after it.

use std::sync::{Arc, Mutex};

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use fsprof_capture::{meta, Capture, Made, Plan, Progress};
use fsprof_core::profile::Layer;
use fsprof_core::unnamed::Unnamed;
use fsprof_core::{Profile, Resolution};
use fsprof_export::serve::{self, MetricsServer};
use fsprof_report::after_capture;
use fsprof_user::{UserOptions, UserSource};

use super::capture::{exit_status, failed, output, save_and_tell};
use crate::args::{CaptureArgs, ClockArg, MetricsArgs, OutputArgs, SummaryArgs};

pub const HELP: &str = "\
Exit status: the command's: 128+signal if a signal ended it
(130 after Ctrl-C, which is the command's to handle: the profile is written
when it exits), 127 if it could not be found, 126 if it could not be
executed; 2 on fsprof's own errors before the command starts, and instead
of 0 when the profile could not be written anywhere.";

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// Clock used to time calls
    #[arg(long, value_enum, default_value_t = ClockArg::Auto)]
    pub clock: ClockArg,
    #[command(flatten)]
    pub summary: SummaryArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub cold: ColdArgs,
    /// Run CMD without address-space layout randomization (as `setarch -R`): repeated runs of one program get one memory layout; see docs/analysis.md before comparing two programs so
    #[arg(long)]
    pub no_aslr: bool,
    /// The command to profile and its arguments
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

// Starting cold.
#[derive(Debug, Default, Args)]
pub struct ColdArgs {
    /// Start with these files out of the page cache (a directory: every file under it on its file system), evicted and verified before CMD starts; end the list with `--` or another option
    #[arg(long, value_name = "PATH", num_args = 1.., action = clap::ArgAction::Append)]
    pub cold: Vec<PathBuf>,
    /// With --cold: then also empty the machine's dentry and inode caches (root; every program here loses them)
    #[arg(long, requires = "cold")]
    pub drop_caches: bool,
}

/// Evicts the `--cold` files and says what the check found; the
/// profile's settings keep it. An error (a file that stayed cached, one
/// that cannot be opened) stops the run before the command starts.
fn start_cold(a: &ColdArgs) -> Result<Option<String>> {
    if a.cold.is_empty() {
        return Ok(None);
    }
    let cold = fsprof_measure::cold_paths::make_cold(&a.cold, a.drop_caches)?;
    let said = cold.describe();
    fsprof_sys::diag!("fsprof: {said}");
    Ok(Some(said))
}

pub fn run(a: RunArgs) -> Result<i32> {
    // Refuse an existing -o before running anything (the run may be
    // long), and make its file now: the run's end only writes it.
    let out = output(&a.out);
    let made = out.prepare()?;
    let resolution = a.capture.resolution;
    // Before the metrics server starts its threads (see Capture::new).
    let capture = Capture::new(Plan {
        tool: "run".into(),
        command: a.command.clone(),
        resolution,
        interval_ns: a.capture.interval,
        duration_ns: None,
        sample_ns: a.metrics.serve_metrics.as_ref().map(|_| LIVE_PERIOD_NS),
    });
    let mut live = RunProgress {
        make_file: out.path.is_none(),
        ..Default::default()
    };
    let server = match &a.metrics.serve_metrics {
        Some(addr) => Some(serve_metrics(addr, &a, resolution, &mut live)?),
        None => None,
    };
    let mut source = UserSource::new(&UserOptions {
        resolution,
        clock: a.clock.into(),
    })?;
    if a.no_aslr {
        fsprof_sys::process::no_aslr_for_commands().map_err(|e| {
            anyhow::anyhow!("--no-aslr: the kernel refused personality(ADDR_NO_RANDOMIZE): {e}")
        })?;
    }
    // Last before the command, so that nothing of ours reads them back.
    let cold = start_cold(&a.cold)?;
    live.keep = fsprof_sys::keeper::OnStart::new(source.control_fd());
    let mut outcome = match capture.run(&mut source, &mut live) {
        Ok(o) => o,
        Err(e) => return failed(e),
    };
    if let Some(said) = cold {
        outcome.profile.meta.settings.insert("cache".into(), said);
    }
    if a.no_aslr {
        // compare's caution and the docs' advice rest on knowing this.
        let layout = "fixed (--no-aslr: no address-space layout randomization)";
        outcome
            .profile
            .meta
            .settings
            .insert("layout".into(), layout.into());
    }
    drop(server);
    let cmd = a.command[0].to_string_lossy();
    let made = match live.file.take() {
        Some(u) => Made::Default(u),
        None => made,
    };
    let saved = save_and_tell(&outcome, &out, "run", Some(&cmd), made);
    // A profile of nothing because fsprof saw nothing is a warning, which
    // -q keeps; one of a command that made no call stands for the report,
    // which -q leaves out.
    if outcome.profile.processes.is_empty() && !outcome.profile.meta.unprofiled.is_empty() {
        fsprof_sys::diag!(
            "fsprof: warning: no process of `{cmd}` could be profiled; the notes above say why"
        );
    } else if outcome.profile.processes.is_empty() {
        fsprof_sys::diag!(
            "fsprof: warning: no process of `{cmd}` loaded the preload shim, so no call was seen: statically linked programs \
             (many Go binaries) and setuid ones ignore LD_PRELOAD; profile them at the syscall layer (`fsprof kernel -- {cmd}`)"
        );
    } else if a.summary.quiet {
    } else if outcome.profile.total_calls() == 0 {
        fsprof_sys::diag!(
            "fsprof: `{cmd}` made no file-system call through libc; calls made inside libc or by io_uring are only \
             visible at the syscall layer (`fsprof kernel -- {cmd}`)"
        );
    } else {
        fsprof_sys::diag_nonl!("{}", after_capture(&outcome.profile, a.summary.top)?);
    }
    let status = exit_status(&outcome, &saved);
    // fsprof exits next: freeing a profile of thousands of processes one
    // allocation at a time cost milliseconds of the user's wait (the run
    // directory, in `source`, is still removed).
    std::mem::forget(outcome);
    // The mapping and the control file go with fsprof's memory, which the
    // keeper made at the command's start holds until fsprof has exited.
    source.leave_to_exit();
    Ok(status)
}

/// Live metrics sampled every --interval, or every second without one.
const LIVE_PERIOD_NS: u64 = 1_000_000_000;

/// Keeps the counts of the last sample for the metrics endpoint, and
/// makes the profile's file once the command has started.
#[derive(Default)]
struct RunProgress {
    layers: Option<Arc<Mutex<Vec<Layer>>>>,
    /// The profile goes under the default name in the current directory.
    make_file: bool,
    /// Its file, made unnamed while the command starts (on the other CPU:
    /// `fsprof_sys::process`, `OnThisCpu`), not at the run's end.
    file: Option<Unnamed>,
    /// The control file, for the keeper made once the command runs
    /// (fsprof_sys::keeper): its pages and fsprof's memory are then
    /// released after fsprof's exit, not before.
    keep: fsprof_sys::keeper::OnStart,
}

impl Progress for RunProgress {
    fn started(&mut self, _what: &str) {
        if self.make_file {
            // Not possible here (no O_TMPFILE): made at the end as before.
            self.file = Unnamed::make(std::path::Path::new(".")).ok();
        }
        self.keep.start();
    }

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
    live: &mut RunProgress,
) -> Result<MetricsServer> {
    let addrs = serve::resolve(addr, a.metrics.metrics_allow_remote)?;
    let template = Profile::new(meta::describe("run", &a.command, resolution));
    let layers: Arc<Mutex<Vec<Layer>>> = Default::default();
    live.layers = Some(layers.clone());
    let source: serve::Source = Arc::new(move || {
        let mut p = template.clone();
        p.layers = layers.lock().unwrap_or_else(|e| e.into_inner()).clone();
        p
    });
    let render = serve::profile_render(source, a.metrics.labels());
    let server = MetricsServer::start(&addrs, render)?;
    fsprof_sys::diag!(
        "fsprof: serving live metrics on http://{}/metrics",
        server.local_addr()
    );
    Ok(server)
}
