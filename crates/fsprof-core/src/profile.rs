//! The profile: layers → operations → histograms, optional time intervals
//! (FSprof's 4-D profile: op × bucket × count × interval), per-process detail
//! and the metadata that makes a file self-describing.

use std::collections::BTreeMap;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::buckets::Resolution;
use crate::histogram::OpStats;
use crate::named::named;

pub const FORMAT_NAME: &str = "fsprof-profile";
pub const FORMAT_VERSION: u32 = 1;

/// Layer names, here too for the paths that name them `profile::layer`.
pub use crate::layer;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Always [`FORMAT_NAME`]; lets readers reject other JSON early.
    pub format: String,
    pub format_version: u32,
    pub meta: Meta,
    pub layers: Vec<Layer>,
    /// Per-interval slices (deltas, not running totals), when captured with
    /// an interval. Each slice's counts add up to `layers`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Interval>,
    /// Per-process detail; `layers` is their merge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<Process>,
}

/// [`Meta::target`] of a capture of every task on the system.
pub const SYSTEM_WIDE: &str = "every task (system-wide)";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub fsprof_version: String,
    /// What produced the profile: `run`, `kernel`, `mount`, `merge`, ...
    pub tool: Tool,
    /// The profiled command line, when there is one.
    #[serde(default)]
    pub command: Vec<String>,
    /// What was profiled when there is no command: `pid 1234 and the
    /// children it forks`, `tasks named postgres`, `tasks in cgroup PATH`,
    /// or [`SYSTEM_WIDE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Where and when it ran (`host`, `kernel`, `start_time`,
    /// `start_unix_ns` in the file).
    #[serde(flatten)]
    pub run: RunInfo,
    #[serde(default)]
    pub duration_ns: u64,
    pub clock: Clock,
    pub resolution: Resolution,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<Overhead>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<ExitStatus>,
    /// For merged profiles: the metadata of each input.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<Source>,
    /// How the capture was set up, in the source's words (`fsprof mount`:
    /// `lower`, `mountpoint`, `mode`, ...); reports print them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    /// What a reader must know about what the profile does not show (one
    /// line each, e.g. "data ops bypass the daemon"); every report prints
    /// them, and a merge keeps them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Processes of the run that could not be profiled, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprofiled: Vec<Unprofiled>,
}

/// Where and when a capture ran. A profile's [`Meta`] and a trace file's
/// header both carry it, flattened: the same four fields under the same
/// names in both files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub kernel: String,
    /// Wall-clock start, RFC 3339 UTC.
    #[serde(default)]
    pub start_time: String,
    #[serde(default)]
    pub start_unix_ns: u64,
}

impl RunInfo {
    /// A run on `host` (kernel release `kernel`) that started at
    /// `start_unix_ns`, with its RFC 3339 rendering.
    pub fn new(host: String, kernel: String, start_unix_ns: u64) -> RunInfo {
        RunInfo {
            host,
            kernel,
            start_time: crate::units::rfc3339_utc(start_unix_ns),
            start_unix_ns,
        }
    }
}

/// A process the capture saw but could not profile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unprofiled {
    pub pid: i32,
    #[serde(default)]
    pub ppid: i32,
    /// What it ran (or, when it exec'd as another user, what it started).
    #[serde(default)]
    pub exe: String,
    /// Why, in a few words.
    pub reason: String,
}

/// How latencies were timed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    pub source: ClockSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_hz: Option<f64>,
}

named! {
    /// The clock latencies were read from (a string in the file, as in
    /// format version 1 from the start).
    pub enum ClockSource {
        /// The cycle counter, calibrated against CLOCK_MONOTONIC.
        Tsc = "tsc",
        /// clock_gettime(CLOCK_MONOTONIC) in the profiled process.
        Monotonic = "monotonic",
        /// The kernel's ktime_get_ns (CLOCK_MONOTONIC) read by eBPF programs.
        Kernel = "ktime_get_ns (CLOCK_MONOTONIC, in the kernel)",
        /// Not recorded.
        #[default]
        Unknown = "",
    }
}

named! {
    /// What produced a profile (a string in the file).
    pub enum Tool {
        /// `fsprof run`: the preload shim.
        Run = "run",
        /// `fsprof kernel`: eBPF.
        Kernel = "kernel",
        /// `fsprof mount`: the FUSE pass-through daemon.
        Mount = "mount",
        /// `fsprof trace`: a recorded trace's profile.
        Trace = "trace",
        /// `fsprof bench`.
        Bench = "bench",
        /// `fsprof merge`.
        Merge = "merge",
        /// `fsprof agent`: always-on, system-wide, by cgroup.
        Agent = "agent",
        /// `fsprof pull`: read back from Prometheus.
        Pull = "pull",
        /// Not recorded.
        #[default]
        Unknown = "",
    }
}

/// The profiler's own cost (FSprof §4.2).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    /// Time added to each intercepted call by the measurement, ns: from
    /// `sampled` when there is one, else timed in a hot loop at start.
    pub per_call_ns: f64,
    /// Two back-to-back clock reads: no latency below this can be recorded.
    pub min_recordable_ns: f64,
    /// `per_call_ns` × intercepted calls: the estimated total added time.
    #[serde(default)]
    pub estimated_total_ns: u64,
    /// The per-call figure measured inside the run's own calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampledOverhead>,
}

/// The profiler's cost per call timed inside a sample of the run's own
/// calls (the user layer's shim: the clock read at the wrapper's entry and
/// exit of about one call in `every`), plus the part of a wrapper that
/// such timing cannot see, measured once at start.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SampledOverhead {
    /// Sampled calls in the mean.
    pub samples: u64,
    /// One call in this many is sampled (on average).
    pub every: f64,
    /// Mean bookkeeping time inside a sampled wrapper, ns.
    pub mean_ns: f64,
    /// Standard deviation of one sample, ns.
    pub sd_ns: f64,
    /// Half-width of the 95% confidence interval of `mean_ns`, ns.
    pub ci95_ns: f64,
    /// The wrapper's entry and exit around the timed window (saving
    /// registers, one more call level), timed in a hot loop at start, ns.
    pub outside_ns: f64,
    /// Sampled calls left out because their window held an interrupt, a
    /// preemption or a one-off set-up (16 µs or more).
    pub interrupted: u64,
    /// The bookkeeping timed in a hot loop at start, for comparison (the
    /// figure used before sampling), ns.
    #[serde(default)]
    pub hot_loop_ns: f64,
    /// The window's clock reads waited for earlier work (the shim's
    /// `ordered_ticks`), so `mean_ns` holds the wrapper's work with nothing
    /// overlapping it: at most what the calls cost the program. Profiles
    /// of older versions timed an unordered window, an estimate.
    #[serde(default)]
    pub upper_bound: bool,
}

impl SampledOverhead {
    /// The per-call figure: the sampled mean plus the part outside it.
    pub fn per_call_ns(&self) -> f64 {
        self.mean_ns + self.outside_ns
    }
}

impl Overhead {
    /// How `per_call_ns` was measured, for the reports' self-overhead
    /// line: "at most, timed inside 12621 of the calls (1 in 64, ±0.2ns)"
    /// or "timed in a hot loop".
    pub fn how_measured(&self) -> String {
        match &self.sampled {
            Some(s) => format!(
                "{}timed inside {} of the calls (1 in {:.0}, ±{})",
                if s.upper_bound { "at most, " } else { "" },
                s.samples,
                s.every,
                crate::units::format_ns(s.ci95_ns)
            ),
            None => "timed in a hot loop".to_string(),
        }
    }

    /// "≤" before the figures when they are an upper bound, else "≈".
    pub fn relation(&self) -> &'static str {
        match &self.sampled {
            Some(s) if s.upper_bound => "≤",
            _ => "≈",
        }
    }

    /// The reports' self-overhead line, one wording for text and HTML:
    /// "25ns per call at most, timed inside … (smallest recordable latency
    /// 10ns); × the calls ≤ 1.2ms".
    pub fn summary(&self) -> String {
        use crate::units::format_ns;
        format!(
            "{} per call {} (smallest recordable latency {}); × the calls {} {}",
            format_ns(self.per_call_ns),
            self.how_measured(),
            format_ns(self.min_recordable_ns),
            self.relation(),
            format_ns(self.estimated_total_ns as f64)
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

impl ExitStatus {
    /// The status a shell would report: the code, or 128 + signal.
    pub fn shell_code(&self) -> i32 {
        match *self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub tool: Tool,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub start_time: String,
    #[serde(default)]
    pub duration_ns: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    pub name: String,
    pub ops: Vec<OpStats>,
}

impl Layer {
    pub fn new(name: impl Into<String>) -> Self {
        Layer {
            name: name.into(),
            ops: Vec::new(),
        }
    }

    pub fn op(&self, name: &str) -> Option<&OpStats> {
        self.ops.iter().find(|o| o.name == name)
    }

    /// The op's stats, created empty if absent.
    pub fn op_mut(&mut self, name: &str) -> &mut OpStats {
        if let Some(k) = self.ops.iter().position(|o| o.name == name) {
            return &mut self.ops[k];
        }
        self.ops.push(OpStats::new(name));
        self.ops.last_mut().unwrap()
    }

    /// Adds `other`'s ops into this layer (by name, in one pass over each:
    /// a layer may hold thousands of ops).
    pub fn merge(&mut self, other: &Layer) {
        let mut index: HashMap<String, usize> = self
            .ops
            .iter()
            .enumerate()
            .map(|(k, o)| (o.name.clone(), k))
            .collect();
        for op in &other.ops {
            match index.get(&op.name) {
                Some(&k) => self.ops[k].merge(op),
                None => {
                    index.insert(op.name.clone(), self.ops.len());
                    let mut fresh = OpStats::new(&op.name);
                    fresh.merge(op);
                    self.ops.push(fresh);
                }
            }
        }
        self.normalize();
    }

    /// Drops ops nobody called and sorts by name, so equal layers compare
    /// and serialize equal.
    pub fn normalize(&mut self) {
        self.ops.retain(|o| !o.is_empty());
        self.ops.sort_by(|a, b| a.name.cmp(&b.name));
    }

    pub fn total_calls(&self) -> u64 {
        self.ops.iter().fold(0u64, |t, o| t.saturating_add(o.post))
    }

    pub fn total_ns(&self) -> u64 {
        self.ops
            .iter()
            .fold(0u64, |t, o| t.saturating_add(o.total_ns))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    /// Offset of the slice from the profile start, ns.
    pub start_ns: u64,
    pub end_ns: u64,
    pub layers: Vec<Layer>,
}

impl Interval {
    /// The slice between two cumulative snapshots of the same layers:
    /// counter-wise `now - before` (ops absent before count from zero).
    pub fn between(now: &[Layer], before: &[Layer], start_ns: u64, end_ns: u64) -> Self {
        let layers = now
            .iter()
            .map(|l| {
                let prev = before.iter().find(|b| b.name == l.name);
                let mut d = Layer::new(&l.name);
                for op in &l.ops {
                    d.ops.push(match prev.and_then(|p| p.op(&op.name)) {
                        Some(o) => op.delta_since(o),
                        None => op.delta_since(&OpStats::new(&op.name)),
                    });
                }
                d.normalize();
                d
            })
            .collect();
        Interval {
            start_ns,
            end_ns,
            layers,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub pid: i32,
    #[serde(default)]
    pub ppid: i32,
    /// The executable (after exec, a process appears once per image).
    #[serde(default)]
    pub exe: String,
    #[serde(default)]
    pub argv: Vec<String>,
    /// Start offset from the profile start, ns.
    #[serde(default)]
    pub start_ns: u64,
    pub layers: Vec<Layer>,
}

impl Profile {
    pub fn new(meta: Meta) -> Self {
        Profile {
            format: FORMAT_NAME.to_string(),
            format_version: FORMAT_VERSION,
            meta,
            layers: Vec::new(),
            intervals: Vec::new(),
            processes: Vec::new(),
        }
    }

    pub fn resolution(&self) -> Resolution {
        self.meta.resolution
    }

    pub fn layer(&self, name: &str) -> Option<&Layer> {
        self.layers.iter().find(|l| l.name == name)
    }

    pub fn layer_mut(&mut self, name: &str) -> &mut Layer {
        layer_in(&mut self.layers, name)
    }

    /// All completed calls over all layers.
    pub fn total_calls(&self) -> u64 {
        self.layers
            .iter()
            .fold(0u64, |t, l| t.saturating_add(l.total_calls()))
    }
}

/// Merges `from` into `into` layer by layer, matching names through an
/// index (one pass over each list, not a search per layer).
pub fn merge_layers(into: &mut Vec<Layer>, from: impl IntoIterator<Item = Layer>) {
    let mut index: HashMap<String, usize> = into
        .iter()
        .enumerate()
        .map(|(k, l)| (l.name.clone(), k))
        .collect();
    for l in from {
        match index.get(&l.name) {
            Some(&k) => into[k].merge(&l),
            None => {
                index.insert(l.name.clone(), into.len());
                let mut fresh = Layer::new(&l.name);
                fresh.merge(&l);
                into.push(fresh);
            }
        }
    }
}

/// The named layer of a list, created empty if absent.
pub fn layer_in<'a>(layers: &'a mut Vec<Layer>, name: &str) -> &'a mut Layer {
    if let Some(k) = layers.iter().position(|l| l.name == name) {
        return &mut layers[k];
    }
    layers.push(Layer::new(name));
    layers.last_mut().unwrap()
}

#[cfg(test)]
mod clock_tests {
    use super::{ClockSource, Tool};

    /// Every name round-trips through the file unchanged, known or not.
    #[test]
    fn clock_sources_keep_their_names() {
        for name in [
            "tsc",
            "monotonic",
            "ktime_get_ns (CLOCK_MONOTONIC, in the kernel)",
            "",
            "a clock from a later fsprof",
        ] {
            let c: ClockSource =
                serde_json::from_str(&serde_json::to_string(name).unwrap()).unwrap();
            assert_eq!(serde_json::to_value(&c).unwrap(), name);
            assert_eq!(c.to_string(), name);
        }
        assert_eq!(ClockSource::from("tsc"), ClockSource::Tsc);
        assert_eq!(
            ClockSource::from("sundial"),
            ClockSource::Other("sundial".into())
        );
        for name in ["run", "kernel", "merge", "", "discover"] {
            let t: Tool = serde_json::from_str(&serde_json::to_string(name).unwrap()).unwrap();
            assert_eq!(serde_json::to_value(&t).unwrap(), name);
        }
        assert_eq!(Tool::from("kernel"), Tool::Kernel);
    }
}

#[cfg(test)]
mod run_info_tests {
    use super::{Meta, RunInfo};

    /// `RunInfo` is flattened: the file keeps `host`, `kernel`,
    /// `start_time` and `start_unix_ns` as fields of `meta`, in that order
    /// between `command` and `duration_ns`, as before it was a struct.
    #[test]
    fn run_info_fields_stay_fields_of_meta() {
        let meta = Meta {
            command: vec!["cat".into()],
            run: RunInfo::new("h".into(), "6.1".into(), 1_000_000_000),
            duration_ns: 7,
            ..Default::default()
        };
        let json = serde_json::to_string(&meta).unwrap();
        let at = |k: &str| json.find(&format!("\"{k}\":")).expect(k);
        let order = [
            "command",
            "host",
            "kernel",
            "start_time",
            "start_unix_ns",
            "duration_ns",
        ]
        .map(at);
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{json}");
        assert!(!json.contains("\"run\""), "{json}");
        assert!(
            json.contains("\"start_time\":\"1970-01-01T00:00:01.000Z\""),
            "{json}"
        );
        let back: Meta = serde_json::from_str(&json).unwrap();
        assert_eq!(back, meta);
        // A meta without them (older or hand-made files) still reads.
        let bare: Meta = serde_json::from_str(
            r#"{"fsprof_version":"0","tool":"run","clock":{"source":"tsc"},"resolution":1}"#,
        )
        .unwrap();
        assert_eq!(bare.run, RunInfo::default());
    }
}

#[cfg(test)]
mod overhead_tests {
    use super::Overhead;

    /// A profile whose sampled window was ordered says "at most" and "≤";
    /// one written before the reads were ordered (no `upper_bound`) still
    /// reads, and claims no bound.
    #[test]
    fn only_an_ordered_window_is_called_a_bound() {
        let sampled = |extra: &str| {
            format!(
                r#"{{"per_call_ns":40.0,"min_recordable_ns":9.0,"estimated_total_ns":4000,
                   "sampled":{{"samples":900,"every":63.5,"mean_ns":38.6,"sd_ns":17.0,
                   "ci95_ns":1.1,"outside_ns":1.4,"interrupted":0,"hot_loop_ns":24.6{extra}}}}}"#
            )
        };
        let old: Overhead = serde_json::from_str(&sampled("")).unwrap();
        assert!(!old.sampled.as_ref().unwrap().upper_bound);
        assert_eq!(old.relation(), "≈");
        assert!(old
            .how_measured()
            .starts_with("timed inside 900 of the calls (1 in 64, ±"));
        let new: Overhead = serde_json::from_str(&sampled(r#","upper_bound":true"#)).unwrap();
        assert_eq!(new.relation(), "≤");
        assert!(new
            .how_measured()
            .starts_with("at most, timed inside 900 of the calls"));
        let json = serde_json::to_value(&new).unwrap();
        assert_eq!(json["sampled"]["upper_bound"], true);
        let hot = Overhead {
            sampled: None,
            ..new
        };
        assert_eq!(
            (hot.relation(), hot.how_measured().as_str()),
            ("≈", "timed in a hot loop")
        );
    }
}
