//! Directories: opendir, readdir, readdirplus.
//!
//! A directory handle is a lower descriptor (marked like file handles, so
//! never 0); each readdir seeks it to the kernel's offset (a `d_off` cookie
//! the lower file system gave) and reads one `getdents64` batch, so no
//! per-handle state is kept. The control file's name is left out of the
//! root's listing.
//!
//! `--fast` without passthrough answers opendir with ENOSYS, as it does
//! open (see `files`): the kernel then opens and releases directories
//! itself and caches their entries (FOPEN_CACHE_DIR, its default then), so
//! a warm `grep -r` sends no opendir and releasedir per directory. A
//! readdir without a handle (handle 0: the cache was empty) opens the
//! directory for that request alone.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::os::fd::{IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::Duration;

use fuser::{FopenFlags, Generation, INodeNo, ReplyDirectory, ReplyDirectoryPlus};

use super::files::{fd_of, OPENED};
use super::{Mode, PassFs};
use crate::control;
use crate::inodes::{DataFd, ROOT};
use crate::sys::{self, Dirent, Res};

/// One getdents64 batch: about what one FUSE readdir reply (a page) holds,
/// so little is read twice when the reply fills first.
const BATCH: usize = 4096;

thread_local! {
    static DENTS: RefCell<Vec<u8>> = RefCell::new(vec![0u8; BATCH]);
}

fn is_dot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

impl PassFs {
    pub(super) fn dir_open_flags(&self) -> FopenFlags {
        match self.cfg.mode {
            Mode::ObserveAll => FopenFlags::empty(),
            Mode::Fast => FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_CACHE_DIR,
        }
    }

    pub(super) fn open_dir(&self, id: INodeNo) -> Res<u64> {
        Ok(self.open_dir_fd(id)?.into_raw_fd() as u64 | OPENED)
    }

    /// A new descriptor of directory `id`, for a handle or one request.
    fn open_dir_fd(&self, id: INodeNo) -> Res<OwnedFd> {
        let ino = self.inode(id)?;
        sys::open_at(ino.fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)
    }

    /// The descriptor a readdir works on: its handle's, or without one a
    /// descriptor of the request's own.
    pub(super) fn dir_fd(&self, id: INodeNo, fh: u64) -> Res<DataFd> {
        if fh != 0 {
            return Ok(DataFd::Handle(fd_of(fh)));
        }
        Ok(DataFd::Kept(Arc::new(self.open_dir_fd(id)?)))
    }

    /// Calls `add` for each entry from `offset` on (the control file's name
    /// skipped) until it says the reply is full or the directory ends.
    /// Reads further batches only while nothing was added, since an empty
    /// reply means the end to the kernel.
    fn each_entry(
        &self,
        id: INodeNo,
        fh: u64,
        offset: u64,
        mut add: impl FnMut(&Dirent<'_>) -> bool,
    ) -> Res<()> {
        let hide_control = id.0 == ROOT;
        let dir = self.dir_fd(id, fh)?;
        let fd: RawFd = dir.raw();
        DENTS.with_borrow_mut(|buf| {
            let mut at = offset;
            loop {
                let mut any = false;
                let mut added = false;
                for d in sys::getdents(fd, at, buf)? {
                    any = true;
                    at = d.off;
                    if hide_control && d.name == control::NAME.as_bytes() {
                        continue;
                    }
                    if add(&d) {
                        return Ok(());
                    }
                    added = true;
                }
                if added || !any {
                    return Ok(());
                }
            }
        })
    }

    pub(super) fn read_dir(
        &self,
        id: INodeNo,
        fh: u64,
        offset: u64,
        reply: &mut ReplyDirectory,
    ) -> Res<()> {
        self.each_entry(id, fh, offset, |d| {
            let kind = crate::attr::kind(sys::dtype_mode(d.kind));
            reply.add(INodeNo(d.ino), d.off, kind, OsStr::from_bytes(d.name))
        })
    }

    /// Entries with their attributes; each one but `.` and `..` counts as
    /// a lookup (the kernel takes a reference), undone if the reply had no
    /// room for it.
    pub(super) fn read_dir_plus(
        &self,
        id: INodeNo,
        fh: u64,
        offset: u64,
        reply: &mut ReplyDirectoryPlus,
    ) -> Res<()> {
        let dir = self.inode(id)?;
        let g = Generation(0);
        self.each_entry(id, fh, offset, |d| {
            let name = OsStr::from_bytes(d.name);
            if is_dot(d.name) {
                // SAFETY: stat is plain data; zeroes are a valid value.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                st.st_ino = d.ino;
                st.st_mode = sys::dtype_mode(d.kind);
                let a = crate::attr::from_stat(&st, d.ino);
                return reply.add(INodeNo(d.ino), d.off, name, &Duration::ZERO, &a, g);
            }
            let Ok(c) = sys::cname(name) else {
                return false;
            };
            // Gone since the getdents: left out, as a later listing would.
            let Ok((ino, st)) = self.inodes.lookup(&dir, &c) else {
                return false;
            };
            let a = self.attr(&ino, &st);
            let full = reply.add(INodeNo(ino.id), d.off, name, &self.ttl, &a, g);
            if full {
                self.inodes.forget(ino.id, 1);
            }
            full
        })
    }
}
