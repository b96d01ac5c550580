//! `fsprof agent`: the always-on, system-wide capture by cgroup
//! (fsprof-agent), served to Prometheus and pushed to OpenTelemetry, run
//! by systemd (`dist/fsprof-agent.service`).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use fsprof_agent::config::{Layer, OtlpFormat, Overrides};
use fsprof_agent::labels::Mode;
use fsprof_capture::Output;

pub const HELP: &str = "\
Examples (as root):
  fsprof agent --serve-metrics 127.0.0.1:9464
  fsprof agent --config /etc/fsprof/agent.toml        (the systemd unit's way)
  fsprof agent --serve-metrics 9464 --otlp http://127.0.0.1:4318 --top 20

Every block request, file-system call (the ext4/xfs/btrfs enter/exit
tracepoint pairs this kernel has) and FUSE request is timed in the kernel
and filed under the cgroup v2 of the task that caused it: for a block
request, the task that submitted it. Cgroups are labelled by the systemd
unit, container or pod their path names (--cgroup-labels, --cgroup-depth);
the --top busiest labels have series of their own, the rest are `other`,
and a cgroup gone for --cgroup-ttl is forgotten.

--syscalls adds the syscall layer. It costs per system call, not per I/O:
about 1.2-1.3x the time of syscall-heavy work (a warm grep -r), against the
other layers' cost per request; see docs/fleet.md and docs/benchmarks/agent.md.

Settings come from the defaults, then --config FILE (TOML, the flags' names
without the dashes: top = 20, cgroup-ttl = \"10m\"), then the flags. SIGHUP
reads the file again; SIGTERM or Ctrl-C stops, detaching every program.

Exit status: 0 after SIGTERM, SIGINT or --duration; 2 on errors.";

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Settings file (TOML), read again on SIGHUP
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Layers to capture [default: block,fs,fuse]
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LAYER,...")]
    pub layers: Vec<AgentLayerArg>,
    /// Add the syscall layer (file-system syscalls): costs per system call
    #[arg(long)]
    pub syscalls: bool,
    /// Add the syscall layer with every syscall, not only the file-system ones
    #[arg(long)]
    pub all_syscalls: bool,
    /// Buckets per power of two (1, 2, 4, 8 or 16) [default: 1]
    #[arg(long, value_name = "R")]
    pub resolution: Option<u32>,
    /// Cgroup labels with series of their own; the rest are `other` [default: 50]
    #[arg(long, value_name = "K")]
    pub top: Option<usize>,
    /// Forget a cgroup (and its series) this long after it is removed [default: 5m]
    #[arg(long, value_name = "DURATION")]
    pub cgroup_ttl: Option<String>,
    /// Label a cgroup by its first N path components (0: the whole path) [default: 0]
    #[arg(long, value_name = "N")]
    pub cgroup_depth: Option<usize>,
    /// How a cgroup's path becomes its label [default: auto]
    #[arg(long, value_enum, value_name = "HOW")]
    pub cgroup_labels: Option<LabelsArg>,
    /// The cgroup v2 hierarchy [default: /sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid hosts]
    #[arg(long, value_name = "PATH")]
    pub cgroup_root: Option<PathBuf>,
    /// Serve Prometheus metrics on http://ADDR/metrics (e.g. 127.0.0.1:9464)
    #[arg(long, value_name = "ADDR")]
    pub serve_metrics: Option<String>,
    /// Allow --serve-metrics on an address other than loopback
    #[arg(long)]
    pub metrics_allow_remote: bool,
    /// Push OTLP/HTTP to this OpenTelemetry collector (e.g. http://127.0.0.1:4318)
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// How often to push [default: 60s]
    #[arg(long, value_name = "DURATION")]
    pub otlp_interval: Option<String>,
    /// The pushes' encoding [default: protobuf]
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub otlp_format: Option<OtlpFormatArg>,
    /// Pushes kept for retry while the collector does not answer [default: 16]
    #[arg(long, value_name = "N")]
    pub otlp_buffer: Option<usize>,
    /// How often to read the kernel's counters when nothing scrapes [default: 10s]
    #[arg(long, value_name = "DURATION")]
    pub collect_interval: Option<String>,
    /// Stop after this long, e.g. 10m [default: at SIGTERM or Ctrl-C]
    #[arg(long, value_name = "DURATION", value_parser = fsprof_core::units::parse_duration_ns)]
    pub duration: Option<u64>,
    /// Write everything counted, all cgroups together, to FILE when stopping
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace FILE if it exists
    #[arg(short, long, requires = "output")]
    pub force: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AgentLayerArg {
    Block,
    Fs,
    Fuse,
    Syscall,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LabelsArg {
    /// The systemd unit, container or pod the path names, else the path
    Auto,
    /// The path
    Path,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OtlpFormatArg {
    Protobuf,
    Json,
}

impl AgentArgs {
    /// The flags as settings over the file's.
    fn overrides(&self) -> Overrides {
        let layer = |l: &AgentLayerArg| match l {
            AgentLayerArg::Block => Layer::Block,
            AgentLayerArg::Fs => Layer::Fs,
            AgentLayerArg::Fuse => Layer::Fuse,
            AgentLayerArg::Syscall => Layer::Syscall,
        };
        let on = |b: bool| b.then_some(true);
        Overrides {
            layers: (!self.layers.is_empty()).then(|| self.layers.iter().map(layer).collect()),
            syscalls: on(self.syscalls),
            all_syscalls: on(self.all_syscalls),
            resolution: self.resolution,
            top: self.top,
            cgroup_ttl: self.cgroup_ttl.clone(),
            cgroup_depth: self.cgroup_depth,
            cgroup_labels: self.cgroup_labels.map(|l| match l {
                LabelsArg::Auto => Mode::Auto,
                LabelsArg::Path => Mode::Path,
            }),
            cgroup_root: self.cgroup_root.clone(),
            serve_metrics: self.serve_metrics.clone(),
            metrics_allow_remote: on(self.metrics_allow_remote),
            otlp: self.otlp.clone(),
            otlp_interval: self.otlp_interval.clone(),
            otlp_format: self.otlp_format.map(|f| match f {
                OtlpFormatArg::Protobuf => OtlpFormat::Protobuf,
                OtlpFormatArg::Json => OtlpFormat::Json,
            }),
            otlp_buffer: self.otlp_buffer,
            collect_interval: self.collect_interval.clone(),
        }
    }
}

pub fn agent(a: AgentArgs) -> Result<i32> {
    let out = Output {
        path: a.output.clone(),
        force: a.force,
    };
    // Refuse a FILE that exists before anything is attached.
    out.check()?;
    let opts = fsprof_agent::RunOptions {
        config: a.config.clone(),
        flags: a.overrides(),
        duration: a.duration.map(std::time::Duration::from_nanos),
    };
    let outcome = fsprof_agent::run(&opts, &|line| fsprof_sys::diag!("{line}"))?;
    if a.output.is_some() {
        let saved = fsprof_capture::save(&outcome.profile, &out, "agent", None)?;
        fsprof_sys::diag!("fsprof agent: profile written to {}", saved.display());
    }
    Ok(0)
}
