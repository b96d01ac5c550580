//! What a replay reports (Replayfs §4.3, Figs 6–8, and beyond): the
//! distribution of issue-time errors (CDF, median, p99, max), per traced
//! second the mean error and the op counts of the trace and of the replay,
//! elapsed vs traced time, the results that differ from the trace (those on
//! a file's first access, where the initial state was wrong, apart), and
//! the replay's profile compared with the trace's, op by op.

use std::collections::BTreeMap;

use serde::Serialize;

use fsprof_analysis::compare::Comparison;
use fsprof_capture::meta;
use fsprof_core::profile::{Clock, ClockSource, Layer, Meta};
use fsprof_core::units::format_ns;
use fsprof_core::{BucketLayout, Profile, Resolution};
use fsprof_trace::replayfile::{Command, Compiled, CMD_FIRST_ACCESS};
use fsprof_trace::show::errno_name;

use crate::engine::{Late, Pace, Run, TimeSplit};

#[derive(Clone, Debug, Serialize)]
pub struct Mismatch {
    pub command: usize,
    pub thread: u32,
    pub op: String,
    pub path: Option<String>,
    pub t_ns: u64,
    pub expected: String,
    pub got: String,
    pub first_access: bool,
    /// It depends on timing ([`timing_dependent`]), not on the file system.
    pub timing_dependent: bool,
}

/// A call that ran longer than traced. In a paced replay every command
/// queued behind it is late until the traced program's own time between
/// calls has absorbed the excess (a median 190 ns a call on a traced
/// `tar`), so a replay's p99 is about the size of its few largest ones.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Excess {
    pub command: usize,
    pub op: String,
    pub path: Option<String>,
    /// When it was traced, ns after the trace's start.
    pub t_ns: u64,
    pub traced_ns: u64,
    pub replayed_ns: u64,
}

/// How many of the largest excesses a report names.
const EXCESSES: usize = 5;

/// A command's path, as text (lossy UTF-8).
fn path_text(c: &Compiled, cmd: &Command) -> Option<String> {
    cmd.path
        .map(|p| String::from_utf8_lossy(&c.strings[p as usize]).into_owned())
}

/// The calls that ran longest beyond their traced duration, largest
/// first.
fn largest_excesses(c: &Compiled, run: &Run) -> Vec<Excess> {
    let mut v: Vec<(u64, usize)> = run
        .outcomes
        .iter()
        .zip(&c.commands)
        .enumerate()
        .filter(|(_, (o, cmd))| o.timed() && o.latency_ns > cmd.dur_ns)
        .map(|(i, (o, cmd))| (o.latency_ns - cmd.dur_ns, i))
        .collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v.iter()
        .take(EXCESSES)
        .map(|&(_, i)| {
            let cmd = &c.commands[i];
            Excess {
                command: i,
                op: cmd.op.name().into(),
                path: path_text(c, cmd),
                t_ns: cmd.t_ns,
                traced_ns: cmd.dur_ns,
                replayed_ns: run.outcomes[i].latency_ns,
            }
        })
        .collect()
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Quantiles {
    pub median_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Second {
    pub second: u64,
    pub traced_ops: u64,
    pub replayed_ops: u64,
    /// Mean issue-time error of the commands traced in this second.
    pub mean_error_ns: f64,
}

/// The issue-time error summed over the commands, by cause (paced
/// replays; [`crate::lateness`]).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct ErrorParts {
    /// The replayer's own time between calls due back to back (its
    /// per-command cost above the traced gaps).
    pub behind_ns: u64,
    /// Calls that ran longer than traced, by less than 50 µs each.
    pub slower_ns: u64,
    /// Calls that ran 50 µs or more longer than traced.
    pub stalled_ns: u64,
    pub constraint_ns: u64,
    /// Late wake-ups and preemptions while spinning.
    pub wakeup_ns: u64,
}

/// Commands issued later than a threshold, by their dominant cause
/// (paced replays).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct LateCauses {
    pub over_ns: u64,
    /// Mostly the replayer's own cost: its time between calls due back to
    /// back beyond the traced program's own (or this one's preparation).
    pub behind: u64,
    /// Mostly earlier calls of the thread that ran longer than traced, by
    /// less than 50 µs each.
    pub slower: u64,
    /// Mostly waiting for a command of another thread that completed late.
    pub constraint: u64,
    /// Mostly a late wake-up or a preemption while spinning, of this
    /// command or of one it queued behind.
    pub wakeup: u64,
    /// Mostly an earlier call of the thread that ran 50 µs or more longer
    /// than traced: preempted during it, or the file system was slower.
    pub stalled: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TimingReport {
    pub pace: String,
    /// `--dry-timing`: no call was made, each command spun for its traced
    /// duration (the timing floor).
    pub dry_timing: bool,
    /// The trace's calls the replay holds (set-up commands not counted).
    pub commands: u64,
    pub issued: u64,
    /// Set-up commands: descriptors the trace saw only at their first
    /// use, opened anew before it (not timed).
    pub setup: u64,
    pub skipped_reads: u64,
    pub elapsed_ns: u64,
    pub traced_ns: u64,
    /// Issue-time errors of the issued commands (all 0 with --afap).
    pub error: Quantiles,
    /// (error ns, fraction of commands issued within it), log-spaced.
    pub cdf: Vec<(u64, f64)>,
    pub per_second: Vec<Second>,
    /// Why commands were late, above 10 µs, 100 µs and 1 ms.
    pub late: Vec<LateCauses>,
    /// The errors' parts by cause, summed.
    pub error_parts: ErrorParts,
    /// The errors less their calls' and machine parts (slower calls,
    /// stalls, late wake-ups): the replayer's own share and the waits for
    /// other threads.
    pub error_without_machine: Quantiles,
    /// The replayer's own time from a call's return to the thread's next
    /// call's issue, over the calls due by then (all, with --afap): its
    /// per-command cost, measured directly rather than through the lag.
    pub between_calls: Quantiles,
    /// The calls that ran longest beyond their traced durations, largest
    /// first ([`Excess`]).
    pub largest_excesses: Vec<Excess>,
    /// Involuntary context switches of the replay threads during the
    /// replay (getrusage): how often the machine took their CPU away.
    pub preemptions: u64,
    /// CPU time (user and system) of the replay threads from the start.
    pub cpu_ns: u64,
    /// Where their time went: the calls, the replayer's own work, the
    /// waits for the commands' times.
    pub time_split: TimeSplit,
    /// Replay threads that ran under SCHED_FIFO (`--realtime`), of `threads`.
    pub realtime_threads: u64,
    pub threads: u64,
    pub mismatches: u64,
    /// Mismatches on a file's first access: the initial state was wrong.
    pub initial_state_mismatches: u64,
    /// Mismatches that depend on timing ([`timing_dependent`]), which
    /// do not make the replay fail.
    pub timing_dependent_mismatches: u64,
    /// Calls that failed for want of room (ENOSPC, EDQUOT, EFBIG) where
    /// the trace had not, whether results were verified or not.
    pub out_of_space: u64,
    pub mismatch_examples: Vec<Mismatch>,
    pub aborted: bool,
}

impl Quantiles {
    fn text(&self) -> String {
        format!(
            "median {}, p90 {}, p99 {}, max {}",
            format_ns(self.median_ns as f64),
            format_ns(self.p90_ns as f64),
            format_ns(self.p99_ns as f64),
            format_ns(self.max_ns as f64)
        )
    }

    fn of_sorted(sorted: &[u64]) -> Quantiles {
        let n = sorted.len();
        Quantiles {
            median_ns: quantile(sorted, 0.5),
            p90_ns: quantile(sorted, 0.9),
            p99_ns: quantile(sorted, 0.99),
            max_ns: sorted.last().copied().unwrap_or(0),
            mean_ns: if n == 0 {
                0.0
            } else {
                sorted.iter().map(|&e| e as f64).sum::<f64>() / n as f64
            },
        }
    }
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let k = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[k]
}

fn result_text(ret: i64, errno: i32) -> String {
    if errno != 0 || ret == -1 {
        format!("-1 {}", errno_name(errno))
    } else {
        ret.to_string()
    }
}

pub fn timing(c: &Compiled, run: &Run, pace: Pace) -> TimingReport {
    let issued = || run.outcomes.iter().filter(|o| o.timed());
    let setup = run.outcomes.iter().filter(|o| o.setup).count() as u64;
    let mut errors: Vec<u64> = issued().map(|o| o.error_ns).collect();
    errors.sort_unstable();
    let mut own: Vec<u64> = issued()
        .map(|o| o.error_ns.saturating_sub(o.parts.machine()))
        .collect();
    own.sort_unstable();
    let mut between: Vec<u64> = issued().filter_map(|o| o.between_ns).collect();
    between.sort_unstable();
    let error_parts = issued().fold(ErrorParts::default(), |mut e, o| {
        e.behind_ns += o.parts.behind;
        e.slower_ns += o.parts.slower;
        e.stalled_ns += o.parts.stall;
        e.constraint_ns += o.parts.constraint;
        e.wakeup_ns += o.parts.wakeup;
        e
    });
    let m = Mismatches::of(c, run);
    TimingReport {
        pace: match pace {
            Pace::Afap => "afap".into(),
            Pace::Speed(s) => format!("speed {s}"),
        },
        dry_timing: run.dry,
        commands: c.commands.len() as u64 - setup,
        issued: errors.len() as u64,
        setup,
        skipped_reads: run.outcomes.iter().filter(|o| !o.issued).count() as u64,
        elapsed_ns: run.elapsed_ns,
        traced_ns: c.header.duration_ns,
        error: Quantiles::of_sorted(&errors),
        cdf: cdf(&errors),
        per_second: per_second(c, run),
        late: match pace {
            Pace::Afap => Vec::new(),
            Pace::Speed(_) => late_causes(run),
        },
        error_parts,
        error_without_machine: Quantiles::of_sorted(&own),
        between_calls: Quantiles::of_sorted(&between),
        largest_excesses: largest_excesses(c, run),
        preemptions: run.preemptions,
        cpu_ns: run.cpu_ns,
        time_split: run.split,
        realtime_threads: run.realtime_threads,
        threads: run.threads,
        mismatches: m.count,
        initial_state_mismatches: m.initial,
        timing_dependent_mismatches: m.timing_dependent,
        out_of_space: m.out_of_space,
        mismatch_examples: m.examples,
        aborted: run.aborted,
    }
}

/// The share of the errors within 1-2-5 steps from 100 ns to 10 s, up to
/// the first step that holds them all.
fn cdf(sorted: &[u64]) -> Vec<(u64, f64)> {
    let n = sorted.len();
    let mut cdf = Vec::new();
    for exp in 2..=10u32 {
        for m in [1u64, 2, 5] {
            let edge = m * 10u64.pow(exp);
            let within = sorted.partition_point(|&e| e <= edge);
            if n > 0 {
                cdf.push((edge, within as f64 / n as f64));
            }
            if within == n {
                return cdf;
            }
        }
    }
    cdf
}

/// Per traced second: the commands traced in it, those replayed in it,
/// and the mean error of those traced in it (Replayfs Figs 7-8).
fn per_second(c: &Compiled, run: &Run) -> Vec<Second> {
    let seconds =
        (c.header.duration_ns / 1_000_000_000 + 1).max(run.elapsed_ns / 1_000_000_000 + 1) as usize;
    let mut rows: Vec<Second> = (0..seconds)
        .map(|s| Second {
            second: s as u64,
            traced_ops: 0,
            replayed_ops: 0,
            mean_error_ns: 0.0,
        })
        .collect();
    let mut err_n = vec![0u64; seconds];
    for (cmd, o) in c.commands.iter().zip(&run.outcomes) {
        if o.setup {
            continue;
        }
        let s = (cmd.t_ns / 1_000_000_000) as usize;
        if let Some(row) = rows.get_mut(s) {
            row.traced_ops += 1;
            if o.issued {
                row.mean_error_ns += o.error_ns as f64;
                err_n[s] += 1;
            }
        }
        if o.issued {
            if let Some(row) = rows.get_mut((o.issued_ns / 1_000_000_000) as usize) {
                row.replayed_ops += 1;
            }
        }
    }
    for (row, n) in rows.iter_mut().zip(err_n) {
        row.mean_error_ns /= n.max(1) as f64;
    }
    rows
}

/// Commands later than 10 µs, 100 µs and 1 ms, by dominant cause.
fn late_causes(run: &Run) -> Vec<LateCauses> {
    let mut late: Vec<LateCauses> = [10_000, 100_000, 1_000_000]
        .into_iter()
        .map(|over_ns| LateCauses {
            over_ns,
            ..Default::default()
        })
        .collect();
    for o in run.outcomes.iter().filter(|o| o.timed()) {
        for l in late.iter_mut().filter(|l| o.error_ns > l.over_ns) {
            match o.late {
                Late::Behind => l.behind += 1,
                Late::Slower => l.slower += 1,
                Late::Constraint => l.constraint += 1,
                Late::Wakeup => l.wakeup += 1,
                Late::Stall => l.stalled += 1,
                Late::No => {}
            }
        }
    }
    late
}

/// Whether a difference from the trace depends on timing rather than on
/// the file system: a call that would block (EAGAIN/EWOULDBLOCK: a lock
/// another process held, a non-blocking descriptor), was interrupted
/// (EINTR), or took a lock (`flock`), on either side.
pub fn timing_dependent(op: &str, traced_errno: i32, got_errno: i32) -> bool {
    let timed = |e: i32| e == libc::EAGAIN || e == libc::EINTR;
    op == "flock" || timed(traced_errno) || timed(got_errno)
}

/// The results that differ from the trace, by kind.
#[derive(Default)]
struct Mismatches {
    count: u64,
    initial: u64,
    timing_dependent: u64,
    out_of_space: u64,
    examples: Vec<Mismatch>,
}

impl Mismatches {
    fn of(c: &Compiled, run: &Run) -> Mismatches {
        let mut m = Mismatches::default();
        for (i, (cmd, o)) in c.commands.iter().zip(&run.outcomes).enumerate() {
            if !o.issued {
                continue;
            }
            // Checked whatever --verify says: the replay did not do what
            // the trace did, and a full disk is no one else's business.
            if crate::budget::out_of_space(o.errno) && o.errno != cmd.errno {
                m.out_of_space += 1;
            }
            if !o.mismatch {
                continue;
            }
            m.count += 1;
            let first = cmd.cflags & CMD_FIRST_ACCESS != 0;
            let timed = timing_dependent(cmd.op.name(), cmd.errno, o.errno);
            m.initial += first as u64;
            m.timing_dependent += timed as u64;
            if m.examples.len() < 20 {
                m.examples.push(Mismatch {
                    command: i,
                    thread: cmd.thread,
                    op: cmd.op.name().into(),
                    path: path_text(c, cmd),
                    t_ns: cmd.t_ns,
                    expected: result_text(cmd.ret, cmd.errno),
                    got: result_text(o.ret, o.errno),
                    first_access: first,
                    timing_dependent: timed,
                });
            }
        }
        m
    }
}

/// What a replay's exit status says, and why when it is not 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// 0: the results were the trace's (timing-dependent differences
    /// aside, and up to `--max-mismatches` others); 1: they were not.
    pub code: i32,
    pub why: Option<String>,
}

impl TimingReport {
    /// The differences that count against `--max-mismatches`.
    pub fn counted_mismatches(&self) -> u64 {
        self.mismatches
            .saturating_sub(self.timing_dependent_mismatches)
    }

    pub fn verdict(&self, max_mismatches: u64) -> Verdict {
        let fail = |why: String| Verdict {
            code: 1,
            why: Some(why),
        };
        if self.out_of_space > 0 {
            return fail(format!(
                "the file system under the root ran out of room (ENOSPC, EDQUOT or EFBIG) in {} call(s) the trace had not seen fail that way: the replay did not do what the trace did",
                self.out_of_space
            ));
        }
        if self.aborted {
            return fail(
                "stopped at the first result that differs from the trace (--verify strict)".into(),
            );
        }
        let n = self.counted_mismatches();
        if n > max_mismatches {
            return fail(format!(
                "{n} result(s) differ from the trace{}; --max-mismatches {} tolerated",
                if self.timing_dependent_mismatches > 0 {
                    format!(
                        " ({} timing-dependent one(s) not counted)",
                        self.timing_dependent_mismatches
                    )
                } else {
                    String::new()
                },
                max_mismatches
            ));
        }
        Verdict { code: 0, why: None }
    }
}

/// The traced and the replayed latencies of the issued commands, as two
/// profiles of the same ops (layer `user`), so that `compare` can score
/// them.
pub fn profiles(c: &Compiled, run: &Run) -> (Profile, Profile) {
    let layout = BucketLayout::new(Resolution::default());
    let mut traced = Layer::new(fsprof_core::profile::layer::USER);
    let mut replayed = Layer::new(fsprof_core::profile::layer::USER);
    let add = |l: &mut Layer, op: &str, ns: u64, failed: bool| {
        l.op_mut(op).record(&layout, ns, failed);
    };
    for (cmd, o) in c.commands.iter().zip(&run.outcomes) {
        if !o.timed() {
            continue;
        }
        let op = cmd.op.name();
        add(&mut traced, op, cmd.dur_ns, cmd.errno != 0 || cmd.ret == -1);
        add(&mut replayed, op, o.latency_ns, o.errno != 0 || o.ret == -1);
    }
    traced.normalize();
    replayed.normalize();
    let start = fsprof_sys::clock::wall_unix_ns();
    let meta = |tool: &str, duration_ns: u64| Meta {
        command: c.header.trace_command.clone(),
        clock: Clock {
            source: "monotonic".into(),
            tsc_hz: None,
        },
        ..meta::timed(
            meta::describe(tool, &[], Resolution::default()),
            start,
            duration_ns,
        )
    };
    let mut t = Profile::new(meta("trace", c.header.duration_ns));
    t.layers = vec![traced];
    let mut r = Profile::new(meta("replay", run.elapsed_ns));
    if let Some(hz) = run.tsc_hz {
        r.meta.clock = Clock {
            source: ClockSource::Tsc,
            tsc_hz: Some(hz),
        };
    }
    r.layers = vec![replayed];
    (t, r)
}

impl TimingReport {
    /// The CPU per command: the sleeps' share (measured around them),
    /// and the wall time per command of the calls, the replayer's own
    /// work and the pre-spin (before a command's time, with or without a
    /// sleep before it), which the rest of the CPU went to (less what the
    /// threads spent blocked in calls or preempted).
    fn cpu_text(&self) -> String {
        let n = self.issued.max(1) as f64;
        let x = &self.time_split;
        let per = |ns: u64| format_ns(ns as f64 / n);
        format!(
            "CPU per command {}: {} sleeping and waking ({} sleep(s)), {} else; wall time per command: calls {}, the replayer's own work {}, pre-spin {} ({} of it after a sleep), asleep {}",
            per(self.cpu_ns),
            per(x.sleep_cpu_ns),
            x.sleeps,
            per(self.cpu_ns.saturating_sub(x.sleep_cpu_ns)),
            per(x.calls_ns),
            per(x.own_ns),
            per(x.spin_ns + x.woken_spin_ns),
            per(x.woken_spin_ns),
            per(x.slept_ns.saturating_sub(x.woken_spin_ns)),
        )
    }

    /// The calls that ran longest beyond their traced time.
    fn excess_text(&self) -> String {
        let x: Vec<String> = self
            .largest_excesses
            .iter()
            .map(|e| {
                format!(
                    "{} #{}{} at {}: {} traced, {} replayed",
                    e.op,
                    e.command,
                    e.path
                        .as_deref()
                        .map(|p| format!(" {p}"))
                        .unwrap_or_default(),
                    format_ns(e.t_ns as f64),
                    format_ns(e.traced_ns as f64),
                    format_ns(e.replayed_ns as f64)
                )
            })
            .collect();
        format!(
            "calls that ran longest beyond their traced time (in a paced replay each delays the calls queued behind it): {}",
            x.join("; ")
        )
    }

    /// The paced replays' part of [`TimingReport::text`]: the error, its
    /// causes, and the per-second table.
    fn paced_text(&self, s: &mut String) {
        use std::fmt::Write;
        let t = self;
        let _ = writeln!(s, "  issue-time error: {}", t.error.text());
        let cdf: Vec<String> = t
            .cdf
            .iter()
            .map(|(ns, f)| format!("≤{} {:.1}%", format_ns(*ns as f64), f * 100.0))
            .collect();
        let _ = writeln!(s, "  CDF: {}", cdf.join(", "));
        // The replayer's part (behind) apart from the machine's
        // (stalled, woke late) and the workload's (another thread).
        let p = &t.error_parts;
        let sum = (p.behind_ns + p.slower_ns + p.stalled_ns + p.constraint_ns + p.wakeup_ns).max(1)
            as f64;
        let part = |ns: u64| format!("{} ({:.0}%)", format_ns(ns as f64), ns as f64 * 100.0 / sum);
        let _ = writeln!(
            s,
            "  error by cause, summed over the commands: behind (the replayer's per-command cost) {}, slower calls (<50µs longer than traced each) {}, stalled (calls ≥50µs longer than traced: preempted or a slower file system) {}, waiting for another thread {}, woke or ran late (scheduling) {}",
            part(p.behind_ns),
            part(p.slower_ns),
            part(p.stalled_ns),
            part(p.constraint_ns),
            part(p.wakeup_ns)
        );
        let _ = writeln!(
            s,
            "  issue-time error less the calls' and the machine's parts (slower calls, stalls, late wake-ups): {}",
            t.error_without_machine.text()
        );
        for l in &t.late {
            let _ = writeln!(
                s,
                "  late by more than {}, by main cause: {} behind, {} slower calls, {} stalled, {} waiting for another thread, {} woke or ran late",
                format_ns(l.over_ns as f64),
                l.behind,
                l.slower,
                l.stalled,
                l.constraint,
                l.wakeup
            );
        }
        let _ = writeln!(s, "  second  traced ops  replayed ops  mean error");
        for sec in t.per_second.iter().take(30) {
            let _ = writeln!(
                s,
                "  {:>6}  {:>10}  {:>12}  {:>10}",
                sec.second,
                sec.traced_ops,
                sec.replayed_ops,
                format_ns(sec.mean_error_ns)
            );
        }
    }

    /// The report as `fsprof replay` prints it on standard error.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let t = self;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "fsprof: replayed {} of {} command(s) ({}{}): elapsed {} vs traced {}{}{}",
            t.issued,
            t.commands,
            t.pace,
            if t.dry_timing {
                ", dry: no calls made, each spun for its traced duration"
            } else {
                ""
            },
            format_ns(t.elapsed_ns as f64),
            format_ns(t.traced_ns as f64),
            if t.setup > 0 {
                format!(
                    "; {} set-up command(s) (descriptors the trace saw only at their first use, opened anew)",
                    t.setup
                )
            } else {
                String::new()
            },
            if t.skipped_reads > 0 {
                format!(
                    ", {} not issued ({})",
                    t.skipped_reads,
                    if t.aborted {
                        "after the stop, or reads skipped"
                    } else {
                        "reads skipped"
                    }
                )
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            s,
            "  replay threads: {}, CPU {} ({} per command), preempted {} time(s) (involuntary context switches){}",
            t.threads,
            format_ns(t.cpu_ns as f64),
            format_ns(t.cpu_ns as f64 / t.issued.max(1) as f64),
            t.preemptions,
            if t.realtime_threads > 0 {
                format!(", {} under SCHED_FIFO", t.realtime_threads)
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            s,
            "  the replayer's own time between calls due back to back: {}",
            t.between_calls.text()
        );
        let _ = writeln!(s, "  {}", t.cpu_text());
        if !t.largest_excesses.is_empty() {
            let _ = writeln!(s, "  {}", t.excess_text());
        }
        if t.pace != "afap" {
            t.paced_text(&mut s);
        }
        let _ = writeln!(
            s,
            "  mismatches: {} ({} on a file's first access: the initial state differed; {} timing-dependent){}",
            t.mismatches,
            t.initial_state_mismatches,
            t.timing_dependent_mismatches,
            if t.aborted {
                "; stopped at the first (--verify strict)"
            } else {
                ""
            }
        );
        for m in &t.mismatch_examples {
            let _ = writeln!(
                s,
                "    #{} thread {} {}({}) at +{}: traced {}, replayed {}{}",
                m.command,
                m.thread,
                m.op,
                m.path.as_deref().unwrap_or(""),
                format_ns(m.t_ns as f64),
                m.expected,
                m.got,
                match (m.first_access, m.timing_dependent) {
                    (true, _) => " [first access]",
                    (_, true) => " [timing-dependent]",
                    _ => "",
                }
            );
        }
        s
    }
}

/// The file `fsprof replay --timing FILE` writes: the timing report and
/// the per-op fidelity scores (the same keys and values the CLI once put
/// in a `json!` map; the top-level keys keep that map's order).
#[derive(Serialize)]
pub struct TimingFile<'a> {
    pub fidelity: Vec<FidelityRow<'a>>,
    pub fsprof_version: &'static str,
    /// The compiled trace replayed.
    pub replay: String,
    /// `fsprof-replay-timing`.
    pub report: &'static str,
    pub timing: &'a TimingReport,
}

/// One op of the fidelity comparison, trace (A) against replay (B).
#[derive(Serialize)]
pub struct FidelityRow<'a> {
    pub interesting: bool,
    pub layer: &'a str,
    pub op: &'a str,
    /// The EMD (powers of two) that sampling alone puts between two runs
    /// with these counts of calls ([`fidelity_noise`]).
    pub noise: Option<f64>,
    pub reason: String,
    pub score: Option<f64>,
}

/// Per op, the EMD in powers of two that sampling alone would put between
/// the trace's and the replay's histograms with their counts of calls, if
/// both came from one distribution
/// ([`fsprof_analysis::distance::emd_noise`]): a score near it is as close
/// as that op's calls can show. An op of a few dozen calls is 0.3–0.4
/// from a second run of the same program by chance.
pub fn fidelity_noise(traced: &Profile, replayed: &Profile) -> BTreeMap<String, f64> {
    // [`profiles`] makes both at one resolution.
    let res = traced.meta.resolution.get() as f64;
    let mut out = BTreeMap::new();
    for l in &traced.layers {
        let Some(rl) = replayed.layers.iter().find(|r| r.name == l.name) else {
            continue;
        };
        for o in &l.ops {
            let Some(ro) = rl.ops.iter().find(|r| r.name == o.name) else {
                continue;
            };
            if let Some(n) = fsprof_analysis::distance::emd_noise(&o.histogram, &ro.histogram) {
                out.insert(o.name.clone(), n / res);
            }
        }
    }
    out
}

impl<'a> TimingFile<'a> {
    pub fn new(
        replay: &std::path::Path,
        timing: &'a TimingReport,
        fidelity: &'a Comparison,
        noise: &BTreeMap<String, f64>,
    ) -> Self {
        TimingFile {
            fidelity: fidelity
                .ops
                .iter()
                .map(|o| FidelityRow {
                    interesting: o.interesting,
                    layer: &o.layer,
                    op: &o.op,
                    noise: noise.get(&o.op).copied(),
                    reason: fsprof_report::reason::compare_reason(fidelity, o),
                    score: o.score,
                })
                .collect(),
            fsprof_version: env!("CARGO_PKG_VERSION"),
            replay: replay.display().to_string(),
            report: "fsprof-replay-timing",
            timing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_analysis::compare::{compare_profiles, CompareOptions};

    /// The calls that ran longest beyond their traced time are named,
    /// largest first, in the report and its text; a faster call, a call
    /// not issued and a set-up command are not.
    #[test]
    fn the_calls_that_ran_longest_beyond_their_traced_time_are_named() {
        use crate::engine::Outcome;
        use fsprof_trace::replayfile::Command;
        let op = |name: &str| fsprof_trace::event::Op::from_name(name).unwrap();
        // (op, traced ns, replayed ns, issued, set-up)
        let calls = [
            ("fstat", 500, 700, true, false),
            ("getdents64", 200_000, 330_000, true, false),
            ("write", 8_000, 60_000, true, false),
            ("read", 2_000, 900_000, false, false),
            ("openat", 1_900, 500_000, true, true),
            ("close", 800, 600, true, false),
            ("stat", 1_500, 1_600, true, false),
            ("fstat", 500, 520, true, false),
            ("fstat", 500, 510, true, false),
        ];
        let c = Compiled {
            strings: vec![b"/usr/include/linux/a.h".to_vec()],
            commands: calls
                .iter()
                .map(|&(name, dur_ns, ..)| Command {
                    op: op(name),
                    dur_ns,
                    path: (name == "stat").then_some(0),
                    ..Command::default()
                })
                .collect(),
            ..Compiled::default()
        };
        let run = Run {
            outcomes: calls
                .iter()
                .map(|&(_, _, latency_ns, issued, setup)| Outcome {
                    issued,
                    setup,
                    latency_ns,
                    ..Outcome::default()
                })
                .collect(),
            elapsed_ns: 1,
            aborted: false,
            tsc_hz: None,
            preemptions: 0,
            cpu_ns: 1,
            realtime_threads: 0,
            threads: 1,
            split: TimeSplit::default(),
            dry: false,
        };
        let t = timing(&c, &run, Pace::Speed(1.0));
        let got: Vec<(usize, u64)> = t
            .largest_excesses
            .iter()
            .map(|e| (e.command, e.replayed_ns - e.traced_ns))
            .collect();
        assert_eq!(
            got,
            vec![(1, 130_000), (2, 52_000), (0, 200), (6, 100), (7, 20)]
        );
        assert_eq!(
            t.largest_excesses[3].path.as_deref(),
            Some("/usr/include/linux/a.h")
        );
        let text = t.text();
        assert!(
            text.contains("getdents64 #1 at 0ns: 200µs traced, 330µs replayed; write #2"),
            "{text}"
        );
    }

    /// The report's error parts are the commands' parts summed, and the
    /// error less the machine's parts leaves what the replayer and the
    /// ordering account for.
    #[test]
    fn the_error_is_split_into_the_replayers_and_the_machines_parts() {
        use crate::engine::{Late, Outcome, Parts};
        use fsprof_trace::replayfile::Command;
        let parts = [
            Parts::default(),
            Parts {
                wakeup: 2_000_000,
                behind: 3_000,
                ..Parts::default()
            },
            Parts {
                behind: 40_000,
                slower: 9_000,
                ..Parts::default()
            },
            Parts {
                stall: 70_000,
                constraint: 20_000,
                ..Parts::default()
            },
        ];
        let between = [Some(100), Some(300), None, Some(200)];
        let outcomes: Vec<Outcome> = parts
            .iter()
            .zip(between)
            .map(|(p, between_ns)| Outcome {
                issued: true,
                between_ns,
                error_ns: p.total(),
                parts: *p,
                late: if p.total() > 10_000 {
                    p.dominant()
                } else {
                    Late::No
                },
                ..Outcome::default()
            })
            .collect();
        let c = Compiled {
            commands: vec![Command::default(); 4],
            ..Compiled::default()
        };
        let run = Run {
            outcomes,
            elapsed_ns: 1,
            aborted: false,
            tsc_hz: None,
            preemptions: 3,
            cpu_ns: 10_000,
            realtime_threads: 0,
            threads: 1,
            split: TimeSplit {
                calls_ns: 4_000,
                own_ns: 600,
                spin_ns: 2_000,
                slept_ns: 400_000,
                sleeps: 2,
                sleep_cpu_ns: 3_000,
                woken_spin_ns: 200_000,
            },
            dry: false,
        };
        let t = timing(&c, &run, Pace::Speed(1.0));
        assert_eq!(
            t.error_parts,
            ErrorParts {
                behind_ns: 43_000,
                slower_ns: 9_000,
                stalled_ns: 70_000,
                constraint_ns: 20_000,
                wakeup_ns: 2_000_000,
            }
        );
        // Less the calls' and the machine's parts: 0, 3 µs, 40 µs, 20 µs.
        assert_eq!(t.error_without_machine.max_ns, 40_000);
        assert_eq!(t.error_without_machine.median_ns, 20_000);
        assert_eq!(t.error.max_ns, 2_003_000);
        let over_10us = &t.late[0];
        assert_eq!(
            (
                over_10us.behind,
                over_10us.wakeup,
                over_10us.stalled,
                over_10us.constraint
            ),
            (1, 1, 1, 0)
        );
        let text = t.text();
        assert!(text.contains("preempted 3 time(s)"), "{text}");
        assert!(
            text.contains("CPU per command 2.50µs: 750ns sleeping and waking (2 sleep(s)), 1.75µs else; wall time per command: calls 1.00µs, the replayer's own work 150ns, pre-spin 50.5µs (50.0µs of it after a sleep), asleep 50.0µs"),
            "{text}"
        );
        assert!(
            text.contains("less the calls' and the machine's parts (slower calls, stalls, late wake-ups): median 20.0µs"),
            "{text}"
        );
        // The replayer's own time between calls, over the calls that had
        // one (due when the previous returned).
        assert_eq!(t.between_calls.max_ns, 300);
        assert_eq!(t.between_calls.median_ns, 200);
    }

    /// The typed timing file holds, key for key and value for value, the
    /// map the CLI used to build with `json!`.
    #[test]
    fn the_timing_file_is_the_map_it_replaced() {
        let layout = BucketLayout::new(Resolution::default());
        let mut a = Profile::new(Meta::default());
        for ns in [100, 2_000, 40_000] {
            a.layer_mut("user")
                .op_mut("read")
                .record(&layout, ns, false);
        }
        let mut b = a.clone();
        b.layer_mut("user")
            .op_mut("read")
            .record(&layout, 9_000_000, true);
        b.layer_mut("user")
            .op_mut("open")
            .record(&layout, 500, false);
        let fidelity = compare_profiles(&a, &b, &CompareOptions::default());
        let timing = TimingReport {
            dry_timing: false,
            pace: "speed 1".into(),
            commands: 4,
            issued: 4,
            setup: 0,
            skipped_reads: 0,
            elapsed_ns: 5_000,
            traced_ns: 7_000,
            error: Quantiles::default(),
            cdf: vec![(1_000, 0.5), (10_000, 1.0)],
            per_second: Vec::new(),
            late: Vec::new(),
            error_parts: ErrorParts::default(),
            error_without_machine: Quantiles::default(),
            between_calls: Quantiles::default(),
            largest_excesses: Vec::new(),
            preemptions: 0,
            cpu_ns: 0,
            time_split: TimeSplit::default(),
            realtime_threads: 0,
            threads: 1,
            mismatches: 0,
            initial_state_mismatches: 0,
            timing_dependent_mismatches: 0,
            out_of_space: 0,
            mismatch_examples: Vec::new(),
            aborted: false,
        };
        let replay = std::path::Path::new("/tmp/t.replay");
        let noise = fidelity_noise(&a, &b);
        let typed = TimingFile::new(replay, &timing, &fidelity, &noise);
        let map = serde_json::json!({
            "report": "fsprof-replay-timing",
            "fsprof_version": env!("CARGO_PKG_VERSION"),
            "replay": replay.display().to_string(),
            "timing": timing,
            "fidelity": fidelity.ops.iter().map(|o| serde_json::json!({
                "layer": o.layer, "op": o.op, "score": o.score,
                "noise": noise.get(&o.op),
                "interesting": o.interesting,
                "reason": fsprof_report::reason::compare_reason(&fidelity, o),
            })).collect::<Vec<_>>(),
        });
        assert_eq!(fidelity.ops.len(), 2);
        // open: one call on one side only.
        assert!(
            noise["read"] > 0.0 && !noise.contains_key("open"),
            "{noise:?}"
        );
        assert_eq!(serde_json::to_value(&typed).unwrap(), map);
    }
}
