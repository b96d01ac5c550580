//! `-o FILE --force` never renames over something that is not a regular
//! file: a device node stays a device (written into), a FIFO is written
//! into, a socket or a directory is refused before anything runs. Every
//! command that writes a file goes through the same check.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use fsprof_testkit::{capture_in, fsprof, stderr};

/// A private /dev/null (the test must not touch the real one).
fn null_device(dir: &Path) -> PathBuf {
    fsprof_testkit::need_root("mknod");
    let p = dir.join("null");
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; mknod only creates a node.
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    assert_eq!(rc, 0);
    p
}

fn is_char_device(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_char_device())
}

fn profile(dir: &Path) -> PathBuf {
    let p = dir.join("p.json");
    let o = capture_in(dir, &["run", "-q"], &p, &["cat", "/etc/hostname"]);
    assert!(o.status.success(), "{}", stderr(&o));
    p
}

#[test]
#[ignore = "needs root"]
fn a_device_node_is_written_into_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let null = null_device(dir.path());
    let p = profile(dir.path());
    let runs: Vec<Vec<&str>> = vec![
        vec!["run", "-q", "--force", "-o", "NULL", "--", "true"],
        vec!["merge", "P", "--force", "-o", "NULL"],
        vec!["report", "P", "--format", "html", "--force", "-o", "NULL"],
        vec![
            "export",
            "P",
            "--format",
            "prometheus",
            "--force",
            "-o",
            "NULL",
        ],
        vec!["plot", "P", "--op", "read", "--force", "-o", "NULL"],
    ];
    for args in runs {
        let args: Vec<&std::ffi::OsStr> = args
            .iter()
            .map(|a| match *a {
                "NULL" => null.as_os_str(),
                "P" => p.as_os_str(),
                a => std::ffi::OsStr::new(a),
            })
            .collect();
        let o = fsprof().args(&args).output().unwrap();
        assert!(
            is_char_device(&null),
            "{args:?} replaced the device node: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn a_socket_is_refused_before_the_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let o = fsprof()
        .args(["run", "-q", "--force", "-o"])
        .arg(&sock)
        .args(["--", "touch"])
        .arg(dir.path().join("ran"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is a socket"), "{err}");
    assert!(!dir.path().join("ran").exists(), "the command ran");
    assert!(std::fs::symlink_metadata(&sock)
        .unwrap()
        .file_type()
        .is_socket());
}

#[test]
fn a_fifo_receives_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; mkfifo only creates a node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    // The reader opens its end within moments; fsprof refuses a FIFO
    // nobody reads, so wait for it.
    let mut last = String::new();
    for _ in 0..200 {
        let o = capture_in(dir.path(), &["run", "-q"], &fifo, &["cat", "/etc/hostname"]);
        if o.status.success() {
            let got = reader.join().unwrap();
            let p = fsprof_core::format::parse_profile(&got, &fifo).unwrap();
            assert_eq!(p.meta.tool, "run");
            assert!(std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo());
            return;
        }
        last = String::from_utf8_lossy(&o.stderr).into_owned();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("never written: {last}");
}

/// Sets or clears the immutable flag of directory `dir` (FS_IOC_SETFLAGS):
/// nothing can be created in it then, not even by root.
fn set_immutable(dir: &Path, on: bool) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(dir)?;
    let mut flags: libc::c_int = 0;
    // SAFETY: FS_IOC_GETFLAGS/SETFLAGS read and write one int at the
    // pointer, which outlives the calls; the descriptor is open.
    unsafe {
        if libc::ioctl(f.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // FS_IMMUTABLE_FL (linux/fs.h), which the libc crate does not have.
        let imm: libc::c_int = 0x10;
        flags = if on { flags | imm } else { flags & !imm };
        if libc::ioctl(f.as_raw_fd(), libc::FS_IOC_SETFLAGS, &flags) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A device is written into, so nothing need be creatable beside it: no
/// trial file is made in its directory (for `-o /dev/null`, a file made
/// and removed in /dev on every run), and a device in a directory where
/// nothing can be created takes the profile.
#[test]
#[ignore = "needs root"]
fn a_device_takes_the_profile_where_no_file_can_be_created() {
    let dir = tempfile::tempdir().unwrap();
    let sealed = dir.path().join("sealed");
    std::fs::create_dir(&sealed).unwrap();
    let null = null_device(&sealed);
    set_immutable(&sealed, true)
        .expect("the temporary directory's file system takes FS_IMMUTABLE_FL");
    let o = fsprof()
        .current_dir(dir.path())
        .args(["run", "-q", "-o"])
        .arg(&null)
        .args(["--", "true"])
        .output()
        .unwrap();
    set_immutable(&sealed, false).unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(is_char_device(&null));
    assert_eq!(std::fs::read_dir(&sealed).unwrap().count(), 1);
}
