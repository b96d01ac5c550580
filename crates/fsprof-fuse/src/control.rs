//! The control file `.fsprof` at the mount root: reading it returns the
//! live profile as JSON (the profile file format), writing `reset` zeroes
//! the counts. It exists only in the mount (LOWER is not touched; a
//! `.fsprof` in LOWER's root is hidden by it), is left out of directory
//! listings, and none of its requests are counted.
//!
//! It is owned by the daemon's user with mode 0600: with `allow_other`,
//! other users use the files but may not read the statistics (the
//! command line, the daemon's pid, LOWER's path, the counts) nor reset
//! them (the kernel checks, `default_permissions`; root may). With
//! `--stat-allow-other` it is 0644: everyone may read, only the owner
//! reset.
//!
//! Where the daemon answers open requests, each open handle reads with
//! direct I/O the profile rendered at its open. `--fast` does not answer
//! them (see `fs::files`): the kernel then opens the file itself and reads
//! it through its page cache, bounded by the size it was last told. So a
//! lookup of the name (each path walk: the entry is never cached) renders
//! the profile for the asking process and reports its length as the size,
//! made to differ from the size reported before (a trailing newline) so
//! that the kernel drops the pages of the previous one; reads without a
//! handle serve the asking process's rendering. Two processes reading the
//! file at the same moment may then see a cut profile.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use fuser::{Errno, FileAttr, FileType, INodeNo};

use crate::live::Live;
use crate::sys::Res;

pub const NAME: &str = ".fsprof";
/// Its node id: outside both the lower inode numbers and the synthetic ids.
pub const ID: u64 = u64::MAX - 1;
/// Its file handles have this bit set (lower file handles are descriptors).
const FH_BIT: u64 = 1 << 63;

pub fn is_name(parent: u64, name: &OsStr) -> bool {
    parent == crate::inodes::ROOT && name == NAME
}

/// A request on the control file: through one of its handles, or (the
/// kernel opening files itself in `--fast`) by its node id alone.
pub fn is_control(ino: u64, fh: u64) -> bool {
    ino == ID || Control::is_fh(fh)
}

pub struct Control {
    live: Arc<Live>,
    /// The JSON each open handle reads, rendered at open so that one read
    /// of the file sees one consistent profile.
    open: Mutex<HashMap<u64, Arc<Vec<u8>>>>,
    next: AtomicU64,
    /// Read through the kernel's page cache without handles (`--fast`).
    cached: bool,
    /// Without handles: the rendering each process looked up last.
    by_pid: Mutex<HashMap<u32, Arc<Vec<u8>>>>,
    /// The size the kernel was told last.
    shown_size: AtomicU64,
    uid: u32,
    gid: u32,
    /// 0600, or 0644 when other users may read the statistics.
    perm: u16,
}

/// Renderings kept for processes that looked the file up without reading
/// it to the end are dropped beyond this many.
const MAX_PIDS: usize = 64;

impl Control {
    /// `cached`: read through the page cache, without handles;
    /// `shared`: other users may read it.
    pub fn new(live: Arc<Live>, cached: bool, shared: bool) -> Control {
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Control {
            live,
            open: Mutex::new(HashMap::new()),
            next: AtomicU64::new(FH_BIT | 1),
            cached,
            by_pid: Mutex::new(HashMap::new()),
            shown_size: AtomicU64::new(0),
            uid,
            gid,
            perm: if shared { 0o644 } else { 0o600 },
        }
    }

    fn render(&self) -> Vec<u8> {
        fsprof_core::format::to_json(&self.live.profile()).into_bytes()
    }

    /// The attributes a lookup of the name answers: with handles, those of
    /// [`Control::attr`]; without, a fresh rendering for `pid`, its length
    /// the size.
    pub fn looked_up(&self, pid: u32) -> FileAttr {
        if !self.cached {
            return self.attr();
        }
        let mut json = self.render();
        if json.len() as u64 == self.shown_size.load(Relaxed) {
            json.push(b'\n');
        }
        let size = json.len() as u64;
        let mut m = lock(&self.by_pid);
        if m.len() >= MAX_PIDS {
            m.clear();
        }
        m.insert(pid, Arc::new(json));
        drop(m);
        self.sized(size)
    }

    /// The attributes a getattr answers: the size of `pid`'s rendering
    /// (or the last one shown) without handles.
    pub fn attr_for(&self, pid: u32) -> FileAttr {
        if !self.cached {
            return self.attr();
        }
        let size = lock(&self.by_pid).get(&pid).map(|j| j.len() as u64);
        self.sized(size.unwrap_or_else(|| self.shown_size.load(Relaxed)))
    }

    /// Truncated (`echo reset > .fsprof`): the kernel now holds size 0.
    pub fn truncated(&self) -> FileAttr {
        self.sized(0)
    }

    fn sized(&self, size: u64) -> FileAttr {
        self.shown_size.store(size, Relaxed);
        let mut a = self.attr();
        a.size = size;
        a
    }

    /// A read without a handle: `pid`'s rendering from its lookup.
    pub fn read_unopened(&self, pid: u32, offset: u64, size: u32) -> Res<Vec<u8>> {
        let json = lock(&self.by_pid).get(&pid).cloned();
        let json = match json {
            Some(j) => j,
            None => Arc::new(self.render()),
        };
        Ok(slice(&json, offset, size))
    }

    pub fn is_fh(fh: u64) -> bool {
        fh & FH_BIT != 0
    }

    fn attr(&self) -> FileAttr {
        let t = crate::attr::time((self.live.start_unix_ns() / 1_000_000_000) as i64, 0);
        FileAttr {
            ino: INodeNo(ID),
            // Read with direct I/O, so the size does not limit reads.
            size: 0,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind: FileType::RegularFile,
            perm: self.perm,
            nlink: 1,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// A new handle; its reads see the profile as it is now.
    pub fn open(&self) -> u64 {
        let fh = self.next.fetch_add(1, Relaxed);
        let json = self.render();
        lock(&self.open).insert(fh, Arc::new(json));
        fh
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Res<Vec<u8>> {
        let json = lock(&self.open).get(&fh).cloned().ok_or(Errno::EBADF)?;
        Ok(slice(&json, offset, size))
    }

    /// `reset` (with or without a newline) zeroes the counts.
    pub fn write(&self, data: &[u8]) -> Res<u32> {
        match std::str::from_utf8(data).map(str::trim) {
            Ok("reset") => {
                self.live.rec.reset();
                self.live.poll.reset();
                Ok(data.len() as u32)
            }
            _ => Err(Errno::EINVAL),
        }
    }

    pub fn release(&self, fh: u64) {
        lock(&self.open).remove(&fh);
    }
}

fn slice(json: &[u8], offset: u64, size: u32) -> Vec<u8> {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(json.len());
    let end = start.saturating_add(size as usize).min(json.len());
    json[start..end].to_vec()
}

fn lock<K, V>(m: &Mutex<HashMap<K, V>>) -> std::sync::MutexGuard<'_, HashMap<K, V>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
