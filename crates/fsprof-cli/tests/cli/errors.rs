//! Bad input gets one clear line on stderr and a non-zero exit, never a
//! panic, and nothing the user had is overwritten.

use std::fs;

use fsprof_testkit::*;

/// `fsprof ARGS...` exits 2 and its standard error, returned, says `says`.
#[track_caller]
fn refused(args: &[&str], says: &str) -> String {
    let out = fsprof().args(args).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?} does not say {says:?}: {err}");
    err
}

fn assert_one_clean_line(out: &std::process::Output) {
    let err = stderr(out);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.starts_with("fsprof: ") || err.starts_with("error: "),
        "{err}"
    );
}

#[test]
fn unknown_option_is_a_usage_error() {
    refused(&["run", "--frobnicate", "--", "true"], "--frobnicate");
}

/// As strace and perf do: an unknown flag before the command is a usage
/// error for `run` and `kernel` alike (not a command named `--typo`),
/// the command starts at the first word that is not an option (or after
/// `--`), and `kernel -p PID` is `--pid PID`. All decided before anything
/// runs, so no root is needed to check it.
#[test]
fn unknown_flags_before_the_command_are_refused_by_run_and_kernel() {
    for sub in ["run", "kernel"] {
        let out = fsprof()
            .args([sub, "--typo-flag", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{sub}");
        let err = stderr(&out);
        assert!(
            err.starts_with("fsprof: unexpected argument '--typo-flag' found"),
            "{sub}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{sub}: {err}");
    }
    // The command's own flags are its own, with or without `--`.
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["run", "-q", "-o", "a.json", "sh", "-c", "exit 3", "--force"][..],
        &[
            "run", "-q", "-o", "b.json", "--", "sh", "-c", "exit 3", "--force",
        ][..],
    ] {
        let out = fsprof()
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", stderr(&out));
    }
    refused(
        &["kernel", "-p", "x"],
        "invalid value 'x' for '--pid <PID>'",
    );
}

/// `trace` takes its options as `run` and `kernel` do: an unknown flag
/// (or fsprof's own `-q`) before the command is fsprof's, not a program
/// named `--typo` or `-q` that then exits 127.
#[test]
fn trace_refuses_unknown_flags_before_the_command() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["trace", "--typo", "--", "true"][..],
        &["trace", "--typo", "true"][..],
    ] {
        let out = fsprof_in(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with("fsprof: unexpected argument '--typo' found"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0, "nothing ran");
    // -q is trace's --quiet: the command is `true`, and no report is printed.
    let out = fsprof_in(dir.path(), &["trace", "-q", "-o", "t.trace", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("layer user"), "{}", stderr(&out));
    assert!(dir.path().join("t.trace").exists());
    // Without -q the report follows the capture, as `run` prints it.
    let out = fsprof_in(
        dir.path(),
        &["trace", "-f", "-o", "t.trace", "cat", "/etc/hostname"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("layer user"), "{}", stderr(&out));
    // The command's own flags stay its own, with or without `--`.
    let out = fsprof_in(
        dir.path(),
        &[
            "trace", "-q", "-f", "-o", "t.trace", "sh", "-c", "exit 3", "--force",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
}

/// `kernel --format` prints the probe report as JSON; with a capture it
/// is refused rather than ignored, and the probe report takes no capture
/// option.
#[test]
fn kernel_format_belongs_to_the_probe_report() {
    refused(
        &["kernel", "--format", "json", "--", "true"],
        "--probe-report",
    );
    refused(
        &["kernel", "--probe-report", "-p", "1"],
        "cannot be used with",
    );
    refused(
        &["kernel", "--probe-report", "--layer", "fs"],
        "cannot be used with",
    );
}

#[test]
fn missing_command_is_a_usage_error() {
    refused(&["run"], "CMD");
}

#[test]
fn bad_resolution_and_interval_are_refused() {
    refused(
        &["run", "--resolution", "3", "--", "true"],
        "1, 2, 4, 8, 16",
    );
    refused(&["run", "--interval", "soon", "--", "true"], "'soon'");
    // One minimum, one message, whatever the value below it and the command.
    for (sub, v) in [
        ("run", "0"),
        ("run", "1us"),
        ("run", "0.5ms"),
        ("kernel", "0"),
    ] {
        let want = format!(
            "invalid value '{v}' for '--interval <DURATION>': an interval must be at least 1ms"
        );
        refused(&[sub, "--interval", v, "--", "true"], &want);
    }
}

#[test]
fn nonexistent_program_exits_127_like_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let (out, path) = run_profiled(dir.path(), &["/no/such/program-fsprof"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(
        stderr(&out).contains("command not found"),
        "{}",
        stderr(&out)
    );
    assert_one_clean_line(&out);
    assert!(!path.exists(), "no profile for a command that never ran");
}

#[test]
fn non_executable_file_exits_126() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("script.txt");
    fs::write(&f, "echo hi\n").unwrap();
    let (out, _) = run_profiled(dir.path(), &[f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(126));
}

#[test]
fn existing_output_is_not_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("keep.json");
    fs::write(&out_path, "precious").unwrap();
    refused(
        &["run", "-o", out_path.to_str().unwrap(), "--", "true"],
        "--force",
    );
    assert_eq!(fs::read_to_string(&out_path).unwrap(), "precious");
    let out = fsprof()
        .args(["run", "-q", "-f", "-o"])
        .arg(&out_path)
        .args(["--", "cat", "/etc/hostname"])
        .output()
        .unwrap();
    assert!(out.status.success());
    load(&out_path);
}

#[test]
fn default_output_name_never_clobbers() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let out = fsprof_in(dir.path(), &["run", "-q", "--", "true"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stderr(&out).contains("profile written to fsprof-run-true-"));
    }
    let n = fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(n, 2, "two runs, two files");
}

fn profile_file(dir: &std::path::Path) -> std::path::PathBuf {
    let (out, path) = run_profiled(dir, &["cat", "/etc/hostname"]);
    assert!(out.status.success());
    path
}

#[test]
fn truncated_profile_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = profile_file(dir.path());
    let text = fs::read(&path).unwrap();
    fs::write(&path, &text[..text.len() / 2]).unwrap();
    for cmd in ["report", "check"] {
        let out = fsprof().arg(cmd).arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        assert!(stderr(&out).contains("truncated"), "{}", stderr(&out));
        assert_one_clean_line(&out);
        assert_eq!(stderr(&out).lines().count(), 1);
    }
}

#[test]
fn garbage_and_foreign_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.json");
    fs::write(&junk, b"\x00\x01not json").unwrap();
    let junk_arg = junk.to_str().unwrap();
    refused(&["report", junk_arg], "malformed");
    fs::write(&junk, br#"{"some": "other json"}"#).unwrap();
    refused(&["report", junk_arg], "not an fsprof profile");
    let missing = dir.path().join("missing.json");
    refused(&["report", missing.to_str().unwrap()], "cannot read");
}

#[test]
fn unknown_format_version_names_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = profile_file(dir.path());
    let text = fs::read_to_string(&path)
        .unwrap()
        .replace("\"format_version\": 1", "\"format_version\": 99");
    fs::write(&path, text).unwrap();
    let err = refused(&["report", path.to_str().unwrap()], "version 99");
    assert!(err.contains("version 1"), "{err}");
}

#[test]
fn statically_linked_program_is_explained_not_reported_empty() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("static_hello", dir.path(), &["-static"]);
    let out = fsprof()
        .args(["run", "-o"])
        .arg(dir.path().join("p.json"))
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"static hello\n");
    let err = stderr(&out);
    assert!(
        err.contains("statically linked") && err.contains("fsprof kernel"),
        "{err}"
    );
    assert!(!err.contains("layer user"), "no empty report: {err}");
}

/// `-q` leaves out what stands for the report (a command that made no
/// call, `true`) and keeps the warning that no process could be seen (a
/// statically linked program).
#[test]
fn quiet_leaves_out_notices_not_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("static_hello", dir.path(), &["-static"]);
    let run = |quiet: bool, cmd: &std::ffi::OsStr| {
        let mut c = fsprof();
        c.arg("run");
        if quiet {
            c.arg("-q");
        }
        let out = c
            .arg("-f")
            .arg("-o")
            .arg(dir.path().join("p.json"))
            .arg("--")
            .arg(cmd)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stderr(&out)
    };
    let notice = "made no file-system call";
    assert!(run(false, "true".as_ref()).contains(notice));
    let quiet = run(true, "true".as_ref());
    assert!(!quiet.contains(notice), "{quiet}");
    let warning = "fsprof: warning: no process of";
    assert!(run(true, exe.as_os_str()).contains(warning));
}

/// `kernel --help` describes the layers as they are today (fentry for the
/// fs layer, the block layer system-wide) and says how it exits.
#[test]
fn kernel_help_is_current() {
    let out = fsprof().args(["kernel", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let fs = help
        .lines()
        .find(|l| l.trim_start().starts_with("- fs:"))
        .unwrap();
    assert!(fs.contains("fentry/fexit"), "{fs}");
    let block = help
        .lines()
        .skip_while(|l| !l.contains("- block:"))
        .take(2)
        .collect::<String>();
    assert!(block.contains("system-wide"), "{block}");
    assert!(help.contains("-p, --pid <PID>"), "{help}");
    assert!(help.contains("130 after Ctrl-C"), "{help}");
}

/// `calibrate` keeps the rule every writer keeps: its default file (and an
/// explicit `-o FILE`) is not replaced without `--force`, and it says so
/// before measuring anything.
#[test]
fn calibrate_replaces_no_file_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cfg");
    let default = cfg.join("fsprof/calibration.json");
    fs::create_dir_all(default.parent().unwrap()).unwrap();
    fs::write(&default, "precious").unwrap();
    let out = fsprof()
        .env("XDG_CONFIG_HOME", &cfg)
        .args(["calibrate", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_one_clean_line(&out);
    assert_eq!(
        stderr(&out),
        format!(
            "fsprof: {} already exists; pass --force to replace it or -o to write another file\n",
            default.display()
        )
    );
    let explicit = dir.path().join("cal.json");
    fs::write(&explicit, "mine").unwrap();
    let out = fsprof()
        .env("XDG_CONFIG_HOME", &cfg)
        .args(["calibrate", "-o"])
        .arg(&explicit)
        .args(["--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(fs::read_to_string(&default).unwrap(), "precious");
    assert_eq!(fs::read_to_string(&explicit).unwrap(), "mine");
    // Refused before measuring: no scratch file was left in --dir.
    let mut left: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["cal.json", "cfg"]);
}
