//! `fsprof mount`, `fsprof stat`, `fsprof umount`: the pass-through
//! profiling file system (fsprof-fuse) and its controls.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use fsprof_capture::{first_free, name_part, name_stamp, Capture, Output, Plan, Progress};
use fsprof_core::profile::Layer;
use fsprof_core::Resolution;
use fsprof_export::serve::{self, MetricsServer};
use fsprof_fuse::daemon::{self, Detached, Ready};
use fsprof_fuse::dump::{block_sigusr1, Dumper};
use fsprof_fuse::{Mode, MountOptions, MountSource};
use fsprof_report::{render, ReportOptions};

use super::capture::save_and_tell;
use crate::args::{CaptureArgs, MetricsArgs, TextOrJson};

#[derive(Debug, Args)]
pub struct MountArgs {
    /// The directory to profile (its requests are passed through to it)
    pub lower: PathBuf,
    /// Where to mount the profiling view (may be LOWER itself: it is opened first)
    pub mountpoint: PathBuf,
    /// Where to write the profile at unmount (and at SIGUSR1)
    /// [default: fsprof-mount-<lower>-<time>.json in the current directory]
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace FILE if it exists
    #[arg(short, long)]
    pub force: bool,
    /// No entry, attribute or cross-open page caching: every operation reaches the profiler (default)
    #[arg(long, conflicts_with = "fast")]
    pub observe_all: bool,
    /// Kernel caches on, files opened by the kernel alone: repeated lookups, getattrs, opens, closes and cached reads are not seen
    #[arg(long)]
    pub fast: bool,
    /// With --fast: files opened in the daemon, their reads and writes handed to the kernel's FUSE passthrough where it allows it (not seen)
    #[arg(long, requires = "fast")]
    pub passthrough: bool,
    /// How long entries and attributes stay cached with --fast
    #[arg(long, value_name = "DURATION", default_value = "24h",
          value_parser = fsprof_core::units::parse_duration_ns)]
    pub cache_ttl: u64,
    /// Stay in the foreground (Ctrl-C unmounts and writes the profile)
    #[arg(long)]
    pub foreground: bool,
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// Worker threads serving requests (one hand-off less per request than
    /// two threads on small machines: see docs/benchmarks.md)
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,
    /// After each reply, poll for the next request this long before sleeping
    /// in read (one vCPU wake-up per request instead of two when the
    /// application runs on another CPU; costs daemon CPU time, never used
    /// while the daemon may run on one CPU only); `off` or 0 disables
    #[arg(long, value_name = "DURATION", default_value = "50us",
          value_parser = fsprof_fuse::poll::parse)]
    pub busy_poll: Duration,
    /// Let other users use the mount (root: files they create are theirs);
    /// its statistics (MOUNTPOINT/.fsprof, `fsprof stat`) stay the owner's
    /// and root's
    #[arg(long)]
    pub allow_other: bool,
    /// With --allow-other: let other users read the statistics too (the
    /// command line, the daemon's pid, LOWER's path, the counts)
    #[arg(long, requires = "allow_other")]
    pub stat_allow_other: bool,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    /// Don't print the report at the end (--foreground)
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct StatArgs {
    /// The mount point of an `fsprof mount`
    pub mountpoint: PathBuf,
    /// Zero the counts after printing them
    #[arg(long)]
    pub reset: bool,
    #[arg(long, value_enum, default_value_t = TextOrJson::Text)]
    pub format: TextOrJson,
    /// Ops that get a histogram in the text report
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
}

#[derive(Debug, Args)]
pub struct UmountArgs {
    /// The mount point of an `fsprof mount`
    pub mountpoint: PathBuf,
    /// Detach now even if busy (open files fail from then on)
    #[arg(long)]
    pub lazy: bool,
}

pub fn mount(a: MountArgs) -> Result<i32> {
    fsprof_fuse::check_paths(&a.lower, &a.mountpoint)?;
    let out = output_path(&a)?;
    let mode = if a.fast { Mode::Fast } else { Mode::ObserveAll };
    let resolution = a.capture.resolution;
    let addrs = match &a.metrics.serve_metrics {
        Some(addr) => Some(serve::resolve(addr, a.metrics.metrics_allow_remote)?),
        None => None,
    };
    // Before any thread (and before the fork), so every thread inherits it.
    block_sigusr1();
    let mut ready = None;
    if !a.foreground {
        match daemon::detach()? {
            Detached::Parent(pipe) => {
                let (code, msg) = daemon::wait_for_child(pipe);
                fsprof_sys::diag!("fsprof: {msg}");
                return Ok(code);
            }
            Detached::Child(r) => ready = Some(r),
        }
    }
    let mut progress = Announce {
        ready,
        live: None,
        out: out.clone(),
        mountpoint: a.mountpoint.clone(),
    };
    match serve_and_capture(&a, mode, resolution, &out, addrs, &mut progress) {
        Ok(code) => Ok(code),
        Err(e) => {
            let line = format!("{:#}", e).replace('\n', " ");
            if let Some(r) = progress.ready.as_mut() {
                r.fail(&line);
            }
            Err(e)
        }
    }
}

fn serve_and_capture(
    a: &MountArgs,
    mode: Mode,
    resolution: Resolution,
    out: &Path,
    addrs: Option<Vec<std::net::SocketAddr>>,
    progress: &mut Announce,
) -> Result<i32> {
    let capture = Capture::new(Plan {
        tool: "mount".into(),
        command: Vec::new(),
        resolution,
        interval_ns: a.capture.interval,
        duration_ns: None,
        sample_ns: None,
    });
    let mut source = MountSource::new(MountOptions {
        lower: a.lower.clone(),
        mountpoint: a.mountpoint.clone(),
        mode,
        passthrough: a.passthrough,
        threads: a.threads as usize,
        allow_other: a.allow_other,
        stat_allow_other: a.stat_allow_other,
        resolution,
        cache_ttl: Duration::from_nanos(a.cache_ttl),
        output: Some(out.to_path_buf()),
        busy_poll: a.busy_poll,
    })?;
    let live = source.live();
    let labels = a.metrics.labels();
    let server = match addrs {
        Some(addrs) => {
            let l = live.clone();
            let render = serve::profile_render(Arc::new(move || l.profile()), labels);
            let s = MetricsServer::start(&addrs, render)?;
            Some(s)
        }
        None => None,
    };
    progress.live = Some(server.as_ref().map(|s| s.local_addr().to_string()));
    let foreground = a.foreground;
    let _dumper = Dumper::start(live, out.to_path_buf(), move |e| {
        if foreground {
            fsprof_sys::diag!("fsprof: {e}");
        }
    });
    let outcome = capture.run(&mut source, progress)?;
    drop(server);
    // The file, if there is one, is ours: -o was checked at the start.
    let path = save_and_tell(
        &outcome,
        &Output {
            path: Some(out.to_path_buf()),
            force: true,
        },
        "mount",
        None,
        fsprof_capture::Made::Nothing,
    )?;
    if foreground && !a.quiet {
        let opts = ReportOptions {
            top: 5,
            ..Default::default()
        };
        fsprof_sys::diag_nonl!("{}", render(&outcome.profile, &opts, None)?);
    }
    fsprof_sys::diag!("fsprof: profile written to {}", path.display());
    Ok(outcome.exit_code())
}

/// The profile's path, fixed before the mount: SIGUSR1 and the final save
/// write the same file, and `fsprof umount` reports it.
fn output_path(a: &MountArgs) -> Result<PathBuf> {
    let path = match &a.output {
        Some(p) => {
            let o = Output {
                path: Some(p.clone()),
                force: a.force,
            };
            o.check()?;
            p.clone()
        }
        None => default_name(&a.lower)?,
    };
    Ok(std::path::absolute(&path)?)
}

fn default_name(lower: &Path) -> Result<PathBuf> {
    let base = std::path::absolute(lower)?;
    let name = name_part(Some(&base), "root");
    let stamp = name_stamp(&fsprof_core::units::rfc3339_utc(
        fsprof_sys::clock::wall_unix_ns(),
    ));
    first_free(
        &format!("fsprof-mount-{name}-{stamp}"),
        "json",
        // Anything there takes the name, a dangling link too.
        |p| p.symlink_metadata().is_ok(),
    )
    .ok_or_else(|| {
        anyhow::anyhow!(
            "could not find a free file name like fsprof-mount-{name}-{stamp}.json; use -o FILE"
        )
    })
}

/// Tells the terminal (or the waiting parent) that the mount is up.
struct Announce {
    ready: Option<Ready>,
    /// The metrics endpoint's address, once known.
    live: Option<Option<String>>,
    out: PathBuf,
    mountpoint: PathBuf,
}

impl Progress for Announce {
    fn started(&mut self, what: &str) {
        let mp = self.mountpoint.display();
        let mut msg = format!(
            "profiling {what}; `fsprof stat {mp}` shows the counts, `fsprof umount {mp}` writes the profile to {}",
            self.out.display()
        );
        if let Some(Some(addr)) = &self.live {
            msg.push_str(&format!("; live metrics on http://{addr}/metrics"));
        }
        match self.ready.as_mut() {
            Some(r) => r.ok(&msg),
            None => fsprof_sys::diag!("fsprof: {msg} (or Ctrl-C)"),
        }
    }

    fn sampled(&mut self, _elapsed_ns: u64, _layers: &[Layer]) {}
}

pub fn stat(a: StatArgs) -> Result<i32> {
    let p = fsprof_fuse::remote::read_profile(&a.mountpoint)?;
    match a.format {
        TextOrJson::Json => print!("{}", fsprof_core::format::to_json(&p)),
        TextOrJson::Text => {
            let opts = ReportOptions {
                top: a.top,
                ..Default::default()
            };
            print!("{}", render(&p, &opts, None)?);
        }
    }
    if a.reset {
        fsprof_fuse::remote::reset(&a.mountpoint)?;
    }
    Ok(0)
}

pub fn umount(a: UmountArgs) -> Result<i32> {
    use fsprof_fuse::remote::Unmounted;
    let mp = a.mountpoint.display();
    match fsprof_fuse::remote::umount(&a.mountpoint, a.lazy)? {
        Unmounted::Written(Some(p)) => fsprof_sys::diag!(
            "fsprof: unmounted {mp}; profile written to {}",
            p.display()
        ),
        Unmounted::Written(None) => fsprof_sys::diag!("fsprof: unmounted {mp}"),
        Unmounted::DaemonGone => fsprof_sys::diag!(
            "fsprof: {mp}: its daemon is gone (was it killed?), so its profile was not written; detached the mount (lazily)"
        ),
        Unmounted::Others(uid) => fsprof_sys::diag!(
            "fsprof: unmounted {mp}, the fsprof mount of uid {uid}; its daemon writes the profile where that user asked"
        ),
    }
    Ok(0)
}
