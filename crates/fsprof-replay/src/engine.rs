//! The replay itself: one OS thread per replay thread, each running its
//! commands in traced order. Before a command a thread waits for the
//! commands of other threads it depends on (each thread publishes how many
//! commands it has completed, release/acquire), makes the command ready
//! (its call with every argument resolved, [`crate::exec::Ready`]), then
//! waits for the command's time: it sleeps until shortly before, spins the
//! rest (pre-spin), and makes the call.
//!
//! The loop is kept lean because at full speed, and in a paced replay's
//! bursts, its cost is the replay's overhead (Replayfs §4.4): each
//! thread's commands are laid out before the start as a flat array of
//! 56-byte steps (kind, the data calls' arguments, due time, waits); two
//! cycle-counter reads per command, just before its system call and just
//! after it, with the decoding and the replayer's bookkeeping outside
//! them, converted to
//! CLOCK_MONOTONIC ns afterwards by a line through two (counter, clock)
//! pairs taken at the start and the end); results go to a per-thread
//! array touched before the start, scratch buffers are sized before the
//! start (no page faults or allocation during the replay); a thread
//! publishes its completion count only after commands another thread
//! waits for (and every few thousand, for progress), on a cache line of
//! its own; results are checked against the trace after the replay unless
//! `--verify strict` must stop at the first mismatch. A paced thread
//! compares a command's time with the cycle counter (no clock_gettime per
//! command) and issues a command that is already due at once.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use fsprof_sys::clock::{mono_ns, rdtsc, tsc_is_invariant, tsc_mono_pair, TscRate};
use fsprof_sys::usage::thread_cpu_ns;
use fsprof_trace::replayfile::{Compiled, CMD_SETUP, CMD_UNVERIFIED};

use crate::exec::{DataArgs, Exec, Kind, Local, PathTable, Slots};
use crate::lateness::{Lag, PREP_LATE, WAITED_LATE};
pub use crate::lateness::{Late, Parts};
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

/// What a replay thread does at a command's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Calls {
    /// Makes the traced call.
    Made,
    /// Makes no call: spins for the call's traced duration instead and
    /// takes the traced result as its own (`--dry-timing`). The schedule,
    /// the waits, the clock reads and the records are the replay's own, so
    /// its issue-time error is what this machine's scheduler and stolen
    /// time alone put on a replay of this trace: the floor under a real
    /// replay's, whose calls also vary from the traced ones.
    Dry,
}

/// Sleep until this long before a command's time, then spin. It covers
/// how late this VM's timer wake-ups end (bench/wakeup.c, printed by
/// bench/trace_replay.py part 5; 1 ns timer slack): at load 8 under
/// SCHED_FIFO median 28.5 µs, p99 71 µs, p99.9 110 µs, max 120 µs (without
/// SCHED_FIFO p99 0.6 ms: preemptions, which no margin covers). Halved to
/// 75 µs it saved 0.06 µs of pre-spin a command on the traced tar (CPU per
/// command 2.29 → 2.20 µs under `--realtime`, paired, not resolved) for a
/// p99 error of 63 instead of 53 µs; a sleep itself costs ~21 µs of CPU,
/// so a shorter gap is cheaper spun through.
pub const SPIN_NS: u64 = 150_000;

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
    /// A set-up command of the compiler's, not a call of the trace
    /// (`CMD_SETUP`): left out of the timing and the profile.
    pub setup: bool,
    pub mismatch: bool,
    /// The dominant cause when late by more than [`LATE_NS`].
    pub late: Late,
    /// The error by cause (paced replays).
    pub parts: Parts,
    /// The replayer's own time from the thread's previous call's return
    /// to this call's issue, when this one was due by then (always, with
    /// --afap): its per-command cost, measured directly.
    pub between_ns: Option<u64>,
}

impl Outcome {
    /// Issued, and a call of the trace: what the timing and the profile
    /// count.
    pub fn timed(&self) -> bool {
        self.issued && !self.setup
    }
}

pub struct Run {
    /// Per command, in the compiled order.
    pub outcomes: Vec<Outcome>,
    pub elapsed_ns: u64,
    /// Stopped at the first mismatch (`--verify strict`).
    pub aborted: bool,
    /// The cycle counter's rate, when commands were timed with it.
    pub tsc_hz: Option<f64>,
    /// Involuntary context switches of the replay threads during the
    /// replay: how often the machine took their CPU away.
    pub preemptions: u64,
    /// CPU time (user and system) the replay threads used from the start:
    /// the replay's cost independent of how loaded the machine is.
    pub cpu_ns: u64,
    /// Replay threads that ran under SCHED_FIFO (`--realtime`).
    pub realtime_threads: u64,
    /// Replay threads (traced threads with commands to replay).
    pub threads: u64,
    /// Where the replay threads' time went, next to `cpu_ns`.
    pub split: TimeSplit,
    /// No call was made ([`Calls::Dry`]).
    pub dry: bool,
}

/// Where the replay threads' time from their start to their last call's
/// return went, summed over the threads (ns, wall time): with their CPU
/// time ([`Run::cpu_ns`]) it splits the CPU per command into the calls,
/// the replayer's own work, the pre-spin before commands' times, and,
/// as what is left, the sleeps and their wake-ups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TimeSplit {
    /// In the calls, from the clock read before each to the one after.
    pub calls_ns: u64,
    /// From a call's return to the next call's issue where that one was
    /// due by then (all, with --afap): the replayer's own work per
    /// command.
    pub own_ns: u64,
    /// From a call's return to the next call's issue where that one was
    /// not due yet and the thread did not sleep: its preparation and the
    /// spin to its time, on the CPU throughout (less any preemption).
    pub spin_ns: u64,
    /// The same for the waits that slept (the sleep, the wake-up and the
    /// spin after it), and how many there were.
    pub slept_ns: u64,
    pub sleeps: u64,
    /// CPU time from just before each sleep to just after its wake-up
    /// (CLOCK_THREAD_CPUTIME_ID): what sleeping costs on the CPU.
    pub sleep_cpu_ns: u64,
    /// Of `slept_ns`, the spin from each wake-up to the command's time:
    /// pre-spin too, on the CPU.
    pub woken_spin_ns: u64,
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
    /// SCHED_FIFO priority for the replay threads (`--realtime`).
    pub realtime: Option<i32>,
    pub calls: Calls,
    /// Spin this long after each call, as replayer work of its own: a
    /// deliberately slower replayer, for checking that a bench tells one
    /// from the other (0: none; not with [`Calls::Dry`]).
    pub added_ns: u64,
}

/// One command of a thread's program, laid out before the start: what the
/// loop needs of it in 56 bytes, read in order.
#[derive(Clone, Copy)]
struct Step {
    args: DataArgs,
    /// When to issue it, ns after the start (paced replays).
    due_ns: u64,
    /// Index in the compiled commands.
    cmd: u32,
    /// This step's waits are `waits[previous step's end..waits_end]`.
    waits_end: u32,
    /// None: not issued (an op the replayer does not know, a skipped read).
    kind: Option<Kind>,
    /// Publish the thread's completion count after this step: another
    /// thread waits for it, or it is time to show progress. Other steps
    /// publish nothing: no shared write per command.
    publish: bool,
}

const _: () = assert!(std::mem::size_of::<Step>() <= 56);

/// A replay thread's commands, laid out before the start.
struct Program {
    steps: Vec<Step>,
    waits: Vec<(u32, u32)>,
    /// The largest read and generated write, to size scratch memory.
    max_read: u64,
    max_write: u64,
}

/// Steps between two progress publications of a thread.
const PUBLISH_EVERY: usize = 4096;

/// What the loop records per command, in clock ticks.
#[derive(Clone, Copy, Default)]
struct Rec {
    /// When it was issued: the clock read that ended the wait for its time,
    /// or, when it was due already, the read that ended the previous
    /// command (one clock read per command).
    t0: u64,
    t1: u64,
    ret: i64,
    errno: i32,
    flags: u8,
}

const ISSUED: u8 = 1;
/// The wait for its time slept ([`TimeSplit`]).
const SLEPT: u8 = 8;

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
    /// Ticks per ns, measured before the start (paced replays; 1 for ns).
    per_ns: f64,
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

    fn anchor(self) -> Anchor {
        let (ticks, ns) = self.pair();
        Anchor {
            ticks,
            ns,
            per_ns: self.per_ns,
        }
    }
}

/// CLOCK_MONOTONIC ns → ticks near a recent (ticks, ns) pair. A thread
/// takes a new pair after every sleep, so the rate's uncertainty (~1e-5)
/// only acts over the time since (a 100 ms burst: ~1 µs), not over the
/// whole replay.
#[derive(Clone, Copy)]
struct Anchor {
    ticks: u64,
    ns: u64,
    per_ns: f64,
}

impl Anchor {
    #[inline(always)]
    fn ticks(&self, ns: u64) -> u64 {
        let d = ns as i64 - self.ns as i64;
        (self.ticks as i64 + (d as f64 * self.per_ns) as i64).max(0) as u64
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

/// What every replay thread shares.
struct Shared<'a> {
    done: &'a [Done],
    abort: &'a AtomicBool,
    exec: &'a Exec<'a>,
    ticks: Ticks,
    /// CLOCK_MONOTONIC ns at which every thread starts.
    start: u64,
}

impl Engine<'_> {
    fn programs(&self) -> Vec<Program> {
        let c = self.compiled;
        let kinds = Kind::table(c);
        let speed = match self.pace {
            Pace::Speed(s) => s,
            Pace::Afap => 1.0,
        };
        let mut progs: Vec<Program> = (0..c.header.threads)
            .map(|_| Program {
                steps: Vec::new(),
                waits: Vec::new(),
                max_read: 0,
                max_write: 0,
            })
            .collect();
        for (i, cmd) in c.commands.iter().enumerate() {
            let p = &mut progs[cmd.thread as usize];
            p.waits.extend_from_slice(&cmd.waits);
            let kind = kinds[i].filter(|k| !(self.reads == Reads::Skip && k.is_read()));
            if let Some(k) = kind {
                if k.is_read() || k == Kind::Getdents || k == Kind::Readlink {
                    p.max_read = p.max_read.max(cmd.len);
                } else if cmd.buf.is_none() {
                    p.max_write = p.max_write.max(cmd.len);
                }
            }
            p.steps.push(Step {
                args: DataArgs::of(cmd),
                due_ns: (cmd.t_ns as f64 / speed) as u64,
                cmd: i as u32,
                waits_end: p.waits.len() as u32,
                kind,
                publish: p.steps.len() % PUBLISH_EVERY == PUBLISH_EVERY - 1,
            });
        }
        // The steps other threads wait for publish their completion.
        for cmd in &c.commands {
            for &(u, idx) in &cmd.waits {
                if let Some(s) = progs
                    .get_mut(u as usize)
                    .and_then(|p| p.steps.get_mut(idx as usize))
                {
                    s.publish = true;
                }
            }
        }
        progs
    }

    /// Runs the replay; `progress` receives the number of completed
    /// commands about every 100 ms (on the calling thread).
    pub fn run(&self, progress: &mut dyn FnMut(u64)) -> Result<Run, ThreadPanic> {
        let c = self.compiled;
        let progs = self.programs();
        let done: Vec<Done> = progs.iter().map(|_| Done(AtomicU32::new(0))).collect();
        let abort = AtomicBool::new(false);
        let slots = Slots::new(c.header.slots as usize);
        let paths = PathTable::new(c);
        let exec = Exec::new(self.root, &slots, c, &paths);
        if c.commands.iter().any(|k| k.op.is_mapped()) {
            crate::touch::guard();
        }
        let tsc = tsc_is_invariant();
        // A dry replay spins for traced durations, and the knob for an
        // added cost spins too, at any pace.
        let timed =
            matches!(self.pace, Pace::Speed(_)) || self.calls == Calls::Dry || self.added_ns > 0;
        let per_ns = if tsc && timed {
            TscRate::calibrate(None).hz / 1e9
        } else {
            1.0
        };
        let ticks = Ticks { tsc, per_ns };
        // Each thread's state, its parent directories opened now: before
        // the start is set, so that opening them cannot delay it.
        let locals: Vec<Option<Local>> = progs
            .iter()
            .map(|prog| {
                let mut local = Local::new();
                let cmds = prog.steps.iter().filter_map(|s| Some((s.kind?, s.cmd)));
                exec.preopen(cmds, &mut local);
                Some(local)
            })
            .collect();
        let begin = ticks.pair();
        // Every thread starts at `start`, after all are spawned and have
        // laid out their memory, in both paces.
        let start = begin.1 + START_DELAY_NS;
        let shared = Shared {
            done: &done,
            abort: &abort,
            exec: &exec,
            ticks,
            start,
        };
        let recs = self.run_threads(&progs, locals, &shared, progress)?;
        // The pairs are each uncertain by ~100 ns: 10 ms apart at least,
        // the rate through them is exact to 1e-5.
        let mut end = ticks.pair();
        if end.1 < begin.1 + MIN_SPAN_NS {
            std::thread::sleep(Duration::from_nanos(begin.1 + MIN_SPAN_NS - end.1));
            end = ticks.pair();
        }
        slots.close_all();
        let to_ns = ToNs::new(begin, end);
        let (outcomes, elapsed_ns, split) = self.outcomes(&progs, &recs, start, to_ns);
        progress(c.commands.len() as u64);
        Ok(Run {
            outcomes,
            elapsed_ns,
            aborted: abort.load(Ordering::Relaxed),
            tsc_hz: ticks.tsc.then(|| 1e9 / to_ns.ns_per_tick),
            preemptions: recs.iter().map(|r| r.1.preempted).sum(),
            cpu_ns: recs.iter().map(|r| r.1.cpu_ns).sum(),
            realtime_threads: recs.iter().filter(|r| r.1.realtime).count() as u64,
            threads: progs.iter().filter(|p| !p.steps.is_empty()).count() as u64,
            split: TimeSplit {
                sleep_cpu_ns: recs.iter().map(|r| r.1.sleep_cpu_ns).sum(),
                woken_spin_ns: recs
                    .iter()
                    .map(|r| to_ns.span(0, r.1.woken_spin_ticks))
                    .sum(),
                ..split
            },
            dry: self.calls == Calls::Dry,
        })
    }

    /// Runs each program on its own thread, reporting progress meanwhile:
    /// each thread's records and resource use, or the first panic.
    fn run_threads(
        &self,
        progs: &[Program],
        mut locals: Vec<Option<Local>>,
        shared: &Shared,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Vec<(Vec<Rec>, Usage)>, ThreadPanic> {
        std::thread::scope(|sc| {
            let handles: Vec<_> = progs
                .iter()
                .enumerate()
                // A thread whose traced calls were all left out at
                // compile time has nothing to do.
                .filter(|(_, prog)| !prog.steps.is_empty())
                .map(|(t, prog)| {
                    let local = locals[t].take().unwrap_or_default();
                    let body = move || self.thread(t, prog, local, shared);
                    (t, sc.spawn(move || guarded(shared.abort, body)))
                })
                .collect();
            while handles.iter().any(|(_, h)| !h.is_finished()) {
                progress(
                    shared
                        .done
                        .iter()
                        .map(|d| d.0.load(Ordering::Relaxed) as u64)
                        .sum(),
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            let mut recs: Vec<(Vec<Rec>, Usage)> = progs
                .iter()
                .map(|_| (Vec::new(), Usage::default()))
                .collect();
            let mut panicked = None;
            for (t, h) in handles {
                match h.join() {
                    Ok(Ok(r)) => recs[t] = r,
                    Ok(Err(p)) | Err(p) => panicked = Some(ThreadPanic::new(t, &*p)),
                }
            }
            panicked.map_or(Ok(recs), Err)
        })
    }

    /// One replay thread: its records, and its resource use from its start
    /// time on.
    fn thread(&self, t: usize, prog: &Program, local: Local, sh: &Shared) -> (Vec<Rec>, Usage) {
        let realtime = self.realtime.is_some_and(|p| set_fifo(p).is_ok());
        let (recs, usage) = match (self.calls, self.added_ns) {
            (Calls::Made, 0) => self.thread_loop::<false, false>(t, prog, local, sh),
            (Calls::Made, _) => self.thread_loop::<false, true>(t, prog, local, sh),
            (Calls::Dry, _) => self.thread_loop::<true, false>(t, prog, local, sh),
        };
        (recs, Usage { realtime, ..usage })
    }

    /// `DRY`: [`Calls::Dry`]; `SLOWED`: [`Engine::added_ns`] (not with a
    /// dry replay). Loops of their own, so that the real one has no branch
    /// for either.
    fn thread_loop<const DRY: bool, const SLOWED: bool>(
        &self,
        t: usize,
        prog: &Program,
        mut local: Local,
        sh: &Shared,
    ) -> (Vec<Rec>, Usage) {
        // Written, not just allocated: the pages are faulted in now.
        let mut recs = vec![Rec::default(); prog.steps.len()];
        local.reserve(prog.max_read, prog.max_write);
        let paced = matches!(self.pace, Pace::Speed(_));
        if paced {
            // Sleeps end within ~1 µs of when asked rather than within
            // the default 50 µs slack.
            // SAFETY: prctl with integer arguments; affects this thread.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        }
        let strict = self.verify == Verify::Strict;
        let (ticks, exec) = (sh.ticks, sh.exec);
        let added = (self.added_ns as f64 * ticks.per_ns) as u64;
        sleep_until(sh.start.saturating_sub(SPIN_NS));
        let mut pacer = Pacer {
            ticks,
            anchor: ticks.anchor(),
            sleep_cpu_ns: 0,
            woken_spin_ticks: 0,
        };
        let mut now = spin_until(pacer.anchor.ticks(sh.start), ticks);
        let usage = Usage::now();
        let mut w0 = 0usize;
        for (k, (step, r)) in prog.steps.iter().zip(recs.iter_mut()).enumerate() {
            let due_ns = sh.start + step.due_ns;
            let mut flags = ISSUED;
            let w1 = step.waits_end as usize;
            if w1 != w0 {
                let mut waited = false;
                for &(u, idx) in &prog.waits[w0..w1] {
                    match wait_for(&sh.done[u as usize].0, idx, sh.abort) {
                        None => return (recs, Usage::now().since(usage, &pacer)),
                        Some(w) => waited |= w,
                    }
                }
                w0 = w1;
                if waited {
                    now = ticks.now();
                    if paced && now > pacer.anchor.ticks(due_ns) {
                        flags |= WAITED_LATE;
                    }
                }
            }
            if strict && sh.abort.load(Ordering::Relaxed) {
                break;
            }
            if let Some(kind) = step.kind {
                let early = paced && now < pacer.anchor.ticks(due_ns);
                let (t0, got, t1) = if DRY {
                    if early {
                        pacer.wait(due_ns, || false, &mut flags);
                    }
                    self.dry_call(step.cmd, ticks)
                } else {
                    let mut ready = exec.ready(kind, &step.args, step.cmd, &mut local);
                    if early {
                        pacer.wait(
                            due_ns,
                            || ready.is_whole() && exec.prepare(kind, step.cmd, &mut local),
                            &mut flags,
                        );
                    }
                    ready.fire(exec, kind, &step.args, step.cmd, &mut local, || ticks.now())
                };
                now = if SLOWED {
                    spin_until(t1 + added, ticks)
                } else {
                    t1
                };
                (r.t0, r.t1, r.ret, r.errno, r.flags) = (t0, t1, got.0, got.1, flags);
                if strict {
                    let cmd = &self.compiled.commands[step.cmd as usize];
                    if !matches(kind, cmd.cflags, (cmd.ret, cmd.errno), got) {
                        sh.abort.store(true, Ordering::Relaxed);
                    }
                }
            }
            if step.publish {
                sh.done[t].0.store(k as u32 + 1, Ordering::Release);
            }
        }
        sh.done[t]
            .0
            .store(prog.steps.len() as u32, Ordering::Release);
        (recs, Usage::now().since(usage, &pacer))
    }

    /// A dry command ([`Calls::Dry`]): the clock read, a spin for the
    /// call's traced duration, the clock read again; the traced result.
    #[inline(always)]
    fn dry_call(&self, cmd: u32, ticks: Ticks) -> (u64, (i64, i32), u64) {
        let c = &self.compiled.commands[cmd as usize];
        let t0 = ticks.now();
        let t1 = spin_until(t0 + (c.dur_ns as f64 * ticks.per_ns) as u64, ticks);
        (t0, (c.ret, c.errno), t1)
    }

    /// The records in ns, per command in the compiled order, the elapsed
    /// time from the start to the last command's return, and where the
    /// threads' time went.
    fn outcomes(
        &self,
        progs: &[Program],
        recs: &[(Vec<Rec>, Usage)],
        start: u64,
        to_ns: ToNs,
    ) -> (Vec<Outcome>, u64, TimeSplit) {
        let c = self.compiled;
        let mut out = vec![Outcome::default(); c.commands.len()];
        let mut last = start;
        let mut split = TimeSplit::default();
        for (prog, (recs, _)) in progs.iter().zip(recs) {
            let mut lag = Lag::default();
            let mut prev_end = None;
            // A thread's CPU time is counted from the start on.
            let mut prev = start;
            for (step, r) in prog.steps.iter().zip(recs) {
                let Some(kind) = step.kind.filter(|_| r.flags & ISSUED != 0) else {
                    continue;
                };
                let cmd = &c.commands[step.cmd as usize];
                let t0 = to_ns.ns(r.t0);
                let t1 = to_ns.ns(r.t1);
                let target = match self.pace {
                    Pace::Afap => None,
                    Pace::Speed(_) => Some(start + step.due_ns),
                };
                let error_ns = target.map_or(0, |tg| t0.saturating_sub(tg));
                let between_ns = prev_end
                    .filter(|&e| target.is_none_or(|tg| tg <= e))
                    .map(|e| t0.saturating_sub(e));
                prev_end = Some(t1);
                let latency_ns = to_ns.span(r.t0, r.t1);
                let gap = t0.saturating_sub(prev);
                if target.is_none_or(|tg| tg <= prev) {
                    split.own_ns += gap;
                } else if r.flags & SLEPT != 0 {
                    split.slept_ns += gap;
                    split.sleeps += 1;
                } else {
                    split.spin_ns += gap;
                }
                split.calls_ns += latency_ns;
                prev = t1;
                let parts = target.map_or(Parts::default(), |tg| {
                    lag.step(tg, t0, latency_ns, cmd.dur_ns, r.flags)
                });
                let late = if error_ns > LATE_NS {
                    parts.dominant()
                } else {
                    Late::No
                };
                let got = (r.ret, r.errno);
                out[step.cmd as usize] = Outcome {
                    issued_ns: t0.saturating_sub(start),
                    error_ns,
                    latency_ns,
                    ret: r.ret,
                    errno: r.errno,
                    issued: true,
                    setup: cmd.cflags & CMD_SETUP != 0,
                    mismatch: self.verify != Verify::Off
                        && !matches(kind, cmd.cflags, (cmd.ret, cmd.errno), got),
                    late,
                    parts,
                    between_ns,
                };
                last = last.max(t1);
            }
        }
        (out, last - start, split)
    }
}

/// How long after the set-up the threads start.
const START_DELAY_NS: u64 = 5_000_000;
/// The shortest span between the two (ticks, ns) pairs.
const MIN_SPAN_NS: u64 = 10_000_000;
/// An error above this is counted under its dominant cause ([`Late`]).
pub const LATE_NS: u64 = 10_000;

/// A replay thread that panicked: a fault in fsprof, reported as an error
/// of the replay rather than as fsprof's own panic.
#[derive(Debug, thiserror::Error)]
#[error("replay thread {thread} failed ({message}); the replay was stopped. This is a bug in fsprof: please report it with the trace")]
pub struct ThreadPanic {
    pub thread: usize,
    pub message: String,
}

impl ThreadPanic {
    fn new(thread: usize, payload: &(dyn std::any::Any + Send)) -> ThreadPanic {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        ThreadPanic { thread, message }
    }
}

/// Runs a replay thread's body; a panic in it sets `abort`, so that the
/// threads waiting on its commands stop instead of waiting for ever.
fn guarded<T>(abort: &AtomicBool, body: impl FnOnce() -> T) -> std::thread::Result<T> {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    if r.is_err() {
        abort.store(true, Ordering::Relaxed);
    }
    r
}

/// Waits until thread `u` has completed command `idx`: None on abort, else
/// whether it had to wait at all.
fn wait_for(done: &AtomicU32, idx: u32, abort: &AtomicBool) -> Option<bool> {
    if done.load(Ordering::Acquire) > idx {
        return Some(false);
    }
    let mut spins = 0u32;
    while done.load(Ordering::Acquire) <= idx {
        if abort.load(Ordering::Relaxed) {
            return None;
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
    Some(true)
}

/// Sleeps until `ns` (CLOCK_MONOTONIC, absolute).
fn sleep_until(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec; EINTR only ends the sleep early, and the
    // spin that follows covers the rest.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Spins until the tick clock reaches `due`; the tick count it stopped at.
#[inline]
fn spin_until(due: u64, ticks: Ticks) -> u64 {
    loop {
        let t = ticks.now();
        if t >= due {
            return t;
        }
        std::hint::spin_loop();
    }
}

/// A replay thread's clock: the tick clock and the (ticks, ns) pair it
/// converts through.
struct Pacer {
    ticks: Ticks,
    anchor: Anchor,
    /// The thread's CPU time from before each sleep to after its
    /// wake-up, summed ([`TimeSplit::sleep_cpu_ns`]).
    sleep_cpu_ns: u64,
    /// The spins from the wake-ups to the commands' times, in ticks.
    woken_spin_ticks: u64,
}

impl Pacer {
    /// Waits for a step due at `due_ns` (CLOCK_MONOTONIC) that was early
    /// when the thread got to it and has been made ready since: prepares
    /// what else it can (`prepare` says whether it had work; PREP_LATE
    /// when that or the making ready ran past its time), then sleeps and
    /// spins to its time. The call itself reads the clock again.
    #[inline(always)]
    fn wait(&mut self, due_ns: u64, prepare: impl FnOnce() -> bool, flags: &mut u8) {
        prepare();
        let now = self.ticks.now();
        if now > self.anchor.ticks(due_ns) {
            *flags |= PREP_LATE;
            return;
        }
        self.until(due_ns, now, flags);
    }

    /// Waits for a command due at `due_ns` (CLOCK_MONOTONIC) from `now`
    /// (ticks): sleeps until [`SPIN_NS`] before, takes a fresh anchor,
    /// then spins on the tick clock (pre-spin). The tick count it stopped
    /// at.
    ///
    /// The margin is fixed, not fitted to how late wake-ups end: a margin
    /// that followed them down to 10 µs (so that a dense burst slept
    /// through gaps it spins through now) was measured against this one
    /// on the traced tar replay under `--realtime` (bench/trace_replay.py
    /// part 5, docs/benchmarks/trace-replay.md): p99 error 859 vs 247 µs,
    /// every cached op's latency further from the trace (fstat EMD 0.74
    /// vs 0.36), and no CPU saved — a thread that sleeps comes back to
    /// caches other tasks have used. So the thread spins through gaps
    /// under 150 µs.
    fn until(&mut self, due_ns: u64, now: u64, flags: &mut u8) -> u64 {
        let due = self.anchor.ticks(due_ns);
        if due.saturating_sub(now) as f64 > SPIN_NS as f64 * self.ticks.per_ns {
            *flags |= SLEPT;
            // Read around the sleep only (a few per replay), inside the
            // margin before the command's time: the sleeps' share of the
            // CPU per command, measured rather than inferred.
            let c0 = thread_cpu_ns();
            sleep_until(due_ns - SPIN_NS);
            if let (Some(c0), Some(c1)) = (c0, thread_cpu_ns()) {
                self.sleep_cpu_ns += c1.saturating_sub(c0);
            }
            self.anchor = self.ticks.anchor();
            let stop = spin_until(self.anchor.ticks(due_ns), self.ticks);
            self.woken_spin_ticks += stop.saturating_sub(self.anchor.ticks);
            return stop;
        }
        spin_until(self.anchor.ticks(due_ns), self.ticks)
    }
}

/// This thread's resource use so far.
#[derive(Clone, Copy, Default)]
struct Usage {
    /// Involuntary context switches.
    preempted: u64,
    /// User and system CPU time.
    cpu_ns: u64,
    /// The thread ran under SCHED_FIFO.
    realtime: bool,
    /// CPU time around its sleeps ([`TimeSplit::sleep_cpu_ns`]).
    sleep_cpu_ns: u64,
    /// Its spins after waking, in ticks.
    woken_spin_ticks: u64,
}

/// Puts the calling thread under SCHED_FIFO at priority `prio`.
fn set_fifo(prio: i32) -> std::io::Result<()> {
    // Field by field would not build for musl, whose sched_param has
    // more fields.
    // SAFETY: sched_param is plain integers, for which zero is valid.
    let mut p: libc::sched_param = unsafe { std::mem::zeroed() };
    p.sched_priority = prio;
    // SAFETY: a valid sched_param; pid 0 is the calling thread on Linux.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether this process may put threads under SCHED_FIFO at `prio`
/// (tried on a thread of its own, which then ends).
pub fn realtime_permitted(prio: i32) -> std::io::Result<()> {
    std::thread::spawn(move || set_fifo(prio))
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the probe thread panicked")))
}

impl Usage {
    fn now() -> Usage {
        let u = fsprof_sys::usage::this_thread();
        Usage {
            preempted: u.involuntary_switches,
            cpu_ns: u.cpu_ns,
            realtime: false,
            sleep_cpu_ns: 0,
            woken_spin_ticks: 0,
        }
    }

    fn since(self, before: Usage, pacer: &Pacer) -> Usage {
        Usage {
            preempted: self.preempted.saturating_sub(before.preempted),
            cpu_ns: self.cpu_ns.saturating_sub(before.cpu_ns),
            realtime: false,
            sleep_cpu_ns: pacer.sleep_cpu_ns,
            woken_spin_ticks: pacer.woken_spin_ticks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panicking replay thread stops the others (abort) and comes back as
    /// an error naming the thread and the panic, not as fsprof's panic.
    #[test]
    fn a_panicking_thread_aborts_the_others_and_is_an_error() {
        let abort = AtomicBool::new(false);
        assert_eq!(guarded(&abort, || 7).unwrap(), 7);
        assert!(!abort.load(Ordering::Relaxed));
        let r = std::thread::scope(|sc| {
            let abort = &abort;
            let h = sc.spawn(move || guarded(abort, || -> u32 { panic!("slot {} gone", 3) }));
            h.join()
        });
        assert!(abort.load(Ordering::Relaxed));
        let p = r.unwrap().unwrap_err();
        let e = ThreadPanic::new(2, &*p);
        assert_eq!(e.message, "slot 3 gone");
        assert!(
            e.to_string()
                .starts_with("replay thread 2 failed (slot 3 gone)"),
            "{e}"
        );
        let p = std::panic::catch_unwind(|| panic!("fixed")).unwrap_err();
        assert_eq!(ThreadPanic::new(0, &*p).message, "fixed");
    }

    #[test]
    fn an_anchor_maps_ns_to_ticks_on_both_sides() {
        let a = Anchor {
            ticks: 3_000_000,
            ns: 1_000_000,
            per_ns: 3.0,
        };
        assert_eq!(a.ticks(1_000_000), 3_000_000);
        assert_eq!(a.ticks(1_000_100), 3_000_300);
        assert_eq!(a.ticks(999_900), 2_999_700);
        // Far before the anchor: clamped at 0, never wrapped.
        assert_eq!(a.ticks(0), 0);
    }

    /// Commands that need no resource (`fchdir` replays as a no-op),
    /// traced at `t_ns`, on one thread.
    fn noops(t_ns: &[u64]) -> Compiled {
        use fsprof_trace::replayfile::{Command, ReplayHeader};
        Compiled {
            header: ReplayHeader {
                threads: 1,
                duration_ns: t_ns.last().copied().unwrap_or(0),
                ..Default::default()
            },
            commands: t_ns
                .iter()
                .map(|&t| Command {
                    t_ns: t,
                    op: fsprof_trace::event::Op::from_name("fchdir").unwrap(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// A paced replay never issues a command before its (scaled) time,
    /// whatever the machine's load, and takes at least the traced span;
    /// an afap replay ignores the times. The times come from the trace,
    /// not from the replayer.
    #[test]
    fn paced_commands_are_never_issued_early() {
        // Bursts 10 µs apart after pauses of 20 ms, over 200 ms.
        let mut t = Vec::new();
        for b in 0..10u64 {
            for k in 0..5u64 {
                t.push(b * 20_000_000 + k * 10_000);
            }
        }
        let compiled = noops(&t);
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let engine = |pace| Engine {
            compiled: &compiled,
            root: &root,
            pace,
            verify: Verify::Strict,
            reads: Reads::Current,
            realtime: None,
            calls: Calls::Made,
            added_ns: 0,
        };
        // The (ticks, ns) anchors and the line through the run's two pairs
        // agree to well under this.
        let slack = 2_000;
        for speed in [1.0, 2.0] {
            let run = engine(Pace::Speed(speed)).run(&mut |_| {}).unwrap();
            assert!(!run.aborted);
            for (o, &tr) in run.outcomes.iter().zip(&t) {
                let due = (tr as f64 / speed) as u64;
                assert!(o.issued, "{o:?}");
                assert!(
                    o.issued_ns + slack >= due,
                    "issued at {} before {due}",
                    o.issued_ns
                );
                assert_eq!(o.error_ns, o.issued_ns.saturating_sub(due));
                assert_eq!(o.parts.total(), o.error_ns, "{o:?}");
            }
            let span = (*t.last().unwrap() as f64 / speed) as u64;
            assert!(
                run.elapsed_ns + slack >= span,
                "{} < {span}",
                run.elapsed_ns
            );
            // The thread's time is accounted for, wall time from the start
            // to its last return; the nine bursts after a pause slept
            // (fewer only if one was over 19 ms late), and sleeping cost
            // CPU time, less than it lasted (how long is the machine's:
            // a loaded one starts the thread late and the sleeps shorter).
            let x = run.split;
            let sum = x.calls_ns + x.own_ns + x.spin_ns + x.slept_ns;
            assert!(
                sum.abs_diff(run.elapsed_ns) < slack,
                "{x:?} {}",
                run.elapsed_ns
            );
            assert!((1..=9).contains(&x.sleeps), "{x:?}");
            assert!(x.sleep_cpu_ns > 0 && x.sleep_cpu_ns < x.slept_ns, "{x:?}");
            // Each sleep ends before its margin does: a spin follows it.
            assert!(x.woken_spin_ns > 0 && x.woken_spin_ns < x.slept_ns, "{x:?}");
        }
        let run = engine(Pace::Afap).run(&mut |_| {}).unwrap();
        let x = run.split;
        assert_eq!(
            (
                x.sleeps,
                x.spin_ns,
                x.slept_ns,
                x.sleep_cpu_ns,
                x.woken_spin_ns
            ),
            (0, 0, 0, 0, 0)
        );
        assert!(x.own_ns > 0 && x.calls_ns > 0, "{x:?}");
        assert!(run.outcomes.iter().all(|o| o.issued && o.error_ns == 0));
        assert!(run.elapsed_ns < *t.last().unwrap(), "{}", run.elapsed_ns);
    }

    /// A paced thread spins through gaps shorter than the pre-spin
    /// margin and sleeps through longer ones, with the margin left to
    /// spin: commands 100 µs apart (tar's longest gaps within a burst),
    /// then one after a 20 ms pause.
    #[test]
    fn a_thread_sleeps_only_through_gaps_longer_than_its_margin() {
        let t: Vec<u64> = [0, 100, 200, 300, 20_000, 20_100]
            .iter()
            .map(|us| us * 1_000)
            .collect();
        let compiled = noops(&t);
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let run = strict(&compiled, &root, Pace::Speed(1.0), Calls::Made, 0)
            .run(&mut |_| {})
            .unwrap();
        // The 100 µs gaps spun through (or run late, on a loaded
        // machine: then due at once), the pause slept — unless the thread
        // got past the burst less than the margin before the pause's end
        // (started 20 ms late at load 11 once): then it spins or is due.
        let x = run.split;
        let o = &run.outcomes[3];
        if o.issued_ns + o.latency_ns + SPIN_NS < 20_000_000 {
            assert_eq!(x.sleeps, 1, "{x:?}");
            assert!(x.slept_ns > 0, "{x:?}");
        } else {
            assert_eq!(x.sleeps, 0, "{x:?}");
        }
    }

    /// An engine verifying strictly, reads replayed, not real-time.
    fn strict<'a>(
        compiled: &'a Compiled,
        root: &'a Root,
        pace: Pace,
        calls: Calls,
        added_ns: u64,
    ) -> Engine<'a> {
        Engine {
            compiled,
            root,
            pace,
            verify: Verify::Strict,
            reads: Reads::Current,
            realtime: None,
            calls,
            added_ns,
        }
    }

    /// `mkdir /dK` traced at K × 100 µs, each taking 30 µs, one thread.
    fn mkdirs(n: u32) -> Compiled {
        use fsprof_trace::replayfile::{Command, ReplayHeader};
        Compiled {
            header: ReplayHeader {
                threads: 1,
                duration_ns: (n as u64 - 1) * 100_000,
                ..Default::default()
            },
            strings: (0..n).map(|k| format!("/d{k}").into_bytes()).collect(),
            commands: (0..n)
                .map(|k| Command {
                    t_ns: k as u64 * 100_000,
                    dur_ns: 30_000,
                    op: fsprof_trace::event::Op::from_name("mkdir").unwrap(),
                    path: Some(k),
                    mode: 0o755,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// A dry replay makes no call (the root stays empty where the real one
    /// makes every directory), each command lasting its traced duration
    /// with its traced result, on the replay's schedule.
    #[test]
    fn a_dry_replay_makes_no_call_and_spins_for_the_traced_durations() {
        let compiled = mkdirs(20);
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let engine = |calls| strict(&compiled, &root, Pace::Speed(1.0), calls, 0);
        let run = engine(Calls::Dry).run(&mut |_| {}).unwrap();
        assert!(!run.aborted);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        for (k, o) in run.outcomes.iter().enumerate() {
            assert!(o.issued && !o.mismatch && o.ret == 0, "{o:?}");
            // The clock's two reads around the spin add a few dozen ns;
            // a preemption inside it, more.
            assert!(o.latency_ns >= 30_000 - 100, "{k}: {o:?}");
            assert!(o.issued_ns + 2_000 >= k as u64 * 100_000, "{k}: {o:?}");
        }
        let median = {
            let mut l: Vec<u64> = run.outcomes.iter().map(|o| o.latency_ns).collect();
            l.sort_unstable();
            l[l.len() / 2]
        };
        assert!(median < 40_000, "{median}");
        let run = engine(Calls::Made).run(&mut |_| {}).unwrap();
        assert!(!run.aborted);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 20);
    }

    /// The knob for a slower replayer adds its time after every call:
    /// each command as fast as possible starts that long after the one
    /// before returned.
    #[test]
    fn added_ns_delays_each_next_command_by_as_much() {
        let compiled = noops(&[0; 50]);
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let run = |added_ns| {
            strict(&compiled, &root, Pace::Afap, Calls::Made, added_ns)
                .run(&mut |_| {})
                .unwrap()
        };
        let between =
            |r: &Run| -> Vec<u64> { r.outcomes.iter().filter_map(|o| o.between_ns).collect() };
        let slow = run(20_000);
        assert_eq!(between(&slow).len(), 49);
        assert!(
            between(&slow).iter().all(|&b| b >= 19_900),
            "{:?}",
            between(&slow)
        );
        let fast = run(0);
        let mut b = between(&fast);
        b.sort_unstable();
        assert!(b[b.len() / 2] < 5_000, "{b:?}");
    }

    #[test]
    fn only_waited_for_steps_and_every_few_thousandth_publish() {
        use fsprof_trace::replayfile::{Command, ReplayHeader};
        let cmd = |thread: u32, waits: Vec<(u32, u32)>| Command {
            thread,
            op: fsprof_trace::event::Op::from_name("pread").unwrap(),
            waits,
            ..Default::default()
        };
        let mut commands: Vec<Command> = (0..PUBLISH_EVERY + 10).map(|_| cmd(0, vec![])).collect();
        commands.push(cmd(1, vec![(0, 7)]));
        let compiled = Compiled {
            header: ReplayHeader {
                threads: 2,
                ..Default::default()
            },
            commands,
            ..Default::default()
        };
        let root = Root::open(std::path::Path::new("/")).unwrap();
        let e = Engine {
            compiled: &compiled,
            root: &root,
            pace: Pace::Afap,
            verify: Verify::Off,
            reads: Reads::Current,
            realtime: None,
            calls: Calls::Made,
            added_ns: 0,
        };
        let progs = e.programs();
        let published: Vec<usize> = progs[0]
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.publish)
            .map(|(k, _)| k)
            .collect();
        assert_eq!(published, vec![7, PUBLISH_EVERY - 1]);
        assert_eq!(progs[1].steps.len(), 1);
        assert_eq!(progs[0].max_read, 0);
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
