//! The shim's self-test run in a process of its own (what a static musl
//! fsprof, which cannot load the shim into itself, measures its overhead
//! with) gives a result, and refuses what the loaded shim refuses.

use fsprof_core::{BucketLayout, Resolution};
use fsprof_shim::{install, selftest_in_process, LoadedShim};
use fsprof_user::clock::ClockParams;
use fsprof_user::rundir::control_bytes;

#[test]
fn the_self_test_runs_in_a_process_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let shim = install(dir.path()).unwrap();
    let layout = BucketLayout::new(Resolution::new(1).unwrap());
    let control = control_bytes(&ClockParams::monotonic(), &layout);
    let own = selftest_in_process(&shim, &control, 2000).unwrap();
    let loaded = LoadedShim::load(&shim)
        .unwrap()
        .selftest(&control, 2000)
        .unwrap();
    for (name, v) in [
        ("per call", own.per_call_ns),
        ("smallest recordable", own.min_recordable_ns),
    ] {
        assert!(
            v.is_finite() && v > 0.0 && v < 1e6,
            "{name}: {v} ns ({own:?})"
        );
    }
    assert!(
        own.outside_ns.is_finite() && own.outside_ns >= 0.0,
        "{own:?}"
    );
    // The same clock, read back to back, in either process: its smallest
    // visible latency is the clock's, not the process's (a loose bound: the
    // two run at different moments of a loaded machine).
    let ratio = own.min_recordable_ns / loaded.min_recordable_ns;
    assert!((0.1..10.0).contains(&ratio), "{own:?} against {loaded:?}");
}

#[test]
fn a_control_block_the_shim_refuses_is_an_error_with_the_runner_s_reason() {
    let dir = tempfile::tempdir().unwrap();
    let shim = install(dir.path()).unwrap();
    let layout = BucketLayout::new(Resolution::new(1).unwrap());
    let mut control = control_bytes(&ClockParams::monotonic(), &layout);
    control[..8].fill(0xff); // not a control block's magic
    assert!(LoadedShim::load(&shim)
        .unwrap()
        .selftest(&control, 10)
        .is_err());
    let e = selftest_in_process(&shim, &control, 10)
        .unwrap_err()
        .to_string();
    assert!(e.contains("rejected the self-test parameters"), "{e}");
    let e = selftest_in_process(&dir.path().join("no-shim.so"), &control, 10)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot load the preload shim"), "{e}");
}
