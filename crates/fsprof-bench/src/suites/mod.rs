//! The suites, one file each, and the registry the runner and the command
//! line read them from ([`SUITES`]): adding a suite is its file and one
//! line there. Each suite declares its own options, checks them, and does
//! one run (all its phases, once), returning per phase one figure, the
//! per-file times, the per-operation latencies and the cache check made
//! before it; repeating runs, discarding warm-up and computing statistics
//! is the runner's job, the text and the warnings are the result's.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use fsprof_core::buckets::Resolution;
use fsprof_core::histogram::OpStats;

use crate::params::{Opt, ParamError, Params};
use fsprof_measure::cache::CacheCheck;
use fsprof_measure::timing::{Clock, Samples, TimingLoop};

/// Declares each suite's module (`suites/<module>.rs`) and lists its type
/// in [`SUITES`]: one line per suite.
macro_rules! registry {
    ($($module:ident::$suite:ident,)*) => {
        $(pub mod $module;)*
        /// Every suite, in the order `fsprof bench --help` lists them.
        pub const SUITES: &[&dyn Suite] = &[$(&$module::$suite),*];
    };
}

registry! {
    sprite::Sprite,
    metadata::Metadata,
    pread::Pread,
    sweep::Sweep,
}

/// The suite called `name`.
pub fn find(name: &str) -> Option<&'static dyn Suite> {
    SUITES.iter().copied().find(|s| s.name() == name)
}

/// What a suite is called and takes, as `fsprof bench --help` shows it.
#[derive(Debug)]
pub struct Description {
    /// The name on the command line and in results (`sprite`).
    pub name: &'static str,
    /// One line for `fsprof bench --help`.
    pub about: &'static str,
    /// The options it takes besides the common ones (an option two suites
    /// share is declared alike in both).
    pub options: &'static [Opt],
}

/// A benchmark: its name and options, their checks, and one run.
pub trait Suite: Sync {
    fn description(&self) -> &'static Description;

    fn name(&self) -> &'static str {
        self.description().name
    }

    fn about(&self) -> &'static str {
        self.description().about
    }

    fn options(&self) -> &'static [Opt] {
        self.description().options
    }

    /// Checks of its own options that need no I/O (the common ones are
    /// checked before).
    fn validate(&self, p: &Params) -> Result<(), ParamError>;

    /// Bytes it keeps on DIR at once.
    fn working_set(&self, p: &Params) -> u64;

    /// The file sizes of a sweep, each measured `--warmup` + `--runs`
    /// times and reported apart (`seq_read@4KiB`); `None` for a suite
    /// measured once per run.
    fn sweep(&self, p: &Params) -> Option<Vec<u64>> {
        let _ = p;
        None
    }

    /// One run of every phase (at file size `size` in a sweep).
    fn run_once(&self, ctx: &Ctx, size: u64) -> io::Result<Vec<PhaseRun>>;

    /// A line under the text table on how the figures were taken (the
    /// files a figure leaves out); `None` when there is nothing to say.
    fn figures_note(&self, p: &Params) -> Option<String> {
        let _ = p;
        None
    }

    /// Its options in a few words, for a chart's title (`11 files, 4 KiB
    /// I/O, unaligned`).
    fn summary(&self, p: &Params) -> String {
        let _ = p;
        String::new()
    }
}

/// What every suite needs from the runner.
pub struct Ctx<'a> {
    pub params: &'a Params,
    /// A private directory under DIR, removed afterwards.
    pub scratch: &'a Path,
    pub clock: Clock,
    pub resolution: Resolution,
}

impl Ctx<'_> {
    pub fn timing(&self) -> TimingLoop {
        TimingLoop::new(self.clock)
    }

    /// The suite's options, typed; an I/O error for the runner to report
    /// (the options were checked before the run).
    pub fn options<T: serde::de::DeserializeOwned>(&self) -> io::Result<T> {
        self.params
            .options_as()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
    }
}

/// One phase of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseRun {
    pub name: String,
    pub unit: &'static str,
    /// The run's figure (higher is better).
    pub value: f64,
    /// Per-file times, ns (sprite), first file included.
    pub file_ns: Vec<u64>,
    /// Latencies by op (the phase's own op, and e.g. its fsync).
    pub ops: Vec<OpStats>,
    /// Exact median of this run's per-operation latencies, ns.
    pub op_median_ns: f64,
    /// Share of the timed loops' wall time their thread was on a CPU.
    pub on_cpu: Option<f64>,
    /// Every latency of the phase's own op in this run, ns, in the order
    /// they ran (files in order, first file included); empty unless
    /// `--raw-samples`.
    pub op_ns: Vec<u64>,
    pub cache: Option<CacheCheck>,
    /// Where the run's time went, for suites that watch it.
    pub wait: Option<crate::result::RunWait>,
}

pub const MB_PER_S: &str = "MB/s";
pub const OPS_PER_S: &str = "ops/s";

/// `bytes / ns` in MB/s (10^6 bytes per second).
pub fn mb_per_s(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 1e3 / ns as f64
    }
}

pub fn median_ns(samples: &[&Samples]) -> f64 {
    let xs: Vec<f64> = samples
        .iter()
        .flat_map(|s| s.ns.iter().map(|&n| n as f64))
        .collect();
    fsprof_core::stats::median(&xs).unwrap_or(0.0)
}

/// The raw latencies a phase keeps: all of them in order with
/// `--raw-samples`, none otherwise.
pub fn raw(params: &Params, samples: &[&Samples]) -> Vec<u64> {
    if params.raw_samples {
        samples.iter().flat_map(|s| s.ns.iter().copied()).collect()
    } else {
        Vec::new()
    }
}

/// CPU time over wall time of several timed loops together.
pub fn on_cpu(samples: &[&Samples]) -> Option<f64> {
    let wall: u64 = samples.iter().map(|s| s.wall_ns).sum();
    let cpu: u64 = samples.iter().map(|s| s.cpu_ns).sum();
    Samples {
        ns: Vec::new(),
        wall_ns: wall,
        cpu_ns: cpu,
        ..Samples::default()
    }
    .on_cpu()
}

pub fn cstring(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The result of a libc call returning -1 on error.
pub fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn cvt_size(r: isize, want: usize) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else if r as usize != want {
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("short transfer: {r} of {want} bytes"),
        ))
    } else {
        Ok(())
    }
}
