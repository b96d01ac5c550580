//! `bench/trace_replay.py`'s pooled lines read the replay's fidelity in
//! the fidelity table's own measure (compare's EMD, refined inside the
//! buckets by the exact means), not the plain bucket EMD, which reads a
//! small shift across a bucket's edge as a whole bucket. The script checks
//! this itself on made-up profiles (`--self-test`) with this build's
//! `fsprof compare`.

use std::process::Command;

use fsprof_testkit::need_program;

#[test]
#[ignore = "needs python3"]
fn the_replay_bench_pools_in_the_fidelity_table_s_emd() {
    let python = need_program("python3", "python3");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/trace_replay.py");
    let o = Command::new(python)
        .arg(script)
        .arg("--fsprof")
        .arg(fsprof_testkit::fsprof_path())
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
