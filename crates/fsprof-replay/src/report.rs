//! What a replay reports (Replayfs §4.3, Figs 6–8, and beyond): the
//! distribution of issue-time errors (CDF, median, p99, max), per traced
//! second the mean error and the op counts of the trace and of the replay,
//! elapsed vs traced time, the results that differ from the trace (those on
//! a file's first access, where the initial state was wrong, apart), and
//! the replay's profile compared with the trace's, op by op.

use serde::Serialize;

use fsprof_analysis::compare::Comparison;
use fsprof_capture::meta;
use fsprof_core::profile::{Clock, ClockSource, Layer, Meta};
use fsprof_core::units::format_ns;
use fsprof_core::{BucketLayout, Profile, Resolution};
use fsprof_trace::replayfile::{Compiled, CMD_FIRST_ACCESS};
use fsprof_trace::show::errno_name;

use crate::engine::{Late, Pace, Run};

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
    /// The replayer's per-command cost above the traced gaps.
    pub behind_ns: u64,
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
    /// Mostly the replayer's own cost: earlier commands of the thread (or
    /// this one's preparation) took longer than the traced gaps allowed.
    pub behind: u64,
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
    pub commands: u64,
    pub issued: u64,
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
    /// The errors less their machine parts (stalls, late wake-ups): the
    /// replayer's own share and the waits for other threads.
    pub error_without_machine: Quantiles,
    /// Involuntary context switches of the replay threads during the
    /// replay (getrusage): how often the machine took their CPU away.
    pub preemptions: u64,
    /// CPU time (user and system) of the replay threads from the start.
    pub cpu_ns: u64,
    /// Replay threads that ran under SCHED_FIFO (`--realtime`), of `threads`.
    pub realtime_threads: u64,
    pub threads: u64,
    pub mismatches: u64,
    /// Mismatches on a file's first access: the initial state was wrong.
    pub initial_state_mismatches: u64,
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

// One pass over the commands fills every part of the report.
#[allow(clippy::too_many_lines)]
pub fn timing(c: &Compiled, run: &Run, pace: Pace) -> TimingReport {
    let issued = || run.outcomes.iter().filter(|o| o.issued);
    let mut errors: Vec<u64> = issued().map(|o| o.error_ns).collect();
    errors.sort_unstable();
    let n = errors.len();
    let error = Quantiles::of_sorted(&errors);
    let mut own: Vec<u64> = issued()
        .map(|o| o.error_ns.saturating_sub(o.parts.machine()))
        .collect();
    own.sort_unstable();
    let error_parts = issued().fold(ErrorParts::default(), |mut e, o| {
        e.behind_ns += o.parts.behind;
        e.stalled_ns += o.parts.stall;
        e.constraint_ns += o.parts.constraint;
        e.wakeup_ns += o.parts.wakeup;
        e
    });
    // 1-2-5 steps from 100 ns to 10 s.
    let mut cdf = Vec::new();
    'edges: for exp in 2..=10u32 {
        for m in [1u64, 2, 5] {
            let edge = m * 10u64.pow(exp);
            let within = errors.partition_point(|&e| e <= edge);
            if n > 0 {
                cdf.push((edge, within as f64 / n as f64));
            }
            if within == n {
                break 'edges;
            }
        }
    }
    let seconds =
        (c.header.duration_ns / 1_000_000_000 + 1).max(run.elapsed_ns / 1_000_000_000 + 1) as usize;
    let mut traced = vec![0u64; seconds];
    let mut replayed = vec![0u64; seconds];
    let mut err_sum = vec![0f64; seconds];
    let mut err_n = vec![0u64; seconds];
    let mut late: Vec<LateCauses> = [10_000, 100_000, 1_000_000]
        .into_iter()
        .map(|over_ns| LateCauses {
            over_ns,
            ..Default::default()
        })
        .collect();
    let mut mismatches = 0;
    let mut initial = 0;
    let mut examples = Vec::new();
    for (i, (cmd, o)) in c.commands.iter().zip(&run.outcomes).enumerate() {
        let s = (cmd.t_ns / 1_000_000_000) as usize;
        if s < seconds {
            traced[s] += 1;
        }
        if !o.issued {
            continue;
        }
        let r = (o.issued_ns / 1_000_000_000) as usize;
        if r < seconds {
            replayed[r] += 1;
        }
        if s < seconds {
            err_sum[s] += o.error_ns as f64;
            err_n[s] += 1;
        }
        for l in late.iter_mut().filter(|l| o.error_ns > l.over_ns) {
            match o.late {
                Late::Behind => l.behind += 1,
                Late::Constraint => l.constraint += 1,
                Late::Wakeup => l.wakeup += 1,
                Late::Stall => l.stalled += 1,
                Late::No => {}
            }
        }
        if o.mismatch {
            mismatches += 1;
            let first = cmd.cflags & CMD_FIRST_ACCESS != 0;
            if first {
                initial += 1;
            }
            if examples.len() < 20 {
                examples.push(Mismatch {
                    command: i,
                    thread: cmd.thread,
                    op: cmd.op.name().into(),
                    path: cmd
                        .path
                        .map(|p| String::from_utf8_lossy(&c.strings[p as usize]).into_owned()),
                    t_ns: cmd.t_ns,
                    expected: result_text(cmd.ret, cmd.errno),
                    got: result_text(o.ret, o.errno),
                    first_access: first,
                });
            }
        }
    }
    let per_second = (0..seconds)
        .map(|s| Second {
            second: s as u64,
            traced_ops: traced[s],
            replayed_ops: replayed[s],
            mean_error_ns: if err_n[s] == 0 {
                0.0
            } else {
                err_sum[s] / err_n[s] as f64
            },
        })
        .collect();
    TimingReport {
        pace: match pace {
            Pace::Afap => "afap".into(),
            Pace::Speed(s) => format!("speed {s}"),
        },
        commands: c.commands.len() as u64,
        issued: n as u64,
        skipped_reads: run.outcomes.iter().filter(|o| !o.issued).count() as u64,
        elapsed_ns: run.elapsed_ns,
        traced_ns: c.header.duration_ns,
        error,
        cdf,
        per_second,
        late: if matches!(pace, Pace::Afap) {
            Vec::new()
        } else {
            late
        },
        error_parts,
        error_without_machine: Quantiles::of_sorted(&own),
        preemptions: run.preemptions,
        cpu_ns: run.cpu_ns,
        realtime_threads: run.realtime_threads,
        threads: run.threads,
        mismatches,
        initial_state_mismatches: initial,
        mismatch_examples: examples,
        aborted: run.aborted,
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
        if !o.issued {
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
        let sum = (p.behind_ns + p.stalled_ns + p.constraint_ns + p.wakeup_ns).max(1) as f64;
        let part = |ns: u64| format!("{} ({:.0}%)", format_ns(ns as f64), ns as f64 * 100.0 / sum);
        let _ = writeln!(
            s,
            "  error by cause, summed over the commands: behind (the replayer's per-command cost) {}, stalled (calls ≥50µs longer than traced: preempted or a slower file system) {}, waiting for another thread {}, woke or ran late (scheduling) {}",
            part(p.behind_ns),
            part(p.stalled_ns),
            part(p.constraint_ns),
            part(p.wakeup_ns)
        );
        let _ = writeln!(
            s,
            "  issue-time error less the machine's parts (stalls, late wake-ups): {}",
            t.error_without_machine.text()
        );
        for l in &t.late {
            let _ = writeln!(
                s,
                "  late by more than {}, by main cause: {} behind, {} stalled, {} waiting for another thread, {} woke or ran late",
                format_ns(l.over_ns as f64),
                l.behind,
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
            "fsprof: replayed {} of {} command(s) ({}): elapsed {} vs traced {}{}",
            t.issued,
            t.commands,
            t.pace,
            format_ns(t.elapsed_ns as f64),
            format_ns(t.traced_ns as f64),
            if t.skipped_reads > 0 {
                format!(", {} not issued (reads skipped)", t.skipped_reads)
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
        if t.pace != "afap" {
            t.paced_text(&mut s);
        }
        let _ = writeln!(
            s,
            "  mismatches: {} ({} on a file's first access: the initial state differed){}",
            t.mismatches,
            t.initial_state_mismatches,
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
                if m.first_access {
                    " [first access]"
                } else {
                    ""
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
    pub reason: String,
    pub score: Option<f64>,
}

impl<'a> TimingFile<'a> {
    pub fn new(
        replay: &std::path::Path,
        timing: &'a TimingReport,
        fidelity: &'a Comparison,
    ) -> Self {
        TimingFile {
            fidelity: fidelity
                .ops
                .iter()
                .map(|o| FidelityRow {
                    interesting: o.interesting,
                    layer: &o.layer,
                    op: &o.op,
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
                ..Parts::default()
            },
            Parts {
                stall: 70_000,
                constraint: 20_000,
                ..Parts::default()
            },
        ];
        let outcomes: Vec<Outcome> = parts
            .iter()
            .map(|p| Outcome {
                issued: true,
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
            cpu_ns: 5,
            realtime_threads: 0,
            threads: 1,
        };
        let t = timing(&c, &run, Pace::Speed(1.0));
        assert_eq!(
            t.error_parts,
            ErrorParts {
                behind_ns: 43_000,
                stalled_ns: 70_000,
                constraint_ns: 20_000,
                wakeup_ns: 2_000_000,
            }
        );
        // Less the machine's parts: 0, 3 µs, 40 µs, 20 µs.
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
            text.contains("less the machine's parts (stalls, late wake-ups): median 20.0µs"),
            "{text}"
        );
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
            pace: "speed 1".into(),
            commands: 4,
            issued: 4,
            skipped_reads: 0,
            elapsed_ns: 5_000,
            traced_ns: 7_000,
            error: Quantiles::default(),
            cdf: vec![(1_000, 0.5), (10_000, 1.0)],
            per_second: Vec::new(),
            late: Vec::new(),
            error_parts: ErrorParts::default(),
            error_without_machine: Quantiles::default(),
            preemptions: 0,
            cpu_ns: 0,
            realtime_threads: 0,
            threads: 1,
            mismatches: 0,
            initial_state_mismatches: 0,
            mismatch_examples: Vec::new(),
            aborted: false,
        };
        let replay = std::path::Path::new("/tmp/t.replay");
        let typed = TimingFile::new(replay, &timing, &fidelity);
        let map = serde_json::json!({
            "report": "fsprof-replay-timing",
            "fsprof_version": env!("CARGO_PKG_VERSION"),
            "replay": replay.display().to_string(),
            "timing": timing,
            "fidelity": fidelity.ops.iter().map(|o| serde_json::json!({
                "layer": o.layer, "op": o.op, "score": o.score,
                "interesting": o.interesting,
                "reason": fsprof_report::reason::compare_reason(&fidelity, o),
            })).collect::<Vec<_>>(),
        });
        assert_eq!(fidelity.ops.len(), 2);
        assert_eq!(serde_json::to_value(&typed).unwrap(), map);
    }
}
