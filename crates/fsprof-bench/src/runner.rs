//! Runs a suite `--warmup` + `--runs` times in a private scratch directory
//! under DIR, discards the warm-up runs, and turns the rest into per-phase
//! statistics, a latency profile and warnings.
//!
//! Nothing is written before every check has passed (options, DIR, free
//! space, privileges); the scratch directory is removed on success, on
//! error and on interruption alike (it is a `TempDir`).

use std::path::Path;

use fsprof_core::buckets::Resolution;
use fsprof_core::histogram::OpStats;
use fsprof_core::profile::{Layer, Profile};
use fsprof_core::stats::Summary;

use crate::machine::{DirInfo, Machine};
use crate::params::{ParamError, Params};
use crate::result::{self, BenchResult, PhaseResult, SweepPoint, TimerInfo, LAYER};
use crate::suites::{Ctx, PhaseRun, Suite};
use crate::warnings;
use fsprof_measure::timing::{Clock, Overhead};

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Param(#[from] ParamError),
    #[error("cannot create a scratch directory in {dir}: {source}")]
    Scratch { dir: String, source: std::io::Error },
    #[error("run {run}: {source}")]
    Io { run: usize, source: std::io::Error },
    #[error("interrupted after {0} runs; nothing was written")]
    Interrupted(usize),
}

/// How a run tells its caller it is moving on (the CLI draws a bar): one
/// phase named after the suite, a step per run.
pub use fsprof_capture::{Silent as NoProgress, Steps as Progress};

/// Runs the benchmark `params` describes. `stop` is polled between runs.
pub fn run(
    params: &Params,
    command: Vec<String>,
    progress: &mut dyn Progress,
    stop: &dyn Fn() -> bool,
) -> Result<(Profile, BenchResult), BenchError> {
    run_suite(params.suite()?, params, command, progress, stop)
}

/// Runs `suite` (registered or not) with `params`.
pub fn run_suite(
    suite: &dyn Suite,
    params: &Params,
    command: Vec<String>,
    progress: &mut dyn Progress,
    stop: &dyn Fn() -> bool,
) -> Result<(Profile, BenchResult), BenchError> {
    let dir = preflight(suite, params)?;
    let machine = Machine::read();
    let start_unix_ns = fsprof_sys::clock::wall_unix_ns();
    let start_mono = fsprof_sys::clock::mono_ns();
    let scratch = tempfile::Builder::new()
        .prefix(".fsprof-bench-")
        .tempdir_in(&params.dir)
        .map_err(|source| BenchError::Scratch {
            dir: params.dir.display().to_string(),
            source,
        })?;
    let clock = Clock::best();
    let overhead = Overhead::measure(clock);
    let resolution = Resolution::new(params.resolution).map_err(|e| ParamError::Invalid {
        option: "--resolution",
        fix: e.to_string(),
    })?;
    let ctx = Ctx {
        params,
        scratch: scratch.path(),
        clock,
        resolution,
    };
    let (layer, phases, sweep) = measure(suite, &ctx, progress, stop)?;
    drop(scratch);
    let mut meta = fsprof_capture::meta::timed(
        result::profile_meta(command, &machine),
        start_unix_ns,
        fsprof_sys::clock::mono_ns().saturating_sub(start_mono),
    );
    meta.clock = clock.describe();
    meta.resolution = resolution;
    let profile = profile_of(meta, layer, &overhead);
    let mut bench = BenchResult {
        format: result::FORMAT_NAME.into(),
        format_version: result::FORMAT_VERSION,
        params: params.clone(),
        machine,
        dir,
        timer: TimerInfo {
            clock: clock.describe().source.to_string(),
            overhead_ns: overhead.per_op_ns,
            resolution_ns: overhead.resolution_ns,
        },
        phases,
        sweep,
        warnings: Vec::new(),
    };
    bench.warnings = warnings::all(&bench);
    Ok((profile, bench))
}

/// Every run of every size: the layer of latencies, and the phases (or,
/// in a sweep, the phases per size).
fn measure(
    suite: &dyn Suite,
    ctx: &Ctx,
    progress: &mut dyn Progress,
    stop: &dyn Fn() -> bool,
) -> Result<(Layer, Vec<PhaseResult>, Vec<SweepPoint>), BenchError> {
    let params = ctx.params;
    let sweep = suite.sweep(params);
    let sizes = sweep.clone().unwrap_or_else(|| vec![0]);
    let mut runs = Runs {
        ctx,
        suite,
        progress,
        stop,
        done: 0,
    };
    runs.progress.phase(
        suite.name(),
        ((params.warmup + params.runs) * sizes.len()) as u64,
    );
    let mut layer = Layer::new(LAYER);
    let mut phases = Vec::new();
    let mut points = Vec::new();
    for &size in &sizes {
        let (ph, ops) = aggregate(&runs.all_of(size)?, params.warmup);
        add_ops(&mut layer, ops, sweep.is_some().then_some(size));
        if sweep.is_some() {
            points.push(SweepPoint {
                file_size: size,
                phases: ph,
            });
        } else {
            phases = ph;
        }
    }
    Ok((layer, phases, points))
}

/// Every check that must pass before anything is written under DIR.
fn preflight(suite: &dyn Suite, params: &Params) -> Result<DirInfo, BenchError> {
    params.validate_common()?;
    suite.validate(params)?;
    let dir = params.check_dir_for(suite.working_set(params))?;
    // SAFETY: geteuid cannot fail.
    if params.drop_caches && unsafe { libc::geteuid() } != 0 {
        return Err(ParamError::DropCachesNeedsRoot.into());
    }
    Ok(dir)
}

/// The warm-up and measured runs of one file size, counted across sizes
/// for the progress bar and for the interruption message.
struct Runs<'a> {
    ctx: &'a Ctx<'a>,
    suite: &'a dyn Suite,
    progress: &'a mut dyn Progress,
    stop: &'a dyn Fn() -> bool,
    done: usize,
}

impl Runs<'_> {
    fn all_of(&mut self, size: u64) -> Result<Vec<Vec<PhaseRun>>, BenchError> {
        let params = self.ctx.params;
        let per_size = params.warmup + params.runs;
        let mut runs = Vec::with_capacity(per_size);
        for run in 0..per_size {
            if (self.stop)() {
                return Err(BenchError::Interrupted(self.done));
            }
            let r = self
                .suite
                .run_once(self.ctx, size)
                .map_err(|source| BenchError::Io {
                    run: run + 1,
                    source,
                })?;
            runs.push(r);
            self.done += 1;
            self.progress.advance(1);
        }
        Ok(runs)
    }
}

/// Merges one size's ops into the layer; a sweep's op names carry their
/// file size (`seq_read@4KiB`) so that sizes stay apart in the profile.
fn add_ops(layer: &mut Layer, ops: Vec<OpStats>, sweep_size: Option<u64>) {
    for mut op in ops {
        if let Some(size) = sweep_size {
            let size = crate::params::human_bytes(size).replace(' ', "");
            op.name = format!("{}@{size}", op.name);
        }
        layer.op_mut(&op.name.clone()).merge(&op);
    }
}

/// The latency profile of the measured runs, with the timer's overhead
/// over all its calls.
fn profile_of(
    mut meta: fsprof_core::profile::Meta,
    mut layer: Layer,
    overhead: &Overhead,
) -> Profile {
    layer.normalize();
    meta.overhead = Some(overhead.describe(layer.total_calls()));
    let mut profile = Profile::new(meta);
    profile.layers.push(layer);
    profile
}

/// Per phase: the measured runs' statistics, the warm-up figures apart,
/// and the measured runs' latencies merged into one op each.
pub fn aggregate(runs: &[Vec<PhaseRun>], warmup: usize) -> (Vec<PhaseResult>, Vec<OpStats>) {
    let Some(first) = runs.first() else {
        return (Vec::new(), Vec::new());
    };
    let mut phases = Vec::new();
    let mut ops: Vec<OpStats> = Vec::new();
    for (k, proto) in first.iter().enumerate() {
        let all: Vec<&PhaseRun> = runs.iter().filter_map(|r| r.get(k)).collect();
        let (warm, measured) = all.split_at(warmup.min(all.len()));
        let values: Vec<f64> = measured.iter().map(|r| r.value).collect();
        let medians: Vec<f64> = measured.iter().map(|r| r.op_median_ns).collect();
        let on_cpu: Vec<f64> = measured.iter().filter_map(|r| r.on_cpu).collect();
        for r in measured {
            for op in &r.ops {
                match ops.iter_mut().find(|o| o.name == op.name) {
                    Some(o) => o.merge(op),
                    None => ops.push(op.clone()),
                }
            }
        }
        let Some(summary) = Summary::of(&values) else {
            continue;
        };
        phases.push(PhaseResult {
            name: proto.name.clone(),
            unit: proto.unit.into(),
            summary,
            runs: values,
            warmup_runs: warm.iter().map(|r| r.value).collect(),
            file_ns: all
                .iter()
                .map(|r| r.file_ns.clone())
                .filter(|v| !v.is_empty())
                .collect(),
            op_ns: all
                .iter()
                .map(|r| r.op_ns.clone())
                .filter(|v| !v.is_empty())
                .collect(),
            first_file_dropped: !proto.file_ns.is_empty(),
            op_median_ns: fsprof_core::stats::median(&medians).unwrap_or(0.0),
            on_cpu: fsprof_core::stats::median(&on_cpu),
            cache: all.iter().filter_map(|r| r.cache.clone()).collect(),
            waits: all.iter().filter_map(|r| r.wait.clone()).collect(),
        });
    }
    (phases, ops)
}

/// Whether `dir` holds anything this crate left behind (tests use it).
pub fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".fsprof-bench-"))
                .collect()
        })
        .unwrap_or_default()
}
