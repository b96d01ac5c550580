//! Command-line definitions. Validation only; no I/O happens here.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "fsprof", version, about = "Shows where file-system time goes", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command and profile every file-system call it makes through libc
    Run(RunArgs),
    /// Print a profile: ops ranked by total latency, with latency histograms
    Report(ReportArgs),
    /// Verify a profile's counters (entered = returned = histogram total)
    Check(CheckArgs),
    /// Merge profiles of several processes, runs or hosts by adding buckets
    Merge(MergeArgs),
    /// Profile syscall, file-system, FUSE and block latency in the kernel (eBPF)
    Kernel(KernelArgs),
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Where to write the profile [default: fsprof-<command>-<time>.json]
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
    /// The command to profile and its arguments
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
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
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FormatArg {
    Text,
    Json,
    Csv,
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
    /// Stop after this long, e.g. 10s
    #[arg(long, value_name = "DURATION", value_parser = fsprof_core::units::parse_duration_ns)]
    pub duration: Option<u64>,
    /// Buckets per power of two
    #[arg(long, default_value_t = 1, value_parser = parse_resolution)]
    pub resolution: u32,
    /// Profile this process and the children it forks from now on
    #[arg(long, value_name = "PID", group = "target")]
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
    /// List which layers this kernel supports and why not, then exit
    #[arg(long, exclusive = true)]
    pub probe_report: bool,
    /// Fail unless tracepoint CATEGORY:NAME exists (for testing error paths)
    #[arg(long, hide = true, value_name = "CATEGORY:NAME")]
    pub require_tracepoint: Vec<String>,
    /// Record syscalls with perf tracepoints, not raw ones (tests the fallback)
    #[arg(long, hide = true)]
    pub perf_tracepoints: bool,
    /// Don't print the report (the profile is still written)
    #[arg(short, long)]
    pub quiet: bool,
    /// Ops that get a histogram in the report
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
    /// The command to profile and its arguments
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD",
        group = "target"
    )]
    pub command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KernelLayerArg {
    /// raw_syscalls enter/exit, per syscall
    Syscall,
    /// ext4/xfs/btrfs enter/exit tracepoint pairs
    Fs,
    /// block request issue to completion, per device and op, plus sizes
    Block,
    /// FUSE request send to reply, per opcode
    Fuse,
}

fn parse_interval(s: &str) -> Result<u64, String> {
    let ns = fsprof_core::units::parse_duration_ns(s)?;
    if ns < 1_000_000 {
        return Err("intervals shorter than 1ms are not supported".into());
    }
    Ok(ns)
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
