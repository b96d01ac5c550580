//! `fsprof kernel`: a capture with the eBPF source (fsprof-kernel) through
//! fsprof-capture's loop, then the report after it; `--probe-report` lists
//! what this kernel allows.

use anyhow::Result;
use fsprof_capture::{Capture, Plan, Progress};
use fsprof_core::Resolution;
use fsprof_kernel::{KernelSource, Options, Target};
use fsprof_report::after_capture;

use super::capture::{exit_status, failed, output, save_and_tell};
use crate::cli::{KernelArgs, KernelLayerArg};

pub fn kernel(a: KernelArgs) -> Result<i32> {
    if a.probe_report {
        return probe_report();
    }
    let out = output(&a.out);
    out.check()?;
    let opts = options(&a)?;
    let capture = Capture::new(Plan {
        tool: "kernel".into(),
        command: a.command.clone(),
        resolution: opts.resolution,
        interval_ns: a.interval,
        duration_ns: a.duration,
        sample_ns: None,
    });
    let outcome = match capture.run(&mut KernelSource::new(opts), &mut Announce) {
        Ok(o) => o,
        Err(e) => return failed(e),
    };
    let program = a.command.first().map(|c| c.to_string_lossy().into_owned());
    let saved = save_and_tell(&outcome, &out, "kernel", program.as_deref());
    if !a.quiet {
        fsprof_sys::diag_nonl!("{}", after_capture(&outcome.profile, a.top)?);
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
        resolution: Resolution::new(a.resolution).map_err(anyhow::Error::msg)?,
        target,
        require: a.require_tracepoint.clone(),
        explicit_layers: explicit,
        perf_tracepoints: a.perf_tracepoints,
        fs_functions: a.fs_functions.clone(),
        by_cgroup: false,
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

fn probe_report() -> Result<i32> {
    // Exit 0 either way: "no" lines are findings, not failures.
    for f in fsprof_kernel::probe::report() {
        println!("{f}");
    }
    Ok(0)
}
