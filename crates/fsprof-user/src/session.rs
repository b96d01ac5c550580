//! One `fsprof run`: set up the run directory and the shim, start the
//! command, sample the counters into intervals while it runs, and assemble
//! the profile once it has exited — however it exited: the counters live in
//! shared files, so a process killed by SIGKILL still has its calls counted.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fsprof_core::profile::{layer, ExitStatus, Interval, Layer, Meta, Overhead, Process};
use fsprof_core::{BucketLayout, Profile, Resolution};
use fsprof_shim::{abi, install};

use crate::clock::{mono_ns, ClockChoice, ClockParams};
use crate::collector::Collector;
use crate::launch::{self, LaunchError};
use crate::reader::ProcessCounters;
use crate::rundir::RunDir;
use crate::selfcost::SelfCost;
use crate::sysinfo;

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub argv: Vec<OsString>,
    pub resolution: Resolution,
    pub interval_ns: Option<u64>,
    pub clock: ClockChoice,
    /// Kept current while the command runs (for live metrics).
    pub live: Option<LiveSink>,
}

/// Where `run` publishes the merged counters at every sample, for readers
/// such as a metrics endpoint; sampled every `period_ns` (or at each
/// `--interval`, when that is given).
#[derive(Clone, Debug)]
pub struct LiveSink {
    pub layers: Arc<Mutex<Vec<Layer>>>,
    pub period_ns: u64,
}

#[derive(Debug)]
pub struct RunOutcome {
    pub profile: Profile,
    pub exit: ExitStatus,
    /// Things the user should know about the capture (one line each).
    pub notes: Vec<String>,
    /// Number of process images that loaded the shim.
    pub processes_seen: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error("{0}")]
    Setup(String),
}

fn setup<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> RunError {
    move |e| RunError::Setup(format!("{what}: {e}"))
}

/// How often ended processes' counter files are folded into memory.
const HARVEST_NS: u64 = 500_000_000;

pub fn run(opts: &RunOptions) -> Result<RunOutcome, RunError> {
    let layout = BucketLayout::new(opts.resolution);
    // LD_PRELOAD splits on spaces and colons: a TMPDIR with either can't
    // hold the shim.
    let preloadable = |p: &std::path::Path| !p.to_string_lossy().contains([' ', ':', '\t']);
    let base = Some(std::env::temp_dir())
        .filter(|d| preloadable(d))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let shim_path = install(&base).map_err(setup("cannot install the preload shim"))?;
    let cache = shim_path.parent().map(PathBuf::from);
    let mut clock = ClockParams::choose(opts.clock, cache.as_deref()).map_err(RunError::Setup)?;
    let dir = RunDir::create().map_err(setup("cannot create the run directory"))?;
    let control = dir
        .write_control(&clock, &layout)
        .map_err(setup("cannot write the control file"))?;

    let selfcost = SelfCost::start(
        cache.as_deref(),
        &shim_path,
        &control,
        clock.kind,
        opts.resolution.get(),
    );

    let env = vec![
        ("LD_PRELOAD".to_string(), preload_value(&shim_path)),
        (abi::ENV.to_string(), dir.path().as_os_str().to_owned()),
    ];
    let start_wall = SystemTime::now();
    let start_mono = mono_ns();
    let child = launch::spawn(&opts.argv, &env)?;

    let mut intervals = Vec::new();
    let mut last: Vec<Layer> = Vec::new();
    let mut last_t = 0u64;
    let mut collector = Collector::new(&dir, layout.thresholds().len() as u32);
    let sample_period = opts.interval_ns.or(opts.live.as_ref().map(|l| l.period_ns));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(launch::wait(child));
    });
    // Wake for each sample, and at least every HARVEST_NS to retire the
    // files of processes that have ended.
    let mut next_sample = sample_period.unwrap_or(u64::MAX);
    let mut next_harvest = HARVEST_NS;
    let exit = loop {
        let due = next_sample.min(next_harvest);
        let timeout = Duration::from_nanos(due.saturating_sub(mono_ns() - start_mono));
        match rx.recv_timeout(timeout) {
            Ok(status) => break status.map_err(setup("waiting for the command failed"))?,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = mono_ns() - start_mono;
                if now >= next_harvest {
                    collector.harvest();
                    next_harvest = now + HARVEST_NS;
                }
                if let Some(period) = sample_period.filter(|_| now >= next_sample) {
                    next_sample += period;
                    let total = merged(&collector.snapshot());
                    publish(opts, &total);
                    if opts.interval_ns.is_some() {
                        intervals.push(Interval::between(&total, &last, last_t, now));
                        last = total;
                        last_t = now;
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(RunError::Setup("the waiting thread died".into()))
            }
        }
    };
    let end_mono = mono_ns();
    let duration_ns = end_mono - start_mono;
    let procs = collector.snapshot();
    let total = merged(&procs);
    publish(opts, &total);
    if opts.interval_ns.is_some() {
        intervals.push(Interval::between(&total, &last, last_t, duration_ns));
    }

    let mut notes = std::mem::take(&mut collector.notes);
    let drift = clock.refine();
    if let Some(cache) = &cache {
        if drift.abs() > 0.005 {
            notes.push(format!(
                "the TSC rate changed by {:.2}% during the run; latencies may be off by as much (use --clock monotonic if this repeats)",
                drift * 100.0
            ));
            ClockParams::forget_rate(cache);
        } else {
            clock.save_rate(cache);
        }
    }
    let selftest = match selfcost.finish() {
        Ok(st) => Some(st),
        Err(e) => {
            notes.push(format!("could not measure the shim's own overhead: {e}"));
            None
        }
    };

    let calls: u64 = total.iter().map(Layer::total_calls).sum();
    let start_unix_ns = start_wall
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let meta = Meta {
        fsprof_version: env!("CARGO_PKG_VERSION").to_string(),
        tool: "run".into(),
        command: opts
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        host: sysinfo::hostname(),
        kernel: sysinfo::kernel_release(),
        start_time: fsprof_core::units::rfc3339_utc(start_unix_ns),
        start_unix_ns,
        duration_ns,
        clock: clock.describe(),
        resolution: opts.resolution,
        interval_ns: opts.interval_ns,
        overhead: selftest.map(|st| Overhead {
            per_call_ns: st.per_call_ns,
            min_recordable_ns: st.min_recordable_ns,
            estimated_total_ns: (st.per_call_ns * calls as f64) as u64,
        }),
        exit: Some(exit.clone()),
        merged_from: Vec::new(),
    };
    let mut profile = Profile::new(meta);
    profile.layers = total;
    profile.intervals = intervals;
    let processes_seen = procs.len();
    profile.processes = procs
        .into_iter()
        .map(|p| to_process(p, start_mono))
        .collect();
    for l in &profile.layers {
        for op in &l.ops {
            if op.unfinished() > 0 {
                notes.push(format!(
                    "{}: {} call(s) never returned (the process ended inside them); they are counted as entered only",
                    op.name,
                    op.unfinished()
                ));
            }
        }
    }
    Ok(RunOutcome {
        profile,
        exit,
        notes,
        processes_seen,
    })
}

/// Our shim first, then whatever the user preloads already, minus any
/// fsprof shim of an enclosing `fsprof run`: two shims would both count
/// every call into the inner run's files.
fn preload_value(shim: &std::path::Path) -> OsString {
    let mut v = shim.as_os_str().to_owned();
    if let Some(existing) = std::env::var_os("LD_PRELOAD") {
        for part in existing.to_string_lossy().split([' ', ':']) {
            if !part.is_empty() && !part.contains("libfsprof_shim") {
                v.push(" ");
                v.push(part);
            }
        }
    }
    v
}

fn publish(opts: &RunOptions, total: &[Layer]) {
    if let Some(live) = &opts.live {
        *live.layers.lock().unwrap_or_else(|e| e.into_inner()) = total.to_vec();
    }
}

fn merged(procs: &[ProcessCounters]) -> Vec<Layer> {
    let mut user = Layer::new(layer::USER);
    for p in procs {
        for op in &p.ops {
            user.op_mut(&op.name).merge(op);
        }
    }
    user.normalize();
    vec![user]
}

fn to_process(p: ProcessCounters, start_mono: u64) -> Process {
    let mut user = Layer::new(layer::USER);
    user.ops = p.ops;
    user.normalize();
    Process {
        pid: p.pid,
        ppid: p.ppid,
        exe: p.exe,
        argv: p.argv,
        start_ns: p.start_mono_ns.saturating_sub(start_mono),
        layers: vec![user],
    }
}
