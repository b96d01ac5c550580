//! Profiles for tests: built by hand with known buckets, or recorded by
//! `fsprof run` from a real workload; and reading them back.

use std::path::{Path, PathBuf};
use std::process::Output;

use fsprof_core::format::{read_profile, write_profile};
use fsprof_core::profile::Meta;
use fsprof_core::{OpStats, Profile};

/// A calibration file (JSON) of one stable characteristic: device reads
/// of 2.5–4 ms (median 3 ms), which bucket 21 (2.10–4.19 ms) matches.
pub const CALIBRATION_DEVICE_READ_3MS: &str = r#"{"format":"fsprof-calibration","format_version":2,"fsprof_version":"t",
    "characteristics":[{"name":"device_read","label":"device read",
    "median_ns":3000000,"p10_ns":2500000,"p90_ns":4000000,"samples":9,
    "rounds":[3000000,3100000]}]}"#;

/// An op with `count` calls in each listed bucket (`(index, count)`),
/// each call taking the bucket's middle (1.5 × 2^index ns).
pub fn op(name: &str, buckets: &[(i32, u64)]) -> OpStats {
    let mut o = OpStats::new(name);
    for &(i, c) in buckets {
        o.histogram.add_to(Some(i), c);
        o.pre += c;
        o.post += c;
        o.total_ns += c * (3u64 << i) / 2;
    }
    o
}

/// An op of `calls` calls taking `total_ns` in all, every call in bucket
/// 10: for tests of counts, totals and shares rather than of shapes.
pub fn op_total(name: &str, calls: u64, total_ns: u64) -> OpStats {
    let mut o = OpStats::new(name);
    (o.pre, o.post, o.total_ns) = (calls, calls, total_ns);
    o.histogram.add_to(Some(10), calls);
    o
}

/// A profile of these layers, in order, each holding its ops as given.
pub fn profile_layers(layers: &[(&str, Vec<OpStats>)]) -> Profile {
    let mut p = Profile::new(Meta::default());
    for (l, ops) in layers {
        p.layer_mut(l).ops.extend(ops.iter().cloned());
    }
    p
}

/// A profile whose `layer` holds `ops`, at one bucket per power of two.
pub fn profile_of(layer: &str, ops: Vec<OpStats>) -> Profile {
    let mut p = Profile::new(Meta {
        tool: "test".into(),
        ..Default::default()
    });
    p.layer_mut(layer).ops = ops;
    p.layer_mut(layer).normalize();
    p
}

/// Writes `p` to `dir/name`.
pub fn write(dir: &Path, name: &str, p: &Profile) -> PathBuf {
    let path = dir.join(name);
    write_profile(&path, p, false).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// `fsprof run -q -o <dir>/profile.json -- args...` in `dir`.
pub fn run_profiled(dir: &Path, args: &[&str]) -> (Output, PathBuf) {
    let out = dir.join("profile.json");
    (capture_in(dir, &["run", "-q"], &out, args), out)
}

/// `fsprof SUB... -o OUT -- args...` in `dir`: any capture (`run`,
/// `kernel`, `trace`) of a command.
pub fn capture_in(dir: &Path, sub: &[&str], out: &Path, args: &[&str]) -> Output {
    crate::fsprof()
        .args(sub)
        .arg("-o")
        .arg(out)
        .arg("--")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running fsprof")
}

/// A real profile (`dir/name`) of a small multi-process workload that
/// reads files, stats and fails opens (so errors are non-zero); `extra`
/// goes to `fsprof run` (e.g. `--interval 50ms`).
pub fn record(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let o = crate::fsprof()
        .args(["run", "-q", "-o"])
        .arg(&out)
        .args(extra)
        .args([
            "--",
            "sh",
            "-c",
            "for i in 1 2 3; do find /usr/include -maxdepth 2 -name '*.h' | head -200 | xargs cat >/dev/null; \
             ls /nonexistent-fsprof-test 2>/dev/null; sleep 0.05; done",
        ])
        .output()
        .expect("running fsprof");
    assert!(
        o.status.success(),
        "fsprof run failed: {}",
        crate::stderr(&o)
    );
    out
}

pub fn load(path: &Path) -> Profile {
    read_profile(path).unwrap_or_else(|e| panic!("{e}"))
}

/// The user layer's `op`, if it was called.
pub fn user_op<'a>(p: &'a Profile, op: &str) -> Option<&'a OpStats> {
    p.layer("user")?.op(op)
}

/// Returned calls of the user layer's `op` (0 if never called).
pub fn count(p: &Profile, op: &str) -> u64 {
    user_op(p, op).map(|o| o.post).unwrap_or(0)
}

/// Writes a profile whose user layer holds `ops` to `dir/name`.
pub fn write_user_profile(dir: &Path, name: &str, ops: Vec<OpStats>) -> PathBuf {
    write(dir, name, &profile_of("user", ops))
}
