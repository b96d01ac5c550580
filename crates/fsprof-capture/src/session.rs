//! The capture loop: one for every source, so that `--interval`,
//! `--duration`, Ctrl-C and the command's exit mean the same everywhere.
//!
//! The rules:
//! - The capture ends when the command exits, when the source says it has
//!   ended (the `--pid` it followed is gone), at the `--duration` deadline,
//!   or on a stop signal (SIGINT, SIGQUIT, SIGTERM, SIGHUP).
//! - With a command running, a stop signal the terminal sent (Ctrl-C,
//!   Ctrl-\, hang-up) is the command's to handle: the terminal sent it to
//!   the whole foreground group, so the command has it already, and an
//!   interactive command may well go on. fsprof neither passes it on (that
//!   would deliver it twice) nor stops: the capture ends when the command
//!   does, as `time` does.
//! - With a command running, the first stop signal sent to fsprof alone
//!   (kill) is passed on to the command, and the capture goes on until the
//!   command exits, so the profile covers its way out; a second one ends
//!   the capture at once.
//! - Without a command, the first stop signal ends the capture.
//! - fsprof's exit status is the command's (128 + signal when killed);
//!   without one, 128 + the stop signal, or 0.

use std::ffi::OsString;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fsprof_core::profile::{ExitStatus, Interval, Layer, Tool};
use fsprof_core::{Profile, Resolution};
use fsprof_sys::clock::{mono_ns, wall_unix_ns};
use fsprof_sys::signals::Wake;
use fsprof_sys::{Child, LaunchError, StopSignals};

use crate::meta::{self, Span};
use crate::progress::Progress;
use crate::source::{Caps, Ended, Source, SourceError};

/// The longest the loop sleeps: how soon it notices a command whose
/// SIGCHLD went elsewhere, or a source that has ended. A source with a
/// bell ([`Source::bell`], `fsprof run`) sleeps until its upkeep is due
/// instead: SIGCHLD comes to the waiting thread's handler, and an idle
/// run wakes a few times a second, not ten.
const POLL: Duration = Duration::from_millis(100);
/// The least time between two upkeeps that a bell asks for: a process that
/// rings it again and again costs fsprof at most an upkeep every
/// `BELL_GAP`, as the 5 ms tick of the fifteenth session did at most.
pub const BELL_GAP: Duration = Duration::from_millis(2);

/// What to capture and for how long.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Recorded as `Meta.tool`: `run`, `kernel`, ...
    pub tool: Tool,
    /// The command to start and capture; empty for none.
    pub command: Vec<OsString>,
    pub resolution: Resolution,
    /// `--interval`: also record the counts per interval of this length.
    pub interval_ns: Option<u64>,
    /// `--duration`: stop after this long.
    pub duration_ns: Option<u64>,
    /// Without `--interval`, report the counts to [`Progress::sampled`]
    /// this often (a live metrics endpoint).
    pub sample_ns: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error("{0}")]
    Source(SourceError),
    #[error("this capture needs a command to run (`-- CMD ARGS...`)")]
    NeedsCommand,
}

/// A finished capture.
#[derive(Debug)]
pub struct Outcome {
    pub profile: Profile,
    /// How the command ended, when there was one and it ended.
    pub exit: Option<ExitStatus>,
    /// The stop signal sent to fsprof that interrupted the capture (passed
    /// on to the command, or ending the capture); a terminal's Ctrl-C while
    /// a command runs is the command's, not an interruption.
    pub interrupted: Option<i32>,
    /// Things the user should know about the capture (one line each).
    pub notes: Vec<String>,
    /// Things that make the profile less trustworthy (one line each).
    pub warnings: Vec<String>,
}

impl Outcome {
    /// fsprof's exit status: the command's, else 128 + the stop signal,
    /// else 0.
    pub fn exit_code(&self) -> i32 {
        match (&self.exit, self.interrupted) {
            (Some(st), _) => st.shell_code(),
            (None, Some(sig)) => 128 + sig,
            (None, None) => 0,
        }
    }
}

/// A capture about to run. Creating it blocks the stop signals, so create
/// it before starting any thread (see [`fsprof_sys::signals`]).
pub struct Capture {
    plan: Plan,
    signals: StopSignals,
}

impl Capture {
    pub fn new(plan: Plan) -> Capture {
        Capture {
            signals: StopSignals::block(),
            plan,
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Runs the capture to its end (see the module doc for the rules).
    pub fn run(
        self,
        source: &mut dyn Source,
        progress: &mut dyn Progress,
    ) -> Result<Outcome, CaptureError> {
        let caps = source.caps();
        // A command that is not held runs from its launch on.
        let launched = (mono_ns(), wall_unix_ns());
        let mut child = self.launch(source, &caps)?;
        let what = match source.start(child.as_ref().map(Child::pid)) {
            Ok(what) => what,
            Err(e) => {
                // Never left running unobserved (a held one is killed when
                // its Child is dropped).
                if let Some(c) = child.as_mut().filter(|_| !caps.hold_command) {
                    c.signal(libc::SIGKILL);
                    let _ = c.wait();
                }
                return Err(CaptureError::Source(e));
            }
        };
        let (start_mono, start_unix_ns) = match &child {
            Some(_) if !caps.hold_command => launched,
            _ => (mono_ns(), wall_unix_ns()),
        };
        if let Some(c) = &mut child {
            c.release()?;
        }
        progress.started(&what);
        let mut sampler = Sampler::new(&self.plan);
        let stop = Watch {
            signals: &self.signals,
            caps,
            deadline: self.plan.duration_ns,
            start_mono,
            child: child.as_mut(),
        }
        .watch(source, &mut sampler, progress)?;
        let duration_ns = mono_ns() - start_mono;
        let how = Ended {
            start_mono_ns: start_mono,
            duration_ns,
            exit: stop.exit.clone(),
        };
        let fin = source.finish(&how).map_err(CaptureError::Source)?;
        progress.sampled(duration_ns, &fin.layers);
        let span = Span {
            start_unix_ns,
            duration_ns,
            interval_ns: self.plan.interval_ns,
        };
        let p = &self.plan;
        let mut meta = meta::finished(
            p.tool.clone(),
            &p.command,
            p.resolution,
            span,
            &fin,
            stop.exit.clone(),
        );
        source.amend_meta(&mut meta);
        let mut profile = Profile::new(meta);
        profile.intervals = sampler.finish(duration_ns, &fin.layers);
        profile.layers = fin.layers;
        profile.processes = fin.processes;
        Ok(Outcome {
            profile,
            exit: stop.exit,
            interrupted: stop.interrupted,
            notes: fin.notes,
            warnings: fin.warnings,
        })
    }

    /// Starts the command: held before `execve` until the source is
    /// attached when the source asks for that, else at once.
    fn launch(&self, source: &dyn Source, caps: &Caps) -> Result<Option<Child>, CaptureError> {
        if self.plan.command.is_empty() {
            return match caps.needs_command {
                true => Err(CaptureError::NeedsCommand),
                false => Ok(None),
            };
        }
        let env = source.command_env();
        if !caps.hold_command {
            return Ok(Some(Child::spawn(&self.plan.command, &env)?));
        }
        let child = Child::spawn_held(&self.plan.command, &env)?;
        child.wait_parked();
        Ok(Some(child))
    }
}

/// How the watch ended.
struct Stop {
    exit: Option<ExitStatus>,
    interrupted: Option<i32>,
}

/// The running part of a capture: waits for its end, sampling meanwhile.
struct Watch<'a> {
    signals: &'a StopSignals,
    caps: Caps,
    deadline: Option<u64>,
    start_mono: u64,
    child: Option<&'a mut Child>,
}

impl Watch<'_> {
    fn watch(
        mut self,
        source: &mut dyn Source,
        sampler: &mut Sampler,
        progress: &mut dyn Progress,
    ) -> Result<Stop, CaptureError> {
        let mut interrupted = None;
        // The source may want its next upkeep sooner than every `every`.
        let upkeep_in = |source: &dyn Source, every: u64| {
            source.next_upkeep_ns().map_or(every, |n| n.min(every))
        };
        let mut next_upkeep = self.caps.upkeep_ns.map(|every| upkeep_in(&*source, every));
        let gap = BELL_GAP.as_nanos() as u64;
        // The bell's value at the last upkeep, and when that was: 0 before
        // the first, as the source made it (the command runs already, and
        // may have rung it).
        let mut heard = source.bell().map(|_| 0);
        let mut last_upkeep = 0;
        loop {
            if let Some(st) = self.child.as_mut().and_then(|c| c.try_wait()) {
                return Ok(Stop {
                    exit: Some(st),
                    interrupted,
                });
            }
            let now = mono_ns() - self.start_mono;
            if source.ended() || self.deadline.is_some_and(|d| now >= d) {
                break;
            }
            // Read before the upkeep: a ring after it is heard next time.
            let bell = source.bell().map(|w| w.load(Ordering::Acquire));
            let rang = bell != heard;
            let soonest = last_upkeep + gap;
            if let (Some(due), Some(every)) = (next_upkeep, self.caps.upkeep_ns) {
                if now >= due || (rang && now >= soonest) {
                    heard = bell;
                    source.upkeep();
                    last_upkeep = now;
                    next_upkeep = Some(now + upkeep_in(&*source, every));
                }
            }
            if sampler.due(now) {
                let layers = source.snapshot().map_err(CaptureError::Source)?;
                progress.sampled(now, &layers);
                sampler.record(now, layers);
            }
            // Rung too soon after the last upkeep: the next is at `soonest`,
            // and the bell is not listened to until then.
            let early = (bell != heard).then_some(soonest);
            let listen = match (source.bell(), heard) {
                (Some(w), Some(v)) if early.is_none() => Some((w, v)),
                _ => None,
            };
            let poll = if heard.is_some() { Duration::MAX } else { POLL };
            let wake = [sampler.next, self.deadline, next_upkeep, early]
                .into_iter()
                .flatten()
                .map(|t| Duration::from_nanos(t.saturating_sub(now)))
                .fold(poll, Duration::min);
            let woke = match heard {
                Some(_) => self.signals.wait_bell(wake, listen),
                None => self.signals.wait(wake),
            };
            if let Wake::Stop(sig) = woke {
                match self.child.as_deref() {
                    Some(_) if sig.from_terminal => {}
                    Some(c) if interrupted.is_none() => {
                        c.signal(sig.signo);
                        interrupted = Some(sig.signo);
                    }
                    _ => {
                        interrupted = Some(sig.signo);
                        break;
                    }
                }
            }
        }
        Ok(Stop {
            exit: self.child.and_then(|c| c.try_wait()),
            interrupted,
        })
    }
}

/// Samples the counts at `--interval` (or the live sample period) and
/// slices them into intervals.
struct Sampler {
    period: Option<u64>,
    intervals_on: bool,
    /// When the next sample is due (ns since the start).
    next: Option<u64>,
    intervals: Vec<Interval>,
    prev: Vec<Layer>,
    prev_ns: u64,
}

impl Sampler {
    fn new(plan: &Plan) -> Sampler {
        let period = plan.interval_ns.or(plan.sample_ns);
        Sampler {
            period,
            intervals_on: plan.interval_ns.is_some(),
            next: period,
            intervals: Vec::new(),
            prev: Vec::new(),
            prev_ns: 0,
        }
    }

    fn due(&self, now: u64) -> bool {
        self.next.is_some_and(|t| now >= t)
    }

    fn record(&mut self, now: u64, layers: Vec<Layer>) {
        self.next = self.next.zip(self.period).map(|(t, p)| t + p);
        if self.intervals_on {
            self.intervals
                .push(Interval::between(&layers, &self.prev, self.prev_ns, now));
            self.prev = layers;
            self.prev_ns = now;
        }
    }

    /// The intervals, the last one ending with the capture.
    fn finish(mut self, end_ns: u64, last: &[Layer]) -> Vec<Interval> {
        if self.intervals_on {
            self.intervals
                .push(Interval::between(last, &self.prev, self.prev_ns, end_ns));
        }
        self.intervals
    }
}
