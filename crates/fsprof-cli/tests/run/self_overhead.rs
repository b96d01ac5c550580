//! The self-overhead figure of `fsprof run`: timed by the shim inside a
//! sample of the run's own calls (shim/own.c). Checked against what the
//! traced program itself did (its call count), not against timings: how
//! close the figure comes to the added time is a benchmark's question
//! (bench/selfcost_bound.py, docs/benchmarks.md).

use fsprof_shim::abi::{OWN_GAP_MIN, OWN_GAP_SPAN};
use fsprof_testkit::*;

/// One open, N preads of the whole (cached) 128 KiB file, one close:
/// N + 2 calls the shim times, all in one thread. A pread of 128 KiB takes
/// microseconds, far above the bookkeeping around it.
const PROGRAM: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
static char buf[131072];
int main(int argc, char **argv)
{
    long n = atol(argv[2]);
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 3;
    for (long i = 0; i < n; i++)
        if (pread(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf)
            return 4;
    return close(fd) == 0 ? 0 : 5;
}
"#;

#[test]
fn the_figure_is_timed_inside_one_call_in_every_gap_and_the_reports_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_source("preads", PROGRAM, dir.path(), &[]);
    let file = dir.path().join("f");
    std::fs::write(&file, vec![7u8; 131_072]).unwrap();
    const N: u64 = 10_000;
    let (out, prof) = run_profiled(
        dir.path(),
        &[
            exe.to_str().unwrap(),
            file.to_str().unwrap(),
            &N.to_string(),
        ],
    );
    assert_ok(&out);
    let p = load(&prof);
    let calls: u64 = p.layers.iter().map(|l| l.total_calls()).sum();
    assert_eq!(calls, N + 2, "the program's own calls");
    let o = p.meta.overhead.as_ref().expect("an overhead figure");
    let s = o
        .sampled
        .as_ref()
        .expect("a sampled figure for 20,002 calls");
    // The thread's first call is not sampled; after it, one call at the end
    // of each gap of OWN_GAP_MIN..OWN_GAP_MIN+OWN_GAP_SPAN-1 calls.
    let (short, long) = (OWN_GAP_MIN as u64, (OWN_GAP_MIN + OWN_GAP_SPAN - 1) as u64);
    let sampled = s.samples + s.interrupted;
    assert!(
        (calls.div_ceil(long) - 1..=(calls - 1) / short).contains(&sampled),
        "{sampled} sampled calls out of {calls}: {s:?}"
    );
    assert!(
        s.samples > 0 && s.mean_ns > 0.0 && s.sd_ns >= 0.0 && s.ci95_ns >= 0.0,
        "{s:?}"
    );
    assert!(s.outside_ns >= 0.0 && s.hot_loop_ns >= 0.0, "{s:?}");
    // A window that kept the call's own interval would hold the pread's
    // latency (copying 128 KiB: microseconds); the bookkeeping is a small
    // part of it even where the clock is a system call.
    let pread = user_op(&p, "pread").unwrap();
    let mean_latency = pread.total_ns as f64 / pread.post as f64;
    assert!(
        s.mean_ns < mean_latency / 4.0,
        "{s:?} vs pread {mean_latency} ns"
    );
    // The profile keeps three decimals.
    assert!(
        (o.per_call_ns - (s.mean_ns + s.outside_ns)).abs() < 0.01,
        "{o:?}"
    );
    let total = o.per_call_ns * calls as f64;
    assert!(
        (o.estimated_total_ns as f64 - total).abs() <= 0.01 * calls as f64,
        "{o:?}"
    );

    // The shim orders the window's clock reads (tests/own_clock.rs in
    // fsprof-shim), so the figure is an upper bound and the reports say so.
    assert!(s.upper_bound, "{s:?}");
    let said = format!(
        "per call at most, timed inside {} of the calls (1 in {:.0}, ±",
        s.samples, s.every
    );
    let text = stdout(&succeeds(fsprof().arg("report").arg(&prof)));
    let line = text
        .lines()
        .find(|l| l.contains("self-overhead"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(&said), "{line}");
    assert!(line.contains("; × the calls ≤ "), "{line}");
    let html = html_report(&prof, &dir.path().join("r.html"));
    assert!(html.contains(&said), "the HTML says it too");
    assert!(
        html.contains("× the calls ≤ "),
        "and that the total is a bound"
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&succeeds(
        fsprof().args(["report", "--format", "json"]).arg(&prof),
    )))
    .unwrap();
    let js = &json["meta"]["overhead"]["sampled"];
    assert_eq!(js["samples"].as_u64(), Some(s.samples), "{json}");
    assert_eq!(js["every"].as_f64(), Some(s.every));
    assert_eq!(js["upper_bound"].as_bool(), Some(true), "{json}");
}

#[test]
fn a_run_too_short_to_sample_keeps_the_hot_loop_figure_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (out, prof) = run_profiled(dir.path(), &["cat", "/etc/hostname"]);
    assert_ok(&out);
    let p = load(&prof);
    let o = p.meta.overhead.as_ref().expect("an overhead figure");
    assert!(o.sampled.is_none(), "{o:?}");
    assert!(o.per_call_ns > 0.0);
    let text = stdout(&succeeds(fsprof().arg("report").arg(&prof)));
    assert!(text.contains("per call timed in a hot loop"), "{text}");
    assert!(text.contains("× the calls ≈ "), "no bound claimed: {text}");
}
