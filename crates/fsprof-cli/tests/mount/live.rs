//! A running `fsprof mount`: the control file and `fsprof stat`, SIGUSR1,
//! SIGTERM, the foreground mode's Ctrl-C, live metrics, and a killed
//! daemon.

use std::fs;
use std::io::{Read, Write};

use crate::kit::*;

#[test]
#[ignore = "needs root"]
fn the_control_file_is_hidden_uncounted_and_resettable() {
    control_file_works(&[]);
}

/// `--fast` declines open requests, so the control file is then read
/// through the kernel's page cache without a handle (see fsprof-fuse's
/// `control`): each reading must still see the profile of its moment.
#[test]
#[ignore = "needs root"]
fn the_control_file_works_without_open_requests_in_fast_mode() {
    control_file_works(&["--fast"]);
}

fn control_file_works(extra: &[&str]) {
    let d = dirs();
    let m = d.mount(extra);
    for k in 0..3 {
        fs::write(m.path(format!("f{k}")), "x").unwrap();
    }
    // A plain open (the first: --fast declines it, and the kernel opens
    // files alone from then on, the control file included).
    assert_eq!(fs::read(m.path("f0")).unwrap(), b"x");
    let names: Vec<_> = fs::read_dir(&d.mp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(!d.lower.join(".fsprof").exists(), "LOWER is not touched");
    let a = stat_json(&d.mp);
    let b = stat_json(&d.mp);
    // Reading the control file twice added nothing.
    assert_eq!(a.layers, b.layers);
    assert_eq!(calls(&a, "create"), 3);
    // Text form, then reset.
    let o = fsprof()
        .args(["stat", "--reset"])
        .arg(&d.mp)
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("layer fusefs") && text.contains("create"),
        "{text}"
    );
    let c = stat_json(&d.mp);
    assert_eq!(c.total_calls(), 0, "{:?}", c.layers);
    fs::write(m.path("after"), "y").unwrap();
    assert_eq!(calls(&stat_json(&d.mp), "create"), 1);
    // Only the daemon's user may reset; the file refuses other writes.
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(d.mp.join(".fsprof"))
        .unwrap();
    assert!(f.write_all(b"bogus").is_err());
    drop(f);
    // A nonsense name is not the control file.
    assert!(fs::remove_file(d.mp.join(".fsprof")).is_err());
    // `ls -l` asks for its ACL (an xattr): none, rather than a failure.
    let o = std::process::Command::new("ls")
        .arg("-l")
        .arg(d.mp.join(".fsprof"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = m.umount();
    assert_eq!(
        calls(&p, "create"),
        1,
        "the final profile counts from the reset"
    );
    check_ok(&d.out);
}

#[test]
#[ignore = "needs root"]
fn sigusr1_writes_the_profile_and_sigterm_unmounts() {
    let d = dirs();
    let m = d.mount(&["--interval", "50ms", "--resolution", "4"]);
    fs::write(m.path("a"), "1").unwrap();
    // SAFETY: signalling the daemon we started.
    unsafe { libc::kill(m.pid, libc::SIGUSR1) };
    wait_for("the SIGUSR1 profile", || d.out.exists());
    let p = fsprof_core::format::read_profile(&d.out).unwrap();
    assert_eq!(calls(&p, "create"), 1);
    // Still mounted and counting.
    fs::write(m.path("b"), "2").unwrap();
    assert_eq!(fs::read_to_string(m.path("a")).unwrap(), "1");
    // SAFETY: as above.
    unsafe { libc::kill(m.pid, libc::SIGTERM) };
    // The daemon's parent (fsprof mount) has exited: init reaps it.
    wait_for("the daemon to exit", || {
        // SAFETY: signal 0 only probes.
        let r = unsafe { libc::kill(m.pid, 0) };
        r != 0
    });
    assert!(mount_kit_unmounted(&d.mp));
    let p = fsprof_core::format::read_profile(&d.out).unwrap();
    assert_eq!(calls(&p, "create"), 2);
    assert!(!p.intervals.is_empty());
    assert_eq!(p.meta.resolution.get(), 4);
    check_ok(&d.out);
    std::mem::forget(m);
}

fn mount_kit_unmounted(mp: &std::path::Path) -> bool {
    let mi = fs::read_to_string("/proc/self/mountinfo").unwrap();
    !mi.lines()
        .any(|l| l.contains(&format!(" {} ", mp.display())))
}

#[test]
#[ignore = "needs root"]
fn foreground_mode_stops_on_ctrl_c_and_prints_the_report() {
    let d = dirs();
    let mut child = fsprof()
        .arg("mount")
        .arg("--foreground")
        .arg(&d.lower)
        .arg(&d.mp)
        .arg("-o")
        .arg(&d.out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _detach = Detach(d.mp.clone());
    wait_for("the mount", || fs::metadata(d.mp.join(".fsprof")).is_ok());
    fs::write(d.mp.join("x"), "x").unwrap();
    // SAFETY: signalling our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let st = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(st.code(), Some(130), "{err}");
    assert!(
        err.contains("layer fusefs") && err.contains("profile written to"),
        "{err}"
    );
    assert!(mount_kit_unmounted(&d.mp));
    assert_eq!(
        calls(
            &fsprof_core::format::read_profile(&d.out).unwrap(),
            "create"
        ),
        1
    );
}

#[test]
#[ignore = "needs root"]
fn live_metrics_are_served() {
    let d = dirs();
    let o = fsprof()
        .args(d.mount_args())
        .args(["--serve-metrics", "127.0.0.1:0"])
        .output()
        .unwrap();
    let _detach = Detach(d.mp.clone());
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    let addr = fsprof_testkit::metrics_addr(&err);
    let p = stat_json(&d.mp);
    let m = Mount::adopt(&d.lower, &d.mp, &d.out, &p);
    fs::write(m.path("f"), "x").unwrap();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.contains("layer=\"fusefs\""), "{body}");
    assert!(body.contains("op=\"create\""), "{body}");
    m.umount();
}

#[test]
#[ignore = "needs root"]
fn a_killed_daemon_leaves_a_mount_that_is_refused_and_recoverable() {
    let d = dirs();
    let m = d.mount(&[]);
    // SAFETY: killing the daemon we started.
    unsafe { libc::kill(m.pid, libc::SIGKILL) };
    wait_for("the connection to die", || {
        fs::metadata(&d.mp).err().and_then(|e| e.raw_os_error()) == Some(libc::ENOTCONN)
    });
    let o = fsprof()
        .arg("mount")
        .arg(&d.lower)
        .arg(&d.mp)
        .arg("-o")
        .arg(d.path().join("q.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("fsprof umount") && err.contains("fusermount3 -uz"),
        "{err}"
    );
    // `stat` says what happened; `umount` recognises the dead mount from
    // the mount table, detaches it and says the profile was not written.
    let o = fsprof().arg("stat").arg(&d.mp).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("daemon is gone"), "{err}");
    let err = umount_ok(&d.mp);
    assert!(
        err.contains("daemon is gone") && err.contains("detached"),
        "{err}"
    );
    assert!(!fsprof_mounted(&d.mp), "still mounted");
    assert!(fs::metadata(&d.mp).is_ok());
    drop(m);
}
