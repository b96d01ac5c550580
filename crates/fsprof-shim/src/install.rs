//! Puts the embedded shim where the dynamic linker can load it.
//!
//! The shim goes into a directory of the temporary directory that only we
//! can write: whoever can replace the file runs code in every profiled
//! program. That directory is `fsprof-<uid>` when it is ours; when another
//! user made that name first, a private directory of our own making
//! (`fsprof-<uid>-XXXXXX`, mkdtemp) takes its place, found again by the
//! next run, rather than a refusal that any local user could cause. Every
//! step after the directory is found runs on its descriptor (`openat`,
//! `renameat`), so a name swapped meanwhile leads nowhere, and a file that
//! cannot be completed (a full file system) is removed.

use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::{SHIM_HASH, SHIM_SO};

/// The directory's mode: ours to write, searchable by all, so that a
/// workload that drops to another user can still load the shim (ld.so
/// would otherwise print "cannot be preloaded" on the program's stderr);
/// the shim then finds it cannot join the run and stays idle.
const DIR_MODE: libc::mode_t = 0o711;

/// Writes the shim to `<base>/fsprof-<uid>/libfsprof_shim-<hash>.so` (or
/// into this user's own fallback directory, see the module doc) unless an
/// identical copy is there, and returns its path. The directory also keeps
/// per-boot facts (the TSC rate, the shim's own cost).
pub fn install(base: &Path) -> io::Result<PathBuf> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let (dir, fd) = private_dir(base, uid)?;
    let name = format!("libfsprof_shim-{SHIM_HASH:016x}.so");
    // The name is the content's hash and only we can write the directory,
    // so a regular file of ours of the right size is the right file (a
    // partial write never gets this name: it is renamed into place).
    let present = stat_at(&fd, &name).is_some_and(|st| {
        st.st_mode & libc::S_IFMT == libc::S_IFREG
            && st.st_uid == uid
            && st.st_size == SHIM_SO.len() as libc::off_t
    });
    if !present {
        write_new(&fd, &name)?;
    }
    Ok(dir.join(name))
}

/// `<base>/fsprof-<uid>` if it is ours and private, else this user's
/// fallback directory: an earlier one if there is one, else a new one.
fn private_dir(base: &Path, uid: u32) -> io::Result<(PathBuf, OwnedFd)> {
    let preferred = base.join(format!("fsprof-{uid}"));
    // Opened first: it is there on every run but the first, and the mkdir
    // that fails with EEXIST is a path walk of every run's start-up. The
    // checks are on the descriptor, whoever made the directory.
    if let Some(fd) = open_ours(&preferred, uid, true) {
        return Ok((preferred, fd));
    }
    match mkdir(&preferred) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    if let Some(fd) = open_ours(&preferred, uid, true) {
        return Ok((preferred, fd));
    }
    // Someone else holds the name (or a symlink, or a file, is there).
    let prefix = format!("fsprof-{uid}-");
    if let Ok(entries) = fs::read_dir(base) {
        for e in entries.flatten() {
            let name = e.file_name();
            let fallback = name
                .as_bytes()
                .strip_prefix(prefix.as_bytes())
                .is_some_and(|rest| rest.len() == 6);
            if !fallback {
                continue;
            }
            let path = e.path();
            if let Some(fd) = open_ours(&path, uid, false) {
                return Ok((path, fd));
            }
        }
    }
    let path = mkdtemp(&base.join(format!("{prefix}XXXXXX")))?;
    match open_ours(&path, uid, true) {
        Some(fd) => Ok((path, fd)),
        None => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} changed as it was made; set TMPDIR to a directory only you can write",
                path.display()
            ),
        )),
    }
}

/// The directory at `path` (not a symlink), if it is ours and no one else
/// can write it; `fix_mode` opens a private one of ours to searching
/// (made 0700 by mkdtemp or an older fsprof). Fallback directories are
/// only reused when their mode is exactly what we make.
fn open_ours(path: &Path, uid: u32, fix_mode: bool) -> Option<OwnedFd> {
    let c = cstr(path.as_os_str()).ok()?;
    // SAFETY: a NUL-terminated path that outlives the call.
    let raw = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return None;
    }
    // SAFETY: open returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let st = fstat(&fd)?;
    let mode = st.st_mode & 0o7777;
    if st.st_uid != uid || mode & 0o022 != 0 || (!fix_mode && mode != DIR_MODE) {
        return None;
    }
    if mode != DIR_MODE {
        // SAFETY: fchmod on a descriptor we own.
        if unsafe { libc::fchmod(fd.as_raw_fd(), DIR_MODE) } != 0 {
            return None;
        }
    }
    Some(fd)
}

/// Writes the shim under a temporary name and renames it to `name`, all
/// within `dir`; the temporary file is removed on every failure.
fn write_new(dir: &OwnedFd, name: &str) -> io::Result<()> {
    let tmp = format!(".shim-{}.tmp", std::process::id());
    // A leftover of a killed run that had our pid.
    unlink_at(dir, &tmp);
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let ctmp = cstr(OsStr::new(&tmp))?;
    // SAFETY: a directory descriptor we own and a NUL-terminated name.
    let raw = unsafe { libc::openat(dir.as_raw_fd(), ctmp.as_ptr(), flags, 0o700) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat returned a new descriptor that nothing else owns.
    let mut f = unsafe { File::from_raw_fd(raw) };
    let cname = cstr(OsStr::new(name))?;
    let done = f.write_all(SHIM_SO).and_then(|()| {
        // The umask may have narrowed the mode openat gave.
        // SAFETY: fchmod on a descriptor we own.
        check(unsafe { libc::fchmod(f.as_raw_fd(), 0o755) })?;
        let d = dir.as_raw_fd();
        // SAFETY: both names are NUL-terminated and relative to `dir`, a
        // descriptor we own.
        check(unsafe { libc::renameat(d, ctmp.as_ptr(), d, cname.as_ptr()) })
    });
    if done.is_err() {
        unlink_at(dir, &tmp);
    }
    done
}

fn mkdir(path: &Path) -> io::Result<()> {
    let c = cstr(path.as_os_str())?;
    // SAFETY: a NUL-terminated path that outlives the call.
    check(unsafe { libc::mkdir(c.as_ptr(), DIR_MODE) })
}

/// A libc status (0 or -1 with errno) as a result.
fn check(rc: libc::c_int) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// A new directory from a `...XXXXXX` template, private (0700).
fn mkdtemp(template: &Path) -> io::Result<PathBuf> {
    let mut buf = cstr(template.as_os_str())?.into_bytes_with_nul();
    // SAFETY: a writable NUL-terminated template ending in XXXXXX, which
    // mkdtemp fills in place.
    if unsafe { libc::mkdtemp(buf.as_mut_ptr().cast()) }.is_null() {
        return Err(io::Error::last_os_error());
    }
    buf.pop();
    Ok(PathBuf::from(OsStr::from_bytes(&buf)))
}

fn fstat(fd: &OwnedFd) -> Option<libc::stat> {
    // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor we own and a stat buffer of the right type.
    (unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0).then_some(st)
}

fn stat_at(dir: &OwnedFd, name: &str) -> Option<libc::stat> {
    let c = cstr(OsStr::new(name)).ok()?;
    // SAFETY: an all-zero stat is a valid value for fstatat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a directory descriptor we own, a NUL-terminated name and a
    // stat buffer of the right type.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    (rc == 0).then_some(st)
}

fn unlink_at(dir: &OwnedFd, name: &str) {
    if let Ok(c) = cstr(OsStr::new(name)) {
        // SAFETY: a directory descriptor we own and a NUL-terminated name.
        unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) };
    }
}

fn cstr(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}
