//! The launcher against real programs: exit statuses, the shell's 126/127
//! rules, the held start, and what the command inherits.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use fsprof_core::profile::ExitStatus;
use fsprof_sys::process::{pid_exists, Child, LaunchError};
use fsprof_sys::StopSignals;

fn argv(a: &[&str]) -> Vec<OsString> {
    a.iter().map(OsString::from).collect()
}

fn run(a: &[&str]) -> Result<ExitStatus, LaunchError> {
    let mut c = Child::spawn(&argv(a), &[])?;
    Ok(c.wait().unwrap())
}

#[test]
fn exit_codes_and_signals_pass_through() {
    assert_eq!(run(&["true"]).unwrap(), ExitStatus::Code(0));
    assert_eq!(run(&["sh", "-c", "exit 3"]).unwrap(), ExitStatus::Code(3));
    assert_eq!(
        run(&["sh", "-c", "kill -TERM $$"]).unwrap(),
        ExitStatus::Signal(15)
    );
}

#[test]
fn a_missing_command_is_127_and_an_unrunnable_one_126() {
    for missing in ["/no/such/fsprof-program", "fsprof-no-such-program", ""] {
        let e = run(&[missing]).unwrap_err();
        assert!(matches!(e, LaunchError::NotFound(_)), "{missing}: {e}");
        assert_eq!(e.exit_code(), 127);
        assert!(e.to_string().ends_with("command not found"), "{e}");
    }
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "echo hi\n").unwrap();
    for what in [&text, dir.path()] {
        let e = run(&[what.to_str().unwrap()]).unwrap_err();
        assert_eq!(e.exit_code(), 126, "{}: {e}", what.display());
        assert!(e.to_string().contains("permission denied"), "{e}");
    }
    // A file found in PATH but not executable: "permission denied", as in
    // a shell, not "not found".
    let e = Child::spawn(
        &argv(&["notes.txt"]),
        &[("PATH".into(), dir.path().as_os_str().to_owned())],
    )
    .map(|_| ())
    .unwrap_err();
    assert!(matches!(e, LaunchError::NotExecutable(_)), "{e}");
}

#[test]
fn a_script_without_interpreter_line_runs_with_sh_like_execvp() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script");
    let out = dir.path().join("out");
    std::fs::write(&script, format!("echo \"$0 $1\" > {}\n", out.display())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let st = run(&[script.to_str().unwrap(), "arg"]).unwrap();
    assert_eq!(st, ExitStatus::Code(0));
    let said = std::fs::read_to_string(&out).unwrap();
    assert_eq!(said.trim(), format!("{} arg", script.display()));
}

fn status_field(file: &Path, name: &str) -> u64 {
    let text = std::fs::read_to_string(file).unwrap();
    let v = text
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .unwrap_or_else(|| panic!("no {name} in {text}"));
    u64::from_str_radix(v.trim(), 16).unwrap()
}

#[test]
fn the_command_gets_the_environment_and_clean_signal_state() {
    // fsprof blocks its stop signals and Rust ignores SIGPIPE; the command
    // must see neither.
    let _sigs = StopSignals::block();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("status");
    let env = [("FSPROF_TEST_VAR".into(), "hello world".into())];
    let script = format!(
        "cat /proc/self/status > {0}; echo \"$FSPROF_TEST_VAR\" > {0}.env",
        out.display()
    );
    let mut c = Child::spawn(&argv(&["sh", "-c", &script]), &env).unwrap();
    assert_eq!(c.wait().unwrap(), ExitStatus::Code(0));
    assert_eq!(status_field(&out, "SigBlk:"), 0);
    assert_eq!(
        status_field(&out, "SigIgn:") & (1 << (libc::SIGPIPE - 1)),
        0
    );
    let env = std::fs::read_to_string(dir.path().join("status.env")).unwrap();
    assert_eq!(env.trim(), "hello world");
    // The rest of fsprof's environment is passed on.
    let mut c = Child::spawn(
        &argv(&["sh", "-c", "test -n \"$PATH\" && test -n \"$HOME\""]),
        &[],
    )
    .unwrap();
    assert_eq!(c.wait().unwrap(), ExitStatus::Code(0));
}

/// The command's `envp` is fsprof's environment as std lists it, in its
/// order, with a variable fsprof sets replacing the inherited one (not
/// listed twice) and a new one after the rest: byte for byte, held or not.
#[test]
fn the_command_gets_fsprof_s_environment_with_what_fsprof_sets_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let env: Vec<(OsString, OsString)> = vec![
        ("HOME".into(), "/fsprof/set/home".into()),
        ("FSPROF_TEST_NEW".into(), "a=b c".into()),
    ];
    let mut want: Vec<u8> = Vec::new();
    for (k, v) in std::env::vars_os().filter(|(k, _)| k != "HOME") {
        want.extend_from_slice(k.as_encoded_bytes());
        want.push(b'=');
        want.extend_from_slice(v.as_encoded_bytes());
        want.push(0);
    }
    want.extend_from_slice(b"HOME=/fsprof/set/home\0FSPROF_TEST_NEW=a=b c\0");
    for held in [false, true] {
        let out = dir.path().join(format!("environ-{held}"));
        let cmd = argv(&["cp", "/proc/self/environ", out.to_str().unwrap()]);
        let mut c = if held {
            let mut c = Child::spawn_held(&cmd, &env).unwrap();
            c.release().unwrap();
            c
        } else {
            Child::spawn(&cmd, &env).unwrap()
        };
        assert_eq!(c.wait().unwrap(), ExitStatus::Code(0));
        let got = std::fs::read(&out).unwrap();
        assert!(
            got == want,
            "held {held}: the command's environment\n{}\nagainst\n{}",
            String::from_utf8_lossy(&got).replace('\0', "\n"),
            String::from_utf8_lossy(&want).replace('\0', "\n")
        );
    }
}

#[test]
fn a_held_command_waits_before_execve_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let mut c = Child::spawn_held(&argv(&["sh", "-c", &script]), &[]).unwrap();
    c.wait_parked();
    let syscall = std::fs::read_to_string(format!("/proc/{}/syscall", c.pid())).unwrap();
    assert!(
        syscall.starts_with(&format!("{} ", libc::SYS_read)),
        "{syscall}"
    );
    // Still our own image: no exec yet.
    let exe = std::fs::read_link(format!("/proc/{}/exe", c.pid())).unwrap();
    assert_eq!(exe, std::env::current_exe().unwrap());
    assert!(c.try_wait().is_none());
    assert!(!marker.exists());
    c.release().unwrap();
    assert_eq!(c.wait().unwrap(), ExitStatus::Code(0));
    assert!(marker.exists());
}

#[test]
fn a_held_command_that_is_never_released_is_killed() {
    let c = Child::spawn_held(&argv(&["sleep", "60"]), &[]).unwrap();
    let pid = c.pid();
    assert!(pid_exists(pid));
    drop(c);
    assert!(!pid_exists(pid), "the held child outlived its Child");
}

/// With or without a wait for the hold first (the child says it is
/// parked on the pipe its exec error comes on: that byte is not taken
/// for the error, nor its absence for a successful exec).
#[test]
fn exec_failure_after_the_hold_is_reported_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("prog");
    std::fs::write(&prog, "#!/no/such/interpreter\n").unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    for wait_parked in [false, true] {
        let mut c = Child::spawn_held(&argv(&[prog.to_str().unwrap()]), &[]).unwrap();
        if wait_parked {
            c.wait_parked();
        }
        let e = c.release().unwrap_err();
        assert_eq!(e.exit_code(), 127, "{e} (waited: {wait_parked})");
        assert!(c.try_wait().is_some(), "the failed child is reaped");
    }
}
