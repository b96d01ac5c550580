//! What fsprof's tests share, so that each test binary does not carry its
//! own copy: the `fsprof` binary ([`fsprof`]), profiles built by hand or
//! recorded from real runs ([`profiles`]), C test programs ([`programs`]),
//! and the one rule for tests that need more than cargo ([`need`]).
//!
//! The rule, in short: a test that needs root or a program from outside
//! the Rust toolchain is marked `#[ignore = "needs ..."]`, so `cargo test`
//! and `cargo nextest run` count it as ignored/skipped in their summaries
//! instead of passing it; `./scripts/test-all` (what CI runs) installs
//! what such tests need and runs them too. A test that runs never skips:
//! a missing prerequisite is a failure that says what to install.

pub mod buckets;
pub mod exporters;
pub mod need;
pub mod paths;
pub mod profiles;
pub mod programs;
pub mod samples;
pub mod serve;
pub mod traces;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use buckets::bucket_probe_values;
pub use exporters::py_check;
pub use need::{
    in_ci, missing, need_file, need_machine, need_playwright, need_program, need_python_parsers,
    need_root, which, Machine,
};
pub use paths::{canonical_tempdir, disk_tempdir, target_dir, workspace};
pub use profiles::{
    capture_in, count, load, op, profile_of, record, run_profiled, user_op, write,
    write_user_profile,
};
pub use programs::{
    compile, compile_source, followed_tree, under_followed_tree, unfollowed_warnings,
};
pub use serve::{metrics_addr, serve_live, Live};
pub use traces::HandTrace;

/// The `fsprof` binary cargo built for these tests. nextest passes its
/// path at run time; `cargo test` does not, so it is found next to the
/// test binary (`<target>/<profile>/deps/..`), as cargo lays it out.
pub fn fsprof_path() -> PathBuf {
    if let Some(p) = std::env::var_os("CARGO_BIN_EXE_fsprof") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("a test binary under <target>/<profile>/deps");
    let bin = profile_dir.join("fsprof");
    assert!(
        bin.is_file(),
        "{} was not built: run the tests of the fsprof package (cargo test -p fsprof)",
        bin.display()
    );
    bin
}

/// `fsprof` as a test runs it: with a configuration directory that does
/// not exist, so a calibration the developer made (`fsprof calibrate`)
/// does not label the peaks a test looks at. Tests of the configuration
/// set `XDG_CONFIG_HOME` themselves.
pub fn fsprof() -> Command {
    let mut c = Command::new(fsprof_path());
    c.env("XDG_CONFIG_HOME", "/nonexistent-fsprof-test");
    c
}

/// `strace OPTS -o DIR/strace.log fsprof ARGS`, fsprof run as [`fsprof`]
/// runs it: its output and what strace logged (strace missing fails the
/// test, [`need_program`]).
pub fn strace_fsprof<S: AsRef<std::ffi::OsStr>>(
    dir: &Path,
    opts: &[&str],
    args: &[S],
) -> (Output, String) {
    let strace = need_program("strace", "strace");
    let log = dir.join("strace.log");
    let o = Command::new(strace)
        .args(opts)
        .arg("-o")
        .arg(&log)
        .arg(fsprof_path())
        .args(args)
        .env("XDG_CONFIG_HOME", "/nonexistent-fsprof-test")
        .output()
        .unwrap();
    let seen = std::fs::read_to_string(&log).unwrap_or_default();
    (o, seen)
}

/// `fsprof ARGS -- sh -c CMD` in `dir`, in a private mount namespace
/// whose /dev/shm is a 1 MiB tmpfs with `free_kib` left (as root, with
/// unshare): the command, for the caller to add its environment to.
pub fn in_small_shm(dir: &Path, free_kib: u32, args: &[&str], cmd: &str) -> Command {
    need_root("mounts a small tmpfs on /dev/shm in a private namespace");
    need_program("unshare", "util-linux");
    let fill = 1024 - free_kib;
    let script = format!(
        "mount -t tmpfs -o size=1m fsprof-test /dev/shm && \
         dd if=/dev/zero of=/dev/shm/fill bs=1k count={fill} 2>/dev/null; \
         exec \"$0\" \"$@\" -- sh -c '{cmd}'"
    );
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", &script])
        .arg(fsprof_path())
        .args(args)
        .env("XDG_CONFIG_HOME", "/nonexistent-fsprof-test")
        .current_dir(dir);
    c
}

/// `fsprof report --format html -o HTML PROFILE`: fails the test unless
/// it exits 0; the page it wrote.
#[track_caller]
pub fn html_report(profile: &Path, html: &Path) -> String {
    let mut report = fsprof();
    report.args(["report", "--format", "html", "-o"]);
    succeeds(report.arg(html).arg(profile));
    std::fs::read_to_string(html).unwrap_or_else(|e| panic!("{}: {e}", html.display()))
}

/// `fsprof export --format FORMAT [-o OUT] PROFILE`, whatever its status.
pub fn export(format: &str, profile: &Path, out: Option<&Path>) -> Output {
    let mut c = fsprof();
    c.args(["export", "--format", format]);
    if let Some(out) = out {
        c.arg("-o").arg(out);
    }
    c.arg(profile).output().expect("running fsprof")
}

/// `fsprof ARGS...` run in `dir`, whatever its status.
pub fn fsprof_in(dir: &Path, args: &[&str]) -> Output {
    fsprof()
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running fsprof")
}

/// Standard error as text, for messages in assertions.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `cmd`; fails the test, naming the command and quoting its
/// standard error, unless it exits 0.
#[track_caller]
pub fn succeeds(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?}: {}", stderr(&o));
    o
}

/// Fails the test, quoting the standard error, unless `o` exited 0.
#[track_caller]
pub fn assert_ok(o: &Output) {
    assert!(o.status.success(), "{}", stderr(o));
}

/// Fails the test, listing `notes`, unless one of them says `what`.
#[track_caller]
pub fn assert_noted(notes: &[String], what: &str) {
    assert!(
        notes.iter().any(|n| n.contains(what)),
        "no note says {what:?}: {notes:?}"
    );
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
