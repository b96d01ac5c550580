//! The replay itself: one OS thread per replay thread, each running its
//! commands in traced order. Before a command a thread waits for the
//! commands of other threads it depends on (each thread publishes how many
//! commands it has completed, release/acquire), then for the command's
//! time: it sleeps until shortly before, prepares what it can (a path's
//! parent directory), spins the rest (pre-spin), and issues it.
//!
//! The loop is kept lean because at full speed its cost is the replay's
//! overhead (Replayfs §4.4): each thread's commands, kinds and waits are
//! laid out before the start; a command is timed with two cycle-counter
//! reads, converted to CLOCK_MONOTONIC ns afterwards by a line through two
//! (counter, clock) pairs taken at the start and the end; results go to a
//! per-thread array touched before the start (no page faults during the
//! replay); the completion counters sit on cache lines of their own; and
//! results are checked against the trace after the replay unless
//! `--verify strict` must stop at the first mismatch.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use fsprof_sys::clock::{mono_ns, rdtsc, tsc_is_invariant, tsc_mono_pair};
use fsprof_trace::replayfile::{Compiled, CMD_UNVERIFIED};

use crate::exec::{Exec, Kind, Local, PathTable, Slots};
use crate::root::Root;

/// How closely to follow the traced times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// Traced offsets divided by this factor (1.0 = original speed).
    Speed(f64),
    /// As fast as the ordering constraints allow.
    Afap,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    Strict,
    Warn,
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    Current,
    Skip,
}

/// Sleep until this long before a command's time, then spin. Covers the
/// default 50 µs timer slack and a typical wake-up.
pub const SPIN_NS: u64 = 150_000;

/// Why a command was issued later than its time (paced replays).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Late {
    /// Issued on time (or an afap replay).
    #[default]
    No,
    /// The thread was still busy with its previous commands at the
    /// command's time: the replayer (or the machine) could not keep up.
    Behind,
    /// A command of another thread it must follow completed after the
    /// command's time.
    Constraint,
    /// The thread was ready in time but ran late: it woke up late from its
    /// sleep or was preempted while spinning (scheduling, the machine's
    /// load).
    Wakeup,
}

/// What happened to one command.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    /// When it was issued, ns after the replay's start.
    pub issued_ns: u64,
    /// Issue time minus target time (0 with --afap).
    pub error_ns: u64,
    pub latency_ns: u64,
    pub ret: i64,
    pub errno: i32,
    pub issued: bool,
    pub mismatch: bool,
    pub late: Late,
}

pub struct Run {
    /// Per command, in the compiled order.
    pub outcomes: Vec<Outcome>,
    pub elapsed_ns: u64,
    /// Stopped at the first mismatch (`--verify strict`).
    pub aborted: bool,
    /// The cycle counter's rate, when commands were timed with it.
    pub tsc_hz: Option<f64>,
}

/// Whether a replayed result matches the traced one.
pub fn matches(kind: Kind, cflags: u8, traced: (i64, i32), got: (i64, i32)) -> bool {
    let (tr, te) = traced;
    let (gr, ge) = got;
    let t_failed = te != 0 || tr == -1;
    let g_failed = ge != 0 || gr == -1;
    if t_failed || g_failed {
        return t_failed == g_failed && (te == ge || te == -1);
    }
    if cflags & CMD_UNVERIFIED != 0 || kind.success_only() {
        return true;
    }
    match kind {
        // A new descriptor's number is the replayer's own.
        Kind::Open | Kind::OpenDir | Kind::FOpen | Kind::FdOpen | Kind::FdOpenDir => true,
        _ => tr == gr,
    }
}

pub struct Engine<'a> {
    pub compiled: &'a Compiled,
    pub root: &'a Root,
    pub pace: Pace,
    pub verify: Verify,
    pub reads: Reads,
}

/// One command of a thread's program.
#[derive(Clone, Copy)]
struct Step {
    /// Index in the compiled commands.
    cmd: u32,
    /// None: not issued (an op the replayer does not know, a skipped read).
    kind: Option<Kind>,
    /// This step's waits are `waits[previous step's end..waits_end]`.
    waits_end: u32,
}

/// A replay thread's commands, laid out before the start.
struct Program {
    steps: Vec<Step>,
    waits: Vec<(u32, u32)>,
}

/// What the loop records per command, in clock ticks.
#[derive(Clone, Copy, Default)]
struct Rec {
    /// Paced replays: after the constraint waits, and after the command's
    /// preparation (before the sleep until its time).
    waited: u64,
    ready: u64,
    t0: u64,
    t1: u64,
    ret: i64,
    errno: i32,
    issued: bool,
}

/// A completion counter on a cache line of its own: a thread bumps its
/// counter after every command, and sharing a line with another thread's
/// counter would cost a cache-line transfer per command.
#[repr(align(128))]
struct Done(AtomicU32);

/// The tick clock: the cycle counter where it is invariant, else
/// CLOCK_MONOTONIC ns.
#[derive(Clone, Copy)]
struct Ticks {
    tsc: bool,
}

impl Ticks {
    #[inline(always)]
    fn now(self) -> u64 {
        if self.tsc {
            rdtsc()
        } else {
            mono_ns()
        }
    }

    /// A (ticks, monotonic ns) pair read together.
    fn pair(self) -> (u64, u64) {
        if self.tsc {
            tsc_mono_pair()
        } else {
            let m = mono_ns();
            (m, m)
        }
    }
}

/// Ticks → CLOCK_MONOTONIC ns, by the line through two pairs.
#[derive(Clone, Copy)]
struct ToNs {
    a: (u64, u64),
    ns_per_tick: f64,
}

impl ToNs {
    fn new(a: (u64, u64), b: (u64, u64)) -> ToNs {
        let dt = b.0.saturating_sub(a.0);
        let ns_per_tick = if dt == 0 || b.1 <= a.1 {
            1.0
        } else {
            b.1.saturating_sub(a.1) as f64 / dt as f64
        };
        ToNs { a, ns_per_tick }
    }

    fn ns(&self, t: u64) -> u64 {
        let d = t as i128 - self.a.0 as i128;
        (self.a.1 as i128 + (d as f64 * self.ns_per_tick).round() as i128).max(0) as u64
    }

    fn span(&self, t0: u64, t1: u64) -> u64 {
        (t1.saturating_sub(t0) as f64 * self.ns_per_tick).round() as u64
    }
}

impl Engine<'_> {
    fn programs(&self) -> Vec<Program> {
        let c = self.compiled;
        let kinds = Kind::table(c);
        let mut progs: Vec<Program> = (0..c.header.threads)
            .map(|_| Program {
                steps: Vec::new(),
                waits: Vec::new(),
            })
            .collect();
        for (i, cmd) in c.commands.iter().enumerate() {
            let p = &mut progs[cmd.thread as usize];
            p.waits.extend_from_slice(&cmd.waits);
            let kind = kinds[i].filter(|k| !(self.reads == Reads::Skip && k.is_read()));
            p.steps.push(Step {
                cmd: i as u32,
                kind,
                waits_end: p.waits.len() as u32,
            });
        }
        progs
    }

    /// Runs the replay; `progress` receives the number of completed
    /// commands about every 100 ms (on the calling thread).
    pub fn run(&self, progress: &mut dyn FnMut(u64)) -> Run {
        let c = self.compiled;
        let progs = self.programs();
        let done: Vec<Done> = progs.iter().map(|_| Done(AtomicU32::new(0))).collect();
        let abort = AtomicBool::new(false);
        let slots = Slots::new(c.header.slots as usize);
        let paths = PathTable::new(c);
        let exec = Exec::new(self.root, &slots, c, &paths);
        let ticks = Ticks {
            tsc: tsc_is_invariant(),
        };
        let begin = ticks.pair();
        // Every thread starts at `start`, after all are spawned and have
        // laid out their memory, in both paces.
        let start = begin.1 + START_DELAY_NS;
        let recs: Vec<Vec<Rec>> = std::thread::scope(|sc| {
            let handles: Vec<_> = progs
                .iter()
                .enumerate()
                // A thread whose traced calls were all left out at
                // compile time has nothing to do.
                .filter(|(_, prog)| !prog.steps.is_empty())
                .map(|(t, prog)| {
                    let (done, abort, exec) = (&done, &abort, &exec);
                    (
                        t,
                        sc.spawn(move || self.thread(t, prog, start, ticks, done, abort, exec)),
                    )
                })
                .collect();
            while handles.iter().any(|(_, h)| !h.is_finished()) {
                progress(
                    done.iter()
                        .map(|d| d.0.load(Ordering::Relaxed) as u64)
                        .sum(),
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            let mut recs: Vec<Vec<Rec>> = progs.iter().map(|_| Vec::new()).collect();
            for (t, h) in handles {
                recs[t] = h.join().expect("a replay thread panicked");
            }
            recs
        });
        // The pairs are each uncertain by ~100 ns: 10 ms apart at least,
        // the rate through them is exact to 1e-5.
        let mut end = ticks.pair();
        if end.1 < begin.1 + MIN_SPAN_NS {
            std::thread::sleep(Duration::from_nanos(begin.1 + MIN_SPAN_NS - end.1));
            end = ticks.pair();
        }
        slots.close_all();
        let to_ns = ToNs::new(begin, end);
        let (outcomes, elapsed_ns) = self.outcomes(&progs, &recs, start, to_ns);
        progress(c.commands.len() as u64);
        Run {
            outcomes,
            elapsed_ns,
            aborted: abort.load(Ordering::Relaxed),
            tsc_hz: ticks.tsc.then(|| 1e9 / to_ns.ns_per_tick),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn thread(
        &self,
        t: usize,
        prog: &Program,
        start: u64,
        ticks: Ticks,
        done: &[Done],
        abort: &AtomicBool,
        exec: &Exec,
    ) -> Vec<Rec> {
        let c = self.compiled;
        // Written, not just allocated: the pages are faulted in now.
        let mut recs = vec![Rec::default(); prog.steps.len()];
        let mut local = Local::new();
        let speed = match self.pace {
            Pace::Afap => None,
            Pace::Speed(s) => {
                // Sleeps end within ~1 µs of when asked rather than within
                // the default 50 µs slack.
                // SAFETY: prctl with integer arguments; affects this thread.
                unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
                Some(s)
            }
        };
        let strict = self.verify == Verify::Strict;
        wait_until(start);
        let mut w0 = 0usize;
        for (k, (step, r)) in prog.steps.iter().zip(recs.iter_mut()).enumerate() {
            let w1 = step.waits_end as usize;
            for &(u, idx) in &prog.waits[w0..w1] {
                if !wait_for(&done[u as usize].0, idx, abort) {
                    return recs;
                }
            }
            w0 = w1;
            if abort.load(Ordering::Relaxed) {
                break;
            }
            if let Some(kind) = step.kind {
                let cmd = &c.commands[step.cmd as usize];
                if let Some(s) = speed {
                    r.waited = ticks.now();
                    exec.prepare(kind, cmd, &mut local);
                    r.ready = ticks.now();
                    wait_until(start + (cmd.t_ns as f64 / s) as u64);
                }
                r.t0 = ticks.now();
                let got = exec.run(kind, cmd, &mut local);
                r.t1 = ticks.now();
                (r.ret, r.errno, r.issued) = (got.0, got.1, true);
                if strict && !matches(kind, cmd.cflags, (cmd.ret, cmd.errno), got) {
                    abort.store(true, Ordering::Relaxed);
                }
            }
            done[t].0.store(k as u32 + 1, Ordering::Release);
        }
        recs
    }

    /// The records in ns, per command in the compiled order, and the
    /// elapsed time from the start to the last command's return.
    fn outcomes(
        &self,
        progs: &[Program],
        recs: &[Vec<Rec>],
        start: u64,
        to_ns: ToNs,
    ) -> (Vec<Outcome>, u64) {
        let c = self.compiled;
        let mut out = vec![Outcome::default(); c.commands.len()];
        let mut last = start;
        for (prog, recs) in progs.iter().zip(recs) {
            let mut prev = Prev {
                end: start,
                end_on_time: start,
                late: Late::No,
            };
            for (step, r) in prog.steps.iter().zip(recs) {
                let Some(kind) = step.kind.filter(|_| r.issued) else {
                    continue;
                };
                let cmd = &c.commands[step.cmd as usize];
                let t0 = to_ns.ns(r.t0);
                let t1 = to_ns.ns(r.t1);
                let target = match self.pace {
                    Pace::Afap => None,
                    Pace::Speed(s) => Some(start + (cmd.t_ns as f64 / s) as u64),
                };
                let error_ns = target.map_or(0, |tg| t0.saturating_sub(tg));
                let latency_ns = to_ns.span(r.t0, r.t1);
                let late = target.map_or(Late::No, |tg| {
                    late_cause(tg, error_ns, prev, to_ns.ns(r.waited), to_ns.ns(r.ready))
                });
                let got = (r.ret, r.errno);
                out[step.cmd as usize] = Outcome {
                    issued_ns: t0.saturating_sub(start),
                    error_ns,
                    latency_ns,
                    ret: r.ret,
                    errno: r.errno,
                    issued: true,
                    mismatch: self.verify != Verify::Off
                        && !matches(kind, cmd.cflags, (cmd.ret, cmd.errno), got),
                    late,
                };
                prev = Prev {
                    end: t1,
                    end_on_time: target.map_or(t1, |tg| tg + latency_ns),
                    late,
                };
                last = last.max(t1);
            }
        }
        (out, last - start)
    }
}

/// A thread's previous command, for [`late_cause`].
#[derive(Clone, Copy)]
struct Prev {
    /// When it returned.
    end: u64,
    /// When it would have returned had it been issued on time.
    end_on_time: u64,
    late: Late,
}

/// Why a command due at `target` was issued `error_ns` late: its thread's
/// previous command (`prev`), its waits for other threads (ended at
/// `waited`) and its preparation (ended at `ready`). A command held up
/// only because the previous one was late inherits that one's cause, so
/// that one late wake-up at the start of a burst is not counted as the
/// replayer falling behind on the whole burst.
fn late_cause(target: u64, error_ns: u64, prev: Prev, waited: u64, ready: u64) -> Late {
    if error_ns <= LATE_NS {
        Late::No
    } else if prev.end > target {
        if prev.late != Late::No && prev.end_on_time <= target {
            prev.late
        } else {
            Late::Behind
        }
    } else if waited > target {
        Late::Constraint
    } else if ready > target {
        // Its own preparation ran past its time.
        Late::Behind
    } else {
        Late::Wakeup
    }
}

/// How long after the set-up the threads start.
const START_DELAY_NS: u64 = 5_000_000;
/// The shortest span between the two (ticks, ns) pairs.
const MIN_SPAN_NS: u64 = 10_000_000;
/// An error above this is attributed to a cause ([`Late`]).
pub const LATE_NS: u64 = 10_000;

/// Waits until thread `u` has completed command `idx`; false on abort.
fn wait_for(done: &AtomicU32, idx: u32, abort: &AtomicBool) -> bool {
    if done.load(Ordering::Acquire) > idx {
        return true;
    }
    let mut spins = 0u32;
    while done.load(Ordering::Acquire) <= idx {
        if abort.load(Ordering::Relaxed) {
            return false;
        }
        spins += 1;
        if spins < 200 {
            std::hint::spin_loop();
        } else if spins < 2000 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    true
}

/// Sleeps until shortly before `target` (CLOCK_MONOTONIC ns), then spins.
fn wait_until(target: u64) {
    let now = mono_ns();
    if now >= target {
        return;
    }
    if target > now + SPIN_NS {
        std::thread::sleep(Duration::from_nanos(target - now - SPIN_NS));
    }
    while mono_ns() < target {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_commands_are_put_down_to_the_first_thing_that_held_them() {
        let t = 1_000_000;
        let free = Prev {
            end: t - 5,
            end_on_time: t - 5,
            late: Late::No,
        };
        // On time, or late by no more than the threshold.
        assert_eq!(late_cause(t, 0, free, t, t), Late::No);
        assert_eq!(late_cause(t, LATE_NS, free, t + 9, t + 9), Late::No);
        // The previous command, issued on time, returned after this one's
        // time: the replayer cannot keep up.
        let busy = Prev {
            end: t + 50_000,
            end_on_time: t + 50_000,
            late: Late::No,
        };
        assert_eq!(
            late_cause(t, 60_000, busy, t + 55_000, t + 56_000),
            Late::Behind
        );
        // The previous command was itself late (a late wake-up) and would
        // have returned in time had it not been: this one inherits that.
        let woke_late = Prev {
            end: t + 50_000,
            end_on_time: t - 100,
            late: Late::Wakeup,
        };
        assert_eq!(
            late_cause(t, 60_000, woke_late, t + 55_000, t + 56_000),
            Late::Wakeup
        );
        // ... unless it would have been too slow even on time.
        let slow = Prev {
            end_on_time: t + 1,
            ..woke_late
        };
        assert_eq!(
            late_cause(t, 60_000, slow, t + 55_000, t + 56_000),
            Late::Behind
        );
        // Free in time, but another thread's command completed late.
        assert_eq!(
            late_cause(t, 60_000, free, t + 40_000, t + 41_000),
            Late::Constraint
        );
        // Free and unblocked in time; its own preparation ran over.
        assert_eq!(late_cause(t, 60_000, free, t - 4, t + 20_000), Late::Behind);
        // Ready before its time and still issued late: the scheduler.
        assert_eq!(late_cause(t, 60_000, free, t - 40, t - 30), Late::Wakeup);
    }

    #[test]
    fn ticks_map_to_ns_through_two_pairs() {
        // 3 ticks per ns, the first pair at (3000, 1000).
        let m = ToNs::new((3000, 1000), (3_003_000, 1_001_000));
        assert_eq!(m.ns(3000), 1000);
        assert_eq!(m.ns(6000), 2000);
        assert_eq!(m.ns(0), 0);
        assert_eq!(m.span(6000, 9000), 1000);
        // The identity for the monotonic clock (equal pairs).
        let id = ToNs::new((5, 5), (5, 5));
        assert_eq!(id.ns(1234), 1234);
        assert_eq!(id.span(1000, 1234), 234);
    }
}
