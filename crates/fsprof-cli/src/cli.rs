//! Command-line definitions. Validation only; no I/O happens here.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, FromArgMatches, Parser, Subcommand, ValueEnum};

/// `fsprof --version`: the release and the commit it was built from
/// (`build.rs`; "unknown" when built outside a git checkout).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("FSPROF_GIT_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(name = "fsprof", version = VERSION, about = "Shows where file-system time goes", long_about = None, after_long_help = EXIT_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// A subcommand's arguments, built only when that subcommand is the one
/// being parsed (clap's `Command::defer`). Building all of them for every
/// run (some 200 arguments across the commands) was a third of the
/// instructions `fsprof run -- true` spends before starting the command
/// (callgrind; docs/benchmarks.md, "Start-up"). Completions, man pages and
/// `--help` build everything as before.
#[derive(Debug)]
pub struct Lazy<T>(pub T);

impl<T: FromArgMatches> FromArgMatches for Lazy<T> {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(m).map(Lazy)
    }
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(m)
    }
}

impl<T: Args> Args for Lazy<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_args)
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_args_for_update)
    }
    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command and profile every file-system call it makes through libc
    #[command(after_long_help = RUN_HELP)]
    Run(Lazy<RunArgs>),
    /// Print a profile: ops ranked by total latency, with latency histograms
    #[command(after_long_help = REPORT_HELP)]
    Report(Lazy<ReportArgs>),
    /// Verify a profile's counters (entered = returned = histogram total)
    Check(Lazy<CheckArgs>),
    /// Merge profiles of several processes, runs or hosts by adding buckets
    Merge(Lazy<MergeArgs>),
    /// Profile syscall, file-system, FUSE and block latency in the kernel (eBPF)
    #[command(after_long_help = KERNEL_HELP)]
    Kernel(Lazy<KernelArgs>),
    /// Draw one op's histogram or timeline as SVG or PNG
    Plot(Lazy<PlotArgs>),
    /// Write a profile as OpenTelemetry (OTLP JSON) or Prometheus metrics
    Export(Lazy<ExportArgs>),
    /// Compare two profiles op by op; exit 1 if an op changed significantly
    Compare(Lazy<CompareArgs>),
    /// Measure this machine's characteristic latencies, used to label peaks
    Calibrate(Lazy<CalibrateArgs>),
    /// Infer a file system's block size, read-ahead, page cache and direct blocks from latency
    Discover(Lazy<crate::commands::discover::DiscoverArgs>),
    /// Record every file-system call of a command into a trace (and its profile); `trace show` prints one
    Trace(Lazy<crate::commands::trace::TraceArgs>),
    /// Compile a trace into a replayable form (commands, resource slots, buffers, initial state)
    Compile(Lazy<crate::commands::compile::CompileArgs>),
    /// Replay a compiled trace under a root directory, timed and verified
    Replay(Lazy<crate::commands::replay::ReplayArgs>),
    /// Import a strace log or a fio iolog as a trace
    Import(Lazy<crate::commands::import::ImportArgs>),
    /// Mount a pass-through view of a directory that profiles every request (FUSE)
    Mount(Lazy<crate::commands::mount::MountArgs>),
    /// Print the live profile of an `fsprof mount` (optionally zeroing it)
    Stat(Lazy<crate::commands::mount::StatArgs>),
    /// Unmount an `fsprof mount` and wait until its profile is written
    Umount(Lazy<crate::commands::mount::UmountArgs>),
    /// File-system microbenchmarks with controlled cache state and confidence intervals
    Bench(Lazy<crate::commands::bench::BenchArgs>),
    /// Print shell completions (bash, zsh, fish, elvish, powershell)
    Completions(Lazy<crate::commands::completions::CompletionsArgs>),
    /// Print the man page, or write one per command with --dir
    Man(Lazy<crate::commands::completions::ManArgs>),
}

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Where to store the calibration (`-` for standard output)
    /// [default: $XDG_CONFIG_HOME/fsprof/calibration.json or ~/.config/fsprof/calibration.json]
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace the calibration file if it exists (also the default one)
    #[arg(short, long)]
    pub force: bool,
    /// Measure the device under this directory (scratch files go there)
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// How to print the calibration: a table, or the JSON that is stored
    #[arg(long, value_enum, default_value_t = CalibrateFormatArg::Text)]
    pub format: CalibrateFormatArg,
    /// Measure every characteristic this many times, interleaved; one
    /// whose rounds disagree by more than a power of two labels nothing
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=20))]
    pub rounds: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CalibrateFormatArg {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Where to write the profile (`-` for standard output)
    /// [default: fsprof-<command>-<program>-<UTC time>.json in the current directory]
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace FILE if it exists
    #[arg(short, long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub out: OutputArgs,
    /// Also record the profile per time interval, e.g. 1s or 250ms
    #[arg(long, value_name = "DURATION", value_parser = parse_interval)]
    pub interval: Option<u64>,
    /// Buckets per power of two
    #[arg(long, default_value_t = 1, value_parser = parse_resolution)]
    pub resolution: u32,
    /// Clock used to time calls
    #[arg(long, value_enum, default_value_t = ClockArg::Auto)]
    pub clock: ClockArg,
    /// Don't print the report (the profile is still written)
    #[arg(short, long)]
    pub quiet: bool,
    /// Ops that get a histogram in the report
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
    /// Serve live Prometheus metrics on http://ADDR/metrics while the command runs (e.g. 127.0.0.1:9464)
    #[arg(long, value_name = "ADDR")]
    pub serve_metrics: Option<String>,
    /// Allow --serve-metrics on an address other than loopback
    #[arg(long, requires = "serve_metrics")]
    pub metrics_allow_remote: bool,
    /// The command to profile and its arguments
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ClockArg {
    /// The cycle counter when the CPU guarantees a constant rate, else monotonic
    Auto,
    /// The calibrated cycle counter (x86-64 with an invariant TSC)
    Tsc,
    /// clock_gettime(CLOCK_MONOTONIC)
    Monotonic,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Profile file
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    pub format: FormatArg,
    /// Ops that get a histogram in the text report
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
    /// Only this op (repeatable)
    #[arg(long = "op", value_name = "NAME")]
    pub ops: Vec<String>,
    /// Only this layer (repeatable)
    #[arg(long = "layer", value_name = "NAME")]
    pub layers: Vec<String>,
    /// Also list the profiled processes
    #[arg(long)]
    pub processes: bool,
    /// Also attribute upper-layer latency to lower layers (text format)
    #[arg(long)]
    pub attribution: bool,
    /// Write the report to FILE instead of standard output (required for html)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace FILE if it exists
    #[arg(short, long, requires = "output")]
    pub force: bool,
    #[command(flatten)]
    pub analysis: ReportAnalysisArgs,
}

#[derive(Debug, Args)]
pub struct ReportAnalysisArgs {
    /// Add a per-peak table (bucket and time range, calls, latency share)
    #[arg(long)]
    pub peaks: bool,
    /// Add the ops holding most latency and the peaks with matching counts
    #[arg(long)]
    pub interesting: bool,
    /// Per latency peak of the --op, the distribution of request size or seek distance
    #[arg(long, value_enum, value_name = "VALUE")]
    pub correlate: Option<CorrelateArg>,
    #[command(flatten)]
    pub calibration: CalibrationArgs,
}

#[derive(Debug, Args)]
pub struct CalibrationArgs {
    /// Label peaks with this machine's characteristic latencies from FILE
    /// [default: the file `fsprof calibrate` wrote, if any]
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Don't label peaks, even if a calibration file exists
    #[arg(long, conflicts_with = "calibration")]
    pub no_labels: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CorrelateArg {
    /// Bytes requested per call
    Size,
    /// |offset - end offset of the previous call on the same fd|, bytes
    Seek,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline profile
    pub a: PathBuf,
    /// Profile compared with the baseline
    pub b: PathBuf,
    /// How differences are scored
    #[arg(long, value_enum, default_value_t = MethodArg::Emd)]
    pub method: MethodArg,
    /// Score at or above which an op is interesting
    /// [default: emd 0.5, chi2 0.5, jeffrey 0.3, count 0.2, latency 0.3]
    #[arg(long, value_name = "X", value_parser = parse_nonnegative)]
    pub threshold: Option<f64>,
    /// Ignore ops under this share of their layer's calls and latency in both profiles
    #[arg(long, default_value_t = 0.01, value_name = "SHARE", value_parser = parse_share)]
    pub negligible: f64,
    /// Don't let a new or vanished peak alone make an op interesting
    #[arg(long)]
    pub no_peak_changes: bool,
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    pub format: FormatArg,
    /// Write to FILE instead of standard output (required for html)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace FILE if it exists
    #[arg(short, long, requires = "output")]
    pub force: bool,
    #[command(flatten)]
    pub calibration: CalibrationArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum MethodArg {
    /// Earth Mover's Distance, in powers of two
    Emd,
    /// Symmetric chi-square distance
    Chi2,
    /// Jeffrey divergence (symmetric Kullback-Leibler)
    Jeffrey,
    /// Normalized difference in calls
    Count,
    /// Normalized difference in total latency
    Latency,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    Text,
    Json,
    Csv,
    /// One self-contained page with charts (needs -o)
    Html,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Profile file
    pub file: PathBuf,
    /// The op to draw
    #[arg(long, value_name = "NAME", required = true)]
    pub op: String,
    /// The op's layer, when several layers have an op of that name
    #[arg(long, value_name = "NAME")]
    pub layer: Option<String>,
    /// What to draw
    #[arg(long, value_enum, default_value_t = PlotKindArg::Count)]
    pub kind: PlotKindArg,
    /// Logarithmic value axis (count and delay plots)
    #[arg(long)]
    pub log_y: bool,
    /// Output file (`-` for standard output); its extension picks the
    /// format unless --format does
    #[arg(short, long, value_name = "FILE", required = true)]
    pub output: PathBuf,
    /// Image format [default: FILE's extension, .svg or .png]
    #[arg(long, value_enum)]
    pub format: Option<ImageFormatArg>,
    /// Replace FILE if it exists
    #[arg(short, long)]
    pub force: bool,
    /// PNG pixels per SVG unit
    #[arg(long, default_value_t = 2.0, value_name = "X", value_parser = parse_scale)]
    pub scale: f32,
    /// Don't mark the histogram's peaks
    #[arg(long)]
    pub no_peaks: bool,
    #[command(flatten)]
    pub calibration: CalibrationArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ImageFormatArg {
    Svg,
    Png,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PlotKindArg {
    /// Calls per latency bucket
    Count,
    /// Total latency per bucket (calls × bucket mean latency)
    Delay,
    /// Heat map of the latency distribution per interval (needs --interval profiles)
    Timeline,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Profile file
    pub file: PathBuf,
    #[arg(long, value_enum, required = true)]
    pub format: ExportFormatArg,
    /// Write to FILE instead of standard output
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace FILE if it exists
    #[arg(short, long, requires = "output")]
    pub force: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ExportFormatArg {
    /// OpenTelemetry ExportMetricsServiceRequest, protobuf JSON mapping (exponential histograms)
    OtlpJson,
    /// Prometheus text exposition format 0.0.4 (classic histograms)
    Prometheus,
    /// Prometheus protobuf exposition, delimited MetricFamily messages (native and classic histograms)
    PrometheusProtobuf,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Profile files
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Profiles to merge
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Where to write the merged profile
    #[arg(short, long, value_name = "FILE", required = true)]
    pub output: PathBuf,
    /// Replace FILE if it exists
    #[arg(short, long)]
    pub force: bool,
}

const EXIT_HELP: &str = "\
Exit status: `run` and `kernel -- CMD` pass on the command's (128+signal if a
signal ended it: 130 after Ctrl-C); `kernel` without a command exits 130 after
Ctrl-C, 0 after --duration. `compare` exits 1 when an op changed, `check` 1
when it finds an inconsistency. 2 on errors.";

const RUN_HELP: &str = "\
Exit status: the command's, whatever happens to the profile: 128+signal if a
signal ended it (130 after Ctrl-C, which is the command's to handle: the
profile is written when it exits), 127 if it could not be found, 126 if it
could not be executed; 2 on fsprof's own errors before the command starts.";

const REPORT_HELP: &str = "\
p50 and p99 are estimates: a profile keeps only how many calls fell in each
log2 bucket, so a quantile is interpolated geometrically inside the bucket
that holds it and clamped to the op's smallest and largest call. The true
value lies in that bucket, which each histogram's heading gives (\"p50 in
512ns..1.02µs\"), as do p50_range_ns and p99_range_ns in --format json.
Every figure of a byte-valued layer (block-size) is in bytes.";

const KERNEL_HELP: &str = "\
Examples (as root):
  fsprof kernel -- sh -c 'tar -cf - /usr/include | wc -c'   a command and its children
  fsprof kernel -p 1234 --duration 10s                       a running process
  fsprof kernel --comm postgres --layers syscall,block --interval 1s
  fsprof kernel --probe-report                               what this kernel allows

The block layer is system-wide whatever the target: requests are issued from
plugs, kworkers and interrupts, not by the task that caused them.

Exit status: the command's (128+signal if a signal ended it); without a
command, 130 after Ctrl-C, 128+signal after another stop signal, 0 after
--duration; 2 on errors.";

#[derive(Debug, Args)]
pub struct KernelArgs {
    #[command(flatten)]
    pub out: OutputArgs,
    /// Layers to record [default: all the kernel has: syscall,fs,block,fuse]
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LAYER,...")]
    pub layers: Vec<KernelLayerArg>,
    /// Also record the profile per time interval, e.g. 1s or 250ms
    #[arg(long, value_name = "DURATION", value_parser = parse_interval)]
    pub interval: Option<u64>,
    /// Stop tracing after this long, e.g. 10s [default: when the command
    /// exits, or at Ctrl-C]
    #[arg(long, value_name = "DURATION", value_parser = fsprof_core::units::parse_duration_ns)]
    pub duration: Option<u64>,
    /// Buckets per power of two
    #[arg(long, default_value_t = 1, value_parser = parse_resolution)]
    pub resolution: u32,
    /// Profile this process and the children it forks from now on
    #[arg(short, long, value_name = "PID", group = "target")]
    pub pid: Option<i32>,
    /// Profile tasks in this cgroup v2 directory
    #[arg(long, value_name = "PATH", group = "target")]
    pub cgroup: Option<PathBuf>,
    /// Profile tasks with this command name (as in /proc/PID/comm)
    #[arg(long, value_name = "NAME", group = "target")]
    pub comm: Option<String>,
    /// Profile every task on the system
    #[arg(long, group = "target")]
    pub system_wide: bool,
    /// Record every syscall, not only the file-system ones
    #[arg(long)]
    pub all_syscalls: bool,
    /// Also time these kernel functions in the fs layer with fentry/fexit,
    /// e.g. ext4_file_read_iter,ext4_lookup (needs a kernel that allows fentry)
    #[arg(long, value_delimiter = ',', value_name = "FUNC,...")]
    pub fs_functions: Vec<String>,
    /// List which layers this kernel supports and why not, then exit
    #[arg(long, exclusive = true)]
    pub probe_report: bool,
    /// Fail unless tracepoint CATEGORY:NAME exists (for testing error paths)
    #[arg(long, hide = true, value_name = "CATEGORY:NAME")]
    pub require_tracepoint: Vec<String>,
    /// Record syscalls and block requests with perf tracepoints, not raw
    /// ones (tests the fallbacks)
    #[arg(long, hide = true)]
    pub perf_tracepoints: bool,
    /// Don't print the report (the profile is still written)
    #[arg(short, long)]
    pub quiet: bool,
    /// Ops that get a histogram in the report
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
    /// The command to profile and its arguments
    #[arg(trailing_var_arg = true, value_name = "CMD", group = "target")]
    pub command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KernelLayerArg {
    /// raw_syscalls enter/exit, per syscall
    Syscall,
    /// VFS functions timed with fentry/fexit where the kernel allows it,
    /// and the ext4/xfs/btrfs enter/exit tracepoint pairs
    Fs,
    /// block request issue to completion, per device and op, plus sizes;
    /// system-wide whatever the target
    Block,
    /// FUSE request send to reply, per opcode
    Fuse,
}

/// An interval of at least 1 ms, for every command's `--interval`: one
/// minimum and one message, whether the value is `0`, `1us` or `999us`.
pub fn parse_interval(s: &str) -> Result<u64, String> {
    const MIN: &str = "an interval must be at least 1ms (e.g. 100ms or 1s)";
    let number = s
        .trim()
        .trim_end_matches(|c: char| c.is_alphabetic() || c == 'µ');
    match fsprof_core::units::parse_duration_ns(s) {
        Ok(ns) if ns >= 1_000_000 => Ok(ns),
        Ok(_) => Err(MIN.into()),
        // `0`, `0ms`: a number, but not a duration fsprof accepts at all.
        Err(_) if number.parse::<f64>().is_ok_and(|v| v >= 0.0) => Err(MIN.into()),
        Err(e) => Err(e),
    }
}

fn parse_scale(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(x) if (0.25..=8.0).contains(&x) => Ok(x),
        _ => Err(format!("{s:?} is not a scale between 0.25 and 8")),
    }
}

fn parse_nonnegative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a non-negative number")),
    }
}

fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!(
            "{s:?} is not a share between 0 and 1 (e.g. 0.01 for 1%)"
        )),
    }
}

fn parse_resolution(s: &str) -> Result<u32, String> {
    let r: u32 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    fsprof_core::Resolution::new(r).map(|r| r.get())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
