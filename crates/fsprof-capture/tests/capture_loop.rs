//! The capture loop with the counting test source: what ends a capture,
//! what the command and the source see, and what the profile says.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use fsprof_capture::testing::CountingSource;
use fsprof_capture::{Caps, Capture, CaptureError, Plan, Progress, Silent};
use fsprof_core::profile::{ExitStatus, Layer};
use fsprof_core::Resolution;

const MS: u64 = 1_000_000;

fn plan(command: &[&str]) -> Plan {
    Plan {
        tool: "test".into(),
        command: command.iter().map(OsString::from).collect(),
        resolution: Resolution::new(1).unwrap(),
        interval_ns: None,
        duration_ns: None,
        sample_ns: None,
    }
}

fn calls(layers: &[Layer]) -> u64 {
    layers.iter().map(Layer::total_calls).sum()
}

/// Sends `sig` to the calling thread after `after`, as if from kill(1):
/// the thread runs the capture, where the stop signals are blocked.
fn signal_me_after(after: Duration, sig: i32) -> std::thread::JoinHandle<()> {
    // SAFETY: pthread_self cannot fail.
    let me = unsafe { libc::pthread_self() };
    std::thread::spawn(move || {
        std::thread::sleep(after);
        // SAFETY: the target thread is alive: it is inside the capture.
        unsafe { libc::pthread_kill(me, sig) };
    })
}

#[derive(Default)]
struct Recorder {
    started: Vec<String>,
    samples: Vec<(u64, u64)>,
}

impl Progress for Recorder {
    fn started(&mut self, what: &str) {
        self.started.push(what.into());
    }
    fn sampled(&mut self, elapsed_ns: u64, layers: &[Layer]) {
        self.samples.push((elapsed_ns, calls(layers)));
    }
}

/// The error a capture of `argv` under `src` ends with.
fn run_err(src: &mut CountingSource, argv: &[&str]) -> CaptureError {
    Capture::new(plan(argv)).run(src, &mut Silent).unwrap_err()
}

#[test]
fn duration_and_intervals_without_a_command() {
    let mut p = plan(&[]);
    p.duration_ns = Some(300 * MS);
    p.interval_ns = Some(100 * MS);
    let mut src = CountingSource {
        host: Some("amended".into()),
        ..Default::default()
    };
    let mut rec = Recorder::default();
    let out = Capture::new(p).run(&mut src, &mut rec).unwrap();
    assert_eq!(
        (out.exit.clone(), out.interrupted, out.exit_code()),
        (None, None, 0)
    );
    let prof = &out.profile;
    assert!(
        prof.meta.duration_ns >= 300 * MS,
        "{}",
        prof.meta.duration_ns
    );
    assert_eq!(prof.meta.interval_ns, Some(100 * MS));
    assert_eq!(prof.meta.tool, "test");
    // Without a command, fsprof's own command line says what was captured.
    assert_eq!(prof.meta.command, std::env::args().collect::<Vec<_>>());
    assert!(!prof.meta.run.kernel.is_empty() && !prof.meta.run.start_time.is_empty());
    // The source's own metadata comes last.
    assert_eq!(prof.meta.run.host, "amended");
    assert_eq!(prof.meta.clock.source, "monotonic");
    // Samples at 100 and 200 ms (one may be late on a loaded machine),
    // then the last slice at the end: the intervals add up to the totals
    // and tile the capture.
    let n = prof.intervals.len();
    assert!((2..=4).contains(&n), "{n} intervals");
    let sum: u64 = prof.intervals.iter().map(|i| calls(&i.layers)).sum();
    assert_eq!(sum, calls(&prof.layers));
    assert_eq!(calls(&prof.layers), src.calls);
    for w in prof.intervals.windows(2) {
        assert_eq!(w[0].end_ns, w[1].start_ns);
    }
    assert_eq!(prof.intervals.last().unwrap().end_ns, prof.meta.duration_ns);
    assert_eq!(src.log.first().unwrap(), "start(false)");
    assert_eq!(src.log[src.log.len() - 2..], ["finish", "amend_meta"]);
    assert_eq!(out.notes, vec![format!("{} calls", src.calls)]);
    // Progress heard the start, every sample and the final counts.
    assert_eq!(rec.started, vec!["ticks".to_string()]);
    assert_eq!(rec.samples.len(), n);
    assert_eq!(rec.samples.last().unwrap().1, src.calls);
}

#[test]
fn the_command_exit_ends_the_capture_and_is_fsprofs_status() {
    let mut src = CountingSource::default();
    let out = Capture::new(plan(&["sh", "-c", "exit 3"]))
        .run(&mut src, &mut Silent)
        .unwrap();
    assert_eq!(out.exit, Some(ExitStatus::Code(3)));
    assert_eq!(out.exit_code(), 3);
    assert_eq!(out.profile.meta.exit, Some(ExitStatus::Code(3)));
    assert_eq!(out.profile.meta.command, vec!["sh", "-c", "exit 3"]);
    assert_eq!(src.log.first().unwrap(), "start(true)");
    let how = src.ended_with.unwrap();
    assert_eq!(how.exit, Some(ExitStatus::Code(3)));
    assert_eq!(how.duration_ns, out.profile.meta.duration_ns);
    assert!(out.profile.meta.duration_ns < 5_000 * MS);
}

#[test]
fn the_command_gets_the_sources_environment() {
    let mut src = CountingSource {
        env: vec![("FSPROF_CAPTURE_TEST".into(), "yes".into())],
        caps: Caps {
            hold_command: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let out = Capture::new(plan(&["sh", "-c", "test \"$FSPROF_CAPTURE_TEST\" = yes"]))
        .run(&mut src, &mut Silent)
        .unwrap();
    assert_eq!(out.exit, Some(ExitStatus::Code(0)));
}

#[test]
fn launch_and_start_failures_are_errors_before_anything_runs() {
    let mut src = CountingSource::default();
    let e = run_err(&mut src, &["/no/such/fsprof-cmd"]);
    match &e {
        CaptureError::Launch(l) => assert_eq!(l.exit_code(), 127),
        other => panic!("{other}"),
    }
    assert!(src.log.is_empty(), "{:?}", src.log);

    // A source that attaches to the command holds it: when it fails to
    // start, the command never runs. One that does not (the preload shim)
    // lets the command start at once; when it then fails to start, the
    // command is killed, not left running unobserved.
    let held = CountingSource {
        fail_start: Some("the probe was refused".into()),
        caps: Caps {
            hold_command: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let shim = CountingSource {
        fail_start: Some("the shim was refused".into()),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    for (mut src, why, before, wait_ms, what) in [
        (
            held,
            "the probe was refused",
            "",
            100,
            "the held command ran",
        ),
        (
            shim,
            "the shim was refused",
            "sleep 0.3; ",
            600,
            "the command went on",
        ),
    ] {
        let script = format!("{before}touch {}", marker.display());
        let e = run_err(&mut src, &["sh", "-c", &script]);
        assert_eq!(e.to_string(), why);
        std::thread::sleep(Duration::from_millis(wait_ms));
        assert!(!marker.exists(), "{what} although the source failed");
    }

    let mut src = CountingSource {
        caps: Caps {
            needs_command: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = run_err(&mut src, &[]);
    assert!(matches!(e, CaptureError::NeedsCommand), "{e}");
}

#[test]
fn a_stop_signal_ends_a_capture_without_a_command() {
    let cap = Capture::new(plan(&[]));
    let t = signal_me_after(Duration::from_millis(200), libc::SIGTERM);
    let mut src = CountingSource::default();
    let t0 = Instant::now();
    let out = cap.run(&mut src, &mut Silent).unwrap();
    t.join().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(
        (out.interrupted, out.exit_code()),
        (Some(libc::SIGTERM), 143)
    );
    assert_eq!(src.log.last().unwrap(), "amend_meta");
}

#[test]
fn a_stop_signal_is_passed_on_to_the_command_which_ends_the_capture() {
    let cap = Capture::new(plan(&["sleep", "30"]));
    let t = signal_me_after(Duration::from_millis(200), libc::SIGTERM);
    let t0 = Instant::now();
    let out = cap
        .run(&mut CountingSource::default(), &mut Silent)
        .unwrap();
    t.join().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(out.exit, Some(ExitStatus::Signal(libc::SIGTERM)));
    assert_eq!(
        (out.interrupted, out.exit_code()),
        (Some(libc::SIGTERM), 143)
    );
}

#[test]
fn a_command_that_ignores_the_signal_is_waited_for_until_a_second_one() {
    // The command outlives the first SIGTERM; the capture goes on. The
    // second one ends the capture while the command still runs.
    let cap = Capture::new(plan(&[
        "sh",
        "-c",
        "exec >/dev/null 2>&1; trap '' TERM; sleep 3",
    ]));
    let a = signal_me_after(Duration::from_millis(200), libc::SIGTERM);
    let b = signal_me_after(Duration::from_millis(700), libc::SIGTERM);
    let t0 = Instant::now();
    let out = cap
        .run(&mut CountingSource::default(), &mut Silent)
        .unwrap();
    let took = t0.elapsed();
    a.join().unwrap();
    b.join().unwrap();
    assert!(took >= Duration::from_millis(650), "{took:?}");
    assert!(took < Duration::from_millis(2500), "{took:?}");
    assert_eq!(out.exit, None);
    assert_eq!(out.exit_code(), 143);
}

#[test]
fn upkeep_runs_and_a_source_that_ends_ends_the_capture() {
    let mut p = plan(&[]);
    p.sample_ns = Some(50 * MS);
    let mut src = CountingSource {
        caps: Caps {
            upkeep_ns: Some(20 * MS),
            ..Default::default()
        },
        end_after: Some(4),
        ..Default::default()
    };
    let t0 = Instant::now();
    let out = Capture::new(p).run(&mut src, &mut Silent).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5));
    let count = |what: &str| src.log.iter().filter(|l| *l == what).count();
    assert_eq!(count("snapshot"), 4);
    assert!(count("upkeep") >= 5, "{:?}", src.log);
    // Sampling without --interval records no intervals.
    assert!(out.profile.intervals.is_empty());
    assert_eq!(out.profile.meta.interval_ns, None);
}
