//! `bench/per_process_cpu.py` decides the per-process target (issue 27)
//! from intervals: its quotient "run / empty.so added" must be resolved
//! around the true value when the empty library's cost stands out of the
//! machine's noise, and refused ("not resolved") when it does not. The
//! script checks this itself on made-up rounds (`--self-test`); the
//! machine's figures are the bench's, not a test's.

use std::process::Command;

use fsprof_testkit::need_program;

#[test]
#[ignore = "needs python3"]
fn the_per_process_bench_resolves_a_quotient_only_out_of_the_noise() {
    let python = need_program("python3", "python3");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bench/per_process_cpu.py"
    );
    let o = Command::new(python)
        .arg(script)
        .arg("--self-test")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("self-test passed"));
}
