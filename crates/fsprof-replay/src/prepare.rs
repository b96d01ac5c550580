//! `--prepare`: the trace's initial state made under the root (directories,
//! files of their sizes with the contents the trace read, symlinks), all
//! through the confined [`Root`]. Only into an empty root: nothing the user
//! had there is overwritten.

use std::os::fd::AsRawFd;

use fsprof_trace::replayfile::{Compiled, InitKind};

use crate::root::Root;
use crate::ReplayError;

/// Files up to this size get their unread parts written as zeros (so that
/// reads hit real blocks, as they did when traced); larger ones are left
/// sparse there.
pub(crate) const FILL_MAX: u64 = 256 << 20;

pub fn is_empty(dir: &std::path::Path) -> Result<bool, ReplayError> {
    let mut rd =
        std::fs::read_dir(dir).map_err(|e| ReplayError::Root(format!("{}: {e}", dir.display())))?;
    Ok(rd.next().is_none())
}

/// Creates every initial entry; returns how many were made, and why the
/// others could not be (a path through a symlink the trace makes later, a
/// `..` that leaves a directory not made yet). Those show up again as
/// mismatches on their first access.
pub fn prepare(root: &Root, c: &Compiled) -> (usize, Vec<String>) {
    let mut made = 0;
    let mut failed = Vec::new();
    for e in &c.initial {
        match entry(root, c, e) {
            Ok(()) => made += 1,
            Err(ReplayError::Prepare(m)) => failed.push(m),
            Err(other) => failed.push(other.to_string()),
        }
    }
    (made, failed)
}

fn fail(path: &[u8], what: &str, e: i32) -> ReplayError {
    ReplayError::Prepare(format!(
        "{}: {what}: {}",
        String::from_utf8_lossy(path),
        std::io::Error::from_raw_os_error(e)
    ))
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn entry(
    root: &Root,
    c: &Compiled,
    e: &fsprof_trace::replayfile::InitEntry,
) -> Result<(), ReplayError> {
    let path = &c.strings[e.path as usize];
    match &e.kind {
        InitKind::Dir => make_dir(root, path, e.mode.unwrap_or(0o755)),
        InitKind::Symlink { target } => make_symlink(root, path, target),
        InitKind::File { size, .. } => make_file(root, c, e, path, *size),
    }
}

fn make_dir(root: &Root, path: &[u8], mode: u32) -> Result<(), ReplayError> {
    let (d, n) = root.parent(path).map_err(|x| fail(path, "parent", x))?;
    // SAFETY: a directory fd and a C string we own.
    let r = unsafe { libc::mkdirat(d.as_raw_fd(), n.as_ptr(), mode) };
    let errno = last_errno();
    if r != 0 && errno != libc::EEXIST {
        return Err(fail(path, "mkdir", errno));
    }
    Ok(())
}

fn make_symlink(root: &Root, path: &[u8], target: &[u8]) -> Result<(), ReplayError> {
    let (d, n) = root.parent(path).map_err(|x| fail(path, "parent", x))?;
    let t = std::ffi::CString::new(target.to_vec())
        .map_err(|_| fail(path, "symlink target", libc::EINVAL))?;
    // SAFETY: valid C strings and a directory fd.
    if unsafe { libc::symlinkat(t.as_ptr(), d.as_raw_fd(), n.as_ptr()) } != 0 {
        let errno = last_errno();
        if errno != libc::EEXIST {
            return Err(fail(path, "symlink", errno));
        }
    }
    Ok(())
}

/// A file of `size` bytes: zeros up to [`FILL_MAX`] (so that reads hit
/// real blocks), then what the trace read, at its offsets.
fn make_file(
    root: &Root,
    c: &Compiled,
    e: &fsprof_trace::replayfile::InitEntry,
    path: &[u8],
    size: u64,
) -> Result<(), ReplayError> {
    let flags = (libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY) as i64;
    let f = match root.openat(path, flags, e.mode.unwrap_or(0o644)) {
        Ok(f) => f,
        // Another spelling of the same path (`a/../b` and `b`)
        // made it already: the root was empty before.
        Err(libc::EEXIST) => return Ok(()),
        Err(x) => return Err(fail(path, "create", x)),
    };
    let fd = f.as_raw_fd();
    let write_at = |data: &[u8], off: u64| -> Result<(), ReplayError> {
        let mut done = 0usize;
        while done < data.len() {
            // SAFETY: `data` is valid for its length.
            let r = unsafe {
                libc::pwrite(
                    fd,
                    data[done..].as_ptr() as *const _,
                    data.len() - done,
                    (off + done as u64) as i64,
                )
            };
            if r <= 0 {
                return Err(fail(path, "write", last_errno()));
            }
            done += r as usize;
        }
        Ok(())
    };
    if size <= FILL_MAX {
        let zeros = vec![0u8; size.min(1 << 20) as usize];
        let mut off = 0;
        while off < size {
            let n = (size - off).min(zeros.len() as u64) as usize;
            write_at(&zeros[..n], off)?;
            off += n as u64;
        }
    }
    for &(off, b) in &e.content {
        write_at(&c.buffers[b as usize], off)?;
    }
    // SAFETY: an fd we own.
    if unsafe { libc::ftruncate(fd, size as i64) } != 0 {
        return Err(fail(path, "truncate", last_errno()));
    }
    Ok(())
}
