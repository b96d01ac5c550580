//! Pass-through semantics through a real `fsprof mount`: each test does
//! through the mount what an application would and checks the result
//! against LOWER directly.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::kit::*;

fn setup(extra: &[&str]) -> (Dirs, Mount) {
    let d = dirs();
    let m = d.mount(extra);
    (d, m)
}

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

#[test]
#[ignore = "needs root"]
fn hard_links_and_inode_numbers_are_lowers() {
    let (_d, m) = setup(&[]);
    fs::write(m.path("a"), "one").unwrap();
    fs::hard_link(m.path("a"), m.path("b")).unwrap();
    let (a, b) = (
        fs::metadata(m.path("a")).unwrap(),
        fs::metadata(m.path("b")).unwrap(),
    );
    assert_eq!(a.ino(), b.ino());
    assert_eq!(a.nlink(), 2);
    assert_eq!(a.ino(), fs::metadata(m.lower.join("a")).unwrap().ino());
    fs::write(m.path("b"), "two").unwrap();
    assert_eq!(fs::read_to_string(m.path("a")).unwrap(), "two");
    fs::remove_file(m.path("a")).unwrap();
    assert_eq!(fs::metadata(m.path("b")).unwrap().nlink(), 1);
    // A number stays the same across lookups (ls -i, find's loop checks).
    let again = fs::metadata(m.path("b")).unwrap().ino();
    assert_eq!(again, b.ino());
    let p = m.umount();
    assert_eq!(calls(&p, "link"), 1);
}

#[test]
#[ignore = "needs root"]
fn shared_mmap_writes_reach_lower() {
    let (_d, m) = setup(&[]);
    let len = 3 * 4096 + 100;
    fs::write(m.path("m"), vec![0u8; len]).unwrap();
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.path("m"))
        .unwrap();
    let want = pattern(len, 9);
    // SAFETY: a fresh shared mapping of a file we hold open, written within
    // its length, synced and unmapped before the file is closed.
    unsafe {
        use std::os::fd::AsRawFd;
        let p = map_shared(f.as_raw_fd(), len, 0).unwrap_or_else(|e| panic!("mmap: {e}"));
        std::ptr::copy_nonoverlapping(want.as_ptr(), p.cast(), len);
        assert_eq!(libc::msync(p, len, libc::MS_SYNC), 0);
        libc::munmap(p, len);
    }
    drop(f);
    assert!(fs::read(m.lower.join("m")).unwrap() == want);
    assert!(fs::read(m.path("m")).unwrap() == want);
    let p = m.umount();
    assert!(calls(&p, "write") >= 1, "writeback of the mapped pages");
}

#[test]
#[ignore = "needs root"]
fn rename_flags_pass_through() {
    let (_d, m) = setup(&[]);
    fs::write(m.path("x"), "X").unwrap();
    fs::write(m.path("y"), "Y").unwrap();
    let (x, y) = (c(&m.path("x")), c(&m.path("y")));
    let w = c(&m.path("w"));
    let rename2 = |from: &CString, to: &CString, flags: u32| {
        // SAFETY: NUL-terminated paths.
        unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                flags,
            )
        }
    };
    // The kernel refuses this one itself (the target is in its dcache).
    assert_eq!(rename2(&x, &y, libc::RENAME_NOREPLACE), -1);
    assert_eq!(errno(), libc::EEXIST);
    assert_eq!(rename2(&x, &y, libc::RENAME_EXCHANGE), 0);
    assert_eq!(fs::read_to_string(m.lower.join("x")).unwrap(), "Y");
    assert_eq!(fs::read_to_string(m.lower.join("y")).unwrap(), "X");
    assert_eq!(rename2(&y, &w, libc::RENAME_NOREPLACE), 0);
    assert_eq!(fs::read_to_string(m.lower.join("w")).unwrap(), "X");
    fs::rename(m.path("x"), m.path("z")).unwrap();
    let p = m.umount();
    let r2 = op(&p, "rename2").unwrap();
    assert_eq!((r2.post, r2.errors), (2, 0), "{r2:?}");
    assert_eq!(calls(&p, "rename"), 1);
}

#[test]
#[ignore = "needs root"]
fn xattrs_pass_through() {
    let (_d, m) = setup(&[]);
    fs::write(m.path("f"), "").unwrap();
    let (via, direct) = (c(&m.path("f")), c(&m.lower.join("f")));
    let name = c(Path::new("user.fsprof"));
    let value = b"forty-two";
    // SAFETY: NUL-terminated strings, buffers of their lengths.
    unsafe {
        assert_eq!(
            libc::setxattr(
                via.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0
            ),
            0,
            "setxattr: {}",
            errno()
        );
        let mut buf = [0u8; 64];
        let n = libc::getxattr(direct.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), 64);
        assert_eq!(&buf[..n as usize], value);
        let n = libc::getxattr(via.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0);
        assert_eq!(n as usize, value.len());
        let n = libc::listxattr(via.as_ptr(), buf.as_mut_ptr().cast(), 64);
        assert!(buf[..n as usize].starts_with(b"user.fsprof\0"));
        assert_eq!(libc::removexattr(via.as_ptr(), name.as_ptr()), 0);
        assert_eq!(
            libc::getxattr(direct.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0),
            -1
        );
        assert_eq!(errno(), libc::ENODATA);
    }
    let p = m.umount();
    assert_eq!(calls(&p, "setxattr"), 1);
    assert_eq!(calls(&p, "removexattr"), 1);
}

#[test]
#[ignore = "needs root"]
fn fallocate_lseek_and_copy_file_range_pass_through() {
    let (_d, m) = setup(&[]);
    use std::os::fd::AsRawFd;
    let len = 1 << 20;
    fs::write(m.path("src"), pattern(len, 3)).unwrap();
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.path("src"))
        .unwrap();
    let fd = f.as_raw_fd();
    // SAFETY: descriptors we hold.
    unsafe {
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        assert_eq!(
            libc::fallocate(fd, mode, 256 << 10, 256 << 10),
            0,
            "{}",
            errno()
        );
        assert_eq!(libc::lseek(fd, 256 << 10, libc::SEEK_DATA), 512 << 10);
        assert_eq!(libc::lseek(fd, 0, libc::SEEK_HOLE), 256 << 10);
    }
    let mut want = pattern(len, 3);
    want[256 << 10..512 << 10].fill(0);
    assert!(fs::read(m.lower.join("src")).unwrap() == want);
    let g = fs::File::create(m.path("dst")).unwrap();
    let (mut a, mut b): (i64, i64) = (0, 0);
    // SAFETY: descriptors we hold, offsets we own.
    let n = unsafe { libc::copy_file_range(fd, &mut a, g.as_raw_fd(), &mut b, len, 0) };
    assert_eq!(n as usize, len, "copy_file_range: {}", errno());
    drop((f, g));
    assert!(fs::read(m.lower.join("dst")).unwrap() == want);
    let p = m.umount();
    assert_calls(&p, &[("fallocate", 1), ("lseek", 2)]);
    assert!(calls(&p, "copy_file_range") >= 1);
}

#[test]
#[ignore = "needs root"]
fn attributes_symlinks_and_nodes_pass_through() {
    let (_d, m) = setup(&[]);
    // Modes arrive with the caller's umask applied; the daemon's own
    // (022 in a shell) must not strip group and other bits again.
    let made = c(&m.path("open"));
    // SAFETY: a NUL-terminated path; the umask is restored at once.
    unsafe {
        let old = libc::umask(0);
        let fd = libc::open(made.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o4777);
        libc::umask(old);
        assert!(fd >= 0);
        libc::close(fd);
    }
    assert_eq!(
        fs::metadata(m.lower.join("open")).unwrap().mode() & 0o7777,
        0o4777
    );
    fs::write(m.path("f"), "0123456789").unwrap();
    fs::set_permissions(m.path("f"), fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(m.path("f"), Some(1234), Some(5678)).unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(m.path("f"))
        .unwrap()
        .set_len(4)
        .unwrap();
    let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_000_000_000, 123_456_789);
    fs::File::options()
        .write(true)
        .open(m.path("f"))
        .unwrap()
        .set_modified(t)
        .unwrap();
    let l = fs::metadata(m.lower.join("f")).unwrap();
    assert_eq!(l.mode() & 0o7777, 0o640);
    assert_eq!((l.uid(), l.gid(), l.len()), (1234, 5678, 4));
    assert_eq!((l.mtime(), l.mtime_nsec()), (1_000_000_000, 123_456_789));
    std::os::unix::fs::symlink("f", m.path("s")).unwrap();
    assert_eq!(fs::read_link(m.path("s")).unwrap(), Path::new("f"));
    assert_eq!(fs::read_link(m.lower.join("s")).unwrap(), Path::new("f"));
    let fifo = c(&m.path("fifo"));
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(
        &fs::metadata(m.lower.join("fifo")).unwrap().file_type()
    ));
    let v = fs::metadata(m.path("f")).unwrap();
    assert_eq!((v.uid(), v.len(), v.mode() & 0o7777), (1234, 4, 0o640));
    let p = m.umount();
    assert_calls(&p, &[("symlink", 1), ("readlink", 1), ("mknod", 1)]);
    assert!(calls(&p, "setattr") >= 4);
}

#[test]
#[ignore = "needs root, python3"]
fn locks_work_between_processes_using_the_mount() {
    let (_d, m) = setup(&[]);
    let py = fsprof_testkit::need_program("python3", "python3");
    fs::write(m.path("lock"), "").unwrap();
    let f = fs::OpenOptions::new()
        .write(true)
        .open(m.path("lock"))
        .unwrap();
    use std::os::fd::AsRawFd;
    let mut fl: libc::flock = unsafe_zeroed();
    fl.l_type = libc::F_WRLCK as i16;
    fl.l_whence = libc::SEEK_SET as i16;
    // SAFETY: a descriptor we hold and a flock struct.
    assert_eq!(unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) }, 0);
    let probe = |path: &Path| {
        std::process::Command::new(&py)
            .arg("-c")
            .arg(
                "import fcntl,sys\nf=open(sys.argv[1],'w')\ntry:\n fcntl.lockf(f,fcntl.LOCK_EX|fcntl.LOCK_NB)\nexcept OSError:\n sys.exit(3)\n",
            )
            .arg(path)
            .status()
            .unwrap()
            .code()
    };
    assert_eq!(
        probe(&m.path("lock")),
        Some(3),
        "the lock is seen through the mount"
    );
    drop(f);
    assert_eq!(
        probe(&m.path("lock")),
        Some(0),
        "and released with the file"
    );
    m.umount();
}

fn unsafe_zeroed<T>() -> T {
    // SAFETY: used for C structs of integers only.
    unsafe { std::mem::zeroed() }
}

#[test]
#[ignore = "needs root"]
fn files_other_users_create_are_theirs() {
    let (_d, m) = setup(&["--allow-other"]);
    fs::create_dir(m.path("pub")).unwrap();
    fs::set_permissions(m.path("pub"), fs::Permissions::from_mode(0o1777)).unwrap();
    fs::create_dir(m.path("grp")).unwrap();
    std::os::unix::fs::chown(m.path("grp"), None, Some(4242)).unwrap();
    fs::set_permissions(m.path("grp"), fs::Permissions::from_mode(0o2777)).unwrap();
    let script = "set -e; cd \"$1\"; echo hi > pub/file; mkdir pub/dir; ln -s file pub/link; \
                  mkfifo pub/fifo; echo g > grp/file; echo ok > /dev/null";
    assert!(as_nobody(script, &m.mp).success());
    for n in ["pub/file", "pub/dir", "pub/link", "pub/fifo"] {
        let l = fs::symlink_metadata(m.lower.join(n)).unwrap();
        assert_eq!((l.uid(), l.gid()), (65534, 65533), "{n}");
    }
    // The set-group-ID directory's group, not the creator's.
    let g = fs::metadata(m.lower.join("grp/file")).unwrap();
    assert_eq!((g.uid(), g.gid()), (65534, 4242));
    // And the kernel checks permissions as the caller.
    let st = as_nobody("echo x > \"$1\"/denied 2>/dev/null", &m.mp);
    assert!(!st.success(), "the mount root is root's 0755");
    assert!(!m.lower.join("denied").exists());
    m.umount();
}

/// `sh -c SCRIPT sh DIR` as uid 65534, gid 65533, no other groups.
fn as_nobody(script: &str, dir: &Path) -> std::process::ExitStatus {
    std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65533", "--clear-groups", "--"])
        .args(["sh", "-c", script, "sh"])
        .arg(dir)
        .status()
        .expect("setpriv")
}

/// A uid and two gids no account or group on this machine has: a
/// throwaway unprivileged user that owns nothing and that the daemon has
/// no reason to know.
fn throwaway_ids() -> (u32, u32, u32) {
    // SAFETY: a lookup whose result is only compared with null; the tests
    // of this binary do not hold a previous result.
    let free_uid = |u: u32| unsafe { libc::getpwuid(u).is_null() };
    let base = 50_000 + std::process::id() % 5_000;
    let uid = (base..).find(|&u| free_uid(u)).unwrap();
    let mut gids = (base..).filter(|&g| gid_free(g));
    (uid, gids.next().unwrap(), gids.next().unwrap())
}

fn gid_free(g: u32) -> bool {
    // SAFETY: as for getpwuid above.
    unsafe { libc::getgrgid(g).is_null() }
}

/// What root prepares in a tree before the user acts in it.
fn prepare(root: &Path, member: u32, other: u32) {
    use std::os::unix::fs::chown;
    fs::write(root.join("secret"), "s").unwrap();
    fs::set_permissions(root.join("secret"), fs::Permissions::from_mode(0o600)).unwrap();
    for (dir, gid, mode) in [
        ("pub", 0, 0o1777),
        ("grp", member, 0o770),
        ("sgid", other, 0o2777),
    ] {
        fs::create_dir(root.join(dir)).unwrap();
        chown(root.join(dir), Some(0), Some(gid)).unwrap();
        fs::set_permissions(root.join(dir), fs::Permissions::from_mode(mode)).unwrap();
    }
    fs::write(root.join("pub/rootfile"), "r").unwrap();
}

/// Each step as the user, its outcome and the error text (paths are
/// relative, so the same in both trees), and the owner, group, mode and
/// size of what it made.
const AS_USER: &str = r#"
cd "$1" || exit 9
other=$2
umask 022
st() { stat -c '%n %F %a %u %g %s' "$@"; }
step() { if out=$(eval "$2" 2>&1); then echo "$1: ok $out"; else echo "$1: failed $out"; fi; }
step read-roots-0600 'cat secret'
step create-in-group-dir 'echo x > grp/mine && st grp/mine'
step create 'echo x > pub/mine && st pub/mine'
step write-clears-setuid 'chmod 4755 pub/mine && echo y >> pub/mine && st pub/mine'
step chmod-roots 'chmod 600 secret'
step chown-to-root 'chown 0 pub/mine'
step chgrp-to-non-member 'chgrp $other pub/mine'
step unlink-sticky-roots 'rm -f pub/rootfile'
step rename-over-roots 'mv pub/mine pub/rootfile'
step link-roots 'ln pub/rootfile pub/hl'
step mkdir-in-setgid-dir 'mkdir sgid/d && st sgid/d'
step chmod-setgid-as-non-member 'echo x > sgid/f && chmod 2755 sgid/f && st sgid/f'
step truncate-utimens 'truncate -s 3 pub/mine && touch -d @1000000000 pub/mine && stat -c "%s %Y" pub/mine'
step mkfifo-symlink 'mkfifo pub/ff && ln -s mine pub/sl && st pub/ff pub/sl'
step utimens-roots 'touch -d @1 pub/rootfile'
step listing 'ls -A pub | sort | tr "\n" " "'
step create-in-roots-0755 'echo x > denied'
"#;

fn run_as(uid: u32, gid: u32, groups: &[u32], dir: &Path, other: u32) -> String {
    let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    let o = std::process::Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg(if groups.is_empty() {
            "--clear-groups".to_string()
        } else {
            format!("--groups={}", groups.join(","))
        })
        .args(["--", "sh", "-c", AS_USER, "sh"])
        .arg(dir)
        .arg(other.to_string())
        .output()
        .expect("setpriv");
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout).unwrap()
}

/// With `--allow-other`, a daemon running as root serves a throwaway
/// unprivileged user exactly as LOWER's own file system does: the same
/// steps as that user, on a tree prepared the same way, give the same
/// outcomes, error messages, owners and modes through the mount (in both
/// modes) as directly on a sibling directory of LOWER.
#[test]
#[ignore = "needs root"]
fn another_user_gets_lowers_permissions_and_ownership() {
    fsprof_testkit::need_root("a FUSE mount");
    let (uid, gid, member) = throwaway_ids();
    let other = (member + 1..).find(|&g| gid_free(g)).unwrap();
    let d = tempfile::tempdir().unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let native = d.path().join("native");
    fs::create_dir(&native).unwrap();
    prepare(&native, member, other);
    let want = run_as(uid, gid, &[member], &native, other);
    // Ground truth the comparison rests on, from the kernel's rules rather
    // than from either run.
    for line in [
        "read-roots-0600: failed cat: secret: Permission denied".to_string(),
        format!("create-in-group-dir: ok grp/mine regular file 644 {uid} {gid} 2"),
        format!("write-clears-setuid: ok pub/mine regular file 755 {uid} {gid} 4"),
        "chmod-roots: failed chmod: changing permissions of 'secret': Operation not permitted"
            .to_string(),
        "unlink-sticky-roots: failed rm: cannot remove 'pub/rootfile': Operation not permitted"
            .to_string(),
        format!("mkdir-in-setgid-dir: ok sgid/d directory 2755 {uid} {other} "),
        format!("chmod-setgid-as-non-member: ok sgid/f regular file 755 {uid} {other} 2"),
        "truncate-utimens: ok 3 1000000000".to_string(),
        "create-in-roots-0755: failed sh: 1: eval: cannot create denied: Permission denied"
            .to_string(),
    ] {
        assert!(want.contains(&line), "native run lacks {line:?}:\n{want}");
    }
    for (k, extra) in [&["--allow-other"][..], &["--allow-other", "--fast"]]
        .into_iter()
        .enumerate()
    {
        let (lower, mp) = (
            d.path().join(format!("lower{k}")),
            d.path().join(format!("mnt{k}")),
        );
        fs::create_dir(&lower).unwrap();
        fs::create_dir(&mp).unwrap();
        prepare(&lower, member, other);
        let m = Mount::start(&lower, &mp, &d.path().join(format!("p{k}.json")), extra);
        let got = run_as(uid, gid, &[member], &mp, other);
        let p = m.umount();
        assert_eq!(
            got, want,
            "{extra:?}: through the mount (left) and on LOWER's file system (right)"
        );
        // What the user made is the user's in LOWER too.
        let l = fs::metadata(lower.join("pub/mine")).unwrap();
        assert_eq!((l.uid(), l.gid(), l.mode() & 0o7777), (uid, gid, 0o755));
        let g = fs::metadata(lower.join("sgid/d")).unwrap();
        assert_eq!((g.uid(), g.gid(), g.mode() & 0o7777), (uid, other, 0o2755));
        assert_eq!(fs::read(lower.join("secret")).unwrap(), b"s");
        assert!(!lower.join("denied").exists());
        assert!(calls(&p, "create") >= 3, "{extra:?}");
    }
}
