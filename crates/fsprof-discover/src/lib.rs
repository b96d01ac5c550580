//! `fsprof discover`: infers a file system's hidden parameters from how
//! latency changes along a file (fsdisco, Plonka 2007): the block size
//! from the period of write latency, cross-checked by direct reads of a
//! sparse file; the read-ahead from what a cold read leaves cached past
//! itself; the page-cache capacity from where a forward read after a
//! backward one starts to reach the device, inside a memory cgroup of a
//! known limit; the number of direct block pointers of a block-mapped
//! inode from the one block write that also allocates an indirect block.
//!
//! Each [`Finding`] carries the value the kernel exposes for the same
//! parameter (statfs, sysfs, cgroup), a confidence statement, and the
//! per-offset minimum and median across iterations it was inferred from;
//! [`plot`] draws them, [`profile`] turns the raw samples into an fsprof
//! latency profile.
//!
//! Layout: [`target`] (the directory and its file system), [`exposed`]
//! (what the kernel states), [`cold`] (emptying caches between
//! iterations), [`series`] and [`classify`] (summaries, two latency
//! levels, steps, confidence), [`methods`] (one module per method).

pub mod cgroup;
pub mod classify;
pub mod cold;
mod error;
pub mod exposed;
pub mod finding;
pub mod methods;
pub mod plot;
pub mod profile;
pub mod render;
pub mod series;
pub mod target;
pub mod testing;
mod timing;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use cold::{ColdChoice, ColdMethod};
pub use error::DiscoverError;
pub use finding::{Candidate, Finding, Parameter, Status};

/// What the caller sees while a discovery runs: its phases, in steps.
pub use fsprof_capture::{Silent, Steps as Progress};

/// The caller's hooks: progress, and whether to stop (Ctrl-C).
pub struct Ctx<'a> {
    pub progress: &'a mut dyn Progress,
    pub stop: &'a dyn Fn() -> bool,
}

impl Ctx<'_> {
    /// `Err(Interrupted)` once the caller asked to stop.
    pub fn check(&self) -> Result<(), DiscoverError> {
        if (self.stop)() {
            Err(DiscoverError::Interrupted)
        } else {
            Ok(())
        }
    }
}

/// What to discover, where, and how.
#[derive(Clone, Debug)]
pub struct Options {
    pub dir: PathBuf,
    pub what: Vec<Parameter>,
    /// Iterations of every method; each has its own default otherwise.
    pub iterations: Option<u32>,
    /// The block device under `dir` (for read-ahead settings and remounts).
    pub device: Option<PathBuf>,
    pub cold: ColdChoice,
    /// The memory cgroup limit for the page-cache method.
    pub cgroup_limit: Option<u64>,
    /// fsprof's command line, recorded in the report.
    pub command: Vec<String>,
}

/// Default iterations per method: cheap ones many times (the minimum per
/// offset needs a few undisturbed runs), cold-cache ones fewer.
pub fn default_iterations(p: Parameter) -> u32 {
    match p {
        Parameter::BlockSize => 20,
        Parameter::Readahead => 3,
        Parameter::PageCache => 3,
        Parameter::DirectBlocks => 30,
    }
}

/// Where the discovery ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub dir: PathBuf,
    pub fs_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_point: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub page_size: u64,
}

/// A whole discovery: the `-o RESULT.json` document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always `fsprof-discovery`.
    pub format: String,
    pub format_version: u32,
    pub fsprof_version: String,
    pub host: String,
    pub kernel: String,
    pub command: Vec<String>,
    pub start_time: String,
    pub duration_ns: u64,
    /// The clock every latency was read with (`tsc` or `monotonic`).
    pub clock: fsprof_core::profile::ClockSource,
    /// What fsprof-bench's timing loop adds to each timed call here, ns
    /// (measured, reported, not subtracted).
    pub timing_overhead_ns: f64,
    pub target: TargetInfo,
    /// How caches were emptied between iterations, and why that way.
    pub cold_cache: ColdMethod,
    pub cold_cache_why: String,
    /// Coolings that could not use `cold_cache` and how they emptied the
    /// caches instead (a remount that left the file system alive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_cache_fallback: Option<String>,
    pub findings: Vec<Finding>,
}

pub const FORMAT_NAME: &str = "fsprof-discovery";

/// Runs the method of `p`; direct blocks use the block size found before.
fn one(
    p: Parameter,
    opts: &Options,
    (t, scratch, cooler): (&target::Target, &target::Scratch, &cold::Cooler),
    findings: &[Finding],
    ctx: &mut Ctx,
) -> Result<Finding, DiscoverError> {
    let iters = opts.iterations.unwrap_or_else(|| default_iterations(p));
    let device = opts.device.as_deref();
    match p {
        Parameter::BlockSize => {
            methods::block_size::discover(t, scratch, (iters, iters.min(10)), ctx)
        }
        Parameter::Readahead => {
            methods::readahead::discover(t, scratch, device, cooler, iters, ctx)
        }
        Parameter::DirectBlocks => {
            let found = findings
                .iter()
                .find(|f| f.parameter == Parameter::BlockSize && f.status == Status::Found)
                .and_then(|f| f.value);
            methods::direct_blocks::discover(t, scratch, found, iters, ctx)
        }
        Parameter::PageCache => {
            methods::page_cache::discover(t, scratch, opts.cgroup_limit, cooler, iters, ctx)
        }
    }
}

/// Runs the discoveries `opts.what` asks for, in that order.
pub fn discover(opts: &Options, ctx: &mut Ctx) -> Result<Report, DiscoverError> {
    let start_wall = fsprof_sys::clock::wall_unix_ns();
    let start = fsprof_sys::clock::mono_ns();
    let t = target::Target::probe(&opts.dir)?;
    let scratch = target::Scratch::create(&t.dir)?;
    let cooler = cold::Cooler::choose(opts.cold, &t, opts.device.as_deref())?;
    let mut findings = Vec::new();
    for &p in &opts.what {
        ctx.check()?;
        let f = match one(p, opts, (&t, &scratch, &cooler), &findings, ctx) {
            Ok(f) => f,
            // A method that cannot get a cold cache loses its own finding,
            // not the others'.
            Err(DiscoverError::Cold(e)) if e.method_only() => {
                Finding::new(p, methods::method_of(p), series::Summary::Min)
                    .undetermined(format!("not measured: cold cache: {e}"), Vec::new())
            }
            Err(e) => return Err(e),
        };
        findings.push(f);
    }
    Ok(Report {
        format: FORMAT_NAME.into(),
        format_version: 1,
        fsprof_version: env!("CARGO_PKG_VERSION").into(),
        host: fsprof_sys::host::hostname(),
        kernel: fsprof_sys::host::kernel_release(),
        command: opts.command.clone(),
        start_time: fsprof_core::units::rfc3339_utc(start_wall),
        duration_ns: fsprof_sys::clock::mono_ns() - start,
        clock: timing::Clock::process().describe().source,
        timing_overhead_ns: timing::Overhead::process().per_op_ns,
        target: TargetInfo {
            dir: t.dir.clone(),
            fs_type: t.fs_type.clone(),
            mount_point: t.mount.as_ref().map(|m| m.mount_point.clone()),
            source: t.mount.as_ref().map(|m| m.source.clone()),
            page_size: t.page_size,
        },
        cold_cache: cooler.method,
        cold_cache_why: cooler.why.clone(),
        cold_cache_fallback: cooler.fallbacks(),
        findings,
    })
}
