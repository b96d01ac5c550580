//! `fsprof ... >&-`: a standard output the user closed. The runtime puts
//! /dev/null there before `main`, so without care the profile would vanish
//! with "profile written to standard output" and exit 0. Instead `-o -`
//! (and `-o /dev/stdout`) is refused before the command runs, a profile
//! lost after the run (a full device) turns a success into exit 2, and the
//! command fsprof starts gets its stdout closed, as it would without
//! fsprof.

use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

use fsprof_testkit::{fsprof, stderr};

/// `cmd` with its standard output closed (not /dev/null: closed).
fn closed_stdout(mut cmd: Command) -> Output {
    // SAFETY: close(2) is async-signal-safe; only the child's fd 1 closes.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(1);
            Ok(())
        });
    }
    cmd.output().unwrap()
}

#[test]
fn a_closed_stdout_is_refused_before_the_command_runs() {
    let d = tempfile::tempdir().unwrap();
    let ran = d.path().join("ran");
    for out in ["-", "/dev/stdout", "/proc/self/fd/1"] {
        let mut c = fsprof();
        c.args(["run", "-q", "-o", out, "--", "touch"]).arg(&ran);
        let o = closed_stdout(c);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "-o {out}: {err}");
        assert!(
            err.contains("standard output was closed when fsprof started"),
            "-o {out}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(!ran.exists(), "-o {out}: the command ran");
    }
    // A report to a closed stdout is an error too, not a silent success.
    let p = d.path().join("p.json");
    let o = fsprof()
        .args(["run", "-q", "-o"])
        .arg(&p)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut c = fsprof();
    c.arg("report").arg(&p);
    let o = closed_stdout(c);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// The command sees the closed descriptor it was given, not fsprof's
/// /dev/null.
#[test]
fn the_command_gets_its_stdout_closed_as_without_fsprof() {
    let d = tempfile::tempdir().unwrap();
    let script = "if test -e /proc/$$/fd/1; then echo open > st; else echo closed > st; fi";
    let mut c = Command::new("sh");
    c.args(["-c", script]).current_dir(d.path());
    assert!(closed_stdout(c).status.success());
    assert_eq!(
        std::fs::read_to_string(d.path().join("st")).unwrap(),
        "closed\n"
    );
    std::fs::remove_file(d.path().join("st")).unwrap();
    let mut c = fsprof();
    c.args(["run", "-q", "-o", "p.json", "--", "sh", "-c", script])
        .current_dir(d.path());
    let o = closed_stdout(c);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(d.path().join("st")).unwrap(),
        "closed\n",
        "under fsprof the command's stdout was open"
    );
}

/// A profile that could not be written anywhere after the command ran:
/// a command that succeeded makes fsprof exit 2 (the run's product is
/// gone); a command that failed keeps its own status.
#[test]
fn a_profile_lost_after_the_run_is_not_a_success() {
    for (cmd, want) in [("exit 0", 2), ("exit 7", 7)] {
        let full = std::fs::File::options()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = fsprof()
            .args(["run", "-q", "-o", "-", "--", "sh", "-c", cmd])
            .stdout(full)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(want), "{cmd}: {err}");
        assert!(err.contains("standard output"), "{err}");
        assert!(!err.contains("profile written"), "{err}");
    }
}
