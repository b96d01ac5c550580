//! Every command the README shows is run, as written, in the order shown.
//!
//! The README's `sh` blocks are the only commands a new user copies. Each
//! block runs in a fresh directory, line by line, with this build's
//! `fsprof` first on PATH and `sudo` meaning "as we are" (the test runs as
//! root). A line ending in `# exit N` must exit N; every other line must
//! exit 0. Lines that install or build (they would take minutes, or change
//! the machine) are listed in `NOT_RUN` with the test that checks them
//! instead; a block the test does not know fails it, so a new command in
//! the README cannot go untested.

use std::path::Path;
use std::process::{Command, Stdio};

use fsprof_testkit::need::need_root;
use fsprof_testkit::{fsprof_path, workspace};

/// Lines not run here, and what checks them.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "./scripts/test-all",
        ".ci/run runs it (suite_rules::readme_lists_what_a_fresh_clone_needs)",
    ),
    (
        "cargo install --locked --path crates/fsprof-cli",
        "a release build of the workspace; CI builds the same crate",
    ),
    (
        "sudo install -m 0755 ~/.cargo/bin/fsprof ~/.cargo/bin/fsprof-render /usr/local/bin/",
        "copies the binaries cargo install made; would change the machine",
    ),
    (
        "sudo install -Dm644 dist/agent.toml /etc/fsprof/agent.toml && sudo install -m644 dist/fsprof-agent.service /etc/systemd/system/",
        "installs a service; agent lifecycle tests verify the unit (systemd-analyze) and run the agent from the settings file",
    ),
    (
        "sudo systemctl enable --now fsprof-agent",
        "starts a service; as the line above",
    ),
    (
        "fsprof pull --prometheus http://prom:9090 --from -14d --to -7d -o last-week.json",
        "needs a fleet's Prometheus; agent::prometheus pulls a range from a real Prometheus scraping a real agent and compares it with the agent's own profile",
    ),
    (
        "fsprof pull --prometheus http://prom:9090 --from -7d -o this-week.json",
        "as the line above",
    ),
    (
        "fsprof compare last-week.json this-week.json",
        "the two files come from the lines above; compare of two profiles is the first recipe's",
    ),
];

/// A block whose verdict depends on timing (`compare` of two runs made
/// just now) is run again, in a fresh directory, when it fails: a loaded
/// machine can make one warm run as slow as the cold one. It must pass
/// in one of three tries; compare's own false-alarm and detection rates
/// are measured by bench/compare_rates.py, not here.
const TRIES_OF_A_TIMED_BLOCK: usize = 3;

/// The README's `sh` blocks, each as its command lines.
fn sh_blocks(readme: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in readme.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap()),
            (Some(b), l) if !l.trim().is_empty() && !l.trim_start().starts_with('#') => {
                b.push(l.to_string())
            }
            _ => {}
        }
    }
    assert!(current.is_none(), "an sh block in the README is not closed");
    blocks
}

/// A line without its trailing comment (`cmd   # what it does`).
fn command_of(line: &str) -> &str {
    line.split_once(" #").map_or(line, |(c, _)| c).trim()
}

/// Whether a line is one of the `NOT_RUN` lines.
fn not_run(line: &str) -> bool {
    NOT_RUN.iter().any(|(l, _)| command_of(line) == *l)
}

/// The exit status a line promises (`# exit N`), 0 otherwise.
fn expected_exit(line: &str) -> i32 {
    line.rsplit_once("# exit ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Quick start builds with cargo; here the test's own build stands in.
fn as_run_here(line: &str) -> String {
    line.replace("cargo run --release -- ", "fsprof ")
}

fn run_line(dir: &Path, bin: &Path, line: &str) -> Result<(), String> {
    let script = format!("sudo() {{ \"$@\"; }}\n{}", as_run_here(line));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("bash: {e}"))?;
    let want = expected_exit(line);
    if o.status.code() == Some(want) {
        return Ok(());
    }
    Err(format!(
        "README line `{line}` exited {:?}, not {want}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    ))
}

/// Runs one block's lines in order in a fresh directory; a recipe that
/// mounted something must have unmounted it.
fn run_block(lines: &[&String], bin: &Path) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let _unmount = Unmount(dir.path());
    for line in lines {
        run_line(dir.path(), bin, line)?;
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let d = dir.path().to_string_lossy().into_owned();
    if mounts.contains(&d) {
        return Err(format!("a README recipe left a mount under {d}"));
    }
    Ok(())
}

/// Lazily unmounts whatever a recipe left mounted under its directory,
/// also when the test fails half-way through one.
struct Unmount<'a>(&'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let d = self.0.to_string_lossy().into_owned();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut points: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|p| p.starts_with(d.as_str()))
            .collect();
        // Deepest first, so that a mount inside another goes first.
        points.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for p in points {
            let _ = Command::new("umount").args(["-l", p]).status();
        }
    }
}

#[test]
#[ignore = "needs root"]
fn every_readme_command_runs_as_written() {
    need_root("the README's kernel, mount and discover recipes");
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(fsprof_path(), bin.path().join("fsprof")).unwrap();
    let mut ran = 0;
    for block in sh_blocks(&readme) {
        let lines: Vec<&String> = block.iter().filter(|line| !not_run(line)).collect();
        let timed = lines.iter().any(|l| l.contains("fsprof compare"));
        let tries = if timed { TRIES_OF_A_TIMED_BLOCK } else { 1 };
        let mut outcome = Err(String::new());
        for _ in 0..tries {
            outcome = run_block(&lines, bin.path());
            if outcome.is_ok() {
                break;
            }
        }
        if let Err(e) = outcome {
            panic!("{e}");
        }
        ran += lines.len();
    }
    assert!(ran >= 10, "only {ran} README commands found");
}

#[test]
fn every_readme_block_is_run_or_says_why_not() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let lines: Vec<String> = sh_blocks(&readme).into_iter().flatten().collect();
    for (l, why) in NOT_RUN {
        assert!(
            lines.iter().any(|x| command_of(x) == *l),
            "NOT_RUN lists `{l}` ({why}), which the README no longer has"
        );
    }
    assert!(
        readme.lines().count() <= 250,
        "the README is {} lines; the front page stays within 250 (move detail to docs/)",
        readme.lines().count()
    );
}

#[test]
fn the_exit_convention_is_read() {
    assert_eq!(expected_exit("fsprof compare a b   # exit 1: changed"), 1);
    assert_eq!(expected_exit("fsprof report a"), 0);
    assert_eq!(
        as_run_here("cargo run --release -- run -- true"),
        "fsprof run -- true"
    );
}
