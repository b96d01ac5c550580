//! `fsprof kernel`: a capture with the eBPF source (fsprof-kernel) through
//! fsprof-capture's loop, then the report after it; `--probe-report` lists
//! what this kernel allows.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use fsprof_capture::{Capture, Plan, Progress};
use fsprof_kernel::{KernelSource, Options, Target};
use fsprof_report::after_capture;

use super::capture::{exit_status, failed, output, save_and_tell};
use crate::args::{CaptureArgs, OutputArgs, SummaryArgs, TextOrJson};

pub const HELP: &str = "\
Examples (as root):
  fsprof kernel -- sh -c 'tar -cf - /usr/include | wc -c'   a command and its children
  fsprof kernel -p 1234 --duration 10s                       a running process
  fsprof kernel --comm postgres --layer syscall,block --interval 1s
  fsprof kernel --probe-report                               what this kernel allows

The block layer is system-wide whatever the target: requests are issued from
plugs, kworkers and interrupts, not by the task that caused them.

Exit status: the command's (128+signal if a signal ended it); without a
command, 130 after Ctrl-C, 128+signal after another stop signal, 0 after
--duration; 2 on errors.";

/// Everything that configures a capture, which --probe-report does not make.
/// (The hidden test hooks are left out: completions drop hidden arguments.)
const CAPTURE_ARGS: [&str; 14] = [
    "target",
    "output",
    "force",
    "layers",
    "interval",
    "duration",
    "resolution",
    "all_syscalls",
    "fs_functions",
    "mapped_faults",
    "quiet",
    "top",
    "pid",
    "command",
];

#[derive(Debug, Args)]
pub struct KernelArgs {
    #[command(flatten)]
    pub out: OutputArgs,
    /// Layers to record (repeatable, or comma-separated; also --layers)
    /// [default: all the kernel has: syscall,fs,block,fuse]
    #[arg(
        long = "layer",
        alias = "layers",
        value_enum,
        value_delimiter = ',',
        value_name = "LAYER,..."
    )]
    pub layers: Vec<KernelLayerArg>,
    /// Stop tracing after this long, e.g. 10s [default: when the command
    /// exits, or at Ctrl-C]
    #[arg(long, value_name = "DURATION", value_parser = fsprof_core::units::parse_duration_ns)]
    pub duration: Option<u64>,
    #[command(flatten)]
    pub capture: CaptureArgs,
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
    /// Also time page faults on file mappings in the fs layer (ops
    /// mapped_read, mapped_write): loads and stores through mmap, which
    /// make no call. Costs up to about 1 µs per page fault of every task
    #[arg(long)]
    pub mapped_faults: bool,
    /// List which layers this kernel supports and why not, then exit
    #[arg(long, conflicts_with_all = CAPTURE_ARGS)]
    pub probe_report: bool,
    /// How --probe-report prints its findings: a line each, or a JSON array
    #[arg(long, value_enum)]
    pub format: Option<TextOrJson>,
    /// Fail unless tracepoint CATEGORY:NAME exists (for testing error paths)
    #[arg(long, hide = true, value_name = "CATEGORY:NAME")]
    pub require_tracepoint: Vec<String>,
    /// Record syscalls and block requests with perf tracepoints, not raw
    /// ones (tests the fallbacks)
    #[arg(long, hide = true)]
    pub perf_tracepoints: bool,
    #[command(flatten)]
    pub summary: SummaryArgs,
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

pub fn kernel(a: KernelArgs) -> Result<i32> {
    if a.probe_report {
        return probe_report(a.format.unwrap_or(TextOrJson::Text));
    }
    // Checked here: clap's `requires` takes --probe-report's default
    // (false) as present.
    if a.format.is_some() {
        anyhow::bail!("--format is for --probe-report; a capture writes a profile (JSON) with -o");
    }
    let out = output(&a.out);
    let made = out.prepare()?;
    let opts = options(&a)?;
    let capture = Capture::new(Plan {
        tool: "kernel".into(),
        command: a.command.clone(),
        resolution: opts.resolution,
        interval_ns: a.capture.interval,
        duration_ns: a.duration,
        sample_ns: None,
    });
    let outcome = match capture.run(&mut KernelSource::new(opts), &mut Announce) {
        Ok(o) => o,
        Err(e) => return failed(e),
    };
    let program = a.command.first().map(|c| c.to_string_lossy().into_owned());
    let saved = save_and_tell(&outcome, &out, "kernel", program.as_deref(), made);
    if !a.summary.quiet {
        fsprof_sys::diag_nonl!("{}", after_capture(&outcome.profile, a.summary.top)?);
    }
    Ok(exit_status(&outcome, &saved))
}

/// The kernel session's options from the command line. With a command,
/// the target is set to its process tree once it is started.
fn options(a: &KernelArgs) -> Result<Options> {
    let target = if let Some(p) = a.pid {
        Target::Tree(vec![p])
    } else if let Some(c) = &a.cgroup {
        Target::Cgroup(c.clone())
    } else if let Some(c) = &a.comm {
        Target::Comm(c.clone())
    } else if a.system_wide {
        Target::All
    } else if !a.command.is_empty() {
        Target::Tree(Vec::new())
    } else {
        anyhow::bail!("say what to profile: `-- CMD ARGS...`, --pid PID, --comm NAME, --cgroup PATH or --system-wide");
    };
    let explicit = !a.layers.is_empty();
    let has = |l| !explicit || a.layers.contains(&l);
    Ok(Options {
        syscall: has(KernelLayerArg::Syscall),
        fs: has(KernelLayerArg::Fs),
        block: has(KernelLayerArg::Block),
        fuse: has(KernelLayerArg::Fuse),
        all_syscalls: a.all_syscalls,
        resolution: a.capture.resolution,
        target,
        require: a.require_tracepoint.clone(),
        explicit_layers: explicit,
        perf_tracepoints: a.perf_tracepoints,
        fs_functions: a.fs_functions.clone(),
        by_cgroup: false,
        mapped_faults: a.mapped_faults,
    })
}

/// Says when tracing has begun.
struct Announce;

impl Progress for Announce {
    fn started(&mut self, what: &str) {
        // Tests and scripts wait for this line before generating load.
        fsprof_sys::diag!("fsprof: tracing {what} (Ctrl-C stops and writes the profile)");
    }
}

fn probe_report(format: TextOrJson) -> Result<i32> {
    // Exit 0 either way: "no" lines are findings, not failures.
    let findings = fsprof_kernel::probe::report();
    let text = match format {
        TextOrJson::Text => findings.iter().map(|f| format!("{f}\n")).collect(),
        TextOrJson::Json => {
            let rows: Vec<_> = findings
                .iter()
                .map(|f| {
                    let (usable, detail) = match &f.result {
                        Ok(d) => (true, d),
                        Err(why) => (false, why),
                    };
                    serde_json::json!({ "what": f.what, "usable": usable, "detail": detail })
                })
                .collect();
            serde_json::to_string_pretty(&rows)? + "\n"
        }
    };
    crate::files::write_stdout(text.as_bytes())?;
    Ok(0)
}
