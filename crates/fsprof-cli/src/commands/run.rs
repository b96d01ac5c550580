use std::path::Path;

use anyhow::Result;
use fsprof_core::format::FormatError;
use fsprof_core::{Profile, Resolution};
use fsprof_export::serve::{self, MetricsServer};
use fsprof_report::{render, ReportOptions};
use fsprof_user::{ClockChoice, LiveSink, RunError, RunOptions};

use super::save::save_profile;
use crate::cli::{ClockArg, RunArgs};

pub fn run(a: RunArgs) -> Result<i32> {
    // clap hands an unknown `--flag` before CMD to CMD; only `--` makes a
    // command that starts with `-` plausible.
    let first = a.command[0].to_string_lossy();
    let raw: Vec<_> = std::env::args_os().collect();
    let after_dashdash = raw
        .iter()
        .position(|x| x == "--")
        .is_some_and(|i| raw.get(i + 1) == Some(&a.command[0]));
    if first.starts_with('-') && !after_dashdash {
        eprintln!(
            "error: unexpected argument '{first}' for `fsprof run` (put the command after `--`)"
        );
        return Ok(2);
    }
    // Refuse an existing -o before running anything: the run may be long.
    if let Some(out) = &a.out.output {
        if out.exists() && !a.out.force {
            return Err(FormatError::Exists { path: out.clone() }.into());
        }
        let dir = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            anyhow::bail!(
                "cannot write {}: directory {} does not exist",
                out.display(),
                dir.display()
            );
        }
    }
    let resolution = Resolution::new(a.resolution).map_err(anyhow::Error::msg)?;
    let (live, server) = match &a.serve_metrics {
        Some(addr) => {
            let (sink, server) = serve_metrics(addr, &a, resolution)?;
            (Some(sink), Some(server))
        }
        None => (None, None),
    };
    let opts = RunOptions {
        argv: a.command.clone(),
        resolution,
        interval_ns: a.interval,
        clock: match a.clock {
            ClockArg::Auto => ClockChoice::Auto,
            ClockArg::Tsc => ClockChoice::Tsc,
            ClockArg::Monotonic => ClockChoice::Monotonic,
        },
        live,
    };
    let outcome = match fsprof_user::run(&opts) {
        Ok(o) => o,
        Err(RunError::Launch(e)) => {
            eprintln!("fsprof: {e}");
            return Ok(e.exit_code());
        }
        Err(e) => return Err(e.into()),
    };
    drop(server);
    let code = outcome.exit.shell_code();
    let cmd0 = a.command[0].to_string_lossy().into_owned();
    let path = save_profile(&outcome.profile, &a.out, "", Some(&cmd0))?;
    for n in &outcome.notes {
        eprintln!("fsprof: note: {n}");
    }
    let cmd = a.command[0].to_string_lossy();
    if outcome.processes_seen == 0 {
        eprintln!(
            "fsprof: no process of `{cmd}` loaded the preload shim, so no call was seen: statically linked programs \
             (many Go binaries) and setuid ones ignore LD_PRELOAD; profile them at the syscall layer (`fsprof kernel -- {cmd}`)"
        );
    } else if outcome.profile.total_calls() == 0 {
        eprintln!(
            "fsprof: `{cmd}` made no file-system call through libc; calls made inside libc or by io_uring are only \
             visible at the syscall layer (`fsprof kernel -- {cmd}`)"
        );
    } else if !a.quiet {
        let opts = ReportOptions {
            top: a.top,
            ..Default::default()
        };
        eprint!("{}", render(&outcome.profile, &opts)?);
    }
    eprintln!("fsprof: profile written to {}", path.display());
    Ok(code)
}

/// Live metrics sampled every --interval, or every second without one.
const LIVE_PERIOD_NS: u64 = 1_000_000_000;

/// Starts the endpoint before the command, so a bad or busy address fails
/// the run up front rather than after a long capture.
fn serve_metrics(
    addr: &str,
    a: &RunArgs,
    resolution: Resolution,
) -> Result<(LiveSink, MetricsServer)> {
    let addrs = serve::resolve(addr, a.metrics_allow_remote)?;
    let sink = LiveSink {
        layers: Default::default(),
        period_ns: a.interval.unwrap_or(LIVE_PERIOD_NS),
    };
    let template = Profile::new(fsprof_core::Meta {
        fsprof_version: env!("CARGO_PKG_VERSION").into(),
        tool: "run".into(),
        command: a
            .command
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect(),
        host: fsprof_user::sysinfo::hostname(),
        resolution,
        ..Default::default()
    });
    let layers = sink.layers.clone();
    let source: serve::Source = std::sync::Arc::new(move || {
        let mut p = template.clone();
        p.layers = layers.lock().unwrap_or_else(|e| e.into_inner()).clone();
        p
    });
    let server = MetricsServer::start(&addrs, source)?;
    eprintln!(
        "fsprof: serving live metrics on http://{}/metrics",
        server.local_addr()
    );
    Ok((sink, server))
}
