//! The labelled profile pairs of `bench/classify.py`, produced here from
//! real runs: `fsprof compare` (defaults) must flag exactly the op each
//! controlled change was made to.
//!
//! Each side is five runs, A and B interleaved, at 4 buckets per power of
//! two, compared as `compare A1 ... A5 --vs B1 ... B5` (as
//! `bench/classify.py --runs 5 --resolution 4` would): on a shared 2-CPU
//! machine load from other processes moves sub-µs ops by ±35% from one run
//! to the next, and the runs of each side measure that spread. Single-run rates are in
//! docs/benchmarks/analysis.md.
//!
//! Each pair is measured once and a wrong answer fails the test: as root
//! the workload runs at SCHED_FIFO (see `common_flags`), each phase is long
//! enough that interrupts fall on both sides alike (`ITERATIONS`), and its
//! pipe reads wait only under `--delay` (bench/classify/workload.c).
//!
//! The competing-process pair is only in the benchmark: a competitor's
//! effect on a shared virtual disk varies too much from run to run for a
//! pass/fail test (its rates are in docs/benchmarks.md).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command as Std;

use assert_cmd::prelude::*;
use fsprof_testkit::{disk_tempdir, fsprof};

const WORKLOAD: &str = include_str!("../../../../bench/classify/workload.c");

/// Calls per phase. At 2,000 a phase of a sub-microsecond op lasts about a
/// millisecond, and a dozen 30-50 us interrupts in one run (a cluster on
/// one side only) held a fifth of its latency, a "new peak"; at 20,000 they
/// are spread over both sides alike (a replay of this test at load 10-12:
/// 15 of 15 right, against 17 of 20 at 2,000).
const ITERATIONS: &str = "20000";

fn profile(dir: &Path, out: &str, flags: &[&str]) {
    // One layout for every run: where ASLR puts a buffer makes `open` and
    // `close` bimodal, a mode that five runs a side can split unevenly
    // (a CI run flagged `open` 0.79 powers of two faster in the identical
    // pair; docs/benchmarks/analysis.md, "`close`'s two modes"). This test
    // is about the statistics, not that variance.
    fsprof()
        .args(["run", "-q", "-f", "--no-aslr", "--resolution", "4", "-o"])
        .arg(dir.join(out))
        .arg("--")
        .arg(dir.join("workload"))
        .arg(dir)
        .arg(ITERATIONS)
        .args(flags)
        .assert()
        .success();
}

/// `compare A... --vs B...` with `extra` arguments.
fn compare(dir: &Path, a: &[String], b: &[String], extra: &[&str]) -> std::process::Output {
    fsprof()
        .arg("compare")
        .args(extra)
        .args(a.iter().map(|f| dir.join(f)))
        .arg("--vs")
        .args(b.iter().map(|f| dir.join(f)))
        .output()
        .unwrap()
}

fn flagged(dir: &Path, a: &[String], b: &[String], alpha: &str) -> BTreeSet<String> {
    let out = compare(dir, a, b, &["--format", "json", "--alpha", alpha]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let got: BTreeSet<String> = v["comparison"]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["interesting"] == true)
        .map(|o| o["op"].as_str().unwrap().to_string())
        .collect();
    // The exit status is the gate's (`--fail-on slower`, the default): 1
    // exactly when an interesting op, or a whole layer whose shift
    // decided, got slower. A flagged op that got faster is listed and
    // does not fail.
    assert_eq!(out.status.code(), Some(i32::from(slower_found(&v))), "{v}");
    got
}

/// Whether `compare --format json` found a change that got slower: an
/// interesting op, or a layer shift that decided, with a positive effect.
fn slower_found(v: &serde_json::Value) -> bool {
    let c = &v["comparison"];
    let ops = c["ops"]
        .as_array()
        .unwrap()
        .iter()
        .any(|o| o["interesting"] == true && o["direction"] == "slower");
    let layers = c["layer_shifts"].as_array().unwrap().iter().any(|s| {
        s["check"]["decides"] == true && s["check"]["effect"].as_f64().is_some_and(|e| e > 0.0)
    });
    ops || layers
}

#[test]
fn compare_flags_exactly_the_changed_op() {
    let d = disk_tempdir();
    let dir = d.path();
    std::fs::write(dir.join("workload.c"), WORKLOAD).unwrap();
    let cc = Std::new("cc")
        .args(["-O2", "-o"])
        .arg(dir.join("workload"))
        .arg(dir.join("workload.c"))
        .arg("-lpthread")
        .status()
        .expect("cc is needed to build the workload (apt-get install gcc)");
    assert!(cc.success());
    let data: Vec<u8> = (0..16u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    // Written back now, not by the flusher during the measured runs.
    let mut f = std::fs::File::create(dir.join("data")).unwrap();
    std::io::Write::write_all(&mut f, &data).unwrap();
    f.sync_all().unwrap();

    // The identical pair is judged at alpha 0.01: at the default 0.05
    // compare flags one identical comparison in twenty by design (what
    // alpha means), and a test asserting no alarm at that level fails one
    // CI run in twenty without anything being wrong (5 runs a side, pwrite
    // 1.35x faster in B at p 0.0034 against Holm's 0.0056). A broken
    // spread or profile shift still shows: it makes p-values of 1e-6, not
    // 0.003. The changed pairs are judged at the defaults.
    let pairs: [(&str, &str, &[&str], &[&str]); 3] = [
        ("null", "0.01", &[], &[]),
        ("cold", "0.05", &["--cold"], &["pread"]),
        // Its reads wait on a pipe: filed apart from file reads.
        ("delay", "0.05", &["--delay"], &["pipe_read"]),
    ];
    let both = common_flags();
    let mut report = Vec::new();
    for (name, alpha, change, expected) in pairs {
        let want: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
        let (got, text) = measure_pair(dir, name, &both, change, alpha);
        if got != want {
            report.push(format!(
                "{name}: flagged {got:?}, expected {want:?}\n{text}"
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// The workload flags of both sides of every pair: `--no-sync`, and
/// `--fifo` as root. On a loaded machine a call preempted by another
/// process lasts milliseconds; a few such calls in one run of a
/// sub-microsecond op hold a fifth of its latency, a "new peak" compare
/// rightly flags in a pair that changed nothing. At SCHED_FIFO nothing
/// but interrupts preempts the workload; at idle it changes nothing.
fn common_flags() -> Vec<&'static str> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && fsprof_testkit::in_ci() {
        fsprof_testkit::missing(
            "root (the workload runs at SCHED_FIFO so that load from other processes cannot preempt it)",
            "run it as root",
        );
    }
    if !root {
        eprintln!("not root: the workload runs without SCHED_FIFO, so load from other processes can preempt its calls");
        return vec!["--no-sync"];
    }
    vec!["--no-sync", "--fifo"]
}

/// Profiles both sides of a pair (three runs each) and returns the ops
/// `compare` flags, with its text output for the failure message.
/// Runs of each side compared.
const RUNS_PER_SIDE: usize = 5;

fn measure_pair(
    dir: &Path,
    name: &str,
    both: &[&str],
    change: &[&str],
    alpha: &str,
) -> (BTreeSet<String>, String) {
    let flags = [both, change].concat();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    // Five runs a side: with three, a cold pread 5.9x slower in total came
    // out at p 0.021 against the 0.0071 Holm asks of the first of seven
    // tests (one CI run in three); compare asks for repeated runs exactly
    // so that the spread between them is measured well enough.
    //
    // In the order A B B A A B B A A B, not A B A B: a run's first phases
    // carry over from how the run before it ended, and in A B A B every A
    // follows a changed run (a --delay or --cold run ends idle, waiting)
    // and every B a plain one. The plain side's stat and open then came
    // out 1.3-1.5x slower in 3 of 11 runs of this test at idle (p 0.006-
    // 0.016), a difference of order, not of the change. Balanced, each
    // side follows both kinds, and what is left of it is spread between
    // runs that compare measures.
    for k in 0..RUNS_PER_SIDE {
        a.push(format!("{name}-a{k}.json"));
        b.push(format!("{name}-b{k}.json"));
        if k % 2 == 0 {
            profile(dir, &a[k], both);
            profile(dir, &b[k], &flags);
        } else {
            profile(dir, &b[k], &flags);
            profile(dir, &a[k], both);
        }
    }
    let got = flagged(dir, &a, &b, alpha);
    let text = compare(dir, &a, &b, &["--alpha", alpha]);
    (got, String::from_utf8_lossy(&text.stdout).into_owned())
}
