//! `bench/per_process_cpu.py` decides the per-process target (issue 27)
//! from intervals: its quotient "run / empty.so added" must be resolved
//! around the true value when the empty library's cost stands out of the
//! machine's noise, and refused ("not resolved") when it does not. The
//! script checks this itself on made-up rounds (`--self-test`); the
//! machine's figures are the bench's, not a test's.

use fsprof_testkit::need_program;

/// Runs `bench/per_process_cpu.py` with `args`; fails the test unless it
/// exits 0 and prints `passed`.
fn script_passes(args: &[&std::ffi::OsStr], passed: &str) {
    crate::bench_script_passes("per_process_cpu.py", args, passed);
}

#[test]
#[ignore = "needs python3"]
fn the_per_process_bench_resolves_a_quotient_only_out_of_the_noise() {
    script_passes(&["--self-test".as_ref()], "self-test passed");
}

/// The design's floor that `per_process_cpu.py --floor` measures the shim
/// against (bench/shim_floor.c) must be a preload profiler of the shim's
/// kind, not an empty library under the shim's names: built from the
/// installed shim's own symbol list, it exports exactly the shim's
/// wrappers, and under it a `cat` prints its file unchanged while each of
/// its calls is filed (two reads: the data, then the end of the file).
#[test]
#[ignore = "needs python3, a C compiler and nm"]
fn the_shim_s_design_floor_exports_its_wrappers_and_counts_every_call() {
    floor_self_test_passes("--floor-self-test", "floor self-test passed");
}

/// Runs a floor's self-test (built with cc from the installed shim's
/// `nm -D` list) against this build's fsprof.
fn floor_self_test_passes(flag: &str, passed: &str) {
    need_program("cc", "gcc");
    need_program("nm", "binutils");
    let fsprof = fsprof_testkit::fsprof_path();
    script_passes(&[flag.as_ref(), fsprof.as_os_str()], passed);
}

/// The floor of trace's design (`per_process_cpu.py --trace-floor`:
/// shim_floor.c built with FLOOR_TRACE) must record every call into
/// shared memory, or "trace − trace floor" measures trace against a
/// counting library: under it a `cat` prints its file unchanged, and its
/// window holds one record for each call its counters counted, under its
/// pid, with its two reads' results in order.
#[test]
#[ignore = "needs python3, a C compiler and nm"]
fn the_trace_design_floor_records_every_call_into_shared_memory() {
    floor_self_test_passes("--trace-floor-self-test", "trace floor self-test passed");
}
