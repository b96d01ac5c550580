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
    // Page-cache hits well under 16 µs, device reads well over it (the
    // device side may itself be split, e.g. by a burst of slow requests).
    let (fast, slow): (Vec<_>, Vec<_>) = peaks
        .iter()
        .partition(|p| p["mode_ns"].as_f64().unwrap() < 16_000.0);
    let calls = |ps: &[&&serde_json::Value]| -> u64 {
        ps.iter()
            .map(|p| p["peak"]["count"].as_u64().unwrap())
            .sum()
    };
    assert!(!fast.is_empty() && !slow.is_empty(), "{modes:?}");
    // 2 × (512 reads of 4 KiB + 1 at EOF) from the cache, 512 + 1 direct.
    let (nf, ns) = (calls(&fast), calls(&slow));
    assert!((1000..=1030).contains(&nf), "{nf} cached reads: {v}");
    assert!((500..=520).contains(&ns), "{ns} device reads: {v}");
    let slow_share: f64 = slow
        .iter()
        .map(|p| p["peak"]["latency_share"].as_f64().unwrap())
        .sum();
    assert!(slow_share > 0.5, "{v}");
    // And the text table shows it.
    fsprof()
        .args(["report", "--peaks", "--op", "read"])
        .arg(&profile)
        .assert()
        .success()
        .stdout(predicate::str::contains("peaks (FSprof Table 3):"));
}

/// `calibrate` writes the default file, which `report --peaks` then uses to
/// label the page-cache and device peaks of a real profile.
#[test]
fn calibration_labels_peaks_of_a_real_profile() {
    let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let cfg = d.path().join("cfg");
    let mut c = Command::cargo_bin("fsprof").unwrap();
    c.env("XDG_CONFIG_HOME", &cfg)
        .args(["calibrate", "--dir"])
        .arg(d.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("page-cache hit"))
        .stderr(predicate::str::contains("calibration written to"));
    let file = cfg.join("fsprof/calibration.json");
    assert!(file.exists());
    // An explicit file is never clobbered without --force.
    fsprof()
        .args(["calibrate", "-o"])
        .arg(&file)
        .args(["--dir"])
        .arg(d.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--force"));

    for name in ["hot", "cold"] {
        let ok = Std::new("dd")
            .args(["if=/dev/urandom", "bs=64k", "count=16", "status=none"])
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
    let mut c = Command::cargo_bin("fsprof").unwrap();
    let out = c
        .env("XDG_CONFIG_HOME", &cfg)
        .args(["report", "--peaks", "--op", "read", "--format", "json"])
        .arg(&profile)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let labels: Vec<&str> = v["peaks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["label"].as_str())
        .collect();
    assert!(labels.contains(&"≈ device read"), "{labels:?} {v}");
    // --no-labels turns it off.
    let mut c = Command::cargo_bin("fsprof").unwrap();
    c.env("XDG_CONFIG_HOME", &cfg)
        .args(["report", "--peaks", "--op", "read", "--no-labels"])
        .arg(&profile)
        .assert()
        .success()
        .stdout(predicate::str::contains("≈ device read").not());
}
