//! The launch: fsprof makes the profile's file while the command starts
//! (on the other CPU), unseen by the command. (That fsprof gets its CPU
//! mask back: `cli::startup`.)

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
