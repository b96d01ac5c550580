//! Names and attributes: lookup, getattr/setattr, readlink, the inode
//! creators, unlink/rmdir, rename, link, statfs, xattrs, access.

use std::ffi::{CString, OsStr};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::UNIX_EPOCH;

use fuser::{Errno, FileAttr, INodeNo, ReplyXattr, Request, TimeOrNow};

use super::{not_control, PassFs};
use crate::creds;
use crate::sys::{self, cname, proc_path, Res};

/// What a setattr changes.
pub struct Change {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
    /// The open file the change came through (ftruncate, fchmod, futimens).
    pub fh: Option<u64>,
}

/// An inode to create.
pub enum Make<'a> {
    Node { mode: u32, rdev: u32 },
    Dir { mode: u32 },
    Symlink { target: &'a Path },
}

fn ret(r: libc::c_int) -> Res<()> {
    if r == -1 {
        Err(sys::last())
    } else {
        Ok(())
    }
}

fn timespec(t: Option<TimeOrNow>) -> libc::timespec {
    match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
            Err(e) => {
                // Before 1970: whole seconds down, fraction up.
                let d = e.duration();
                let (mut s, mut ns) = (-(d.as_secs() as i64), -(d.subsec_nanos() as i64));
                if ns < 0 {
                    s -= 1;
                    ns += 1_000_000_000;
                }
                libc::timespec {
                    tv_sec: s as libc::time_t,
                    tv_nsec: ns as libc::c_long,
                }
            }
        },
    }
}

impl PassFs {
    pub(super) fn lookup_entry(&self, parent: INodeNo, name: &OsStr) -> Res<FileAttr> {
        let dir = self.inode(parent)?;
        let (ino, st) = self.inodes.lookup(&dir, &cname(name)?)?;
        Ok(self.attr(&ino, &st))
    }

    pub(super) fn getattr_of(&self, id: INodeNo) -> Res<FileAttr> {
        let ino = self.inode(id)?;
        let st = sys::stat_fd(ino.fd())?;
        Ok(self.attr(&ino, &st))
    }

    pub(super) fn set_attr(&self, id: INodeNo, c: &Change) -> Res<FileAttr> {
        let ino = self.inode(id)?;
        let fd = ino.fd().as_raw_fd();
        let path = proc_path(fd);
        if let Some(mode) = c.mode {
            let mode = mode & 0o7777;
            // SAFETY: a descriptor we hold / a NUL-terminated path.
            ret(match c.fh {
                // SAFETY: descriptors we hold, NUL-terminated paths and names.
                Some(fh) => unsafe { libc::fchmod(super::files::fd_of(fh), mode) },
                None if ino.is_symlink() => return Err(Errno::EOPNOTSUPP),
                // SAFETY: descriptors we hold, NUL-terminated paths and names.
                None => unsafe { libc::fchmodat(libc::AT_FDCWD, path.as_ptr(), mode, 0) },
            })?;
        }
        if c.uid.is_some() || c.gid.is_some() {
            let uid = c.uid.unwrap_or(u32::MAX);
            let gid = c.gid.unwrap_or(u32::MAX);
            let flags = libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW;
            // SAFETY: an O_PATH descriptor with AT_EMPTY_PATH.
            ret(unsafe { libc::fchownat(fd, sys::EMPTY.as_ptr(), uid, gid, flags) })?;
        }
        if let Some(size) = c.size {
            let size = size as libc::off_t;
            // SAFETY: a descriptor we hold / a NUL-terminated path.
            ret(match c.fh {
                // SAFETY: descriptors we hold, NUL-terminated paths and names.
                Some(fh) => unsafe { libc::ftruncate(super::files::fd_of(fh), size) },
                // SAFETY: descriptors we hold, NUL-terminated paths and names.
                None => unsafe { libc::truncate(path.as_ptr(), size) },
            })?;
        }
        if c.atime.is_some() || c.mtime.is_some() {
            let ts = [timespec(c.atime), timespec(c.mtime)];
            // SAFETY: two timespecs; a descriptor or a NUL-terminated path.
            ret(match c.fh {
                // SAFETY: descriptors we hold, NUL-terminated paths and names.
                Some(fh) => unsafe { libc::futimens(super::files::fd_of(fh), ts.as_ptr()) },
                // SAFETY: descriptors we hold, NUL-terminated paths and names.
                None if ino.is_symlink() => unsafe {
                    libc::utimensat(fd, sys::EMPTY.as_ptr(), ts.as_ptr(), libc::AT_EMPTY_PATH)
                },
                // SAFETY: descriptors we hold, NUL-terminated paths and names.
                None => unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), ts.as_ptr(), 0) },
            })?;
        }
        let st = sys::stat_fd(ino.fd())?;
        Ok(self.attr(&ino, &st))
    }

    pub(super) fn read_link(&self, id: INodeNo) -> Res<Vec<u8>> {
        let ino = self.inode(id)?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
        // SAFETY: an O_PATH symlink descriptor, empty path, a buffer of its length.
        let n = unsafe {
            libc::readlinkat(
                ino.fd().as_raw_fd(),
                sys::EMPTY.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(sys::last());
        }
        buf.truncate(n as usize);
        Ok(buf)
    }

    /// mknod, mkdir, symlink: made as the caller where the daemon can (see
    /// [`crate::creds`]), then looked up like any name.
    pub(super) fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        what: Make<'_>,
    ) -> Res<FileAttr> {
        not_control(parent, name)?;
        let dir = self.inode(parent)?;
        let c = cname(name)?;
        let dfd = dir.fd().as_raw_fd();
        {
            let _as = creds::as_caller(req, self.cfg.as_caller)?;
            // SAFETY: a directory descriptor and NUL-terminated names.
            ret(match what {
                // SAFETY: descriptors we hold, NUL-terminated paths and names.
                Make::Node { mode, rdev } => unsafe {
                    libc::mknodat(dfd, c.as_ptr(), mode, rdev as libc::dev_t)
                },
                // SAFETY: descriptors we hold, NUL-terminated paths and names.
                Make::Dir { mode } => unsafe { libc::mkdirat(dfd, c.as_ptr(), mode) },
                Make::Symlink { target } => {
                    let t =
                        CString::new(target.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
                    // SAFETY: NUL-terminated target and name, a directory descriptor.
                    unsafe { libc::symlinkat(t.as_ptr(), dfd, c.as_ptr()) }
                }
            })?;
        }
        let (ino, st) = self.inodes.lookup(&dir, &c)?;
        Ok(self.attr(&ino, &st))
    }

    pub(super) fn remove(&self, parent: INodeNo, name: &OsStr, flags: libc::c_int) -> Res<()> {
        not_control(parent, name)?;
        let dir = self.inode(parent)?;
        let c = cname(name)?;
        // SAFETY: a directory descriptor and a NUL-terminated name.
        ret(unsafe { libc::unlinkat(dir.fd().as_raw_fd(), c.as_ptr(), flags) })
    }

    pub(super) fn rename_entry(
        &self,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: u32,
    ) -> Res<()> {
        not_control(parent, name)?;
        not_control(newparent, newname)?;
        let (from, to) = (self.inode(parent)?, self.inode(newparent)?);
        let (a, b) = (cname(name)?, cname(newname)?);
        // SAFETY: directory descriptors and NUL-terminated names.
        let r = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                from.fd().as_raw_fd(),
                a.as_ptr(),
                to.fd().as_raw_fd(),
                b.as_ptr(),
                flags,
            )
        };
        sys::check(r).map(drop)
    }

    pub(super) fn link_entry(
        &self,
        id: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
    ) -> Res<FileAttr> {
        not_control(newparent, newname)?;
        let ino = self.inode(id)?;
        let dir = self.inode(newparent)?;
        let c = cname(newname)?;
        let src = proc_path(ino.fd().as_raw_fd());
        // Through /proc: linkat(AT_EMPTY_PATH) would need CAP_DAC_READ_SEARCH.
        // SAFETY: NUL-terminated paths and a directory descriptor.
        ret(unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                src.as_ptr(),
                dir.fd().as_raw_fd(),
                c.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        })?;
        let (ino, st) = self.inodes.lookup(&dir, &c)?;
        Ok(self.attr(&ino, &st))
    }

    pub(super) fn stat_fs(&self, id: INodeNo) -> Res<libc::statvfs> {
        let ino = self.inode(id)?;
        // SAFETY: plain data the kernel fills in.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: an O_PATH descriptor (fstatvfs takes one) and an out-pointer.
        ret(unsafe { libc::fstatvfs(ino.fd().as_raw_fd(), &mut s) })?;
        Ok(s)
    }

    /// Xattrs go through `/proc/self/fd/N`; a symlink's cannot be reached
    /// that way without following it (as in passthrough_hp: ENOTSUP).
    fn xattr_path(&self, id: INodeNo) -> Res<CString> {
        let ino = self.inode(id)?;
        if ino.is_symlink() {
            return Err(Errno::ENOTSUP);
        }
        Ok(proc_path(ino.fd().as_raw_fd()))
    }

    pub(super) fn set_xattr(&self, id: INodeNo, name: &OsStr, value: &[u8], flags: i32) -> Res<()> {
        let p = self.xattr_path(id)?;
        let n = cname(name)?;
        // SAFETY: NUL-terminated path and name, a value of its length.
        ret(unsafe {
            libc::setxattr(
                p.as_ptr(),
                n.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                flags,
            )
        })
    }

    /// getxattr (`name`) or listxattr (no name): the size when `size` is 0,
    /// else the value (ERANGE if it does not fit).
    pub(super) fn get_xattr(&self, id: INodeNo, name: Option<&OsStr>, size: u32) -> Res<Vec<u8>> {
        let p = self.xattr_path(id)?;
        let mut buf = vec![0u8; size as usize];
        let (ptr, len) = match size {
            0 => (std::ptr::null_mut(), 0),
            _ => (buf.as_mut_ptr().cast(), buf.len()),
        };
        let n = match name {
            Some(name) => {
                let n = cname(name)?;
                // SAFETY: NUL-terminated strings, a buffer of len (or none).
                unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), ptr, len) }
            }
            // SAFETY: as above.
            None => unsafe { libc::listxattr(p.as_ptr(), ptr.cast(), len) },
        };
        if n < 0 {
            return Err(sys::last());
        }
        buf.truncate(n as usize);
        if size == 0 {
            // The caller wants the size only: carry it in the length.
            return Ok(vec![0u8; n as usize]);
        }
        Ok(buf)
    }

    pub(super) fn remove_xattr(&self, id: INodeNo, name: &OsStr) -> Res<()> {
        let p = self.xattr_path(id)?;
        let n = cname(name)?;
        // SAFETY: NUL-terminated strings.
        ret(unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) })
    }

    pub(super) fn check_access(&self, id: INodeNo, mask: i32) -> Res<()> {
        let ino = self.inode(id)?;
        let p = proc_path(ino.fd().as_raw_fd());
        // SAFETY: a NUL-terminated path.
        ret(unsafe { libc::faccessat(libc::AT_FDCWD, p.as_ptr(), mask, 0) })
    }
}

/// Replies to getxattr/listxattr: the size alone when asked for 0 bytes.
pub fn reply_xattr(r: Res<Vec<u8>>, size: u32, reply: ReplyXattr) {
    match r {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(e),
    }
}
