//! The user layer as a capture source: set up the run directory and the
//! shim, hand the command its LD_PRELOAD, fold the per-process counter
//! files into layers while it runs, and assemble the final counts once it
//! has exited — however it exited: the counters live in shared files, so a
//! process killed by SIGKILL still has its calls counted.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use fsprof_capture::{Caps, Ended, Finish, Source, SourceError};
use fsprof_core::profile::{layer, Layer, Meta, Overhead, SampledOverhead, Unprofiled};
use fsprof_core::{BucketLayout, Resolution};
use fsprof_shim::{abi, install, SelfTest};

use crate::clock::{ClockChoice, ClockError, ClockParams, MAX_DRIFT};
use crate::collector::Collector;
use crate::layers::{merged, process};
use crate::notes;
use crate::reader::ProcessCounters;
use crate::rundir::{control_bytes, RunDir};
use crate::selfcost::SelfCost;

#[derive(Clone, Copy, Debug)]
pub struct UserOptions {
    pub resolution: Resolution,
    pub clock: ClockChoice,
}

/// What stopped the user layer (or a trace) from being set up, with the
/// step it failed in.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot install the preload shim: {0} (set TMPDIR to a writable directory)")]
    Shim(#[source] std::io::Error),
    #[error(transparent)]
    Clock(#[from] ClockError),
    #[error("cannot create the run directory: {0} (is /dev/shm or TMPDIR writable?)")]
    RunDir(#[source] std::io::Error),
    #[error("{} already exists; use --force to replace it", .0.display())]
    Exists(PathBuf),
}

/// A prepared `fsprof run`: shim installed, clock chosen, run directory
/// and control file written.
pub struct UserSource {
    resolution: Resolution,
    shim: PathBuf,
    /// Where per-boot facts (TSC rate, the shim's own cost) are kept.
    cache: Option<PathBuf>,
    clock: ClockParams,
    collector: Collector,
    selfcost: Option<SelfCost>,
    /// The processes the shim could not profile, found at the end.
    unprofiled: Vec<Unprofiled>,
    /// [`fsprof_sys::mapfault::replaced_pages`] when the run was set up.
    replaced_before: u64,
}

impl UserSource {
    pub fn new(opts: &UserOptions) -> Result<UserSource, SetupError> {
        let layout = BucketLayout::new(opts.resolution);
        // LD_PRELOAD splits on spaces and colons: a TMPDIR with either can't
        // hold the shim.
        let preloadable = |p: &Path| !p.to_string_lossy().contains([' ', ':', '\t']);
        let base = Some(std::env::temp_dir())
            .filter(|d| preloadable(d))
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        let shim = install(&base).map_err(SetupError::Shim)?;
        let cache = shim.parent().map(PathBuf::from);
        let clock = ClockParams::choose(opts.clock, cache.as_deref())?;
        let dir = RunDir::create(&clock, &layout).map_err(SetupError::RunDir)?;
        Ok(UserSource {
            resolution: opts.resolution,
            shim,
            cache,
            clock,
            collector: Collector::new(dir, layout.thresholds().len() as u32),
            selfcost: None,
            unprofiled: Vec::new(),
            replaced_before: fsprof_sys::mapfault::replaced_pages(),
        })
    }

    /// The run directory the shim writes to (`fsprof trace` reads its
    /// chunk files from there).
    pub fn run_dir(&self) -> &Path {
        self.collector.dir().path()
    }

    /// For a process that exits right after dropping this source: the
    /// run directory is removed, the control file's mapping and
    /// descriptor are left to the exit ([`crate::rundir::RunDir::leave_to_exit`]).
    pub fn leave_to_exit(&mut self) {
        self.collector.dir_mut().leave_to_exit();
    }

    /// The control file's descriptor (for fsprof_sys::keeper).
    pub fn control_fd(&self) -> Option<std::os::fd::RawFd> {
        self.collector.dir().control_fd()
    }

    /// The clock the shim times with.
    /// The arena of blocks processes take (None: it could not be mapped).
    pub fn arena(&self) -> Option<&crate::arena::Arena> {
        self.collector.dir().arena()
    }

    /// For `fsprof trace`: blocks are taken back only once their trace
    /// windows are read.
    pub fn hold_trace_windows(&mut self) {
        self.collector.hold_trace_windows();
    }

    pub fn clock(&self) -> &ClockParams {
        &self.clock
    }

    /// Notes about the clock: a TSC rate that drifted during the run is
    /// reported and forgotten, a steady one kept for the next run.
    fn clock_notes(&mut self, notes: &mut Vec<String>) {
        let drift = self.clock.refine();
        let Some(cache) = &self.cache else {
            return;
        };
        if drift.abs() > MAX_DRIFT {
            notes.push(format!(
                "the TSC rate changed by {:.2}% during the run; latencies may be off by as much (use --clock monotonic if this repeats)",
                drift * 100.0
            ));
            ClockParams::forget_rate(cache);
        } else {
            self.clock.save_rate(cache);
        }
    }

    /// The shim's own cost per call, scaled to the calls counted: the
    /// sampled figure when enough calls were sampled, else the hot loop's.
    fn overhead(
        &mut self,
        calls: u64,
        procs: &[ProcessCounters],
        notes: &mut Vec<String>,
    ) -> Option<Overhead> {
        let st = match self.selfcost.take()?.finish() {
            Ok(st) => st,
            Err(e) => {
                notes.push(format!("could not measure the shim's own overhead: {e}"));
                return None;
            }
        };
        let mut own = abi::OwnSample::default();
        for p in procs {
            own.add(&p.own);
        }
        let sampled = sampled_overhead(&own, &st);
        let per_call_ns = sampled
            .as_ref()
            .map_or(st.per_call_ns, SampledOverhead::per_call_ns);
        Some(Overhead {
            per_call_ns,
            min_recordable_ns: st.min_recordable_ns,
            estimated_total_ns: (per_call_ns * calls as f64) as u64,
            sampled,
        })
    }
}

impl Source for UserSource {
    fn caps(&self) -> Caps {
        Caps {
            needs_command: true,
            hold_command: false,
            upkeep_ns: Some(self.collector.upkeep_ns()),
        }
    }

    fn command_env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("LD_PRELOAD".into(), preload_value(&self.shim)),
            (abi::ENV.into(), self.collector.dir().env_value().clone()),
        ]
    }

    fn start(&mut self, command: Option<i32>) -> Result<String, SourceError> {
        if let Some(pid) = command {
            self.collector.command_unreaped(pid);
        }
        self.collector.dir().remove_stale_beside();
        // Measured on the other core while the command runs.
        let (clock, resolution) = (&self.clock, self.resolution);
        self.selfcost = Some(SelfCost::start(
            self.cache.as_deref(),
            &self.shim,
            || control_bytes(clock, &BucketLayout::new(resolution)),
            self.clock.kind,
            self.resolution.get(),
        ));
        Ok(layer::USER.into())
    }

    fn snapshot(&mut self) -> Result<Vec<Layer>, SourceError> {
        Ok(self.collector.snapshot())
    }

    fn upkeep(&mut self) {
        self.collector.upkeep();
    }

    fn next_upkeep_ns(&self) -> Option<u64> {
        Some(self.collector.next_upkeep_ns())
    }

    fn bell(&self) -> Option<&std::sync::atomic::AtomicU32> {
        self.collector.bell()
    }

    fn finish(&mut self, how: &Ended) -> Result<Finish, SourceError> {
        // From now on processes that start (a daemon's children) stay out.
        self.collector.dir().end();
        let procs = self.collector.finish();
        let layers = merged(&procs);
        let mut notes = std::mem::take(&mut self.collector.notes);
        self.clock_notes(&mut notes);
        let calls = layers.iter().map(Layer::total_calls).sum();
        let overhead = self.overhead(calls, &procs, &mut notes);
        notes.extend(notes::unfinished(&procs));
        notes.extend(notes::dropped(&procs));
        let (lost, lost_count) = self.collector.dir().lost();
        self.unprofiled = lost.iter().map(notes::unprofiled).collect();
        notes.extend(notes::lost(&self.unprofiled, lost_count));
        notes.extend(notes::nonfile(&layers));
        let mut warnings = Vec::new();
        let shrunk = fsprof_sys::mapfault::replaced_pages() - self.replaced_before;
        let cut = self
            .arena()
            .is_some_and(crate::arena::Arena::control_damaged);
        if shrunk > 0 || cut {
            let zeros = match shrunk {
                0 => String::new(),
                n => format!(": {n} page(s) read as zeros"),
            };
            warnings.push(format!(
                "a process of the run shrank or overwrote a file fsprof had mapped (the control file, a counter file or a trace chunk){zeros}, so counts may be missing"
            ));
        }
        Ok(Finish {
            clock: self.clock.describe(),
            overhead,
            processes: procs
                .iter()
                .map(|p| process(p, how.start_mono_ns, |t| self.clock.mono_ns(t)))
                .collect(),
            layers,
            notes,
            warnings,
        })
    }

    fn amend_meta(&mut self, meta: &mut Meta) {
        meta.unprofiled = std::mem::take(&mut self.unprofiled);
    }
}

/// Fewer sampled calls than this and the mean is left to the hot loop's
/// figure (a run of a few hundred calls).
const MIN_SAMPLES: u64 = 30;

/// The sampled own cost as a per-call figure with its spread: mean,
/// standard deviation and a Student-t 95% interval of the mean.
fn sampled_overhead(own: &abi::OwnSample, st: &SelfTest) -> Option<SampledOverhead> {
    if own.samples < MIN_SAMPLES {
        return None;
    }
    let n = own.samples as f64;
    let mean = own.ns as f64 / n;
    let var = ((own.sq_ns as f64 - n * mean * mean) / (n - 1.0)).max(0.0);
    let sd = var.sqrt();
    let t = fsprof_core::stats::t_quantile(0.975, n - 1.0).unwrap_or(1.96);
    Some(SampledOverhead {
        samples: own.samples,
        every: abi::OWN_EVERY,
        mean_ns: mean,
        sd_ns: sd,
        ci95_ns: t * sd / n.sqrt(),
        outside_ns: st.outside_ns,
        interrupted: own.over,
        hot_loop_ns: st.per_call_ns,
        upper_bound: true,
    })
}

/// Our shim first, then whatever the user preloads already, minus any
/// fsprof shim of an enclosing `fsprof run`: two shims would both count
/// every call into the inner run's files.
fn preload_value(shim: &Path) -> OsString {
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
