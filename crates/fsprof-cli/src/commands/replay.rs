//! `fsprof replay REPLAY --root DIR`: a compiled trace replayed under DIR,
//! with the timing report (issue-time errors, per-second counts, elapsed
//! vs traced), the mismatches, and the replay's profile compared with the
//! trace's. Exit status: 0 when the results were the trace's (differences
//! that depend on timing aside, and up to `--max-mismatches` others), 1
//! when they were not (a difference, a stop under `--verify strict`, or a
//! call that ran out of room where the trace's had not), 2 when nothing
//! was replayed (bad input, a refused budget).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use fsprof_capture::Steps;
use fsprof_core::format::{to_json, write_atomic};
use fsprof_core::units::format_bytes;
use fsprof_replay::report::TimingFile;
use fsprof_replay::{
    load, replay as run_replay, Calls, Pace, Reads, ReplayOptions, Replayed, Verify,
};

use super::bar::Bar;
use crate::args::TextOrJson;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Compiled trace (from `fsprof compile`)
    pub replay: PathBuf,
    /// Directory every path of the trace is replayed under (the trace's `/`)
    #[arg(long, value_name = "DIR", required = true)]
    pub root: PathBuf,
    /// Create the trace's initial state under the (empty) root first
    #[arg(long)]
    pub prepare: bool,
    /// Replay at this multiple of the traced speed (2 = twice as fast)
    #[arg(long, value_name = "X", value_parser = parse_speed, conflicts_with = "afap")]
    pub speed: Option<f64>,
    /// As fast as possible (only the ordering constraints are kept)
    #[arg(long)]
    pub afap: bool,
    /// Compare results with the trace: stop at the first difference, report them, or not
    #[arg(long, value_enum, default_value_t = VerifyArg::Warn)]
    pub verify: VerifyArg,
    /// Replay reads against the current cache state, or skip them
    #[arg(long, value_enum, default_value_t = ReadsArg::Current)]
    pub reads: ReadsArg,
    /// Write the replay's profile to FILE
    #[arg(short, long, value_name = "PROFILE")]
    pub output: Option<PathBuf>,
    /// Write the timing report (JSON) to FILE
    #[arg(long, value_name = "FILE")]
    pub timing: Option<PathBuf>,
    /// The most the replay may allocate under the root, all commands and
    /// --prepare together (e.g. 512M, 20G); checked before it starts, with
    /// the free space there [default: half the free space under the root]
    #[arg(long, value_name = "SIZE", value_parser = fsprof_core::units::parse_bytes)]
    pub max_bytes: Option<u64>,
    /// Exit 0 even when up to N results differ from the trace (differences
    /// that depend on timing, such as EAGAIN or a lock, never count)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_mismatches: u64,
    /// Run the replay threads under SCHED_FIFO (priority 10), so that other
    /// processes cannot delay them (root or CAP_SYS_NICE; Linux's real-time
    /// throttling still leaves other tasks 5% of each CPU)
    #[arg(long)]
    pub realtime: bool,
    /// Make no calls: spin for each call's traced duration instead and take
    /// its traced result (the timing floor: what the schedule, the replayer
    /// and this machine put on the issue-time error without the calls'
    /// variation; nothing is made under the root but --prepare's state)
    #[arg(long)]
    pub dry_timing: bool,
    /// A test knob: spin NS ns after each call, as a deliberately slower
    /// replayer (bench/trace_replay.py's check that it resolves one)
    #[arg(long, value_name = "NS", default_value_t = 0, hide = true)]
    pub added_ns: u64,
    /// Replace PROFILE and FILE if they exist
    #[arg(short, long)]
    pub force: bool,
    /// How to print the timing report: text on standard error, or on
    /// standard output the JSON document --timing writes
    #[arg(long, value_enum, default_value_t = TextOrJson::Text)]
    pub format: TextOrJson,
    /// Don't print the timing report or the progress bar (the files are
    /// still written; warnings are still printed)
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum VerifyArg {
    Strict,
    Warn,
    Off,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ReadsArg {
    Current,
    Skip,
}

/// `--realtime`'s SCHED_FIFO priority: above ordinary real-time helpers
/// (1–9), well below the kernel's own threads (50, 99).
const REALTIME_PRIORITY: i32 = 10;

fn parse_speed(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a positive speed factor")),
    }
}

pub fn replay(a: ReplayArgs) -> Result<i32> {
    for p in [&a.output, &a.timing].into_iter().flatten() {
        fsprof_core::output::check_output(p, a.force)?;
    }
    let compiled = load(&a.replay)?;
    let opts = options(&a);
    let mut bar = Bar::new("{msg} {bar:40} {pos}/{len} commands, {elapsed}").hidden(a.quiet);
    bar.phase("replay", compiled.commands.len() as u64);
    let r = run_replay(&compiled, &opts, &mut |n| bar.to(n))?;
    drop(bar);
    if r.prepared > 0 {
        fsprof_sys::diag!(
            "fsprof: prepared {} initial entr(ies) under {}",
            r.prepared,
            a.root.display()
        );
    }
    if !r.prepare_failures.is_empty() {
        fsprof_sys::diag!(
            "fsprof: warning: {} initial entr(ies) could not be made (their first accesses will differ): {}",
            r.prepare_failures.len(),
            r.prepare_failures.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
        );
    }
    let timing = TimingFile::new(&a.replay, &r.timing, &r.fidelity, &r.fidelity_noise);
    if !a.quiet {
        print_report(&a, &r, &timing)?;
    }
    if let Some(p) = &a.output {
        write_atomic(p, to_json(&r.replayed).as_bytes(), a.force)?;
        fsprof_sys::diag!("fsprof: replay profile written to {}", p.display());
    }
    if let Some(p) = &a.timing {
        write_atomic(
            p,
            serde_json::to_string_pretty(&timing)?.as_bytes(),
            a.force,
        )
        .with_context(|| format!("writing {}", p.display()))?;
        fsprof_sys::diag!("fsprof: timing report written to {}", p.display());
    }
    let verdict = r.timing.verdict(a.max_mismatches);
    if let Some(why) = &verdict.why {
        fsprof_sys::diag!("fsprof: {why}");
    }
    Ok(verdict.code)
}

fn options(a: &ReplayArgs) -> ReplayOptions {
    ReplayOptions {
        root: a.root.clone(),
        prepare: a.prepare,
        pace: if a.afap {
            Pace::Afap
        } else {
            Pace::Speed(a.speed.unwrap_or(1.0))
        },
        verify: match a.verify {
            VerifyArg::Strict => Verify::Strict,
            VerifyArg::Warn => Verify::Warn,
            VerifyArg::Off => Verify::Off,
        },
        reads: match a.reads {
            ReadsArg::Current => Reads::Current,
            ReadsArg::Skip => Reads::Skip,
        },
        realtime: a.realtime.then_some(REALTIME_PRIORITY),
        calls: if a.dry_timing {
            Calls::Dry
        } else {
            Calls::Made
        },
        added_ns: a.added_ns,
        max_bytes: a.max_bytes,
    }
}

/// The timing report on standard error (with the space budget and the
/// fidelity comparison), or its JSON document on standard output.
fn print_report(a: &ReplayArgs, r: &Replayed, timing: &TimingFile) -> Result<()> {
    match a.format {
        TextOrJson::Text => {
            fsprof_sys::diag!(
                "fsprof: the replay could allocate up to {} of a budget of {} ({} free under {}){}",
                format_bytes(r.demand.total as f64),
                format_bytes(r.budget.bytes as f64),
                format_bytes(r.budget.space.free as f64),
                a.root.display(),
                if r.file_size_limited {
                    "; no file could grow past the budget (a file system without holes)"
                } else {
                    ""
                }
            );
            fsprof_sys::diag_nonl!("{}", r.timing.text());
            fsprof_sys::diag!("\nfidelity: the trace's latencies (A) vs the replay's (B), per op:");
            fsprof_sys::diag_nonl!(
                "{}",
                fsprof_report::analysis::comparison_text(&r.fidelity, "trace", "replay")
            );
            fsprof_sys::diag!("{}", noise_line(&r.fidelity_noise));
        }
        TextOrJson::Json => {
            crate::files::write_stdout((serde_json::to_string_pretty(&timing)? + "\n").as_bytes())?
        }
    }
    Ok(())
}

/// The EMD each op's counts of calls show by chance, beside the fidelity
/// table's scores: an op of a few dozen calls cannot come closer.
fn noise_line(noise: &std::collections::BTreeMap<String, f64>) -> String {
    let ops: Vec<String> = noise.iter().map(|(op, n)| format!("{op} {n:.2}")).collect();
    format!(
        "sampling noise (the EMD two runs with these counts of calls differ by through chance alone): {}",
        ops.join(", ")
    )
}
