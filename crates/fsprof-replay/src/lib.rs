//! Replaying a compiled trace (`fsprof replay`) at user level, measured.
//!
//! [`replay`] loads a compiled trace ([`fsprof_trace::replayfile`]),
//! confines every path under `--root` ([`root`]), bounds what it may
//! allocate there before it starts ([`budget`]), optionally creates the
//! trace's initial state there ([`prepare`]), runs one thread per replay
//! thread honouring the ordering constraints and the traced times
//! ([`engine`]), checks each result against the trace, and reports timing
//! accuracy, mismatches and the replay's profile next to the trace's
//! ([`report`]).

pub mod budget;
pub mod engine;
pub mod exec;
pub mod lateness;
pub mod prepare;
mod raw;
pub mod report;
pub mod root;
pub mod touch;

use std::path::{Path, PathBuf};

use fsprof_analysis::compare::{compare_profiles, CompareOptions, Comparison};
use fsprof_core::Profile;
use fsprof_trace::replayfile::Compiled;

pub use engine::{Calls, Pace, Reads, Verify};
use report::TimingReport;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    File(#[from] fsprof_trace::TraceError),
    #[error("--root {0}")]
    Root(String),
    #[error("--prepare: {0}")]
    Prepare(String),
    #[error("--realtime: {0}")]
    Realtime(String),
    #[error("replay refused: {0}")]
    Space(String),
    #[error(transparent)]
    Thread(#[from] engine::ThreadPanic),
}

pub struct ReplayOptions {
    pub root: PathBuf,
    pub prepare: bool,
    pub pace: Pace,
    pub verify: Verify,
    pub reads: Reads,
    /// Run the replay threads under SCHED_FIFO at this priority.
    pub realtime: Option<i32>,
    /// Make the calls, or spin for their traced durations ([`Calls::Dry`]).
    pub calls: Calls,
    /// A deliberately slower replayer: this much spin after each call
    /// ([`engine::Engine::added_ns`]).
    pub added_ns: u64,
    /// The most the replay may allocate under the root ([`budget`]);
    /// None: half the free space there.
    pub max_bytes: Option<u64>,
}

pub struct Replayed {
    pub timing: TimingReport,
    /// The trace's latencies of the replayed commands.
    pub traced: Profile,
    /// The replay's latencies of the same commands.
    pub replayed: Profile,
    /// `compare` of the two: how closely the replay behaved like the trace.
    pub fidelity: Comparison,
    /// Per op, the EMD sampling alone puts between the two
    /// ([`report::fidelity_noise`]).
    pub fidelity_noise: std::collections::BTreeMap<String, f64>,
    pub prepared: usize,
    /// Initial entries `--prepare` could not make, with the reason.
    pub prepare_failures: Vec<String>,
    /// What the replay could allocate, and the budget it ran under.
    pub demand: budget::Demand,
    pub budget: budget::Budget,
    /// Files could not grow past the budget (RLIMIT_FSIZE: a file system
    /// without holes).
    pub file_size_limited: bool,
}

/// Reads a compiled trace (a clear error for anything else).
pub fn load(path: &Path) -> Result<Compiled, ReplayError> {
    Ok(Compiled::read(path)?)
}

pub fn replay(
    compiled: &Compiled,
    opts: &ReplayOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Replayed, ReplayError> {
    if !opts.root.is_dir() {
        return Err(ReplayError::Root(format!(
            "{} is not a directory",
            opts.root.display()
        )));
    }
    let root = root::Root::open(&opts.root)
        .map_err(|e| ReplayError::Root(format!("{}: {e}", opts.root.display())))?;
    if let Some(p) = opts.realtime {
        engine::realtime_permitted(p).map_err(|e| {
            ReplayError::Realtime(format!(
                "SCHED_FIFO priority {p} is not permitted ({e}); it needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO of at least {p}"
            ))
        })?;
    }
    let mut prepared = 0;
    let mut prepare_failures = Vec::new();
    if opts.prepare && !prepare::is_empty(&opts.root)? {
        return Err(ReplayError::Prepare(format!(
            "{} is not empty; --prepare only creates the initial state in an empty directory (nothing there is overwritten)",
            opts.root.display()
        )));
    }
    let (demand, budget) = bound(compiled, &root, opts)?;
    let limit = budget::FileSizeLimit::new(&budget)
        .map_err(|e| ReplayError::Space(format!("cannot set RLIMIT_FSIZE: {e}")))?;
    if opts.prepare {
        (prepared, prepare_failures) = prepare::prepare(&root, compiled);
    }
    let engine = engine::Engine {
        compiled,
        root: &root,
        pace: opts.pace,
        verify: opts.verify,
        reads: opts.reads,
        realtime: opts.realtime,
        calls: opts.calls,
        added_ns: opts.added_ns,
    };
    let run = engine.run(progress)?;
    let file_size_limited = limit.active();
    drop(limit);
    let timing = report::timing(compiled, &run, opts.pace);
    let (traced, replayed) = report::profiles(compiled, &run);
    let fidelity = compare_profiles(&traced, &replayed, &CompareOptions::default());
    let fidelity_noise = report::fidelity_noise(&traced, &replayed);
    Ok(Replayed {
        timing,
        traced,
        replayed,
        fidelity,
        fidelity_noise,
        prepared,
        prepare_failures,
        demand,
        budget,
        file_size_limited,
    })
}

/// The replay's demand checked against its budget and the free space
/// under the root ([`budget`]), before anything is made there.
fn bound(
    compiled: &Compiled,
    root: &root::Root,
    opts: &ReplayOptions,
) -> Result<(budget::Demand, budget::Budget), ReplayError> {
    let space = budget::Space::of(root)
        .map_err(|e| ReplayError::Root(format!("{}: statvfs: {e}", opts.root.display())))?;
    let kinds = exec::Kind::table(compiled);
    let demand = budget::demand(compiled, &kinds, opts.prepare, space.block);
    let b = budget::check(compiled, &demand, opts.max_bytes, space, &opts.root)
        .map_err(ReplayError::Space)?;
    Ok((demand, b))
}
