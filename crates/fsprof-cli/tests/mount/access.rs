//! Who may do what with an `fsprof mount`: an unprivileged user's mount on
//! both kinds of machine (with and without a setuid FUSE helper), another
//! user's statistics (`MP/.fsprof`) under `--allow-other`, and `fsprof
//! umount` of a mount that belongs to another user (of a killed daemon's:
//! live.rs).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output};

use crate::kit::*;
use fsprof_testkit::{fsprof_path, need_program, stderr, which};

/// `fsprof ARGS` as nobody (uid and gid 65534, no groups).
fn as_nobody(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(need_program("setpriv", "util-linux"))
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(fsprof_path())
        .args(args)
        .output()
        .unwrap()
}

/// [`dirs`] that nobody may enter and use (LOWER and MP are nobody's).
fn dirs_for_nobody() -> Dirs {
    nobodys(dirs())
}

fn nobodys(d: Dirs) -> Dirs {
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    for p in [d.path(), &d.lower, &d.mp] {
        std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
    }
    d
}

/// [`dirs_for_nobody`] where a setuid program runs as its owner: /tmp
/// unless it is mounted nosuid (a tmpfs /tmp often is), else the build's
/// disk.
fn dirs_for_a_helper() -> Dirs {
    let d = dirs();
    if nosuid(d.path()) {
        return nobodys(dirs_on_disk());
    }
    nobodys(d)
}

fn nosuid(p: &std::path::Path) -> bool {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statvfs is plain data filled by statvfs; a NUL-terminated path.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        libc::statvfs(c.as_ptr(), &mut s) == 0 && s.f_flag & libc::ST_NOSUID != 0
    }
}

/// A FUSE mount helper to copy: fusermount3 (fuse3), else fusermount.
fn helper() -> PathBuf {
    which("fusermount3")
        .or_else(|| which("fusermount"))
        .unwrap_or_else(|| need_program("fusermount3", "fuse3"))
}

/// What an unprivileged user's mount, use and unmount came to, run in a
/// private mount and pid namespace where /dev/fuse has the mode given
/// (666 on Debian) and the FUSE helper is a private copy, setuid root or
/// not.
struct Unprivileged {
    mount: Output,
    umount: Option<Output>,
    /// Mounts at MP in the namespace after everything.
    left: String,
}

fn unprivileged_mount(d: &Dirs, setuid: bool, dev_fuse_mode: &str) -> Unprivileged {
    need_program("unshare", "util-linux");
    assert!(
        !nosuid(d.path()),
        "{} is on a nosuid file system: the helper's copy would not run setuid",
        d.path().display()
    );
    let copy = d.path().join("helper");
    fs::copy(helper(), &copy).unwrap();
    std::os::unix::fs::chown(&copy, Some(0), Some(0)).unwrap();
    let mode = if setuid { 0o4755 } else { 0o755 };
    fs::set_permissions(&copy, fs::Permissions::from_mode(mode)).unwrap();
    // The namespace's first process (this shell) ends last; its end kills
    // every process in the namespace, so no daemon or mount outlives it.
    let script = r#"
        set -u
        cd "$D"
        mknod fuse c 10 229 && chmod "$DEV_MODE" fuse && mount --bind fuse /dev/fuse || exit 99
        nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- env FUSERMOUNT_PATH="$D/helper" "$@"; }
        nobody "$FSPROF" mount lower mnt -o p.json > mount.out 2> mount.err
        echo $? > mount.st
        if grep -q " $D/mnt " /proc/self/mountinfo; then
            nobody sh -c 'echo x > mnt/f'
            nobody "$FSPROF" umount mnt > umount.out 2> umount.err
            echo $? > umount.st
        fi
        grep " $D/mnt " /proc/self/mountinfo > left
        exit 0
    "#;
    let o = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--pid",
            "--fork",
            "--mount-proc",
        ])
        .args(["sh", "-c", script])
        .env("D", d.path())
        .env("DEV_MODE", dev_fuse_mode)
        .env("FSPROF", fsprof_path())
        .output()
        .unwrap();
    assert!(o.status.success(), "the namespace: {o:?}");
    let read = |n: &str| fs::read(d.path().join(n)).unwrap_or_default();
    let output = |n: &str| {
        let code: i32 = String::from_utf8_lossy(&read(&format!("{n}.st")))
            .trim()
            .parse()
            .ok()?;
        Some(Output {
            status: std::os::unix::process::ExitStatusExt::from_raw(code << 8),
            stdout: read(&format!("{n}.out")),
            stderr: read(&format!("{n}.err")),
        })
    };
    Unprivileged {
        mount: output("mount").expect("the mount ran"),
        umount: output("umount"),
        left: String::from_utf8_lossy(&read("left")).into_owned(),
    }
}

/// Where the helper is setuid root (Debian's fuse3), a user mounts, uses
/// and unmounts, and the profile is written.
#[test]
#[ignore = "needs root, setpriv, unshare, fusermount3"]
fn an_unprivileged_user_mounts_with_a_setuid_helper() {
    let d = dirs_for_a_helper();
    let r = unprivileged_mount(&d, true, "666");
    assert!(r.mount.status.success(), "{}", stderr(&r.mount));
    let u = r.umount.expect("mounted, so unmounted");
    assert!(u.status.success(), "{}", stderr(&u));
    assert_eq!(r.left, "", "a mount was left");
    let p = fsprof_core::format::read_profile(&d.out).unwrap();
    assert_eq!(calls(&p, "create"), 1);
}

/// Where it is not, the user is told in one line what is missing, and
/// nothing is mounted.
#[test]
#[ignore = "needs root, setpriv, unshare, fusermount3"]
fn an_unprivileged_user_without_a_setuid_helper_is_told_what_is_missing() {
    let d = dirs_for_a_helper();
    refused(&d, unprivileged_mount(&d, false, "666"), "setuid");
}

/// Where /dev/fuse is root's alone (this VM's 0600), the user is told
/// that, in one line.
#[test]
#[ignore = "needs root, setpriv, unshare, fusermount3"]
fn an_unprivileged_user_who_may_not_open_dev_fuse_is_told_so() {
    let d = dirs_for_a_helper();
    refused(&d, unprivileged_mount(&d, true, "600"), "/dev/fuse");
}

/// Refused in one line naming `what`; nothing mounted, nothing written.
#[track_caller]
fn refused(d: &Dirs, r: Unprivileged, what: &str) {
    let err = stderr(&r.mount);
    assert_eq!(r.mount.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains("not permitted") && err.contains(what), "{err}");
    assert!(
        r.umount.is_none() && r.left.is_empty(),
        "mounted: {}",
        r.left
    );
    assert!(!d.out.exists());
}

/// With `--allow-other` other users use the files, but the statistics
/// (command line, daemon pid, LOWER, counts) are the owner's and root's,
/// unless `--stat-allow-other` shares them.
#[test]
#[ignore = "needs root, setpriv"]
fn only_the_owner_reads_the_statistics_unless_shared() {
    let d = dirs_for_nobody();
    fs::write(d.lower.join("f"), "x").unwrap();
    for share in [false, true] {
        let extra: &[&str] = if share {
            &["--allow-other", "--stat-allow-other"]
        } else {
            &["--allow-other"]
        };
        let m = d.mount(extra);
        let file = m.path("f");
        let o = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat"])
            .arg(&file)
            .arg(m.path(".fsprof"))
            .output()
            .unwrap();
        let err = stderr(&o);
        assert!(String::from_utf8_lossy(&o.stdout).starts_with('x'), "{err}");
        let stat = as_nobody(&["stat".as_ref(), m.mp.as_os_str()]);
        if share {
            assert!(o.status.success(), "{err}");
            assert!(stat.status.success(), "{}", stderr(&stat));
        } else {
            assert!(
                err.contains("Permission denied"),
                "nobody read .fsprof: {err}"
            );
            assert_eq!(stat.status.code(), Some(2));
            assert!(stderr(&stat).contains("uid 0"), "{}", stderr(&stat));
        }
        // The owner (root) reads it either way.
        stat_json(&m.mp);
        m.umount();
        fs::remove_file(&d.out).unwrap();
    }
}

/// As root, another user's `fuse.fsprof` mount (whose control file root
/// may not read: the mount is not shared) is recognised from the mount
/// table and unmounted; its daemon then writes the profile.
#[test]
#[ignore = "needs root, setpriv"]
fn root_unmounts_another_users_mount() {
    let d = dirs_for_nobody();
    // nobody, with the two capabilities a mount needs without a helper.
    let o = Command::new(need_program("setpriv", "util-linux"))
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args([
            "--inh-caps=+sys_admin,+dac_override",
            "--ambient-caps=+sys_admin,+dac_override",
        ])
        .arg(fsprof_path())
        .args(d.mount_args())
        .output()
        .unwrap();
    let _detach = Detach(d.mp.clone());
    assert!(o.status.success(), "{}", stderr(&o));
    let err = umount_ok(&d.mp);
    assert!(err.contains("uid 65534"), "{err}");
    assert!(!fsprof_mounted(&d.mp), "still mounted");
    wait_for("the daemon's profile", || d.out.exists());
    check_ok(&d.out);
}

/// `fsprof umount` of a path that is no mount at all still says so.
#[test]
fn umount_of_a_plain_directory_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let o = crate::kit::fsprof()
        .arg("umount")
        .arg(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not an fsprof mount"));
}
