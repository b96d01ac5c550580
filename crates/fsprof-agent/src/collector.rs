//! The agent's state: the capture session, the cgroups it knows and the
//! series folded from the kernel's counters. One [`Collector`] behind a
//! mutex serves the scrapes, the OTLP pushes and the main loop.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use fsprof_core::profile::{merge_layers, SYSTEM_WIDE};
use fsprof_core::{Layer, Profile};
use fsprof_export::{Exposition, Group, Scalar};
use fsprof_kernel::{Options, Session, Target};

use crate::config::{Layer as AgentLayer, Settings};
use crate::fold::Fold;
use crate::registry::{find_root, Registry};

/// A scrape reads the kernel maps again only if the last read is older.
pub const FRESH: Duration = Duration::from_secs(1);

/// What the agent watches about itself, beside the series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Health {
    pub reads: u64,
    pub read_errors: u64,
    /// Counter map entries and capacity at the last read.
    pub map_entries: usize,
    pub map_capacity: usize,
    /// Kernel counter entries deleted for expired cgroups.
    pub forgotten: u64,
    /// Program runs the kernel skipped (recursion).
    pub missed: u64,
}

pub struct Collector {
    session: Session,
    pub settings: Settings,
    registry: Registry,
    fold: Fold,
    devs: BTreeMap<u32, String>,
    /// `cgroup_mkdir`/`cgroup_rmdir` are attached.
    kernel_names: bool,
    started: Instant,
    start_unix_ns: u64,
    last_read: Option<Instant>,
    pub health: Health,
    /// OTLP pushes dropped and failed, set by the pusher.
    pub otlp_dropped: u64,
    pub otlp_failures: u64,
}

/// The capture options for `s`.
fn options(s: &Settings) -> Options {
    let has = |l| s.layers.contains(&l);
    Options {
        syscall: has(AgentLayer::Syscall),
        fs: has(AgentLayer::Fs),
        block: has(AgentLayer::Block),
        fuse: has(AgentLayer::Fuse),
        all_syscalls: s.all_syscalls,
        resolution: s.resolution,
        target: Target::All,
        require: Vec::new(),
        explicit_layers: false,
        perf_tracepoints: false,
        fs_functions: Vec::new(),
        by_cgroup: true,
        mapped_faults: false,
    }
}

impl Collector {
    /// Loads the programs and learns the cgroups that exist.
    pub fn start(settings: Settings) -> Result<Collector, fsprof_kernel::Error> {
        let session = Session::start(&options(&settings))?;
        let now = Instant::now();
        let root = settings.cgroup_root.clone().or_else(find_root);
        let registry = Registry::new(root, settings.labeler, now);
        Ok(Collector {
            kernel_names: session.names_cgroups(),
            session,
            registry,
            fold: Fold::new(settings.top, settings.ttl),
            settings,
            devs: BTreeMap::new(),
            started: now,
            start_unix_ns: fsprof_sys::clock::wall_unix_ns(),
            last_read: None,
            health: Health::default(),
            otlp_dropped: 0,
            otlp_failures: 0,
        })
    }

    /// The layers attached, and what was skipped and why.
    pub fn describe(&self) -> (Vec<&'static str>, &[String]) {
        (self.session.layers.clone(), &self.session.notes)
    }

    /// Whether the cgroup v2 hierarchy was found.
    pub fn has_hierarchy(&self) -> bool {
        self.settings.cgroup_root.is_some() || find_root().is_some()
    }

    /// Reads the maps unless they were read less than [`FRESH`] ago.
    pub fn refresh(&mut self) -> Result<(), fsprof_kernel::Error> {
        let now = Instant::now();
        if self
            .last_read
            .is_some_and(|t| now.duration_since(t) < FRESH)
        {
            return Ok(());
        }
        self.collect(now)
    }

    /// Reads the kernel maps: names new cgroups, adds what the counters
    /// gained to the series, and retires cgroups gone for the TTL.
    pub fn collect(&mut self, now: Instant) -> Result<(), fsprof_kernel::Error> {
        self.last_read = Some(now);
        self.health.reads += 1;
        let r = self.collect_inner(now);
        if r.is_err() {
            self.health.read_errors += 1;
        }
        r
    }

    fn collect_inner(&mut self, now: Instant) -> Result<(), fsprof_kernel::Error> {
        self.absorb_cgroup_events(now)?;
        if !self.kernel_names {
            self.registry.rescan(now);
        }
        let read = self.session.read_by_cgroup()?;
        self.health.map_entries = read.entries;
        self.health.map_capacity = read.capacity;
        let live: HashSet<String> = registry_live(&self.registry);
        let live_refs: HashSet<&str> = live.iter().map(|s| &s[..]).collect();
        let (session, registry, devs) = (&self.session, &mut self.registry, &mut self.devs);
        let kernel_names = self.kernel_names;
        let mut resolve = |id: u64| {
            if let Some(l) = registry.known(id) {
                return Some(l.to_string());
            }
            // Created since the events were read: read them again first.
            if kernel_names {
                if let Ok(ev) = session.drain_cgroup_events() {
                    apply(registry, ev, now);
                }
            }
            registry.resolve(id, now)
        };
        let mut name = |key: u64| session.op_name(key, devs);
        self.fold
            .absorb(&read.ops, &mut resolve, &mut name, &live_refs, now);
        let expired = self.registry.expire(now, self.settings.ttl);
        if !expired.is_empty() {
            self.fold.forget(&expired);
            self.health.forgotten += self.session.forget_cgroups(&expired)? as u64;
        }
        self.health.missed = self.session.missed();
        Ok(())
    }

    fn absorb_cgroup_events(&mut self, now: Instant) -> Result<(), fsprof_kernel::Error> {
        if self.kernel_names {
            let ev = self.session.drain_cgroup_events()?;
            apply(&mut self.registry, ev, now);
        }
        Ok(())
    }

    /// Takes new settings: labels and bounds at once; a new capture
    /// session when the layers or the resolution changed (the kernel
    /// counts from zero again; with a new resolution the series start
    /// over too).
    pub fn reconfigure(&mut self, s: Settings) -> Result<Vec<&'static str>, fsprof_kernel::Error> {
        let mut changed = Vec::new();
        if s.capture_differs(&self.settings) {
            // Read what the old programs counted before they go.
            let _ = self.collect(Instant::now());
            let new = Session::start(&options(&s))?;
            self.kernel_names = new.names_cgroups();
            let old = std::mem::replace(&mut self.session, new);
            old.detach_in_background();
            self.fold.restart_kernel_counts();
            if s.resolution != self.settings.resolution {
                self.fold.clear_series();
            }
            changed.push("capture");
        }
        if s.labeler != self.settings.labeler {
            self.registry.relabel(s.labeler);
            self.fold.clear_series();
            changed.push("labels");
        }
        if (s.top, s.ttl) != (self.settings.top, self.settings.ttl) {
            self.fold.top = s.top;
            self.fold.ttl = s.ttl;
            changed.push("bounds");
        }
        self.settings = s;
        Ok(changed)
    }

    /// The series and the agent's own gauges and counters, as exported.
    pub fn exposition(&self) -> Exposition<'_> {
        let groups = self
            .fold
            .groups()
            .into_iter()
            .map(|(label, layers)| Group {
                labels: vec![("cgroup".into(), label.to_string())],
                layers,
            })
            .collect();
        let host = fsprof_sys::host::hostname();
        Exposition {
            resolution: self.settings.resolution,
            groups,
            scalars: self.scalars(),
            resource: vec![
                ("service.name".into(), "fsprof-agent".into()),
                ("host.name".into(), host),
                ("os.version".into(), fsprof_sys::host::kernel_release()),
            ],
            start_unix_ns: self.start_unix_ns,
            end_unix_ns: fsprof_sys::clock::wall_unix_ns(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn scalars(&self) -> Vec<Scalar> {
        let (slots, waiting) = self.fold.sizes();
        let (known, unresolved) = self.registry.sizes();
        let h = &self.health;
        let gauge = |name: &str, help: &str, v: f64| Scalar {
            name: name.into(),
            help: help.into(),
            counter: false,
            points: vec![(Vec::new(), v)],
        };
        let counter = |name: &str, help: &str, v: u64| Scalar {
            counter: true,
            ..gauge(name, help, v as f64)
        };
        vec![
            gauge(
                "fsprof_agent_cgroups",
                "Cgroups the agent knows, live or gone less than the TTL ago.",
                known as f64,
            ),
            gauge(
                "fsprof_agent_cgroups_live",
                "Cgroups that exist.",
                self.registry.live() as f64,
            ),
            gauge(
                "fsprof_agent_cgroup_labels",
                "Cgroup labels with series of their own (at most top).",
                slots as f64,
            ),
            gauge(
                "fsprof_agent_cgroup_labels_waiting",
                "Active cgroup labels filed in `other` for want of a slot.",
                waiting as f64,
            ),
            gauge(
                "fsprof_agent_cgroups_unresolved",
                "Cgroup ids seen that no walk of the hierarchy could name, held for the TTL.",
                unresolved as f64,
            ),
            counter(
                "fsprof_agent_cgroups_unresolved_total",
                "Cgroup ids seen that no walk could name (their observations are in `other`).",
                self.registry.unresolved_total,
            ),
            counter(
                "fsprof_agent_unresolved_observations_total",
                "Observations filed in `other` because their cgroup could not be named.",
                self.fold.unresolved_events,
            ),
            counter(
                "fsprof_agent_slots_displaced_total",
                "Times a much busier cgroup label took the slot of an idle one.",
                self.fold.displaced,
            ),
            gauge(
                "fsprof_agent_map_entries",
                "Entries in the kernel counter maps.",
                h.map_entries as f64,
            ),
            gauge(
                "fsprof_agent_map_capacity",
                "Entries the kernel counter maps hold at most.",
                h.map_capacity as f64,
            ),
            counter(
                "fsprof_agent_reads_total",
                "Reads of the kernel maps.",
                h.reads,
            ),
            counter(
                "fsprof_agent_read_errors_total",
                "Reads of the kernel maps that failed.",
                h.read_errors,
            ),
            counter(
                "fsprof_agent_missed_events_total",
                "Program runs the kernel skipped because one was already running on the CPU.",
                h.missed,
            ),
            counter(
                "fsprof_agent_otlp_dropped_total",
                "OTLP pushes dropped from the full retry buffer or refused by the collector.",
                self.otlp_dropped,
            ),
            counter(
                "fsprof_agent_otlp_failures_total",
                "OTLP push attempts that failed.",
                self.otlp_failures,
            ),
            gauge(
                "fsprof_agent_start_time_seconds",
                "When the agent started, Unix time.",
                self.start_unix_ns as f64 / 1e9,
            ),
        ]
    }

    /// Everything counted since the start, all cgroups together, as a
    /// profile (`-o`).
    pub fn profile(&self) -> Profile {
        let mut meta = fsprof_capture::meta::describe("agent", &[], self.settings.resolution);
        meta.target = Some(SYSTEM_WIDE.into());
        let took = self.started.elapsed().as_nanos() as u64;
        meta = fsprof_capture::meta::timed(meta, self.start_unix_ns, took);
        meta.clock = fsprof_core::profile::Clock {
            source: fsprof_core::profile::ClockSource::Kernel,
            tsc_hz: None,
        };
        let s = &self.settings;
        meta.settings.insert("top".into(), s.top.to_string());
        meta.settings.insert(
            "cgroup ttl".into(),
            humantime::format_duration(s.ttl).to_string(),
        );
        meta.notes.extend(self.session.notes.iter().cloned());
        let mut p = Profile::new(meta);
        let mut layers: Vec<Layer> = Vec::new();
        for (_, l) in self.fold.groups() {
            merge_layers(&mut layers, l.iter().cloned());
        }
        p.layers = layers;
        p
    }

    /// Cgroup ids seen that no walk could name, since the start.
    pub fn unresolved_total(&self) -> u64 {
        self.registry.unresolved_total
    }

    /// Sizes that must stay bounded under churn: cgroups known, previous
    /// totals held, labels with slots and waiting.
    pub fn footprint(&self) -> (usize, usize, usize, usize) {
        let (known, _) = self.registry.sizes();
        let (slots, waiting) = self.fold.sizes();
        (known, self.fold.held(), slots, waiting)
    }
}

fn apply(registry: &mut Registry, ev: fsprof_kernel::cgroups::CgroupEvents, now: Instant) {
    for (id, path) in &ev.created {
        registry.created(*id, path);
    }
    for (id, _) in &ev.removed {
        registry.removed(*id, now);
    }
}

fn registry_live(r: &Registry) -> HashSet<String> {
    r.live_labels().into_iter().map(str::to_string).collect()
}
