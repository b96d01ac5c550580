//! The launch: fsprof moves off the command's CPU for its work after the
//! clone (its own mask is given back), and makes the profile's file
//! then, unseen by the command.

use fsprof_testkit::{load, stderr};

/// fsprof pins itself to its CPU for the clone and stays on the command's
/// CPU until its first wake (a short command's exit wakes it there), but
/// it does not keep that pin: a command that runs longer sees fsprof with
/// the CPU mask it was given.
#[test]
fn fsprof_gets_its_own_cpu_mask_back() {
    let allowed = |status: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_string())
            .unwrap()
    };
    let ours = allowed(&std::fs::read_to_string("/proc/self/status").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("status");
    let script = format!("sleep 0.2; cat /proc/$PPID/status > {}", seen.display());
    let o = fsprof_testkit::fsprof()
        .args(["run", "-q", "-o", "p.json", "--", "sh", "-c", &script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(allowed(&std::fs::read_to_string(&seen).unwrap()), ours);
}

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
