//! A run is never lost and never changes the command's exit status: an
//! unwritable output is refused before the command starts, a place that
//! cannot be written when the run ends falls back to $TMPDIR (and says
//! so), and `-` is standard output / input for every command. (A profile
//! that cannot be written anywhere keeps a failed command's status and
//! turns a success into 2: unit tests of `fsprof-capture`'s save and the
//! CLI's `exit_status`, and closed_stdout.rs.)

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use fsprof_testkit::*;

/// The one profile fsprof named itself in `dir` (the preload shim may be
/// installed there too when it is $TMPDIR).
fn only_file(dir: &Path) -> std::path::PathBuf {
    let files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

/// `cd /proc; fsprof run -- sh -c 'echo RAN; exit 3'`: the command runs,
/// its output and exit status are its own, and the profile goes to $TMPDIR
/// with a line saying where and why.
#[test]
fn an_unwritable_current_directory_sends_the_profile_to_tmpdir() {
    let tmp = tempfile::tempdir().unwrap();
    let o = fsprof()
        .args(["run", "-q", "--", "sh", "-c", "echo RAN; exit 3"])
        .current_dir("/proc")
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(stdout(&o), "RAN\n");
    let file = only_file(tmp.path());
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("fsprof-run-sh-") && name.ends_with(".json"),
        "{name}"
    );
    assert_eq!(
        load(&file).meta.exit,
        Some(fsprof_core::profile::ExitStatus::Code(3))
    );
    let err = stderr(&o);
    assert!(
        err.contains("cannot write fsprof-run-sh-") && err.contains("in /proc"),
        "{err}"
    );
    assert!(
        err.contains(&format!("the profile went to {} instead", file.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!("profile written to {}", file.display())),
        "{err}"
    );
}

/// `-o FILE` in a directory that cannot be written (even by root) is
/// refused before anything runs.
#[test]
fn an_unwritable_output_is_refused_before_the_command_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let o = fsprof()
        .args(["run", "-o", "/sys/p.json", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(!marker.exists(), "the command ran");
    assert_eq!(
        stderr(&o).trim(),
        "fsprof: cannot write /sys/p.json: cannot create files in /sys: Permission denied (os error 13)"
    );
}

/// `-o DIR/FILE` whose directory disappears during the run: the profile
/// goes to $TMPDIR, the command's status stands.
#[test]
fn an_output_directory_removed_during_the_run_falls_back_to_tmpdir() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    fs::create_dir(&sub).unwrap();
    let o = fsprof()
        .args(["run", "-q", "-o"])
        .arg(sub.join("p.json"))
        .args(["--", "sh", "-c", "rmdir \"$0\"; exit 4"])
        .arg(&sub)
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let file = only_file(tmp.path());
    load(&file);
    assert!(
        stderr(&o).contains(&format!("cannot write {}", sub.join("p.json").display())),
        "{}",
        stderr(&o)
    );
}

/// The default name is the one docs/commands.md states and `.gitignore`
/// ignores: `fsprof-<kind>-<program>-<time>.json`.
#[test]
fn the_default_name_is_the_one_gitignore_ignores() {
    let dir = tempfile::tempdir().unwrap();
    let o = fsprof_in(dir.path(), &["run", "-q", "--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let name = only_file(dir.path())
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // fsprof-run-true-20261123T190102.json
    let stamp = name
        .strip_prefix("fsprof-run-true-")
        .and_then(|s| s.strip_suffix(".json"))
        .unwrap_or_else(|| panic!("{name}"));
    assert!(stamp.len() == 15 && stamp.as_bytes()[8] == b'T', "{name}");
    let ignore = fs::read_to_string(workspace().join(".gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "fsprof-*.json"), "{ignore}");
    let readme = fs::read_to_string(workspace().join("docs/commands.md")).unwrap();
    assert!(readme.contains("`fsprof-<command>-<program>-<UTC time>.json`"));
}

/// `-o -` writes the profile to standard output and `-` reads one from
/// standard input, for every command that takes a profile.
#[test]
fn dash_is_standard_output_and_input_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let o = fsprof()
        .args(["run", "-q", "-o", "-", "--", "cat", "/etc/hostname"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // The command's own output comes first, then the profile.
    let host = fs::read(Path::new("/etc/hostname")).unwrap();
    let json = &o.stdout[host.len()..];
    assert!(!dir.path().join("-").exists() && !Path::new("-").exists());
    assert!(stderr(&o).contains("profile written to standard output"));
    let p = fsprof_core::format::parse_profile(json, Path::new("stdout")).unwrap();
    assert!(count(&p, "read") > 0, "the profile counts cat's reads");

    let file = dir.path().join("p.json");
    fs::write(&file, json).unwrap();
    let with_stdin = |args: &[&str]| {
        let mut c = fsprof()
            .args(args)
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(json).unwrap();
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        o
    };
    for (args, from_file) in [
        (vec!["report", "-"], vec!["report", "p.json"]),
        (
            vec!["report", "--format", "json", "-"],
            vec!["report", "--format", "json", "p.json"],
        ),
        (
            vec!["export", "--format", "prometheus", "-"],
            vec!["export", "--format", "prometheus", "p.json"],
        ),
        (vec!["check", "-"], vec!["check", "p.json"]),
    ] {
        let o = with_stdin(&args);
        let f = fsprof()
            .args(&from_file)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(
            stdout(&o),
            stdout(&f).replace("p.json:", "standard input:"),
            "{args:?}"
        );
    }
    // compare and merge take one input from stdin beside files.
    let o = with_stdin(&["compare", "-", "p.json"]);
    assert!(stdout(&o).contains("A = standard input"), "{}", stdout(&o));
    let o = with_stdin(&["merge", "-", "p.json", "-o", "-"]);
    let merged = fsprof_core::format::parse_profile(&o.stdout, Path::new("stdout")).unwrap();
    assert_eq!(count(&merged, "read"), 2 * count(&p, "read"));
    // Two inputs cannot both be standard input.
    let o = fsprof().args(["compare", "-", "-"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("only one input can be standard input"));
    // plot writes an image to stdout when told which format.
    let o = with_stdin(&["plot", "-", "--op", "read", "--format", "svg", "-o", "-"]);
    assert!(
        stdout(&o).starts_with("<svg"),
        "{}",
        &stdout(&o)[..50.min(o.stdout.len())]
    );
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "only p.json");
    // Only one profile argument can be standard input.
}

/// An error's cause is printed once, not once per layer that wraps it.
#[test]
fn error_causes_are_printed_once() {
    let o = fsprof()
        .args(["report", "/nonexistent/p.json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "fsprof: cannot read /nonexistent/p.json: No such file or directory (os error 2)\n"
    );
}
