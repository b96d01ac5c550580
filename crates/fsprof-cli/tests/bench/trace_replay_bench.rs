//! `bench/trace_replay.py`'s pooled lines read the replay's fidelity in
//! the fidelity table's own measure (compare's EMD, refined inside the
//! buckets by the exact means), not the plain bucket EMD, which reads a
//! small shift across a bucket's edge as a whole bucket. The script checks
//! this itself on made-up profiles (`--self-test`) with this build's
//! `fsprof compare`, and, on made-up calls, its two floors: the replay
//! of the program against itself (a call behind a slower one is late, none
//! is early) and the C loop of the same calls (bench/replay_floor.c: the
//! calls it is given are made, under the root).

#[test]
#[ignore = "needs python3"]
fn the_replay_bench_pools_in_the_fidelity_table_s_emd() {
    let fsprof = fsprof_testkit::fsprof_path();
    crate::bench_script_passes(
        "trace_replay.py",
        &[
            "--fsprof".as_ref(),
            fsprof.as_os_str(),
            "--self-test".as_ref(),
        ],
        "self-test passed",
    );
}
