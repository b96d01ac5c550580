//! The one place a captured profile's [`Meta`] is put together, so that
//! every capture (and every live view of one) describes itself the same way.

use std::ffi::OsString;

use fsprof_core::profile::{ExitStatus, Meta, RunInfo, Tool};
use fsprof_core::Resolution;
use fsprof_sys::host;

use crate::source::Finish;

/// What is known before a capture starts: fsprof's version, the tool
/// (`run`, `kernel`, ...), the profiled command line, the host, the
/// resolution. Live views (a metrics endpoint) describe the capture with it.
pub fn describe(tool: impl Into<Tool>, command: &[OsString], resolution: Resolution) -> Meta {
    let (host, kernel) = host::hostname_and_release();
    Meta {
        fsprof_version: env!("CARGO_PKG_VERSION").to_string(),
        tool: tool.into(),
        command: command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        run: RunInfo {
            host,
            kernel,
            ..RunInfo::default()
        },
        resolution,
        ..Default::default()
    }
}

/// `meta` stamped with when a capture (or a live view of one) started,
/// wall clock, and how long it has run.
pub fn timed(meta: Meta, start_unix_ns: u64, duration_ns: u64) -> Meta {
    Meta {
        run: RunInfo::new(meta.run.host, meta.run.kernel, start_unix_ns),
        duration_ns,
        ..meta
    }
}

/// This host's [`RunInfo`] for a run that started at `start_unix_ns`
/// (what [`describe`] and [`timed`] put in a `Meta`), for files that
/// describe a run without a profile's `Meta` (a trace's header).
pub fn run_info(start_unix_ns: u64) -> RunInfo {
    let (host, kernel) = host::hostname_and_release();
    RunInfo::new(host, kernel, start_unix_ns)
}

/// When and how long a capture ran.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    pub interval_ns: Option<u64>,
}

/// The metadata of a finished capture. Without a command (a capture of a
/// pid, a cgroup or the whole system) the command line recorded is
/// fsprof's own, which says what was captured.
pub(crate) fn finished(
    tool: Tool,
    command: &[OsString],
    resolution: Resolution,
    span: Span,
    fin: &Finish,
    exit: Option<ExitStatus>,
) -> Meta {
    let mut meta = timed(
        describe(tool, command, resolution),
        span.start_unix_ns,
        span.duration_ns,
    );
    if meta.command.is_empty() {
        meta.command = std::env::args().collect();
    }
    Meta {
        clock: fin.clock.clone(),
        interval_ns: span.interval_ns,
        overhead: fin.overhead.clone(),
        exit,
        ..meta
    }
}
