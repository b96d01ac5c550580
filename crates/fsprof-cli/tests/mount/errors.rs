//! `fsprof mount`, `stat` and `umount` fail with one clear line and exit
//! status 2, and leave nothing mounted or changed behind.

use std::fs;
use std::path::Path;
use std::process::Output;

use crate::kit::*;

fn one_line_exit_2(o: &Output, want: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(want), "{want:?} in {err}");
}

fn mount_cmd(lower: &Path, mp: &Path, out: &Path) -> Output {
    fsprof()
        .arg("mount")
        .arg(lower)
        .arg(mp)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn missing_lower_or_mount_point_is_one_line() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("p.json");
    let o = mount_cmd(&d.path().join("nolower"), d.path(), &out);
    one_line_exit_2(&o, "does not exist");
    let o = mount_cmd(d.path(), &d.path().join("nomp"), &out);
    one_line_exit_2(&o, "mount point");
    fs::write(d.path().join("file"), "").unwrap();
    let o = mount_cmd(&d.path().join("file"), d.path(), &out);
    one_line_exit_2(&o, "is not a directory");
    assert!(!out.exists());
}

#[test]
fn a_busy_poll_too_long_or_not_a_duration_is_one_line() {
    let d = tempfile::tempdir().unwrap();
    for (v, want) in [
        ("11ms", "use at most 10 ms"),
        ("soon", "invalid duration \"soon\""),
    ] {
        let o = fsprof()
            .args(["mount", "--busy-poll", v])
            .arg(d.path())
            .arg(d.path())
            .output()
            .unwrap();
        one_line_exit_2(&o, want);
    }
}

#[test]
fn an_existing_output_is_not_overwritten() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("p.json");
    fs::write(&out, "mine").unwrap();
    let o = mount_cmd(d.path(), d.path(), &out);
    one_line_exit_2(&o, "exists");
    assert_eq!(fs::read_to_string(&out).unwrap(), "mine");
}

#[test]
fn stat_and_umount_refuse_what_is_not_ours() {
    let d = tempfile::tempdir().unwrap();
    let o = fsprof().arg("stat").arg(d.path()).output().unwrap();
    one_line_exit_2(&o, "is not an fsprof mount");
    let o = fsprof().arg("umount").arg(d.path()).output().unwrap();
    one_line_exit_2(&o, "is not an fsprof mount");
}

#[test]
#[ignore = "needs root"]
fn mounting_over_our_own_mount_and_busy_unmounts_are_refused() {
    let d = dirs();
    let m = d.mount(&[]);
    let o = mount_cmd(&d.lower, &d.mp, &d.path().join("q.json"));
    // Were it mounted after all, over the first one.
    let _detach = Detach(d.mp.clone());
    one_line_exit_2(&o, "already an fsprof mount");
    {
        let _busy = fs::File::create(m.path("open")).unwrap();
        let o = fsprof().arg("umount").arg(&d.mp).output().unwrap();
        one_line_exit_2(&o, "busy");
    }
    let p = m.umount();
    assert_eq!(calls(&p, "create"), 1);
    assert!(!d.path().join("q.json").exists());
}

#[test]
#[ignore = "needs root"]
fn a_missing_dev_fuse_is_named() {
    fsprof_testkit::need_root("a private mount namespace without /dev/fuse");
    let d = tempfile::tempdir().unwrap();
    // An empty /dev in a private mount namespace: no /dev/fuse there.
    let o = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount -t tmpfs none /dev && exec \"$0\" mount \"$1\" \"$1\" -o \"$1/p.json\"")
        .arg(fsprof_testkit::fsprof_path())
        .arg(d.path())
        .output()
        .expect("unshare (util-linux)");
    one_line_exit_2(&o, "no /dev/fuse");
}
