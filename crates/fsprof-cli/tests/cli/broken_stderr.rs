//! A broken standard error (a full device, a pipe nobody reads) never
//! changes fsprof's exit status, never panics and never stops the command
//! from running: diagnostics are dropped, the work is done.

use std::path::Path;
use std::process::{ExitStatus, Stdio};

use fsprof_testkit::{fsprof, workspace};

/// Runs fsprof with `args`, its stderr `/dev/full` or a pipe whose reader
/// has gone.
fn with_broken_stderr(args: &[&str], dir: &Path, how: &str) -> ExitStatus {
    let mut c = fsprof();
    c.args(args).current_dir(dir).stdout(Stdio::null());
    match how {
        "full" => c
            .stderr(
                std::fs::File::options()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            )
            .status()
            .unwrap(),
        _ => {
            let mut child = c.stderr(Stdio::piped()).spawn().unwrap();
            drop(child.stderr.take());
            child.wait().unwrap()
        }
    }
}

/// `fsprof run -f -o p.json [extra] -- sh -c 'touch ran; exit 7'` in
/// `dir`, its stderr broken as `how` says.
fn run_exit_7(dir: &Path, extra: &[&str], how: &str) -> ExitStatus {
    let mut args = vec!["run", "-f", "-o", "p.json"];
    args.extend(extra);
    args.extend(["--", "sh", "-c", "touch ran; exit 7"]);
    with_broken_stderr(&args, dir, how)
}

#[test]
fn the_command_status_stands_whatever_stderr_is() {
    let dir = tempfile::tempdir().unwrap();
    for how in ["full", "pipe"] {
        let st = run_exit_7(dir.path(), &[], how);
        assert_eq!(st.code(), Some(7), "stderr {how}: was 101 (a panic)");
        assert!(dir.path().join("p.json").exists(), "the profile is written");
        std::fs::remove_file(dir.path().join("ran")).expect("the command ran");
    }
}

#[test]
fn serving_metrics_with_a_broken_stderr_still_runs_the_command() {
    let dir = tempfile::tempdir().unwrap();
    for how in ["full", "pipe"] {
        let st = run_exit_7(dir.path(), &["--serve-metrics", "127.0.0.1:0"], how);
        assert_eq!(st.code(), Some(7), "stderr {how}");
        std::fs::remove_file(dir.path().join("ran")).expect("the command ran");
    }
}

#[test]
fn an_error_with_a_broken_stderr_is_still_status_2() {
    let dir = tempfile::tempdir().unwrap();
    for how in ["full", "pipe"] {
        let st = with_broken_stderr(&["report", "no-such.json"], dir.path(), how);
        assert_eq!(st.code(), Some(2), "stderr {how}");
    }
}

/// No `eprintln!`/`eprint!` in fsprof's own code outside tests: they panic
/// on a broken stderr (`fsprof_sys::diag!` does not).
#[test]
fn no_panicking_stderr_macros_in_the_sources() {
    let mut offenders = Vec::new();
    let crates = workspace().join("crates");
    for krate in std::fs::read_dir(&crates).unwrap().flatten() {
        let name = krate.file_name().to_string_lossy().into_owned();
        if name == "fsprof-testkit" {
            continue; // test code throughout
        }
        let mut stack = vec![krate.path().join("src")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    // Unit tests follow `#[cfg(test)]` at the end of a file.
                    let code = text.split("#[cfg(test)]").next().unwrap_or("");
                    for (n, line) in code.lines().enumerate() {
                        let l = line.trim_start();
                        if !l.starts_with("//")
                            && (l.contains("eprintln!(") || l.contains("eprint!("))
                        {
                            offenders.push(format!("{}:{}", p.display(), n + 1));
                        }
                    }
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "use fsprof_sys::diag! instead of eprintln! at {offenders:?}"
    );
}
