//! `--interval` slices the run in time (FSprof's 4-D profile): the slices
//! follow the workload's phases and add up to the totals.

use fsprof_testkit::*;

#[test]
fn intervals_follow_phases_and_sum_to_totals() {
    let dir = tempfile::tempdir().unwrap();
    // Phase 1: stat calls; 0.5 s of nothing; phase 2: reads.
    let script = "for i in $(seq 200); do test -e /etc/hostname; done; sleep 0.5; \
                  for i in $(seq 30); do cat /etc/hostname >/dev/null; done";
    let out_path = dir.path().join("p.json");
    succeeds(
        fsprof()
            .args(["run", "-q", "--interval", "100ms", "-o"])
            .arg(&out_path)
            .args(["--", "bash", "-c", script]),
    );
    let p = load(&out_path);
    assert_eq!(p.meta.interval_ns, Some(100_000_000));
    assert!(p.intervals.len() >= 5, "{} intervals", p.intervals.len());
    for w in p.intervals.windows(2) {
        assert_eq!(w[0].end_ns, w[1].start_ns, "slices are contiguous");
    }
    let rep = fsprof_core::check::check_profile(&p);
    assert!(rep.ok(), "{:?}", rep.errors);
    // Busy, quiet (the sleep), busy again with cat's 30 × 2 reads.
    let calls: Vec<u64> = p
        .intervals
        .iter()
        .map(|iv| iv.layers.iter().map(|l| l.total_calls()).sum())
        .collect();
    let quiet = calls.iter().position(|&c| c == 0).expect("a quiet slice");
    assert!(calls[..quiet].iter().any(|&c| c > 0), "{calls:?}");
    let reads_after: u64 = p.intervals[quiet..]
        .iter()
        .filter_map(|iv| iv.layers[..].iter().find_map(|l| l.op("read")))
        .map(|o| o.post)
        .sum();
    assert!(
        reads_after >= 60,
        "cat's reads come after the pause: {reads_after} ({calls:?})"
    );
}
