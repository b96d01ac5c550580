//! `bench metadata` names the cause of a slow run. A CPU hog pinned to the
//! same CPU as the benchmark preempts some of its few-millisecond phases
//! and not others: every run at half the fastest's rate or less must carry
//! a `slow_run` warning, the run-queue wait the JSON records per run must
//! show the preemption, and a run called preempted must name the hog among
//! the processes that had the CPU.

use std::process::{Child, Command, Stdio};

use fsprof_testkit::{fsprof, need_program};

/// A shell spinning on CPU 0 until dropped.
struct Hog(Child);

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "needs taskset"]
fn slow_runs_beside_a_cpu_hog_are_warned_as_preempted_by_it() {
    need_program("taskset", "util-linux");
    let hog = Hog(Command::new("taskset")
        .args(["-c", "0", "sh", "-c", "while :; do :; done"])
        .spawn()
        .unwrap());
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let out = tempfile::tempdir().unwrap();
    let r = out.path().join("r.json");
    let fsprof_bin = fsprof().get_program().to_owned();
    let o = Command::new("taskset")
        .args(["-c", "0"])
        .arg(fsprof_bin)
        .args(["bench", "metadata", "--dirs", "32", "--files-per-dir", "16"])
        .args(["--runs", "8", "-o"])
        .arg(&r)
        .arg(d.path())
        .stdout(Stdio::null())
        .output()
        .unwrap();
    drop(hog);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&r).unwrap()).unwrap();
    let b = &v["bench"];
    let warnings: Vec<&str> = b["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "slow_run")
        .map(|w| w["message"].as_str().unwrap())
        .collect();
    let (mut queued, mut slow) = (0u64, 0usize);
    for ph in b["phases"].as_array().unwrap() {
        let name = ph["name"].as_str().unwrap();
        let runs: Vec<f64> = ph["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let waits = ph["waits"].as_array().unwrap();
        assert_eq!(waits.len(), runs.len() + 1, "{name}: the warm-up's too");
        queued += waits
            .iter()
            .map(|w| w["runqueue_ns"].as_u64().unwrap_or(0))
            .sum::<u64>();
        let best = runs.iter().copied().fold(0.0, f64::max);
        for (i, v) in runs.iter().enumerate() {
            if best / v >= 2.0 {
                slow += 1;
                let says = format!("{name}: run {} (", i + 1);
                assert!(
                    warnings.iter().any(|w| w.starts_with(&says)),
                    "{says}... not warned: {warnings:#?}"
                );
            }
        }
    }
    assert!(queued > 0, "the hog never made the loops wait for the CPU");
    assert!(slow > 0, "no slow run beside a hog: {warnings:#?}");
    let preempted: Vec<&&str> = warnings
        .iter()
        .filter(|w| w.contains("preempted"))
        .collect();
    assert!(!preempted.is_empty(), "{warnings:#?}");
    assert!(
        preempted.iter().any(|w| w.contains("sh ")),
        "the hog (sh) is not named: {preempted:#?}"
    );
}
