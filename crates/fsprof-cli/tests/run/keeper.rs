//! The keeper (fsprof_sys::keeper): made while the command runs, it holds
//! only the control file (a pipe fsprof writes must end with fsprof) and
//! is gone once fsprof is (nothing of the run outlives it).

use std::path::Path;
use std::time::{Duration, Instant};

use fsprof_testkit::*;

/// The children of `pid` named `name`.
fn children_named(pid: u32, name: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            // "pid (comm) state ppid ...": the comm may hold spaces.
            let Some((comm, rest)) = stat.split_once(" (").and_then(|(_, r)| r.rsplit_once(") "))
            else {
                return false;
            };
            comm == name && rest.split_whitespace().nth(1) == Some(&pid.to_string())
        })
        .collect()
}

/// Gone, or a zombie (its memory and descriptors released) that its new
/// parent has not reaped yet.
fn released(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Err(_) => true,
        Ok(s) => s
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z')),
    }
}

fn until(what: &str, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < end, "{what}: not after 10 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `fsprof run -o DIR/p.json` (its standard output a pipe) of a command
/// that waits until the test makes the marker it is given back (the test
/// looks first); `with` adds to the command line.
fn run_until_marked(
    dir: &Path,
    with: impl FnOnce(&mut std::process::Command) -> &mut std::process::Command,
) -> (std::process::Child, std::path::PathBuf) {
    let marker = dir.join("go");
    let script = format!(
        "n=0; until [ -e {m} ]; do n=$((n+1)); [ $n -lt 2000 ] || exit 3; sleep 0.01; done",
        m = marker.display()
    );
    let mut cmd = fsprof();
    cmd.args(["run", "-q", "-o"])
        .arg(dir.join("p.json"))
        .args(["--", "sh", "-c", &script])
        .current_dir(dir)
        .stdout(std::process::Stdio::piped());
    (with(&mut cmd).spawn().unwrap(), marker)
}

#[test]
fn the_keeper_holds_only_the_control_file_and_ends_with_fsprof() {
    let dir = tempfile::tempdir().unwrap();
    let (fsprof, marker) = run_until_marked(dir.path(), |c| c);
    let out = dir.path().join("p.json");
    let name = fsprof_sys::keeper::NAME.to_str().unwrap();
    let mut keeper = Vec::new();
    until("the keeper started", || {
        keeper = children_named(fsprof.id(), name);
        !keeper.is_empty()
    });
    assert_eq!(keeper.len(), 1, "one keeper");
    let k = keeper[0];
    let fds: Vec<_> = std::fs::read_dir(format!("/proc/{k}/fd"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_link(e.path()).unwrap())
        .collect();
    assert_eq!(fds.len(), 1, "the keeper holds {fds:?}");
    assert_eq!(fds[0].file_name(), Some(Path::new("control").as_os_str()));
    std::fs::write(&marker, b"").unwrap();
    // Standard output is a pipe: it ends when fsprof exits, the keeper
    // holding none of it.
    let o = fsprof.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
    until("the keeper released fsprof's memory", || released(k));
    assert!(load(&out).processes.len() >= 2);
}

/// `FSPROF_NO_KEEPER` (and valgrind, which cannot run a `CLONE_VM`
/// process that is not a thread) makes no keeper: fsprof releases its
/// memory at its own exit, as before.
#[test]
fn no_keeper_is_made_when_asked_for_none() {
    let dir = tempfile::tempdir().unwrap();
    let (fsprof, marker) = run_until_marked(dir.path(), |c| c.env("FSPROF_NO_KEEPER", "1"));
    until("the command started", || {
        !children_named(fsprof.id(), "sh").is_empty()
    });
    // The keeper would be made right after the command started.
    std::thread::sleep(Duration::from_millis(300));
    let name = fsprof_sys::keeper::NAME.to_str().unwrap();
    let keepers = children_named(fsprof.id(), name);
    std::fs::write(&marker, b"").unwrap();
    let o = fsprof.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(keepers.is_empty(), "a keeper was made: {keepers:?}");
}
