//! The launch: fsprof makes the profile's file while the command starts
//! (on the other CPU), unseen by the command. (That fsprof gets its CPU
//! mask back: `cli::startup`.)

use std::os::unix::process::ExitStatusExt;

use fsprof_testkit::{load, stderr};

/// Without `-o`, the profile's file is made while the command runs, but
/// unnamed: the command sees nothing new in its directory, and the
/// profile then appears whole under the default name (`-2` when that is
/// taken), with 0666 less the umask.
#[test]
fn the_default_profile_file_is_unseen_while_the_command_runs() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    for round in 1..=2 {
        let o = fsprof_testkit::fsprof()
            .args(["run", "-q", "--", "ls", "-a"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let listed = String::from_utf8_lossy(&o.stdout).into_owned();
        let mut files: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(files.len(), round, "{files:?}");
        assert_eq!(
            listed.lines().count(),
            2 + round - 1,
            "the command saw: {listed}"
        );
        let newest = dir.path().join(files.last().unwrap());
        assert!(
            files.iter().all(|f| f.starts_with("fsprof-run-ls-")),
            "{files:?}"
        );
        load(&newest);
        let mode = std::fs::metadata(&newest).unwrap().permissions().mode();
        assert_eq!(mode & 0o002, 0, "never world-writable");
    }
}

/// While the command runs, fsprof does not ask the kernel whether its own
/// child exists (its `wait4` already watches it, and an unreaped child's
/// pid is always there): a `kill(pid, 0)` at every wake-up, every 5 ms,
/// was one of the two. strace of fsprof's own thread over a command that
/// sleeps 0.3 s sees the command cloned and never sent signal 0; the
/// command's calls are still counted.
#[test]
#[ignore = "needs strace"]
fn fsprof_does_not_ask_whether_its_own_command_lives() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.json");
    let (o, seen) = fsprof_testkit::strace_fsprof(
        dir.path(),
        &["-qq", "-e", "trace=kill,clone,clone3,vfork"],
        &[
            "run",
            "-q",
            "-o",
            profile.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "sleep 0.3; cat /etc/hostname",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // clone(...) = PID, clone3(...) = PID or vfork() = PID: the command.
    let command = seen
        .lines()
        .filter(|l| {
            !l.contains("CLONE_THREAD") && (l.starts_with("clone") || l.starts_with("vfork"))
        })
        .filter_map(|l| l.rsplit("= ").next()?.trim().parse::<i32>().ok())
        .next()
        .unwrap_or_else(|| panic!("no command started: {seen}"));
    let asked = format!("kill({command}, 0)");
    assert!(!seen.contains(&asked), "{seen}");
    assert!(fsprof_testkit::count(&load(&profile), "read") >= 1);
}

/// The names in `dir`, sorted.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `-o FILE`'s file is made before the command starts, unnamed: the
/// command sees nothing new beside FILE (with `-f`, the file it replaces
/// is still there, whole), and fsprof killed during the run leaves that
/// file as it was and nothing else.
#[test]
fn an_output_files_file_is_unseen_and_a_killed_run_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.json");
    std::fs::write(&p, "mine").unwrap();
    let o = fsprof_testkit::fsprof()
        .args(["run", "-q", "-f", "-o", "p.json", "--", "sh", "-c"])
        .arg("ls -a; cat p.json")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        ".\n..\np.json\nmine",
        "what the command saw"
    );
    load(&p);
    std::fs::write(&p, "mine").unwrap();
    // fsprof is the command's parent; SIGKILL leaves it no end.
    let o = fsprof_testkit::fsprof()
        .args(["run", "-q", "-f", "-o", "p.json", "--", "sh", "-c"])
        .arg("kill -9 $PPID")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.signal(), Some(9), "{}", stderr(&o));
    assert_eq!(names(dir.path()), ["p.json"]);
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "mine");
}

/// The end of the run only writes `-o FILE`'s file: strace of fsprof sees
/// it made (`O_TMPFILE` in FILE's directory) before the command's
/// `execve`, and after the command's exit no file created, only the link
/// that names it.
#[test]
#[ignore = "needs strace"]
fn an_output_files_file_is_made_before_the_command_starts() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.json");
    let (o, seen) = fsprof_testkit::strace_fsprof(
        dir.path(),
        &["-f", "-qq", "-e", "trace=openat,execve,linkat,renameat2"],
        &[
            "run",
            "-q",
            "-o",
            profile.to_str().unwrap(),
            "--",
            "cat",
            "/etc/hostname",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    load(&profile);
    let lines: Vec<&str> = seen.lines().collect();
    let at = |what: &dyn Fn(&str) -> bool| lines.iter().position(|l| what(l));
    let made = at(&|l| l.contains("O_TMPFILE")).unwrap_or_else(|| panic!("{seen}"));
    let exec =
        at(&|l| l.contains("execve(") && l.contains("/cat\"")).unwrap_or_else(|| panic!("{seen}"));
    assert!(made < exec, "made after the command started:\n{seen}");
    let after: Vec<&&str> = lines[exec..]
        .iter()
        .filter(|l| l.contains("O_CREAT") && l.contains("p.json"))
        .collect();
    assert!(after.is_empty(), "created at the end: {after:?}");
    assert!(
        lines[exec..]
            .iter()
            .any(|l| l.contains("linkat(") && l.contains("p.json")),
        "{seen}"
    );
}
