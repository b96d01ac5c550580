//! The replay itself: one OS thread per replay thread, each running its
//! commands in traced order. Before a command a thread waits for the
//! commands of other threads it depends on (each thread publishes how many
//! commands it has completed, release/acquire), then for the command's
//! time: it sleeps until shortly before, spins the rest (pre-spin), and
//! issues it. The issue-time error (actual − target) and the call's own
//! latency are kept per command for the report.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use fsprof_sys::clock::mono_ns;
use fsprof_trace::replayfile::{Compiled, CMD_UNVERIFIED};

use crate::exec::{Exec, Kind, Scratch, Slots};
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

/// Sleep until this long before a command's time, then spin.
const SPIN_NS: u64 = 150_000;

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
}

pub struct Run {
    /// Per command, in the compiled order.
    pub outcomes: Vec<Outcome>,
    pub elapsed_ns: u64,
    /// Stopped at the first mismatch (`--verify strict`).
    pub aborted: bool,
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

impl Engine<'_> {
    /// Runs the replay; `progress` receives the number of completed
    /// commands about every 100 ms (on the calling thread).
    pub fn run(&self, progress: &mut dyn FnMut(u64)) -> Run {
        let c = self.compiled;
        let nthreads = c.header.threads as usize;
        let kinds: Vec<Option<Kind>> = c.commands.iter().map(Kind::of).collect();
        let mut lists: Vec<Vec<usize>> = vec![Vec::new(); nthreads];
        for (i, cmd) in c.commands.iter().enumerate() {
            lists[cmd.thread as usize].push(i);
        }
        let done: Vec<AtomicU32> = (0..nthreads).map(|_| AtomicU32::new(0)).collect();
        let abort = AtomicBool::new(false);
        let slots = Slots::new(c.header.slots as usize);
        let exec = Exec {
            root: self.root,
            slots: &slots,
            compiled: c,
        };
        let start = mono_ns() + 2_000_000;
        let mut outcomes = vec![Outcome::default(); c.commands.len()];
        let results: Vec<Vec<(usize, Outcome)>> = std::thread::scope(|sc| {
            let handles: Vec<_> = lists
                .iter()
                .enumerate()
                .map(|(t, list)| {
                    let (done, abort, exec, kinds) = (&done, &abort, &exec, &kinds);
                    sc.spawn(move || self.thread(t, list, start, done, abort, exec, kinds))
                })
                .collect();
            while handles.iter().any(|h| !h.is_finished()) {
                progress(done.iter().map(|d| d.load(Ordering::Relaxed) as u64).sum());
                std::thread::sleep(Duration::from_millis(100));
            }
            handles
                .into_iter()
                .map(|h| h.join().expect("a replay thread panicked"))
                .collect()
        });
        slots.close_all();
        for per in results {
            for (i, o) in per {
                outcomes[i] = o;
            }
        }
        // From the start to the last command's return (not to when this
        // thread noticed the others had finished).
        let elapsed_ns = outcomes
            .iter()
            .filter(|o| o.issued)
            .map(|o| o.issued_ns + o.latency_ns)
            .max()
            .unwrap_or(0);
        progress(c.commands.len() as u64);
        Run {
            outcomes,
            elapsed_ns,
            aborted: abort.load(Ordering::Relaxed),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn thread(
        &self,
        t: usize,
        list: &[usize],
        start: u64,
        done: &[AtomicU32],
        abort: &AtomicBool,
        exec: &Exec,
        kinds: &[Option<Kind>],
    ) -> Vec<(usize, Outcome)> {
        let mut out = Vec::with_capacity(list.len());
        let mut scratch = Scratch::new();
        for (k, &i) in list.iter().enumerate() {
            let cmd = &self.compiled.commands[i];
            for &(u, idx) in &cmd.waits {
                if !wait_for(&done[u as usize], idx, abort) {
                    return out;
                }
            }
            if abort.load(Ordering::Relaxed) {
                return out;
            }
            let kind = kinds[i];
            let skip =
                kind.is_none() || (self.reads == Reads::Skip && kind.is_some_and(Kind::is_read));
            let target = match self.pace {
                Pace::Afap => None,
                Pace::Speed(s) => Some(start + (cmd.t_ns as f64 / s) as u64),
            };
            let mut o = Outcome::default();
            if !skip {
                let kind = kind.expect("checked");
                if let Some(target) = target {
                    wait_until(target);
                }
                let t0 = mono_ns();
                let got = exec.run(kind, cmd, &mut scratch);
                let t1 = mono_ns();
                o = Outcome {
                    issued_ns: t0.saturating_sub(start),
                    error_ns: target.map_or(0, |tg| t0.saturating_sub(tg)),
                    latency_ns: t1 - t0,
                    ret: got.0,
                    errno: got.1,
                    issued: true,
                    mismatch: self.verify != Verify::Off
                        && !matches(kind, cmd.cflags, (cmd.ret, cmd.errno), got),
                };
                if o.mismatch && self.verify == Verify::Strict {
                    abort.store(true, Ordering::Relaxed);
                }
            }
            out.push((i, o));
            done[t].store(k as u32 + 1, Ordering::Release);
        }
        out
    }
}

/// Waits until thread `u` has completed command `idx`; false on abort.
fn wait_for(done: &AtomicU32, idx: u32, abort: &AtomicBool) -> bool {
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
    if target > now + SPIN_NS {
        std::thread::sleep(Duration::from_nanos(target - now - SPIN_NS));
    }
    while mono_ns() < target {
        std::hint::spin_loop();
    }
}
