//! Ctrl-C and termination requests reach the profiled command, and fsprof
//! survives them long enough to write the profile.

mod common;

use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

fn wait_for(path: &std::path::Path, pattern: &str) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if std::fs::read_to_string(path).is_ok_and(|s| s.contains(pattern)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the profiled command never started");
}

fn start(dir: &std::path::Path, group: bool) -> (std::process::Child, std::path::PathBuf) {
    let out = dir.join("p.json");
    let marker = dir.join("started");
    let script = format!(
        "cat /etc/hostname >/dev/null; echo go > {}; exec sleep 30",
        marker.display()
    );
    let mut cmd = fsprof();
    cmd.args(["run", "-q", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &script]);
    cmd.stderr(Stdio::piped());
    if group {
        cmd.process_group(0);
    }
    let child = cmd.spawn().unwrap();
    wait_for(&marker, "go");
    (child, out)
}

#[test]
fn ctrl_c_to_the_process_group_still_writes_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let (child, out) = start(dir.path(), true);
    // What a terminal does on Ctrl-C: SIGINT to the whole foreground group.
    unsafe { libc_kill(-(child.id() as i32), 2) };
    let res = child.wait_with_output().unwrap();
    assert_eq!(
        res.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let p = load(&out);
    assert!(
        count(&p, "read") >= 1,
        "cat's calls before the interrupt are kept"
    );
}

#[test]
fn sigterm_to_fsprof_is_forwarded_to_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let (child, out) = start(dir.path(), false);
    unsafe { libc_kill(child.id() as i32, 15) };
    let res = child.wait_with_output().unwrap();
    assert_eq!(
        res.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    assert!(load(&out).meta.exit.is_some());
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
