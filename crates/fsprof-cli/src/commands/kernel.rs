use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use fsprof_core::format::FormatError;
use fsprof_core::profile::{Clock, ExitStatus, Interval, Layer, Meta};
use fsprof_core::{Profile, Resolution};
use fsprof_kernel::launch::GatedChild;
use fsprof_kernel::{Options, Session, Target};
use fsprof_report::{render, ReportOptions};

use super::save::save_profile;
use crate::cli::{KernelArgs, KernelLayerArg};

pub fn kernel(a: KernelArgs) -> Result<i32> {
    if a.probe_report {
        return probe_report();
    }
    if let Some(out) = &a.out.output {
        if out.exists() && !a.out.force {
            return Err(FormatError::Exists { path: out.clone() }.into());
        }
    }
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
    let resolution = Resolution::new(a.resolution).map_err(anyhow::Error::msg)?;
    let mut opts = Options {
        syscall: has(KernelLayerArg::Syscall),
        fs: has(KernelLayerArg::Fs),
        block: has(KernelLayerArg::Block),
        fuse: has(KernelLayerArg::Fuse),
        all_syscalls: a.all_syscalls,
        resolution,
        target,
        require: a.require_tracepoint.clone(),
        explicit_layers: explicit,
        perf_tracepoints: a.perf_tracepoints,
        fs_functions: a.fs_functions.clone(),
    };

    // Signals are taken synchronously (sigtimedwait) so that Ctrl-C ends
    // the main loop and the profile is still written.
    let signals = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD];
    let set = sigset(&signals);
    // SAFETY: blocking signals for this thread; the child unblocks them.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };

    let mut child = None;
    if !a.command.is_empty() {
        let c = match GatedChild::spawn(&a.command) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("fsprof: {e}");
                return Ok(e.exit_code());
            }
        };
        c.wait_parked();
        opts.target = Target::Tree(vec![c.pid]);
        child = Some(c);
    }

    let start_unix_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let session = Session::start(&opts)?;
    let t0 = Instant::now();
    // Tests and scripts wait for this line before generating load.
    eprintln!(
        "fsprof: tracing {} (Ctrl-C stops and writes the profile)",
        session.layers.join(", ")
    );
    if let Some(c) = &mut child {
        c.release();
    }

    let mut intervals = Vec::new();
    let mut prev: Vec<Layer> = Vec::new();
    let mut prev_ns = 0u64;
    let mut next_tick = a.interval.map(|i| t0 + Duration::from_nanos(i));
    let deadline = a.duration.map(|d| t0 + Duration::from_nanos(d));
    let mut exit: Option<ExitStatus> = None;
    let mut interrupted = None;
    loop {
        if let Some(c) = &mut child {
            if let Some(st) = c.try_wait() {
                exit = Some(st);
                break;
            }
        }
        if let Some(p) = a.pid {
            // SAFETY: probing existence only.
            if unsafe { libc::kill(p, 0) } != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            {
                break;
            }
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        if let Some(t) = next_tick {
            if now >= t {
                let snap = session.snapshot(false)?;
                let end_ns = t0.elapsed().as_nanos() as u64;
                intervals.push(Interval::between(&snap.layers, &prev, prev_ns, end_ns));
                prev = snap.layers;
                prev_ns = end_ns;
                next_tick = Some(t + Duration::from_nanos(a.interval.unwrap()));
            }
        }
        let mut wake = now + Duration::from_millis(100);
        for t in [next_tick, deadline].into_iter().flatten() {
            wake = wake.min(t);
        }
        let sig = wait_signal(&set, wake.saturating_duration_since(Instant::now()));
        if matches!(sig, Some(s) if s != libc::SIGCHLD) {
            interrupted = sig;
            break;
        }
    }
    if let (Some(sig), Some(c)) = (interrupted, &mut child) {
        // Pass the interrupt on and give the command a moment to finish.
        c.signal(sig);
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if let Some(st) = c.try_wait() {
                exit = Some(st);
                break;
            }
            wait_signal(&set, Duration::from_millis(20));
        }
    }
    let duration_ns = t0.elapsed().as_nanos() as u64;
    let snap = session.snapshot(true)?;
    let notes = session.notes.clone();
    if a.interval.is_some() {
        intervals.push(Interval::between(&snap.layers, &prev, prev_ns, duration_ns));
    }

    let mut command: Vec<String> = a
        .command
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if command.is_empty() {
        command = std::env::args().collect();
    }
    let meta = Meta {
        fsprof_version: env!("CARGO_PKG_VERSION").to_string(),
        tool: "kernel".into(),
        command,
        host: fsprof_user::sysinfo::hostname(),
        kernel: fsprof_user::sysinfo::kernel_release(),
        start_time: fsprof_core::units::rfc3339_utc(start_unix_ns),
        start_unix_ns,
        duration_ns,
        clock: Clock {
            source: "ktime_get_ns (CLOCK_MONOTONIC, in the kernel)".into(),
            tsc_hz: None,
        },
        resolution,
        interval_ns: a.interval,
        overhead: None,
        exit: exit.clone(),
        merged_from: Vec::new(),
    };
    let mut profile = Profile::new(meta);
    profile.layers = snap.layers;
    profile.intervals = intervals;

    let program = a.command.first().map(|c| c.to_string_lossy().into_owned());
    let path = save_profile(&profile, &a.out, "kernel", program.as_deref())?;
    session.detach_in_background();
    for n in &notes {
        eprintln!("fsprof: note: {n}");
    }
    if snap.lost > 0 {
        eprintln!(
            "fsprof: warning: {} observations were counted but not filed in a histogram bucket (a BPF map was full)",
            snap.lost
        );
    }
    if let Some(sig) = interrupted {
        eprintln!("fsprof: interrupted by signal {sig}; the profile covers the run until then");
    }
    if !a.quiet {
        // block-size counts bytes: printed below with byte labels.
        let mut ropts = ReportOptions {
            top: a.top,
            ..Default::default()
        };
        ropts.selection.layers = profile
            .layers
            .iter()
            .map(|l| l.name.clone())
            .filter(|n| n != fsprof_kernel::session::BLOCK_SIZE_LAYER)
            .collect();
        if ropts.selection.layers.is_empty() {
            // Nothing recorded: the header alone.
            ropts.selection = Default::default();
        }
        eprint!("{}", render(&profile, &ropts)?);
        eprint!("{}", fsprof_kernel::sizes::render_text(&profile));
        eprint!("{}", fsprof_kernel::attribution::render_text(&profile));
    }
    eprintln!("fsprof: profile written to {}", path.display());
    Ok(match (exit, interrupted) {
        (Some(st), _) => st.shell_code(),
        (None, Some(sig)) => 128 + sig,
        (None, None) => 0,
    })
}

fn probe_report() -> Result<i32> {
    // Exit 0 either way: "no" lines are findings, not failures.
    for f in fsprof_kernel::probe::report() {
        match f.result {
            Ok(d) => println!("{:<28} yes  {d}", f.what),
            Err(why) => println!("{:<28} no   {why}", f.what),
        }
    }
    Ok(0)
}

fn sigset(sigs: &[i32]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data initialised by sigemptyset.
    unsafe {
        let mut s: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut s);
        for &g in sigs {
            libc::sigaddset(&mut s, g);
        }
        s
    }
}

/// Waits for one of the blocked signals, at most `d`.
fn wait_signal(set: &libc::sigset_t, d: Duration) -> Option<i32> {
    let ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    // SAFETY: valid set and timeout; the info pointer may be null.
    let s = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    (s > 0).then_some(s)
}
