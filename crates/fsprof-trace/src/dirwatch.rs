//! Whether a chunk file may have appeared in the run directory since the
//! last look, from an inotify watch on it: `fsprof trace` listed the
//! directory at every harvest (every 5 ms: a rewind and two `getdents64`,
//! 17% of the harvest's CPU on the loop of 4,000 `cat`s, perf), while a
//! short process's records are in its window, not in a file, and most
//! harvests find no new file. The kernel queues an event as it makes the
//! entry, so a file made after a look is an event at the next one: an
//! empty queue says exactly that no file was made or renamed into the
//! directory since.
//!
//! A hint, never trusted for more: any event named like a chunk file, a
//! full queue, or an error (the watch is then dropped) makes the caller
//! list the directory as before. Over libc: three system calls, and no
//! inotify crate in the workspace's lock file.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::FromRawFd;
use std::path::Path;

/// An inotify descriptor watching one directory for entries made in it.
pub struct DirWatch {
    fd: File,
    buf: Vec<u8>,
}

/// Bytes of `struct inotify_event` before its name.
const EVENT_HDR: usize = std::mem::size_of::<libc::inotify_event>();

impl DirWatch {
    /// Watches `dir` for files created or renamed into it.
    pub fn new(dir: &Path) -> io::Result<DirWatch> {
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: no pointers; returns a new descriptor or -1.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a descriptor just made and owned by nothing else.
        let fd = unsafe { File::from_raw_fd(raw) };
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let mask = libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_ONLYDIR | libc::IN_DONT_FOLLOW;
        // SAFETY: raw is open, path a NUL-terminated string.
        if unsafe { libc::inotify_add_watch(raw, path.as_ptr(), mask) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(DirWatch {
            fd,
            buf: vec![0; 16 << 10],
        })
    }

    /// Takes the events queued since the last call: whether one may be a
    /// new entry whose name `wanted` accepts (a full queue may have lost
    /// one: true). An error is returned for the caller to stop trusting
    /// the watch.
    pub fn made_since(&mut self, wanted: impl Fn(&[u8]) -> bool) -> io::Result<bool> {
        let mut any = false;
        loop {
            let n = match self.fd.read(&mut self.buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            let mut at = 0;
            while at + EVENT_HDR <= n {
                // SAFETY: EVENT_HDR bytes are there; plain integers, read
                // unaligned.
                let ev: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(self.buf[at..].as_ptr() as *const _) };
                let name_end = (at + EVENT_HDR).saturating_add(ev.len as usize).min(n);
                let name = &self.buf[at + EVENT_HDR..name_end];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                // The directory is gone, or the watch with it: no more
                // events would come.
                if ev.mask & libc::IN_IGNORED != 0 {
                    return Err(io::Error::from(io::ErrorKind::NotFound));
                }
                if ev.mask & libc::IN_Q_OVERFLOW != 0 || wanted(name) {
                    any = true;
                }
                at = name_end;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk_name(name: &[u8]) -> bool {
        name.first() == Some(&b't')
    }

    #[test]
    fn a_file_made_or_renamed_in_since_the_last_look_is_seen_once() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("t0"), b"before the watch").unwrap();
        let mut w = DirWatch::new(d.path()).unwrap();
        assert!(!w.made_since(chunk_name).unwrap(), "nothing made yet");
        std::fs::write(d.path().join("t1"), b"").unwrap();
        assert!(w.made_since(chunk_name).unwrap(), "a chunk file made");
        assert!(!w.made_since(chunk_name).unwrap(), "taken at the last look");
        // Another name (a free slot handed back) is not asked for.
        std::fs::write(d.path().join("f0"), b"").unwrap();
        assert!(!w.made_since(chunk_name).unwrap(), "a free slot");
        // A shim takes a free slot by renaming it to its chunk's name.
        std::fs::rename(d.path().join("f0"), d.path().join("t2")).unwrap();
        assert!(w.made_since(chunk_name).unwrap(), "a slot renamed in");
        // Writes and deletions make no entry.
        std::fs::write(d.path().join("t1"), b"records").unwrap();
        std::fs::remove_file(d.path().join("t0")).unwrap();
        assert!(!w.made_since(chunk_name).unwrap(), "no entry made");
    }

    #[test]
    fn a_watch_whose_directory_is_gone_fails() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("run");
        std::fs::create_dir(&sub).unwrap();
        let mut w = DirWatch::new(&sub).unwrap();
        std::fs::remove_dir(&sub).unwrap();
        assert!(w.made_since(chunk_name).is_err());
    }
}
