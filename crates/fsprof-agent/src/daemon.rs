//! The agent's life: start (programs attached, cgroups walked, endpoint
//! listening, then `READY=1`), read the kernel maps every collect
//! interval, apply a new configuration on SIGHUP, and on SIGTERM or
//! SIGINT stop: one last read and push, the endpoint closed, every
//! program and map released (nothing is pinned, so the kernel frees them
//! when their descriptors close, even after SIGKILL).
//!
//! Quiet when healthy: a few lines at start, one per reload and one at
//! the end; a problem (maps nearly full, reads failing, the collector
//! away, cgroups that could not be named) is said at most once a minute
//! per kind.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fsprof_core::Profile;
use fsprof_export::serve::{self, Format, MetricsServer};
use fsprof_sys::signals::{StopSignals, Wake};

use crate::collector::Collector;
use crate::config::{Overrides, Settings};
use crate::notify::{notify, reloading};
use crate::push::Pusher;

/// A kind of problem is said at most once per this long.
pub const WARN_EVERY: Duration = Duration::from_secs(60);
/// Maps this full are worth a warning.
const FULL: f64 = 0.9;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("fsprof agent: {0}")]
    Settings(String),
    #[error("fsprof agent: {0}")]
    Kernel(#[from] fsprof_kernel::Error),
    #[error("fsprof agent: {0}")]
    Serve(#[from] serve::ServeError),
    #[error("fsprof agent: starting the OTLP push: {0}")]
    Push(std::io::Error),
}

/// How the agent was started.
pub struct RunOptions {
    /// Read at start and again on every SIGHUP.
    pub config: Option<PathBuf>,
    /// The command line's settings, over the file's.
    pub flags: Overrides,
    /// Stop after this long (tests, benchmarks).
    pub duration: Option<Duration>,
}

/// How it ended.
pub struct Outcome {
    /// Everything counted, all cgroups together.
    pub profile: Profile,
    /// The signal that stopped it (none: `--duration` ran out).
    pub signal: Option<i32>,
}

/// The settings the options give now.
pub fn settings(o: &RunOptions) -> Result<Settings, String> {
    let file = match &o.config {
        Some(p) => Overrides::read(p)?,
        None => Overrides::default(),
    };
    Settings::resolve(&file, &o.flags)
}

/// Rate-limited problem lines.
struct Warnings<'a> {
    last: HashMap<&'static str, Instant>,
    log: &'a dyn Fn(&str),
}

impl Warnings<'_> {
    fn say(&mut self, kind: &'static str, now: Instant, line: impl FnOnce() -> String) {
        if self
            .last
            .get(kind)
            .is_some_and(|t| now.duration_since(*t) < WARN_EVERY)
        {
            return;
        }
        self.last.insert(kind, now);
        (self.log)(&format!("fsprof agent: {}", line()));
    }
}

/// The running parts: the collector and what serves and pushes it.
struct Running {
    collector: Arc<Mutex<Collector>>,
    server: Option<MetricsServer>,
    pusher: Option<Pusher>,
}

impl Running {
    fn lock(&self) -> std::sync::MutexGuard<'_, Collector> {
        self.collector.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts (or restarts) the endpoint for `s`.
    fn serve(&mut self, s: &Settings) -> Result<Option<String>, AgentError> {
        self.server = None;
        let Some(addr) = &s.serve_metrics else {
            return Ok(None);
        };
        let addrs = serve::resolve(addr, s.metrics_allow_remote)?;
        let c = self.collector.clone();
        let render: serve::Render = Arc::new(move |f| {
            let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
            c.refresh().map_err(|e| e.to_string())?;
            let e = c.exposition();
            Ok(match f {
                Format::Text => fsprof_export::prometheus::text(&e).into_bytes(),
                Format::Protobuf => fsprof_export::protobuf::encode(&e),
            })
        });
        let server = MetricsServer::start(&addrs, render)?;
        let at = server.local_addr().to_string();
        self.server = Some(server);
        Ok(Some(at))
    }

    fn push(&mut self, s: &Settings) -> Result<(), AgentError> {
        self.pusher = None;
        if let Some(o) = &s.otlp {
            let p = Pusher::start(o.clone(), self.collector.clone()).map_err(AgentError::Push)?;
            self.pusher = Some(p);
        }
        Ok(())
    }
}

/// Runs until SIGTERM/SIGINT (or `duration`). `log` takes each line the
/// agent has to say.
pub fn run(o: &RunOptions, log: &dyn Fn(&str)) -> Result<Outcome, AgentError> {
    // Before any thread starts, so every thread inherits the mask.
    let sigs = StopSignals::block();
    let s = settings(o).map_err(AgentError::Settings)?;
    let collector = Collector::start(s.clone())?;
    say_started(&collector, log);
    let mut r = Running {
        collector: Arc::new(Mutex::new(collector)),
        server: None,
        pusher: None,
    };
    if let Some(at) = r.serve(&s)? {
        log(&format!(
            "fsprof agent: serving metrics on http://{at}/metrics"
        ));
    }
    r.push(&s)?;
    notify("READY=1");
    let signal = main_loop(o, &mut r, &sigs, log);
    notify("STOPPING=1");
    // The last push, then nothing reads the collector any more.
    r.pusher = None;
    r.server = None;
    let mut c = Arc::try_unwrap(r.collector)
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .unwrap_or_else(|_| unreachable!("the server and the pusher are gone"));
    let _ = c.collect(Instant::now());
    let profile = c.profile();
    // Dropping the collector detaches every program and frees the maps.
    drop(c);
    let how = signal.map_or("its --duration ran out".into(), |s| format!("signal {s}"));
    log(&format!("fsprof agent: stopped ({how}); programs detached"));
    Ok(Outcome { profile, signal })
}

fn say_started(c: &Collector, log: &dyn Fn(&str)) {
    let (layers, notes) = c.describe();
    let s = &c.settings;
    log(&format!(
        "fsprof agent: capturing {} by cgroup (top {}, cgroups gone {} ago forgotten)",
        layers.join(", "),
        s.top,
        humantime::format_duration(s.ttl)
    ));
    if !c.has_hierarchy() {
        log("fsprof agent: no cgroup v2 hierarchy is mounted: every event is filed under `/`");
    }
    for n in notes {
        log(&format!("fsprof agent: {n}"));
    }
}

/// Collects every interval, reloads on SIGHUP; returns the stop signal.
fn main_loop(
    o: &RunOptions,
    r: &mut Running,
    sigs: &StopSignals,
    log: &dyn Fn(&str),
) -> Option<i32> {
    let end = o.duration.map(|d| Instant::now() + d);
    let mut interval = r.lock().settings.collect_interval;
    let mut next = Instant::now() + interval;
    let mut warn = Warnings {
        last: HashMap::new(),
        log,
    };
    let mut seen = Seen::default();
    loop {
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) {
            return None;
        }
        let wake = end.map_or(next, |e| e.min(next));
        match sigs.wait(wake.saturating_duration_since(now)) {
            Wake::Stop(s) if s.signo == libc::SIGHUP => {
                reload(o, r, log);
                interval = r.lock().settings.collect_interval;
            }
            Wake::Stop(s) => return Some(s.signo),
            Wake::Timeout | Wake::Child | Wake::Bell => {}
        }
        let now = Instant::now();
        if now >= next {
            next = now + interval;
            let res = r.lock().collect(now);
            if let Err(e) = res {
                warn.say("read", now, || {
                    format!("reading the kernel maps failed: {e}")
                });
            }
            seen.check(&r.lock(), now, &mut warn);
        }
    }
}

/// What the last check saw, so only news is said.
#[derive(Default)]
struct Seen {
    unresolved: u64,
    otlp_failures: u64,
}

impl Seen {
    fn check(&mut self, c: &Collector, now: Instant, warn: &mut Warnings) {
        let h = &c.health;
        if h.map_capacity > 0 && h.map_entries as f64 >= FULL * h.map_capacity as f64 {
            warn.say("full", now, || {
                format!(
                    "the kernel counter maps are {}% full ({} of {} entries): new (cgroup, op) pairs are not counted; lower the top or the cgroup TTL",
                    100 * h.map_entries / h.map_capacity,
                    h.map_entries,
                    h.map_capacity
                )
            });
        }
        let unresolved = c.unresolved_total();
        if unresolved > self.unresolved {
            let new = unresolved - self.unresolved;
            self.unresolved = unresolved;
            warn.say("unresolved", now, || {
                format!("{new} cgroup(s) were gone before they could be named; their events are in `other`")
            });
        }
        if c.otlp_failures > self.otlp_failures {
            self.otlp_failures = c.otlp_failures;
            warn.say("otlp", now, || {
                format!(
                    "OTLP pushes are failing ({} so far); they wait in the buffer and are retried",
                    c.otlp_failures
                )
            });
        }
    }
}

/// Applies the configuration as it is now; a bad one is said and the
/// settings in force stay.
fn reload(o: &RunOptions, r: &mut Running, log: &dyn Fn(&str)) {
    reloading();
    let new = match settings(o) {
        Ok(s) => s,
        Err(e) => {
            log(&format!(
                "fsprof agent: reload refused, the settings in force stay: {e}"
            ));
            notify("READY=1");
            return;
        }
    };
    let old = r.lock().settings.clone();
    let changed = r.lock().reconfigure(new.clone());
    let mut what = match changed {
        Ok(c) => c,
        Err(e) => {
            log(&format!(
                "fsprof agent: reload: the new capture did not start ({e}); the old one goes on"
            ));
            Vec::new()
        }
    };
    if (&new.serve_metrics, new.metrics_allow_remote)
        != (&old.serve_metrics, old.metrics_allow_remote)
    {
        match r.serve(&new) {
            Ok(at) => {
                what.push("endpoint");
                if let Some(at) = at {
                    log(&format!(
                        "fsprof agent: serving metrics on http://{at}/metrics"
                    ));
                }
            }
            Err(e) => log(&format!("{e}")),
        }
    }
    if new.otlp != old.otlp {
        match r.push(&new) {
            Ok(()) => what.push("otlp"),
            Err(e) => log(&format!("{e}")),
        }
    }
    let what = if what.is_empty() {
        "nothing".to_string()
    } else {
        what.join(", ")
    };
    log(&format!(
        "fsprof agent: configuration reloaded (changed: {what})"
    ));
    notify("READY=1");
}
