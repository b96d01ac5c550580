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
    // After every entry is made: making an entry changes its parent's
    // times.
    settle_atimes(root, c);
    (made, failed)
}

/// Gives every file and directory made an access time just after its last
/// change, as a file read since it last changed has, which `relatime`
/// (Linux's default) then leaves alone on reads. A file just made has an
/// access time no later than its change time, so its first read or
/// listing would update it (an inode update inside the call: the first
/// 4 KiB read of a new file measured 1.9–2.7 µs against 1.2–1.4 µs once
/// settled), where the traced program read files relatime had already
/// left alone: every replayed first read came out slower than traced.
/// Best effort: an entry whose time cannot be set replays as before.
fn settle_atimes(root: &Root, c: &Compiled) {
    for e in &c.initial {
        if !matches!(e.kind, InitKind::File { .. } | InitKind::Dir) {
            continue;
        }
        let Ok((d, n)) = root.parent(&c.strings[e.path as usize]) else {
            continue;
        };
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a timespec to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
        // A second after now: later than the change time this call itself
        // sets, at any timestamp granularity.
        let times = [
            libc::timespec {
                tv_sec: now.tv_sec + 1,
                tv_nsec: now.tv_nsec,
            },
            libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
        ];
        // SAFETY: a directory fd we hold, a C string and two timespecs;
        // the entry itself is changed, never a symlink's target.
        unsafe {
            libc::utimensat(
                d.as_raw_fd(),
                n.as_ptr(),
                times.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_trace::replayfile::InitEntry;
    use std::os::unix::fs::MetadataExt;

    /// Prepared files and directories are left as read since their last
    /// change (access time after change and modification times), so that
    /// relatime does not update them on the replay's first reads.
    #[test]
    fn prepared_entries_have_an_access_time_after_their_last_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let entry = |path: u32, kind| InitEntry {
            path,
            kind,
            mode: None,
            content: Vec::new(),
        };
        let c = Compiled {
            strings: vec![b"/d".to_vec(), b"/d/f".to_vec()],
            initial: vec![
                entry(0, InitKind::Dir),
                entry(
                    1,
                    InitKind::File {
                        size: 4096,
                        exact: true,
                    },
                ),
            ],
            ..Default::default()
        };
        let (made, failed) = prepare(&root, &c);
        assert_eq!((made, failed.len()), (2, 0), "{failed:?}");
        for p in ["d", "d/f"] {
            let m = std::fs::symlink_metadata(dir.path().join(p)).unwrap();
            let ns = |s: i64, n: i64| s as i128 * 1_000_000_000 + n as i128;
            let atime = ns(m.atime(), m.atime_nsec());
            assert!(atime > ns(m.ctime(), m.ctime_nsec()), "{p}: {m:?}");
            assert!(atime > ns(m.mtime(), m.mtime_nsec()), "{p}: {m:?}");
        }
    }
}
