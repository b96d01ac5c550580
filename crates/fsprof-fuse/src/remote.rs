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
    #[error("{0} is an fsprof mount whose daemon is gone (was it killed?): its profile was not written; `fsprof umount {0}` detaches it")]
    DaemonGone(PathBuf),
    #[error("{0} is the fsprof mount of uid {1}: its statistics are not shared with you (see `fsprof mount --allow-other --stat-allow-other`)")]
    NotShared(PathBuf, u32),
    #[error("{0} is the fsprof mount of uid {1}: only that user or root may unmount it")]
    NotYours(PathBuf, u32),
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

/// The live profile of the fsprof mount at `mountpoint`. An fsprof mount
/// (by the mount table) whose control file cannot be read is told apart:
/// its daemon is gone, or it is another user's.
pub fn read_profile(mountpoint: &Path) -> Result<Profile, RemoteError> {
    let not_ours = || RemoteError::NotOurs(mountpoint.into());
    if !is_fuse(mountpoint)? {
        return Err(not_ours());
    }
    let file = mountpoint.join(control::NAME);
    let bytes = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) => return Err(unreadable(mountpoint, e)),
    };
    fsprof_core::format::parse_profile(&bytes, &file).map_err(|_| not_ours())
}

/// Why the control file of the FUSE mount at `mountpoint` could not be
/// read.
fn unreadable(mountpoint: &Path, e: std::io::Error) -> RemoteError {
    let mp = mountpoint.to_path_buf();
    let Some(entry) = mountinfo::fsprof_at(mountpoint) else {
        return RemoteError::NotOurs(mp);
    };
    match e.raw_os_error() {
        // The daemon's end of the connection closed: requests fail so.
        Some(libc::ENOTCONN) => RemoteError::DaemonGone(mp),
        Some(libc::EACCES | libc::EPERM) => {
            RemoteError::NotShared(mp, mountinfo::owner(&entry).unwrap_or(u32::MAX))
        }
        _ => RemoteError::Io(mountpoint.join(control::NAME), e),
    }
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

/// What `fsprof umount` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Unmounted {
    /// Our mount: its daemon wrote the profile (to this file, if it said).
    Written(Option<PathBuf>),
    /// A mount whose daemon was gone: detached lazily, no profile.
    DaemonGone,
    /// Another user's mount (as root): unmounted; its daemon writes the
    /// profile where that user asked.
    Others(u32),
}

/// Unmounts an fsprof mount and waits until its daemon has written the
/// profile; a mount whose daemon is gone is detached (lazily: nothing
/// answers on it any more), and root unmounts another user's.
pub fn umount(mountpoint: &Path, lazy: bool) -> Result<Unmounted, RemoteError> {
    let mp = mountpoint.to_path_buf();
    let p = match read_profile(mountpoint) {
        Ok(p) => p,
        Err(RemoteError::DaemonGone(_)) => {
            detach(mountpoint, true)?;
            return Ok(Unmounted::DaemonGone);
        }
        Err(RemoteError::NotShared(_, uid)) => {
            // umount2 alone: the setuid helper unmounts only its user's.
            return match umount_when_idle(mountpoint, lazy) {
                Ok(()) => Ok(Unmounted::Others(uid)),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(RemoteError::Busy(mp)),
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                    Err(RemoteError::NotYours(mp, uid))
                }
                Err(e) => Err(RemoteError::Umount(mp, e)),
            };
        }
        Err(e) => return Err(e),
    };
    let pid: Option<i32> = p
        .meta
        .settings
        .get("daemon pid")
        .and_then(|s| s.parse().ok());
    let output = p.meta.settings.get("output").map(PathBuf::from);
    detach(mountpoint, lazy)?;
    if let Some(pid) = pid {
        let t = Instant::now();
        while alive(pid) {
            if t.elapsed() > WAIT {
                return Err(RemoteError::Lingering(pid, WAIT.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(Unmounted::Written(output))
}

/// umount2, or for a user who may not, the setuid helper.
fn detach(mountpoint: &Path, lazy: bool) -> Result<(), RemoteError> {
    let mp = mountpoint.to_path_buf();
    match umount_when_idle(mountpoint, lazy) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(RemoteError::Busy(mp)),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            fusermount_u(mountpoint, lazy).map_err(|e| RemoteError::Umount(mp, e))
        }
        Err(e) => Err(RemoteError::Umount(mp, e)),
    }
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

/// The setuid helper unmounts for users who may not call umount2: the
/// one `FUSERMOUNT_PATH` names (as fuser's mount takes it), else
/// fusermount3 or fusermount on PATH. A helper that refuses (another
/// user's mount) is EPERM.
fn fusermount_u(mountpoint: &Path, lazy: bool) -> std::io::Result<()> {
    let mut last = std::io::Error::from_raw_os_error(libc::EPERM);
    let named = std::env::var_os("FUSERMOUNT_PATH").map(PathBuf::from);
    let bins: Vec<PathBuf> = match named {
        Some(b) => vec![b],
        None => vec!["fusermount3".into(), "fusermount".into()],
    };
    for bin in bins {
        let bin = bin.display().to_string();
        let mut c = std::process::Command::new(&bin);
        c.arg("-u");
        if lazy {
            c.arg("-z");
        }
        let out = c
            .arg("--")
            .arg(mountpoint)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output();
        match out {
            Ok(o) if o.status.success() => return Ok(()),
            Ok(o) => {
                let said = String::from_utf8_lossy(&o.stderr);
                let said = said.lines().next().unwrap_or("").trim().to_string();
                last = if said.contains("not permitted") || said.contains("Permission denied") {
                    std::io::Error::from_raw_os_error(libc::EPERM)
                } else {
                    std::io::Error::other(format!("{bin} -u failed ({}): {said}", o.status))
                };
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}
