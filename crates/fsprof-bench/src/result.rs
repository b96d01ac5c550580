//! A benchmark result: self-describing JSON that is at the same time an
//! fsprof profile.
//!
//! The file is a profile (`"format": "fsprof-profile"`, one layer `bench`
//! whose ops are the phases' per-operation latencies, e.g. `seq_read` and
//! `seq_write:fsync`), so `fsprof report`, `plot` and `export` read it as
//! they read any profile, plus one more top-level object, `bench`, with
//! the machine, the file system under DIR, every parameter, the per-phase
//! statistics, every run's figure, every file's time in every run, the
//! cache checks and the warnings. Profile readers ignore `bench`;
//! [`read_result`] reads both.

use std::path::Path;

use fsprof_core::profile::{Meta, Profile};
use fsprof_core::stats::Summary;
use fsprof_core::Resolution;
use serde::{Deserialize, Serialize};

use crate::machine::{DirInfo, Machine};
use crate::params::Params;
use fsprof_measure::cache::CacheCheck;

pub const FORMAT_NAME: &str = "fsprof-bench";
pub const FORMAT_VERSION: u32 = 1;
/// The profile layer holding the phases' latencies.
pub const LAYER: &str = fsprof_core::layer::BENCH;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    pub format: String,
    pub format_version: u32,
    pub params: Params,
    pub machine: Machine,
    pub dir: DirInfo,
    pub timer: TimerInfo,
    pub phases: Vec<PhaseResult>,
    /// Sweep only: one entry per file size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<SweepPoint>,
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

impl BenchResult {
    /// Every phase with the name it is shown and matched by: in a sweep
    /// `NAME@SIZE`, the file size as `size` writes it.
    pub fn named_phases(&self, size: impl Fn(u64) -> String) -> Vec<(String, &PhaseResult)> {
        if self.sweep.is_empty() {
            self.phases.iter().map(|p| (p.name.clone(), p)).collect()
        } else {
            self.sweep
                .iter()
                .flat_map(|s| {
                    let at = size(s.file_size);
                    s.phases
                        .iter()
                        .map(move |p| (format!("{}@{at}", p.name), p))
                })
                .collect()
        }
    }
}

/// The clock and what the timing loop costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerInfo {
    /// `tsc` or `monotonic`.
    pub clock: String,
    /// Added per timed operation by the loop (one clock read, one store).
    pub overhead_ns: f64,
    /// Smallest non-zero difference between two clock reads.
    pub resolution_ns: f64,
}

/// One phase over all runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub name: String,
    /// `MB/s` (10^6 bytes per second) or `ops/s`. Higher is better.
    pub unit: String,
    /// Statistics of the measured runs' figures.
    pub summary: Summary,
    /// Each measured run's figure, in run order.
    pub runs: Vec<f64>,
    /// The discarded warm-up runs' figures.
    #[serde(default)]
    pub warmup_runs: Vec<f64>,
    /// Per run (warm-up runs first), the time of each file in ns, first
    /// file included (sprite); empty for suites without files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_ns: Vec<Vec<u64>>,
    /// With `--raw-samples`: per run (warm-up runs first), every latency
    /// of the phase's op in ns, in the order the ops ran (sprite: all
    /// files, the first included). Without it the per-op latencies are
    /// kept only as the profile's histograms (layer `bench`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub op_ns: Vec<Vec<u64>>,
    /// Whether the first file's figures were left out of `runs`.
    #[serde(default)]
    pub first_file_dropped: bool,
    /// Median per-operation latency over the measured runs, ns.
    pub op_median_ns: f64,
    /// Median over the measured runs of the share of the timed loops'
    /// wall time their thread was on a CPU (the rest: blocked in I/O or
    /// preempted by other processes). Absent where the CPU clock is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_cpu: Option<f64>,
    /// The cache check before this phase in each run (warm-up runs first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache: Vec<CacheCheck>,
    /// Where each run's timed loops spent their wall time (warm-up runs
    /// first), for suites that record it (metadata).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<RunWait>,
}

/// Where one run of a phase spent its wall time: on a CPU, waiting for
/// one (preempted), or blocked; and which other processes used the CPUs
/// meanwhile. A slow run's warning reads its cause from it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunWait {
    pub wall_ns: u64,
    pub cpu_ns: u64,
    /// Runnable but waiting for a CPU, ns; absent without schedstats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runqueue_ns: Option<u64>,
    /// Times the loop's thread blocked (I/O, a lock, a sleep).
    pub voluntary: u64,
    /// Times it was preempted.
    pub involuntary: u64,
    /// The other commands that used the most CPU over the run, with their
    /// CPU time, ns, most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<(String, u64)>,
}

impl RunWait {
    pub fn of(s: &fsprof_measure::timing::Samples) -> RunWait {
        RunWait {
            wall_ns: s.wall_ns,
            cpu_ns: s.cpu_ns,
            runqueue_ns: s.runqueue_ns,
            voluntary: s.voluntary,
            involuntary: s.involuntary,
            others: s.others.clone(),
        }
    }
}

/// A sweep's figures at one file size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub file_size: u64,
    pub phases: Vec<PhaseResult>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Stable key: `ci_wide`, `warmup`, `working_set`, `cold_failed`,
    /// `timer_coarse`, `busy`, `frequency_scaling`, `outlier`, `off_cpu`.
    pub kind: String,
    /// What happened and what to do about it.
    pub message: String,
}

/// The JSON text of a result and its profile.
pub fn to_json(profile: &Profile, bench: &BenchResult) -> String {
    #[derive(Serialize)]
    struct Ref<'a> {
        #[serde(flatten)]
        profile: &'a Profile,
        bench: &'a BenchResult,
    }
    serde_json::to_string_pretty(&Ref { profile, bench }).expect("a result always serializes")
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Profile(#[from] fsprof_core::format::FormatError),
    #[error("{0} is a profile, not an fsprof bench result")]
    NotBench(String),
    #[error(
        "{path}: bench result format version {found}; this fsprof reads version {FORMAT_VERSION}"
    )]
    Version { path: String, found: u64 },
    #[error("{path}: corrupt bench result: {detail}")]
    Corrupt { path: String, detail: String },
}

/// Reads a result file: the profile (validated as any profile) and the
/// bench object.
pub fn read_result(path: &Path) -> Result<(Profile, BenchResult), ReadError> {
    let bytes = std::fs::read(path).map_err(|e| ReadError::Corrupt {
        path: path.display().to_string(),
        detail: e.to_string(),
    })?;
    let profile = fsprof_core::format::parse_profile(&bytes, path)?;
    match parse_section(&bytes, &path.display().to_string())? {
        Some(bench) => Ok((profile, bench)),
        None => Err(ReadError::NotBench(path.display().to_string())),
    }
}

/// The bench object of a file's bytes, `None` for a plain profile: so a
/// command reads a file once and then knows what it holds (`compare`
/// picks its method by it, `report --format html` adds a sweep's charts).
/// Only the `bench` field is kept; the profile's bulk is skipped unparsed.
pub fn parse_section(bytes: &[u8], shown: &str) -> Result<Option<BenchResult>, ReadError> {
    #[derive(Deserialize)]
    struct Section {
        bench: Option<serde_json::Value>,
    }
    let corrupt = |detail: String| ReadError::Corrupt {
        path: shown.to_string(),
        detail,
    };
    let section: Section = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    let Some(b) = section.bench else {
        return Ok(None);
    };
    match b.get("format_version").and_then(|v| v.as_u64()) {
        Some(v) if v == FORMAT_VERSION as u64 => {}
        Some(found) => {
            return Err(ReadError::Version {
                path: shown.to_string(),
                found,
            })
        }
        None => return Err(corrupt("bench.format_version is missing".into())),
    }
    serde_json::from_value(b)
        .map(Some)
        .map_err(|e| corrupt(e.to_string()))
}

/// An empty result profile's metadata.
pub fn profile_meta(tool_command: Vec<String>, machine: &Machine) -> Meta {
    let mut meta = fsprof_capture::meta::describe("bench", &[], Resolution::default());
    meta.command = tool_command;
    meta.run.host = machine.host.clone();
    meta.run.kernel = machine.kernel.clone();
    meta
}
