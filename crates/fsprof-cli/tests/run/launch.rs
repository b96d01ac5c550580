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
