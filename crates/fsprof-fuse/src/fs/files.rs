//! Open files: open/create, read/write, flush/release, fsync, fallocate,
//! lseek, copy_file_range, and kernel passthrough (`--fast`).
//!
//! A file handle is the lower descriptor itself (no table to look up on
//! the data path), marked [`OPENED`] so that no handle is 0. Handles whose
//! reads and writes the kernel sends to a backing file carry
//! [`PASSTHROUGH`] beside the descriptor, so that release can drop their
//! share of the inode's backing file.
//!
//! `--fast` without passthrough answers open with ENOSYS: from then on the
//! kernel opens and releases files itself (FUSE's no_open, connection
//! wide), keeps their pages across opens, and sends reads, writes, fsync
//! and the rest with handle 0, served by the inode's own descriptors
//! ([`crate::inodes::Inode::data_fd`]). A warm `grep -r` then costs no
//! request per file instead of three (open, release and, with passthrough,
//! a getattr: each passthrough read marks the atime stale). The price: no
//! kernel passthrough (a first read comes through the daemon and is cached
//! twice, by LOWER and by the mount), and opens and closes are not seen.
//! Created files get handle 0 too: once the kernel has no_open it sends no
//! release for any file (6.18 checks no_open at release), so a handle's
//! descriptor would never be closed. The created descriptor becomes the
//! inode's writer instead (the creator may write a file whose mode denies
//! writes).

use std::cell::RefCell;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use fuser::{
    Errno, FileHandle, FopenFlags, Generation, INodeNo, ReplyCreate, ReplyData, ReplyOpen, Request,
};

use super::{not_control, Mode, PassFs};
use crate::creds;
use crate::inodes::{DataFd, Inode};
use crate::opcodes::op;
use crate::sys::{self, cname, Res};

/// Marks a handle opened with a backing file.
const PASSTHROUGH: u64 = 1 << 40;
/// Marks every file and directory handle: handle 0 means "no handle".
pub(super) const OPENED: u64 = 1 << 41;

/// Open flags of a passthrough handle: the kernel refuses any flag but
/// direct I/O, parallel direct writes and no-flush beside FOPEN_PASSTHROUGH
/// (KEEP_CACHE included: the open then fails with EIO), and the page cache
/// is the backing file's anyway. No flush on close, as for any open in
/// fast mode (see `file_open_flags`).
const PASSTHROUGH_OPEN: FopenFlags = FopenFlags::FOPEN_NOFLUSH;

/// The lower descriptor of a file handle.
pub fn fd_of(fh: u64) -> RawFd {
    (fh & 0xffff_ffff) as RawFd
}

/// Flags for the lower open: creation was decided by the kernel's
/// request, the lower descriptor is no terminal, `/proc/self/fd/N` is a
/// symlink that O_NOFOLLOW would refuse, and O_DIRECT would demand aligned
/// buffers of the daemon (the kernel already does direct I/O for the
/// caller: the request bypasses the mount's page cache).
fn lower_flags(flags: i32) -> i32 {
    flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY | libc::O_NOFOLLOW | libc::O_DIRECT)
}

/// An open lower file, before the reply.
enum Opened {
    Plain(u64),
    /// With the inode's backing file (its `users` counted).
    Passthrough(u64, Arc<Inode>),
}

thread_local! {
    /// Each worker's read buffer, grown to the largest read it served.
    static READ_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl PassFs {
    /// The reply's flags for a file opened with `open_flags`.
    fn file_open_flags(&self, open_flags: i32) -> FopenFlags {
        // A file opened read-only has nothing to flush at close(): no
        // write went through its handle, the kernel handles locks itself
        // (no FUSE_POSIX_LOCKS), and the lower descriptor's own close comes
        // with release, which is still seen. One round trip less per
        // read-only open (grep: 7,972 of 84,123), as libfuse's
        // passthrough_hp --nocache does; bindfs sends no flush at all.
        let read_only = open_flags & libc::O_ACCMODE == libc::O_RDONLY;
        let no_flush = if read_only {
            FopenFlags::FOPEN_NOFLUSH
        } else {
            FopenFlags::empty()
        };
        match self.cfg.mode {
            // Every read and write call becomes a request of its own (and
            // the kernel sends no getattr to check the size at each read
            // that reaches the end of the cached file).
            Mode::ObserveAll if self.direct_io => FopenFlags::FOPEN_DIRECT_IO | no_flush,
            // The mount's page cache is dropped at each open, so every
            // open's reads reach LOWER through the daemon at least once.
            Mode::ObserveAll => no_flush,
            // No flush request at each close(): the kernel handles locks
            // itself (no FUSE_POSIX_LOCKS), writes reached LOWER when they
            // were made (no writeback cache) and the lower descriptor's own
            // close comes with release. One request less per file opened.
            Mode::Fast => FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_NOFLUSH,
        }
    }

    pub(super) fn open_file(&self, id: INodeNo, flags: i32, reply: ReplyOpen) {
        let r = self.rec.timed(op!("open"), || {
            let ino = self.inode(id)?;
            let fd = sys::reopen(ino.fd(), lower_flags(flags))?;
            // SAFETY: reopen returned a descriptor nothing else owns.
            let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
            self.with_backing(ino, fd, |b| reply.open_backing(b))
        });
        let flags = self.file_open_flags(flags);
        match r {
            Ok(Opened::Plain(fh)) => reply.opened(FileHandle(fh), flags),
            Ok(Opened::Passthrough(fh, ino)) => {
                let b = ino.backing.lock().unwrap_or_else(|e| e.into_inner());
                let id = b.id.as_ref().expect("counted users have a backing file");
                reply.opened_passthrough(FileHandle(fh), PASSTHROUGH_OPEN, id)
            }
            Err(e) => reply.error(e),
        }
    }

    pub(super) fn create_file(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = self.rec.timed(op!("create"), || {
            not_control(parent, name)?;
            let dir = self.inode(parent)?;
            let c = cname(name)?;
            let fd = {
                let _as = creds::as_caller(req, self.cfg.as_caller)?;
                sys::open_at(dir.fd(), &c, lower_flags(flags) | libc::O_CREAT, mode)?
            };
            // The new inode by its descriptor, not its name (which another
            // process may already have moved).
            let path = sys::reopen(fd.as_fd(), libc::O_PATH)?;
            // SAFETY: a descriptor nothing else owns.
            let path = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(path) };
            let (ino, st) = self.inodes.adopt(path)?;
            let attr = self.attr(&ino, &st);
            if self.no_open {
                let writes = flags & libc::O_ACCMODE != libc::O_RDONLY;
                if writes && flags & libc::O_APPEND == 0 {
                    ino.keep_writer(fd);
                }
                return Ok((attr, Opened::Plain(0)));
            }
            Ok((attr, self.with_backing(ino, fd, |b| reply.open_backing(b))?))
        });
        let flags = self.file_open_flags(flags);
        let g = Generation(0);
        match r {
            Ok((a, Opened::Plain(fh))) => reply.created(&self.ttl, &a, g, FileHandle(fh), flags),
            Ok((a, Opened::Passthrough(fh, ino))) => {
                let b = ino.backing.lock().unwrap_or_else(|e| e.into_inner());
                let id = b.id.as_ref().expect("counted users have a backing file");
                reply.created_passthrough(&self.ttl, &a, g, FileHandle(fh), PASSTHROUGH_OPEN, id)
            }
            Err(e) => reply.error(e),
        }
    }

    /// Hands the open descriptor out as a handle, with the inode's backing
    /// file when passthrough is on (opened from this descriptor if the
    /// inode has none yet). A refused backing file turns passthrough off
    /// for the rest of the mount, saying why in the profile's settings.
    fn with_backing(
        &self,
        ino: Arc<Inode>,
        fd: OwnedFd,
        open_backing: impl FnOnce(BorrowedFd<'_>) -> std::io::Result<fuser::BackingId>,
    ) -> Res<Opened> {
        if !self.passthrough.load(Relaxed) || ino.kind != libc::S_IFREG {
            return Ok(Opened::Plain(fd.into_raw_fd() as u64 | OPENED));
        }
        let mut b = ino.backing.lock().unwrap_or_else(|e| e.into_inner());
        if b.id.is_none() {
            match open_backing(fd.as_fd()) {
                Ok(id) => b.id = Some(id),
                Err(e) => {
                    drop(b);
                    self.passthrough.store(false, Relaxed);
                    self.set_setting(
                        "data ops",
                        format!("through the daemon (the kernel refused a passthrough backing file: {e})"),
                    );
                    self.set_notes(false);
                    return Ok(Opened::Plain(fd.into_raw_fd() as u64 | OPENED));
                }
            }
        }
        b.users += 1;
        drop(b);
        Ok(Opened::Passthrough(
            fd.into_raw_fd() as u64 | OPENED | PASSTHROUGH,
            ino,
        ))
    }

    /// The lower descriptor a data request works on: its handle's, or for
    /// a request without one (no_open), the inode's.
    pub(super) fn data_fd(&self, id: INodeNo, fh: u64, write: bool) -> Res<DataFd> {
        if fh != 0 {
            return Ok(DataFd::Handle(fd_of(fh)));
        }
        self.inode(id)?.data_fd(write)
    }

    pub(super) fn read_file(&self, id: INodeNo, fh: u64, offset: u64, size: u32, reply: ReplyData) {
        READ_BUF.with_borrow_mut(|buf| {
            let size = size as usize;
            if buf.len() < size {
                buf.resize(size, 0);
            }
            let r = self.rec.timed(op!("read"), || {
                sys::pread_full(self.data_fd(id, fh, false)?.raw(), &mut buf[..size], offset)
            });
            match r {
                Ok(n) => reply.data(&buf[..n]),
                Err(e) => reply.error(e),
            }
        })
    }

    pub(super) fn release_file(&self, id: INodeNo, fh: u64) -> Res<()> {
        if fh & PASSTHROUGH != 0 {
            if let Ok(ino) = self.inode(id) {
                let mut b = ino.backing.lock().unwrap_or_else(|e| e.into_inner());
                b.users = b.users.saturating_sub(1);
                if b.users == 0 {
                    b.id = None;
                }
            }
        }
        sys::close(fd_of(fh))
    }
}

/// `kill_suidgid`: the writer lacks CAP_FSETID. The kernel drops the
/// set-user-ID bit (and set-group-ID with group execute) itself before a
/// cached write, but not before a direct one: it asks the daemon, whose
/// own write as root would keep them.
pub fn write(fd: RawFd, data: &[u8], offset: u64, kill_suidgid: bool) -> Res<u32> {
    if kill_suidgid {
        drop_suidgid(fd)?;
    }
    sys::pwrite_full(fd, data, offset).map(|n| n as u32)
}

fn drop_suidgid(fd: RawFd) -> Res<()> {
    // SAFETY: a descriptor we hold.
    let st = sys::stat_fd(unsafe { BorrowedFd::borrow_raw(fd) })?;
    let mut kill = libc::S_ISUID;
    if st.st_mode & libc::S_IXGRP != 0 {
        kill |= libc::S_ISGID;
    }
    if st.st_mode & kill == 0 {
        return Ok(());
    }
    // SAFETY: a descriptor we hold.
    let r = unsafe { libc::fchmod(fd, st.st_mode & 0o7777 & !kill) };
    sys::check(r as libc::c_long).map(drop)
}

/// Closing a duplicate reports the lower file system's deferred errors
/// (NFS) and drops the daemon's POSIX locks, as a close would.
pub fn flush(fh: u64) -> Res<()> {
    // SAFETY: dup of a descriptor we hold.
    let d = unsafe { libc::dup(fd_of(fh)) };
    if d < 0 {
        return Err(sys::last());
    }
    sys::close(d)
}

pub fn sync(fd: RawFd, datasync: bool) -> Res<()> {
    // SAFETY: a descriptor we hold.
    let r = unsafe {
        if datasync {
            libc::fdatasync(fd)
        } else {
            libc::fsync(fd)
        }
    };
    sys::check(r as libc::c_long).map(drop)
}

pub fn allocate(fd: RawFd, offset: u64, length: u64, mode: i32) -> Res<()> {
    let (off, len) = (
        libc::off_t::try_from(offset).map_err(|_| Errno::EFBIG)?,
        libc::off_t::try_from(length).map_err(|_| Errno::EFBIG)?,
    );
    // SAFETY: a descriptor we hold.
    let r = unsafe { libc::fallocate(fd, mode, off, len) };
    sys::check(r as libc::c_long).map(drop)
}

pub fn seek(fd: RawFd, offset: i64, whence: i32) -> Res<i64> {
    // SAFETY: a descriptor we hold.
    let r = unsafe { libc::lseek(fd, offset as libc::off_t, whence) };
    sys::check(r as libc::c_long)
}

pub fn copy_range(
    fd_in: RawFd,
    off_in: u64,
    fd_out: RawFd,
    off_out: u64,
    len: u64,
    flags: u64,
) -> Res<u32> {
    let mut a = libc::loff_t::try_from(off_in).map_err(|_| Errno::EFBIG)?;
    let mut b = libc::loff_t::try_from(off_out).map_err(|_| Errno::EFBIG)?;
    // The reply carries a 32-bit count.
    let len = len.min(u32::MAX as u64 & !0xfff) as usize;
    // SAFETY: descriptors we hold and offsets we own.
    let n = unsafe { libc::copy_file_range(fd_in, &mut a, fd_out, &mut b, len, flags as u32) };
    if n < 0 {
        return Err(sys::last());
    }
    Ok(n as u32)
}
