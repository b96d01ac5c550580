//! `fsprof compare` and `fsprof report --peaks/--interesting/--correlate`
//! end to end: exit statuses, formats, errors, and peaks of a real profile.

use std::path::Path;
use std::process::Command as Std;

use assert_cmd::Command;
use fsprof_core::format::write_profile;
use fsprof_core::profile::Meta;
use fsprof_core::{OpStats, Profile};
use predicates::prelude::*;

fn fsprof() -> Command {
    let mut c = Command::cargo_bin("fsprof").unwrap();
    // Keep a calibration file in the real config dir out of these tests.
    c.env("XDG_CONFIG_HOME", "/nonexistent-fsprof-test");
    c
}

fn op(name: &str, buckets: &[(i32, u64)]) -> OpStats {
    let mut o = OpStats::new(name);
    for &(i, c) in buckets {
        o.histogram.add_to(Some(i), c);
        o.pre += c;
        o.post += c;
        o.total_ns += c * (3u64 << i) / 2;
    }
    o
}

fn write(dir: &Path, name: &str, ops: Vec<OpStats>) -> std::path::PathBuf {
    let mut p = Profile::new(Meta {
        tool: "test".into(),
        ..Default::default()
    });
    p.layer_mut("user").ops = ops;
    p.layer_mut("user").normalize();
    let path = dir.join(name);
    write_profile(&path, &p, false).unwrap();
    path
}

#[test]
fn compare_exit_status_says_whether_anything_changed() {
    let d = tempfile::tempdir().unwrap();
    let a = write(
        d.path(),
        "a.json",
        vec![op("read", &[(9, 1000)]), op("open", &[(12, 40)])],
    );
    let same = write(
        d.path(),
        "same.json",
        vec![op("read", &[(9, 1000)]), op("open", &[(12, 40)])],
    );
    let slow = write(
        d.path(),
        "slow.json",
        vec![op("read", &[(9, 900), (21, 100)]), op("open", &[(12, 40)])],
    );
    fsprof()
        .args(["compare"])
        .arg(&a)
        .arg(&same)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("no op changed significantly"));
    fsprof()
        .args(["compare"])
        .arg(&a)
        .arg(&slow)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "user/read: new peak at 2^22 ns (4.19ms), ",
        ));
    let out = fsprof()
        .args(["compare", "--format", "json", "--method", "chi2"])
        .arg(&a)
        .arg(&slow)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["interesting"], true);
    let ops = v["comparison"]["ops"].as_array().unwrap();
    assert_eq!(ops[0]["op"], "read");
    assert_eq!(ops[0]["method"], "chi2");
    assert_eq!(ops[0]["interesting"], true);
    assert_eq!(ops[1]["interesting"], false);
    fsprof()
        .args(["compare", "--format", "csv", "--method", "count"])
        .arg(&a)
        .arg(&slow)
        .assert()
        .code(1)
        .stdout(predicate::str::starts_with(
            "layer,op,status,interesting,method,score",
        ));
}

#[test]
fn compare_errors_are_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let a = write(d.path(), "a.json", vec![op("read", &[(9, 10)])]);
    fsprof()
        .arg("compare")
        .arg(&a)
        .arg(d.path().join("missing.json"))
        .assert()
        .code(2)
        .stderr(
            predicate::str::starts_with("fsprof: ").and(predicate::str::contains("missing.json")),
        );
    fsprof()
        .args(["compare", "--negligible", "5"])
        .arg(&a)
        .arg(&a)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("share between 0 and 1"));
    fsprof()
        .args(["compare", "--calibration"])
        .arg(d.path().join("nocal.json"))
        .arg(&a)
        .arg(&a)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read calibration"));
}

#[test]
fn report_correlate_needs_one_op_and_data() {
    let d = tempfile::tempdir().unwrap();
    let a = write(d.path(), "a.json", vec![op("read", &[(9, 10)])]);
    fsprof()
        .args(["report", "--correlate", "seek"])
        .arg(&a)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("exactly one --op"));
    fsprof()
        .args(["report", "--correlate", "size", "--op", "read"])
        .arg(&a)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no size correlation data"));
}

/// Reads of a file in the page cache and O_DIRECT reads of another on the
/// disk under the temp dir: two clearly separated read peaks.
#[test]
fn real_profile_of_cached_and_uncached_reads_has_both_peaks() {
    let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    for name in ["hot", "cold"] {
        let ok = Std::new("dd")
            .args(["if=/dev/urandom", "bs=64k", "count=32", "status=none"])
            .arg(format!("of={}", d.path().join(name).display()))
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
    let profile = d.path().join("p.json");
    let script = "dd if=hot of=/dev/null bs=4k status=none && dd if=hot of=/dev/null bs=4k status=none && dd if=cold of=/dev/null bs=4k iflag=direct status=none";
    fsprof()
        .current_dir(d.path())
        .args(["run", "-q", "-o"])
        .arg(&profile)
        .args(["--", "sh", "-c", script])
        .assert()
        .success();
    let out = fsprof()
        .args(["report", "--peaks", "--op", "read", "--format", "json"])
        .arg(&profile)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let peaks: Vec<&serde_json::Value> = v["peaks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["layer"] == "user")
        .collect();
    let modes: Vec<f64> = peaks
        .iter()
        .map(|p| p["mode_ns"].as_f64().unwrap())
        .collect();
    // Page-cache hits well under 16 µs, device reads well over it.
    assert!(modes.iter().any(|&m| m < 16_000.0), "{modes:?}");
    let slow: Vec<_> = peaks
        .iter()
        .filter(|p| p["mode_ns"].as_f64().unwrap() > 16_000.0)
        .collect();
    assert_eq!(slow.len(), 1, "{modes:?}");
    // 512 direct reads of 4 KiB (+1 returning EOF, which may be fast).
    let n = slow[0]["peak"]["count"].as_u64().unwrap();
    assert!((490..=513).contains(&n), "{n} calls in the slow peak: {v}");
    assert!(slow[0]["peak"]["latency_share"].as_f64().unwrap() > 0.5);
    // And the text table shows it.
    fsprof()
        .args(["report", "--peaks", "--op", "read"])
        .arg(&profile)
        .assert()
        .success()
        .stdout(predicate::str::contains("peaks (FSprof Table 3):"));
}
