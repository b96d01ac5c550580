//! Helpers shared by the CLI's integration tests: the fsprof binary, test
//! programs compiled from `tests/programs/*.c`, profile loading.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fsprof_core::format::read_profile;
use fsprof_core::{OpStats, Profile};

pub fn fsprof() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fsprof"))
}

/// `fsprof run -o <dir>/profile.json -- args...`, returning the output and
/// the profile path.
pub fn run_profiled(dir: &Path, args: &[&str]) -> (Output, PathBuf) {
    let out = dir.join("profile.json");
    let output = fsprof()
        .args(["run", "-q", "-o"])
        .arg(&out)
        .arg("--")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run fsprof");
    (output, out)
}

pub fn load(path: &Path) -> Profile {
    read_profile(path).unwrap_or_else(|e| panic!("{e}"))
}

pub fn user_op<'a>(p: &'a Profile, op: &str) -> Option<&'a OpStats> {
    p.layer("user")?.op(op)
}

pub fn count(p: &Profile, op: &str) -> u64 {
    user_op(p, op).map(|o| o.post).unwrap_or(0)
}

/// Compiles `tests/programs/<name>.c` into `dir`.
pub fn compile(name: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(format!("{name}.c"));
    let exe = dir.join(name);
    let st = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(extra)
        .status()
        .expect("a C compiler (cc) is needed to build test programs");
    assert!(st.success(), "compiling {name}.c failed");
    exe
}

/// Path of a program the tests drive; under CI a missing one is a failure,
/// elsewhere the test says loudly that it could not run.
pub fn require(program: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let msg = format!("{program} is not installed; this test cannot run (install it: apt-get install {program})");
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED LOUDLY: {msg}");
    }
    found
}
