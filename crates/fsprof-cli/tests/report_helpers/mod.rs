//! Helpers shared by the report/export tests (browser, exports, plots,
//! fleets): real profiles from real runs, and the external checkers
//! (Python parsers, Chromium) they hand output to.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn fsprof() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fsprof"))
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A real profile of a small multi-process workload that reads files,
/// stats and fails opens (so errors are non-zero), optionally in intervals.
pub fn record(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let mut cmd = fsprof();
    cmd.args(["run", "-q", "-o"]).arg(&out).args(extra).args([
        "--",
        "sh",
        "-c",
        "for i in 1 2 3; do find /usr/include -maxdepth 2 -name '*.h' | head -200 | xargs cat >/dev/null; \
         ls /nonexistent-fsprof-test 2>/dev/null; sleep 0.05; done",
    ]);
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "fsprof run failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A prerequisite a test cannot run without: fatal under CI, a loud
/// notice (not a silent pass) on a developer machine.
pub fn missing(what: &str, fix: &str) -> bool {
    let msg = format!("{what} is not available: {fix}");
    if in_ci() {
        panic!("{msg}");
    }
    eprintln!("SKIPPED (CI would fail): {msg}");
    true
}

/// A Python with `prometheus_client` and `opentelemetry-proto`: $FSPROF_PYTHON,
/// or the venv `.ci/run` makes in target/pyenv.
pub fn python() -> Option<PathBuf> {
    let candidate = std::env::var_os("FSPROF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/pyenv/bin/python3"));
    let ok = Command::new(&candidate)
        .args([
            "-c",
            "import prometheus_client, opentelemetry.proto, google.protobuf",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some(candidate)
    } else {
        missing(
            &format!("{} with prometheus-client and opentelemetry-proto", candidate.display()),
            "run .ci/run, or: python3 -m venv target/pyenv && target/pyenv/bin/pip install prometheus-client opentelemetry-proto",
        );
        None
    }
}

/// Runs one of tests/exporters/*.py and asserts it passed.
pub fn py_check(py: &Path, script: &str, args: &[&Path], extra: &[&str]) -> String {
    let o = Command::new(py)
        .arg(workspace().join("tests/exporters").join(script))
        .args(args)
        .args(extra)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{script} rejected the output:\n{}{}",
        out,
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Lines of stderr, for error-message assertions.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
