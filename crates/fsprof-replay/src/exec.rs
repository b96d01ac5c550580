//! Issuing one command: the system or libc call the traced program made,
//! on the replayer's own descriptors (resource slots) and on paths confined
//! by [`crate::root::Root`]. Returns the result and errno in the trace's
//! conventions, so that they compare with what the trace recorded.

use std::ffi::CString;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU8, Ordering};

use fsprof_trace::replayfile::{Command, Compiled};

use crate::root::Root;

/// What a slot holds.
const EMPTY: u8 = 0;
const FD: u8 = 1;
const DIRP: u8 = 2;
const FILEP: u8 = 3;

/// The resource table. Commands that use a slot another thread filled wait
/// for that thread (the compiler's constraints), and the wait is an
/// acquire/release pair, so relaxed accesses here are enough.
pub struct Slots {
    kind: Vec<AtomicU8>,
    fd: Vec<AtomicI32>,
    ptr: Vec<AtomicPtr<libc::c_void>>,
}

impl Slots {
    pub fn new(n: usize) -> Slots {
        Slots {
            kind: (0..n).map(|_| AtomicU8::new(EMPTY)).collect(),
            fd: (0..n).map(|_| AtomicI32::new(-1)).collect(),
            ptr: (0..n)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
        }
    }

    fn fd(&self, s: Option<u32>) -> i32 {
        s.map_or(-1, |s| self.fd[s as usize].load(Ordering::Relaxed))
    }

    fn ptr(&self, s: Option<u32>, want: u8) -> *mut libc::c_void {
        match s {
            Some(s) if self.kind[s as usize].load(Ordering::Relaxed) == want => {
                self.ptr[s as usize].load(Ordering::Relaxed)
            }
            _ => std::ptr::null_mut(),
        }
    }

    fn set(&self, s: u32, kind: u8, fd: i32, ptr: *mut libc::c_void) {
        self.kind[s as usize].store(kind, Ordering::Relaxed);
        self.fd[s as usize].store(fd, Ordering::Relaxed);
        self.ptr[s as usize].store(ptr, Ordering::Relaxed);
    }

    /// Closes whatever a slot holds.
    fn close(&self, s: u32) -> (i64, i32) {
        let k = self.kind[s as usize].swap(EMPTY, Ordering::Relaxed);
        let fd = self.fd[s as usize].swap(-1, Ordering::Relaxed);
        let p = self.ptr[s as usize].swap(std::ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: the slot owned this descriptor / stream; it is emptied
        // above, so nothing else closes it again.
        let r = unsafe {
            match k {
                FD => libc::close(fd),
                DIRP => libc::closedir(p as *mut libc::DIR),
                FILEP => libc::fclose(p as *mut libc::FILE),
                _ => return (-1, libc::EBADF),
            }
        };
        ret(r as i64)
    }

    /// Closes everything still open at the end of the replay.
    pub fn close_all(&self) {
        for s in 0..self.kind.len() {
            if self.kind[s].load(Ordering::Relaxed) != EMPTY {
                let _ = self.close(s as u32);
            }
        }
    }
}

// SAFETY: the raw DIR*/FILE* pointers are only used by the thread that the
// compiler's ordering constraints make the current user of the slot.
unsafe impl Sync for Slots {}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A C-style result: -1 carries errno.
fn ret(r: i64) -> (i64, i32) {
    if r < 0 {
        (-1, last_errno())
    } else {
        (r, 0)
    }
}

fn err(e: i32) -> (i64, i32) {
    (-1, e)
}

/// Per-thread scratch memory for reads and generated write data.
pub struct Scratch {
    buf: Vec<u8>,
    zeros: Vec<u8>,
}

/// Reads and writes larger than this are issued in pieces of this size
/// from scratch memory.
const MAX_BUF: usize = 64 << 20;

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            buf: Vec::new(),
            zeros: Vec::new(),
        }
    }

    fn read_buf(&mut self, n: u64) -> &mut [u8] {
        let n = (n as usize).min(MAX_BUF);
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        &mut self.buf[..n]
    }

    fn zeros(&mut self, n: u64) -> &[u8] {
        let n = (n as usize).min(MAX_BUF);
        if self.zeros.len() < n {
            self.zeros.resize(n, 0);
        }
        &self.zeros[..n]
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// What a replayed op is, decided once per command before the replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Open,
    OpenDir,
    FOpen,
    FdOpen,
    FdOpenDir,
    Close,
    Read,
    Pread,
    Write,
    Pwrite,
    Lseek,
    Fstat,
    Fsync,
    Fdatasync,
    Syncfs,
    SyncFileRange,
    Ftruncate,
    Fallocate,
    PosixFallocate,
    PosixFadvise,
    Fchmod,
    Fchown,
    Futimens,
    NoOp,
    Readdir,
    Getdents,
    Fstatfs,
    Flock,
    Fread,
    Fwrite,
    Fgets,
    Fflush,
    Getdelim,
    Fseek,
    Ftell,
    Fcntl,
    Sendfile,
    CopyFileRange,
    Stat,
    Lstat,
    Access,
    Truncate,
    Mkdir,
    Rmdir,
    Unlink,
    Rename,
    Link,
    Symlink,
    Readlink,
    Chmod,
    Chown,
    Utimes,
    Chdir,
    Statfs,
    Mknod,
    Sync,
}

impl Kind {
    pub fn of(c: &Command) -> Option<Kind> {
        use Kind::*;
        let nofollow = c.flags & libc::AT_SYMLINK_NOFOLLOW as i64 != 0;
        Some(match c.op.name() {
            "open" | "openat" | "creat" => Open,
            "opendir" => OpenDir,
            "fopen" => FOpen,
            "fdopen" => FdOpen,
            "fdopendir" => FdOpenDir,
            "close" | "fclose" | "closedir" => Close,
            "read" | "readv" => Read,
            "pread" | "preadv" | "preadv2" => Pread,
            "write" | "writev" => Write,
            "pwrite" | "pwritev" | "pwritev2" => Pwrite,
            "lseek" => Lseek,
            "fstat" => Fstat,
            "fsync" => Fsync,
            "fdatasync" => Fdatasync,
            "syncfs" => Syncfs,
            "sync_file_range" => SyncFileRange,
            "ftruncate" => Ftruncate,
            "fallocate" => Fallocate,
            "posix_fallocate" => PosixFallocate,
            "posix_fadvise" => PosixFadvise,
            "fchmod" => Fchmod,
            "fchown" => Fchown,
            "futimens" | "futimes" => Futimens,
            "fchdir" => NoOp,
            "readdir" => Readdir,
            "getdents64" => Getdents,
            "fstatfs" | "fstatvfs" => Fstatfs,
            "flock" => Flock,
            "fread" => Fread,
            "fwrite" | "fputs" => Fwrite,
            "fgets" => Fgets,
            "fflush" => Fflush,
            "getline" | "getdelim" => Getdelim,
            "fseek" => Fseek,
            "ftell" => Ftell,
            "fcntl" => Fcntl,
            "sendfile" => Sendfile,
            "copy_file_range" => CopyFileRange,
            "stat" | "statx" => Stat,
            "fstatat" if nofollow => Lstat,
            "fstatat" => Stat,
            "lstat" => Lstat,
            "access" | "faccessat" => Access,
            "truncate" => Truncate,
            "mkdir" | "mkdirat" => Mkdir,
            "rmdir" => Rmdir,
            "unlink" | "unlinkat" => Unlink,
            "rename" | "renameat" | "renameat2" => Rename,
            "link" | "linkat" => Link,
            "symlink" | "symlinkat" => Symlink,
            "readlink" | "readlinkat" => Readlink,
            "chmod" | "fchmodat" => Chmod,
            "chown" | "lchown" | "fchownat" => Chown,
            "utimensat" | "utime" | "utimes" | "lutimes" => Utimes,
            "chdir" => Chdir,
            "statfs" | "statvfs" => Statfs,
            "mknod" | "mknodat" => Mknod,
            "sync" => Sync,
            _ => return None,
        })
    }

    /// Reads of file data (skipped with `--reads skip`).
    pub fn is_read(self) -> bool {
        matches!(
            self,
            Kind::Read | Kind::Pread | Kind::Fread | Kind::Fgets | Kind::Getdelim
        )
    }

    /// Results checked for success only: sizes that depend on the
    /// replayer's own stdio buffering or item sizes the trace lacks.
    pub fn success_only(self) -> bool {
        matches!(
            self,
            Kind::Fread
                | Kind::Fwrite
                | Kind::Fgets
                | Kind::Getdelim
                | Kind::Fflush
                | Kind::Getdents
                | Kind::Fcntl
        )
    }
}

/// The environment commands run in.
pub struct Exec<'a> {
    pub root: &'a Root,
    pub slots: &'a Slots,
    pub compiled: &'a Compiled,
}

extern "C" {
    // In glibc; the libc crate does not declare it.
    fn getdelim(
        line: *mut *mut libc::c_char,
        n: *mut usize,
        delim: libc::c_int,
        f: *mut libc::FILE,
    ) -> isize;
}

fn proc_fd(fd: &OwnedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL")
}

impl Exec<'_> {
    fn string(&self, id: Option<u32>) -> &[u8] {
        id.map_or(&[][..], |i| &self.compiled.strings[i as usize])
    }

    fn data<'s>(&'s self, c: &Command, scratch: &'s mut Scratch) -> &'s [u8] {
        match c.buf {
            Some(b) => &self.compiled.buffers[b as usize],
            None => scratch.zeros(c.len),
        }
    }

    /// Issues the command; returns (result, errno) as the trace records them.
    // One arm per replayed op: the table of what each traced call becomes
    // reads best in one place (its arms are short).
    #[allow(clippy::too_many_lines)]
    pub fn run(&self, kind: Kind, c: &Command, scratch: &mut Scratch) -> (i64, i32) {
        use Kind::*;
        let s = self.slots;
        let fd = s.fd(c.slot);
        let path = self.string(c.path);
        // SAFETY: every libc call below gets descriptors from the slot
        // table (our own, or -1, which the kernel refuses with EBADF),
        // buffers valid for the lengths passed, and C strings.
        unsafe {
            match kind {
                Open | OpenDir | FOpen => {
                    let out = c.out;
                    match self.root.openat(path, c.flags, c.mode) {
                        Err(e) => err(e),
                        Ok(f) => {
                            let raw = f.into_raw_fd();
                            let Some(out) = out else {
                                libc::close(raw);
                                return (raw as i64, 0);
                            };
                            match kind {
                                OpenDir => {
                                    let d = libc::fdopendir(raw);
                                    if d.is_null() {
                                        let e = last_errno();
                                        libc::close(raw);
                                        return err(e);
                                    }
                                    s.set(out, DIRP, raw, d as *mut _);
                                }
                                FOpen => {
                                    let mode = CString::new(self.string(c.name).to_vec())
                                        .unwrap_or_else(|_| CString::new("r").unwrap());
                                    let f = libc::fdopen(raw, mode.as_ptr());
                                    if f.is_null() {
                                        let e = last_errno();
                                        libc::close(raw);
                                        return err(e);
                                    }
                                    s.set(out, FILEP, raw, f as *mut _);
                                }
                                _ => s.set(out, FD, raw, std::ptr::null_mut()),
                            }
                            (raw as i64, 0)
                        }
                    }
                }
                FdOpen | FdOpenDir => {
                    let Some(slot) = c.slot else {
                        return err(libc::EBADF);
                    };
                    if kind == FdOpenDir {
                        let d = libc::fdopendir(fd);
                        if d.is_null() {
                            return err(last_errno());
                        }
                        s.set(slot, DIRP, fd, d as *mut _);
                    } else {
                        let mode = CString::new(self.string(c.name).to_vec())
                            .unwrap_or_else(|_| CString::new("r").unwrap());
                        let f = libc::fdopen(fd, mode.as_ptr());
                        if f.is_null() {
                            return err(last_errno());
                        }
                        s.set(slot, FILEP, fd, f as *mut _);
                    }
                    (fd as i64, 0)
                }
                Close => match c.slot {
                    Some(slot) => s.close(slot),
                    None => err(libc::EBADF),
                },
                Read => {
                    let b = scratch.read_buf(c.len);
                    ret(libc::read(fd, b.as_mut_ptr() as *mut _, b.len()) as i64)
                }
                Pread => {
                    let b = scratch.read_buf(c.len);
                    ret(libc::pread(fd, b.as_mut_ptr() as *mut _, b.len(), c.offset) as i64)
                }
                Write => {
                    let d = self.data(c, scratch);
                    let f = s.ptr(c.slot, FILEP);
                    if !f.is_null() {
                        let n = libc::fwrite(d.as_ptr() as *const _, 1, d.len(), f as *mut _);
                        return if n < d.len() { err(libc::EIO) } else { (0, 0) };
                    }
                    ret(libc::write(fd, d.as_ptr() as *const _, d.len()) as i64)
                }
                Pwrite => {
                    let d = self.data(c, scratch);
                    ret(libc::pwrite(fd, d.as_ptr() as *const _, d.len(), c.offset) as i64)
                }
                Lseek => ret(libc::lseek(fd, c.offset, c.whence)),
                Fstat => {
                    let mut st: libc::stat = std::mem::zeroed();
                    ret(libc::fstat(fd, &mut st) as i64)
                }
                Fsync => ret(libc::fsync(fd) as i64),
                Fdatasync => ret(libc::fdatasync(fd) as i64),
                Syncfs => ret(libc::syncfs(fd) as i64),
                SyncFileRange => {
                    ret(libc::sync_file_range(fd, c.offset, c.len as i64, c.flags as u32) as i64)
                }
                Ftruncate => ret(libc::ftruncate(fd, c.len as i64) as i64),
                Fallocate => ret(libc::fallocate(fd, c.mode as i32, c.offset, c.len as i64) as i64),
                PosixFallocate => match libc::posix_fallocate(fd, c.offset, c.len as i64) {
                    0 => (0, 0),
                    e => err(e),
                },
                PosixFadvise => {
                    match libc::posix_fadvise(fd, c.offset, c.len as i64, c.flags as i32) {
                        0 => (0, 0),
                        e => err(e),
                    }
                }
                Fchmod => ret(libc::fchmod(fd, c.mode) as i64),
                Fchown => ret(libc::fchown(fd, u32::MAX, u32::MAX) as i64),
                Futimens => ret(libc::futimens(fd, std::ptr::null()) as i64),
                NoOp => (0, 0),
                Readdir => {
                    let d = s.ptr(c.slot, DIRP);
                    if d.is_null() {
                        return err(libc::EBADF);
                    }
                    *libc::__errno_location() = 0;
                    let e = libc::readdir(d as *mut libc::DIR);
                    if e.is_null() {
                        match last_errno() {
                            0 => (0, 0),
                            x => err(x),
                        }
                    } else {
                        (1, 0)
                    }
                }
                Getdents => {
                    let b = scratch.read_buf(c.len.max(4096));
                    ret(libc::syscall(
                        libc::SYS_getdents64,
                        fd,
                        b.as_mut_ptr(),
                        b.len(),
                    ))
                }
                Fstatfs => {
                    let mut st: libc::statfs = std::mem::zeroed();
                    ret(libc::fstatfs(fd, &mut st) as i64)
                }
                Flock => ret(libc::flock(fd, c.flags as i32) as i64),
                Fread | Fgets | Getdelim => {
                    let f = s.ptr(c.slot, FILEP) as *mut libc::FILE;
                    if f.is_null() {
                        return err(libc::EBADF);
                    }
                    let b = scratch.read_buf(c.len.max(1));
                    match kind {
                        Fread => (
                            libc::fread(b.as_mut_ptr() as *mut _, 1, b.len(), f) as i64,
                            0,
                        ),
                        Fgets => {
                            let r = libc::fgets(b.as_mut_ptr() as *mut _, b.len() as i32, f);
                            if r.is_null() {
                                (0, 0)
                            } else {
                                (libc::strlen(r) as i64, 0)
                            }
                        }
                        _ => {
                            let mut line: *mut libc::c_char = std::ptr::null_mut();
                            let mut n: usize = 0;
                            let delim = if c.op.is("getline") {
                                b'\n' as i32
                            } else {
                                c.arg as i32
                            };
                            let r = getdelim(&mut line, &mut n, delim, f);
                            libc::free(line as *mut _);
                            (r as i64, 0)
                        }
                    }
                }
                Fwrite => {
                    let f = s.ptr(c.slot, FILEP) as *mut libc::FILE;
                    if f.is_null() {
                        return err(libc::EBADF);
                    }
                    let d = self.data(c, scratch);
                    (
                        libc::fwrite(d.as_ptr() as *const _, 1, d.len(), f) as i64,
                        0,
                    )
                }
                Fflush => {
                    let f = s.ptr(c.slot, FILEP) as *mut libc::FILE;
                    if f.is_null() {
                        return err(libc::EBADF);
                    }
                    ret(libc::fflush(f) as i64)
                }
                Fseek | Ftell => {
                    let f = s.ptr(c.slot, FILEP) as *mut libc::FILE;
                    if f.is_null() {
                        return err(libc::EBADF);
                    }
                    if kind == Fseek {
                        ret(libc::fseeko(f, c.offset, c.whence) as i64)
                    } else {
                        ret(libc::ftello(f))
                    }
                }
                Fcntl => ret(libc::fcntl(fd, c.flags as i32, c.arg) as i64),
                Sendfile => {
                    let input = s.fd(c.slot2);
                    ret(libc::sendfile(fd, input, std::ptr::null_mut(), c.len as usize) as i64)
                }
                CopyFileRange => {
                    let out = s.fd(c.slot2);
                    ret(libc::copy_file_range(
                        fd,
                        std::ptr::null_mut(),
                        out,
                        std::ptr::null_mut(),
                        c.len as usize,
                        0,
                    ) as i64)
                }
                Stat | Lstat => match self.root.lookup(path, kind == Lstat) {
                    Err(e) => err(e),
                    Ok(o) => {
                        let mut st: libc::stat = std::mem::zeroed();
                        ret(libc::fstat(o.as_raw_fd(), &mut st) as i64)
                    }
                },
                Access => match self.root.lookup(path, false) {
                    Err(e) => err(e),
                    Ok(o) => ret(libc::access(proc_fd(&o).as_ptr(), c.mode as i32) as i64),
                },
                Truncate => match self.root.openat(path, libc::O_WRONLY as i64, 0) {
                    Err(e) => err(e),
                    Ok(o) => ret(libc::ftruncate(o.as_raw_fd(), c.len as i64) as i64),
                },
                Chmod => {
                    let nofollow = c.flags & libc::AT_SYMLINK_NOFOLLOW as i64 != 0;
                    match self.root.lookup(path, nofollow) {
                        Err(e) => err(e),
                        Ok(o) => ret(libc::chmod(proc_fd(&o).as_ptr(), c.mode & 0o7777) as i64),
                    }
                }
                Chown => {
                    let nofollow =
                        c.op.is("lchown") || c.flags & libc::AT_SYMLINK_NOFOLLOW as i64 != 0;
                    match self.root.lookup(path, nofollow) {
                        Err(e) => err(e),
                        Ok(o) => ret(libc::fchownat(
                            o.as_raw_fd(),
                            c"".as_ptr(),
                            u32::MAX,
                            u32::MAX,
                            libc::AT_EMPTY_PATH,
                        ) as i64),
                    }
                }
                Utimes => {
                    let nofollow =
                        c.op.is("lutimes") || c.flags & libc::AT_SYMLINK_NOFOLLOW as i64 != 0;
                    match self.root.lookup(path, nofollow) {
                        Err(e) => err(e),
                        Ok(o) => ret(libc::utimensat(
                            libc::AT_FDCWD,
                            proc_fd(&o).as_ptr(),
                            std::ptr::null(),
                            0,
                        ) as i64),
                    }
                }
                Chdir => match self
                    .root
                    .openat(path, (libc::O_PATH | libc::O_DIRECTORY) as i64, 0)
                {
                    Err(e) => err(e),
                    Ok(_) => (0, 0),
                },
                Statfs => match self.root.lookup(path, false) {
                    Err(e) => err(e),
                    Ok(o) => {
                        let mut st: libc::statfs = std::mem::zeroed();
                        ret(libc::fstatfs(o.as_raw_fd(), &mut st) as i64)
                    }
                },
                Mkdir => match self.root.parent(path) {
                    Err(e) => err(e),
                    Ok((d, n)) => ret(libc::mkdirat(d.as_raw_fd(), n.as_ptr(), c.mode) as i64),
                },
                Rmdir | Unlink => match self.root.parent(path) {
                    Err(e) => err(e),
                    Ok((d, n)) => {
                        let dir = kind == Rmdir || c.flags & libc::AT_REMOVEDIR as i64 != 0;
                        let f = if dir { libc::AT_REMOVEDIR } else { 0 };
                        ret(libc::unlinkat(d.as_raw_fd(), n.as_ptr(), f) as i64)
                    }
                },
                Rename | Link => {
                    let to = self.string(c.path2);
                    match (self.root.parent(path), self.root.parent(to)) {
                        (Err(e), _) | (_, Err(e)) => err(e),
                        (Ok((d1, n1)), Ok((d2, n2))) => {
                            if kind == Rename {
                                let flags = if c.op.is("renameat2") {
                                    c.flags as u32
                                } else {
                                    0
                                };
                                ret(libc::renameat2(
                                    d1.as_raw_fd(),
                                    n1.as_ptr(),
                                    d2.as_raw_fd(),
                                    n2.as_ptr(),
                                    flags,
                                ) as i64)
                            } else {
                                // Never AT_SYMLINK_FOLLOW: a symlink to a
                                // file outside the root must not become a
                                // hard link to it inside.
                                ret(libc::linkat(
                                    d1.as_raw_fd(),
                                    n1.as_ptr(),
                                    d2.as_raw_fd(),
                                    n2.as_ptr(),
                                    0,
                                ) as i64)
                            }
                        }
                    }
                }
                Symlink => match self.root.parent(path) {
                    Err(e) => err(e),
                    Ok((d, n)) => {
                        let Ok(target) = CString::new(self.string(c.name).to_vec()) else {
                            return err(libc::EINVAL);
                        };
                        ret(libc::symlinkat(target.as_ptr(), d.as_raw_fd(), n.as_ptr()) as i64)
                    }
                },
                Readlink => match self.root.parent(path) {
                    Err(e) => err(e),
                    Ok((d, n)) => {
                        let b = scratch.read_buf(c.len.max(1));
                        ret(libc::readlinkat(
                            d.as_raw_fd(),
                            n.as_ptr(),
                            b.as_mut_ptr() as *mut _,
                            b.len(),
                        ) as i64)
                    }
                },
                Mknod => {
                    let t = c.mode & libc::S_IFMT;
                    if t == libc::S_IFCHR || t == libc::S_IFBLK {
                        // Device nodes would reach hardware from inside the root.
                        return err(libc::EPERM);
                    }
                    match self.root.parent(path) {
                        Err(e) => err(e),
                        Ok((d, n)) => {
                            ret(libc::mknodat(d.as_raw_fd(), n.as_ptr(), c.mode, 0) as i64)
                        }
                    }
                }
                Sync => {
                    libc::sync();
                    (0, 0)
                }
            }
        }
    }
}
