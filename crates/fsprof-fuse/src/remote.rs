//! The other side of the control file: `fsprof stat` and `fsprof umount`
//! talk to a running mount through `MOUNTPOINT/.fsprof`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fsprof_core::Profile;

use crate::control;
use crate::mountinfo;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("{0} is not an fsprof mount")]
    NotOurs(PathBuf),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("{0} is busy (a file is open or a process works inside it): close it, or use --lazy")]
    Busy(PathBuf),
    #[error("unmounting {0}: {1}")]
    Umount(PathBuf, std::io::Error),
    #[error("the daemon (pid {0}) did not exit within {1} s after the unmount")]
    Lingering(i32, u64),
}

/// Whether a FUSE file system is mounted at `mountpoint`, from the mount
/// table: asking the mount itself (statfs) would be a request the profile
/// counts.
fn is_fuse(mountpoint: &Path) -> Result<bool, RemoteError> {
    Ok(mountinfo::fuse_at(mountpoint).is_some())
}

/// The live profile of the fsprof mount at `mountpoint`.
pub fn read_profile(mountpoint: &Path) -> Result<Profile, RemoteError> {
    let not_ours = || RemoteError::NotOurs(mountpoint.into());
    if !is_fuse(mountpoint)? {
        return Err(not_ours());
    }
    let file = mountpoint.join(control::NAME);
    let bytes = std::fs::read(&file).map_err(|_| not_ours())?;
    fsprof_core::format::parse_profile(&bytes, &file).map_err(|_| not_ours())
}

/// Zeroes the mount's counts.
pub fn reset(mountpoint: &Path) -> Result<(), RemoteError> {
    if !is_fuse(mountpoint)? {
        return Err(RemoteError::NotOurs(mountpoint.into()));
    }
    let file = mountpoint.join(control::NAME);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => RemoteError::NotOurs(mountpoint.into()),
            _ => RemoteError::Io(file.clone(), e),
        })?;
    f.write_all(b"reset\n")
        .map_err(|e| RemoteError::Io(file.clone(), e))
}

/// How long `umount` waits for the daemon to write its profile.
const WAIT: Duration = Duration::from_secs(60);

/// Unmounts an fsprof mount and waits until its daemon has written the
/// profile; returns where it went.
pub fn umount(mountpoint: &Path, lazy: bool) -> Result<Option<PathBuf>, RemoteError> {
    let p = read_profile(mountpoint)?;
    let pid: Option<i32> = p
        .meta
        .settings
        .get("daemon pid")
        .and_then(|s| s.parse().ok());
    let output = p.meta.settings.get("output").map(PathBuf::from);
    let mp = mountpoint.to_path_buf();
    match umount_when_idle(mountpoint, lazy) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Err(RemoteError::Busy(mp)),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            fusermount_u(mountpoint, lazy).map_err(|e| RemoteError::Umount(mp.clone(), e))?
        }
        Err(e) => return Err(RemoteError::Umount(mp, e)),
    }
    if let Some(pid) = pid {
        let t = Instant::now();
        while alive(pid) {
            if t.elapsed() > WAIT {
                return Err(RemoteError::Lingering(pid, WAIT.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(output)
}

/// How long a busy mount may take to become idle on its own.
const BUSY_GRACE: Duration = Duration::from_secs(2);

/// Unmounts, retrying while the mount is busy for at most [`BUSY_GRACE`]:
/// files the workload just closed can hold the mount for a moment after
/// the last process left it (the kernel finishes some closes, and FUSE
/// releases, asynchronously; seen right after pjdfstest in fast mode).
fn umount_when_idle(mountpoint: &Path, lazy: bool) -> std::io::Result<()> {
    let t = Instant::now();
    loop {
        match mountinfo::umount(mountpoint, lazy) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && t.elapsed() < BUSY_GRACE => {
                std::thread::sleep(Duration::from_millis(50))
            }
            r => return r,
        }
    }
}

/// Whether `pid` runs (a zombie has finished: its parent has not looked).
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only asks whether the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // pid (comm) STATE ...; comm may hold spaces and parentheses.
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The setuid helper unmounts for users who may not call umount2.
fn fusermount_u(mountpoint: &Path, lazy: bool) -> std::io::Result<()> {
    let mut last = std::io::Error::from_raw_os_error(libc::EPERM);
    for bin in ["fusermount3", "fusermount"] {
        let mut c = std::process::Command::new(bin);
        c.arg("-u");
        if lazy {
            c.arg("-z");
        }
        match c.arg("--").arg(mountpoint).status() {
            Ok(s) if s.success() => return Ok(()),
            Ok(s) => last = std::io::Error::other(format!("{bin} -u failed ({s})")),
            Err(e) => last = e,
        }
    }
    Err(last)
}
