//! The control file `.fsprof` at the mount root: reading it returns the
//! live profile as JSON (the profile file format), writing `reset` zeroes
//! the counts. It exists only in the mount (LOWER is not touched; a
//! `.fsprof` in LOWER's root is hidden by it), is left out of directory
//! listings, and none of its requests are counted.
//!
//! It is owned by the daemon's user with mode 0644: with `allow_other`,
//! other users may read the statistics but not reset them (the kernel
//! checks, `default_permissions`).

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

pub struct Control {
    live: Arc<Live>,
    /// The JSON each open handle reads, rendered at open so that one read
    /// of the file sees one consistent profile.
    open: Mutex<HashMap<u64, Arc<Vec<u8>>>>,
    next: AtomicU64,
    uid: u32,
    gid: u32,
}

impl Control {
    pub fn new(live: Arc<Live>) -> Control {
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Control {
            live,
            open: Mutex::new(HashMap::new()),
            next: AtomicU64::new(FH_BIT | 1),
            uid,
            gid,
        }
    }

    pub fn is_fh(fh: u64) -> bool {
        fh & FH_BIT != 0
    }

    pub fn attr(&self) -> FileAttr {
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
            perm: 0o644,
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
        let json = fsprof_core::format::to_json(&self.live.profile()).into_bytes();
        self.lock().insert(fh, Arc::new(json));
        fh
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Res<Vec<u8>> {
        let json = self.lock().get(&fh).cloned().ok_or(Errno::EBADF)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(json.len());
        let end = start.saturating_add(size as usize).min(json.len());
        Ok(json[start..end].to_vec())
    }

    /// `reset` (with or without a newline) zeroes the counts.
    pub fn write(&self, data: &[u8]) -> Res<u32> {
        match std::str::from_utf8(data).map(str::trim) {
            Ok("reset") => {
                self.live.rec.reset();
                Ok(data.len() as u32)
            }
            _ => Err(Errno::EINVAL),
        }
    }

    pub fn release(&self, fh: u64) {
        self.lock().remove(&fh);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Vec<u8>>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}
