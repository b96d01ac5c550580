//! Issuing one command: the system or libc call the traced program made,
//! on the replayer's own descriptors (resource slots) and on paths confined
//! by [`crate::root::Root`]. Returns the result and errno in the trace's
//! conventions, so that they compare with what the trace recorded.
//!
//! Descriptor calls go straight to the kernel on the slot's descriptor (raw
//! system calls for the data calls: libc's wrappers are cancellation points
//! whose bookkeeping costs ~10% of a cached 1 KiB `pread`). Calls that name
//! an entry get its parent directory from a per-thread cache of `O_PATH`
//! descriptors opened under the root ([`Local`]) and act on one plain
//! component with `*at` calls that do not follow it, so a cached parent
//! saves the `openat2` and `close` of every such call.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU64, AtomicU8, Ordering};

use fsprof_trace::replayfile::{Command, Compiled};

use crate::raw;
use crate::root::{split_path, Root};

mod ready;
pub use ready::Ready;

/// What a slot holds.
const EMPTY: u8 = 0;
const FD: u8 = 1;
const DIRP: u8 = 2;
const FILEP: u8 = 3;
/// A file mapping: `ptr` its address, `len` its length, `fd` a descriptor
/// of the file of its own (the traced fd may be closed while it lives).
const MAP: u8 = 4;

/// The resource table. Commands that use a slot another thread filled wait
/// for that thread (the compiler's constraints), and the wait is an
/// acquire/release pair, so relaxed accesses here are enough.
pub struct Slots {
    kind: Vec<AtomicU8>,
    fd: Vec<AtomicI32>,
    ptr: Vec<AtomicPtr<libc::c_void>>,
    /// A mapping's length.
    len: Vec<AtomicU64>,
    /// A mapping's protection (PROT_*).
    prot: Vec<AtomicU8>,
}

impl Slots {
    pub fn new(n: usize) -> Slots {
        Slots {
            kind: (0..n).map(|_| AtomicU8::new(EMPTY)).collect(),
            fd: (0..n).map(|_| AtomicI32::new(-1)).collect(),
            ptr: (0..n)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            len: (0..n).map(|_| AtomicU64::new(0)).collect(),
            prot: (0..n).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    /// The mapping in a slot: its address and length.
    fn map(&self, s: Option<u32>) -> Option<(*mut libc::c_void, u64)> {
        let p = self.ptr(s, MAP);
        let s = s?;
        (!p.is_null()).then(|| (p, self.len[s as usize].load(Ordering::Relaxed)))
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

    /// The stream of a slot, made with `fdopen` for a slot that holds a
    /// descriptor: a descriptor the compiler reopened (compile/reopen.rs)
    /// is a stream in the traced program (its stdin, stdout), whose stdio
    /// calls the trace holds. Null for anything else.
    fn stream(&self, s: Option<u32>) -> *mut libc::FILE {
        let f = self.ptr(s, FILEP);
        let Some(slot) =
            s.filter(|&s| f.is_null() && self.kind[s as usize].load(Ordering::Relaxed) == FD)
        else {
            return f as *mut libc::FILE;
        };
        let fd = self.fd(s);
        // SAFETY: a descriptor the slot owns, and a mode string; the
        // stream then owns it, and the slot holds the stream instead.
        let f = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            let mode: &CStr = match (flags & libc::O_ACCMODE, flags & libc::O_APPEND != 0) {
                (libc::O_RDONLY, _) => c"r",
                (libc::O_WRONLY, false) => c"w",
                (libc::O_WRONLY, true) => c"a",
                (_, false) => c"r+",
                (_, true) => c"a+",
            };
            libc::fdopen(fd, mode.as_ptr())
        };
        if !f.is_null() {
            self.set(slot, FILEP, fd, f as *mut _);
        }
        f
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
        let len = self.len[s as usize].swap(0, Ordering::Relaxed);
        // SAFETY: the slot owned this descriptor / stream; it is emptied
        // above, so nothing else closes it again.
        let r = unsafe {
            match k {
                FD => libc::close(fd),
                DIRP => libc::closedir(p as *mut libc::DIR),
                FILEP => libc::fclose(p as *mut libc::FILE),
                MAP => {
                    libc::close(fd);
                    libc::munmap(p, len as usize)
                }
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

/// A raw system call's result ([`crate::raw`]: `-errno` on failure).
#[inline(always)]
fn sys_ret(r: i64) -> (i64, i32) {
    if r < 0 {
        (-1, -r as i32)
    } else {
        (r, 0)
    }
}

/// Issues a size-taking call of `len` bytes as calls of at most
/// [`MAX_BUF`] bytes each (`piece(at, n)`: `n` bytes from byte `at`), so
/// that no single system call of a replay asks for more, whatever the
/// trace says: the total done, or the first piece's error. Stops at a
/// short or failed piece.
fn in_pieces(len: u64, mut piece: impl FnMut(u64, u64) -> (i64, i32)) -> (i64, i32) {
    let mut done = 0u64;
    loop {
        let n = (len - done).min(MAX_BUF as u64);
        let (r, e) = piece(done, n);
        if e != 0 || r < 0 {
            return if done == 0 { (r, e) } else { (done as i64, 0) };
        }
        done += r as u64;
        if (r as u64) < n || done >= len {
            return (done as i64, 0);
        }
    }
}

/// The file offset `at` bytes into a range starting at `offset`.
fn at_offset(offset: i64, at: u64) -> i64 {
    offset.saturating_add(at as i64)
}

/// What the data calls need of a command, laid out per replay thread
/// before the start so that the hot path reads these 32 bytes rather than
/// the whole command (~180 bytes; at 10^6 commands a second the difference
/// pushed the replayed file's cached pages out of the CPU caches).
#[derive(Clone, Copy, Debug, Default)]
pub struct DataArgs {
    pub slot: Option<u32>,
    pub buf: Option<u32>,
    pub len: u64,
    pub offset: i64,
}

impl DataArgs {
    pub fn of(c: &Command) -> DataArgs {
        DataArgs {
            slot: c.slot,
            buf: c.buf,
            len: c.len,
            offset: c.offset,
        }
    }
}

/// Per-thread state: scratch memory for reads and generated write data,
/// and the parent directories of recent path calls.
pub struct Local {
    buf: PageBuf,
    zeros: PageBuf,
    /// By directory (index into [`PathTable`]'s directories): an `O_PATH`
    /// descriptor opened under the root.
    dirs: Vec<Option<OwnedFd>>,
    open_dirs: usize,
    /// [`Exec`]'s namespace generation the cached descriptors belong to.
    gen: u64,
}

/// Size-taking calls larger than this are issued in pieces of this size
/// ([`in_pieces`]); reads and generated writes use scratch memory of it.
const MAX_BUF: usize = 64 << 20;

/// The longest mapping a replay makes (address space, not memory: a
/// mapping allocates nothing until touched).
const MAX_MAP: u64 = 1 << 40;

/// Parent directories kept open per replay thread (descriptors count
/// against RLIMIT_NOFILE); past this the cache starts over.
const MAX_CACHED_DIRS: usize = 64;

impl Local {
    pub fn new() -> Local {
        Local {
            buf: PageBuf::default(),
            zeros: PageBuf::default(),
            dirs: Vec::new(),
            open_dirs: 0,
            gen: 0,
        }
    }

    fn read_buf(&mut self, n: u64) -> &mut [u8] {
        self.buf.get((n as usize).min(MAX_BUF))
    }

    fn zeros(&mut self, n: u64) -> &[u8] {
        self.zeros.get((n as usize).min(MAX_BUF))
    }

    /// Sizes the scratch memory for reads and generated writes of up to
    /// `read` and `write` bytes now, so that the replay loop allocates
    /// nothing.
    pub fn reserve(&mut self, read: u64, write: u64) {
        let _ = self.read_buf(read);
        let _ = self.zeros(write);
    }

    fn forget_dirs(&mut self) {
        self.dirs.iter_mut().for_each(|d| *d = None);
        self.open_dirs = 0;
    }
}

/// Scratch memory that starts on a page boundary. Where in its page a
/// read's buffer starts changes the kernel's copy into it: tar's reads
/// of /usr/include/linux (whole files, 10 KiB a call) into a buffer 16
/// bytes past a page boundary, which is where glibc puts a chunk it
/// maps for a large `malloc`, took twice as long as into one at a page's
/// start (mean +0.95..+1.13 powers of two, median 5,316 against 2,670
/// ticks; 2,064 bytes past: +0.31; 32, 48, 976, 1,072, 2,048, 4,080:
/// within 0.04; bench/read_offset.c); a `Vec` lands wherever the replay
/// thread's heap puts it. The trace does not keep a call's buffer
/// address; the buffers of tar, cat, cp and dd start on a page (tar
/// reads at multiples of 512 bytes from there), so the replay's do.
#[derive(Default)]
struct PageBuf {
    mem: Vec<u8>,
}

const PAGE: usize = 4096;

impl PageBuf {
    /// `n` bytes from the first page boundary in the memory, grown (and
    /// written: its pages faulted in) when short.
    fn get(&mut self, n: usize) -> &mut [u8] {
        if self.mem.len() < n + PAGE {
            self.mem.resize(n + PAGE, 0);
        }
        let off = (PAGE - self.mem.as_ptr() as usize % PAGE) % PAGE;
        &mut self.mem[off..off + n]
    }
}

impl Default for Local {
    fn default() -> Self {
        Self::new()
    }
}

/// Each path of the compiled trace split once, before the replay, into
/// its parent directory and last component. The component keeps a
/// trailing slash the program gave (one): `unlinkat`, `renameat2`,
/// `mkdirat` and the creating calls then fail or succeed as the traced
/// ones did (`unlink("f/")` is ENOTDIR), and none of them follows the
/// component for that slash. The two calls whose trailing slash follows a
/// symlink (link's source, readlink) are answered by the confined lookup
/// instead ([`Exec::through_slash`]).
pub struct PathTable {
    /// By string id: (directory index, last component), or the errno a
    /// call on it fails with (an empty, `.` or `..` last component).
    split: Vec<Result<(u32, CString), i32>>,
    /// By directory index: the directory's path.
    dirs: Vec<Vec<u8>>,
}

impl PathTable {
    pub fn new(c: &Compiled) -> PathTable {
        let mut index = std::collections::HashMap::new();
        let mut dirs = Vec::new();
        let split = c
            .strings
            .iter()
            .map(|p| {
                let (dir, name) = split_path(p)?;
                let name = if p.ends_with(b"/") {
                    CString::new([name.as_bytes(), b"/"].concat()).map_err(|_| libc::EINVAL)?
                } else {
                    name
                };
                let next = dirs.len() as u32;
                let id = *index.entry(dir.to_vec()).or_insert_with(|| {
                    dirs.push(dir.to_vec());
                    next
                });
                Ok((id, name))
            })
            .collect();
        PathTable { split, dirs }
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
    Mmap,
    Msync,
    Munmap,
    MappedRead,
    MappedWrite,
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
            // dprintf's bytes, as the trace holds them.
            "write" | "writev" | "dprintf" => Write,
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
            // What printf, puts and putc gave the stream, as fwrite's.
            "fwrite" | "fputs" | "fprintf" | "puts" | "fputc" => Fwrite,
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
            "mmap" => Mmap,
            "msync" => Msync,
            "munmap" => Munmap,
            "mapped_read" => MappedRead,
            "mapped_write" => MappedWrite,
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

    /// Every command's kind, by op (computed once per op, not per command).
    pub fn table(c: &Compiled) -> Vec<Option<Kind>> {
        let n = fsprof_trace::event::Op::count();
        let mut by_op: Vec<[Option<Option<Kind>>; 2]> = vec![[None, None]; n];
        c.commands
            .iter()
            .map(|cmd| {
                let nofollow = cmd.flags & libc::AT_SYMLINK_NOFOLLOW as i64 != 0;
                match by_op.get_mut(cmd.op.0 as usize) {
                    Some(e) => *e[nofollow as usize].get_or_insert_with(|| Kind::of(cmd)),
                    None => None,
                }
            })
            .collect()
    }

    /// Reads of file data (skipped with `--reads skip`).
    pub fn is_read(self) -> bool {
        matches!(
            self,
            Kind::Read
                | Kind::Pread
                | Kind::Fread
                | Kind::Fgets
                | Kind::Getdelim
                | Kind::MappedRead
        )
    }

    /// The calls [`Exec::data_call`] issues from [`DataArgs`].
    pub fn is_data(self) -> bool {
        matches!(
            self,
            Kind::Read | Kind::Pread | Kind::Write | Kind::Pwrite | Kind::Fwrite
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
                | Kind::Mmap
        )
    }
}

/// The environment commands run in.
pub struct Exec<'a> {
    root: &'a Root,
    slots: &'a Slots,
    compiled: &'a Compiled,
    paths: &'a PathTable,
    /// Bumped after every call that may change what a directory path
    /// resolves to (rename, unlink, rmdir, a permission or owner change):
    /// the threads' cached parent directories are then opened again.
    gen: AtomicU64,
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

impl<'a> Exec<'a> {
    pub fn new(
        root: &'a Root,
        slots: &'a Slots,
        compiled: &'a Compiled,
        paths: &'a PathTable,
    ) -> Exec<'a> {
        Exec {
            root,
            slots,
            compiled,
            paths,
            gen: AtomicU64::new(0),
        }
    }

    /// The parent directory (a descriptor, cached per thread) and last
    /// component of the path with string id `id`.
    fn parent<'l>(&'l self, id: Option<u32>, local: &mut Local) -> Result<(RawFd, &'l CStr), i32> {
        let Some(id) = id else {
            return Err(libc::EFAULT);
        };
        let (dir, name) = match self.paths.split.get(id as usize) {
            Some(Ok((d, n))) => (*d as usize, n.as_c_str()),
            Some(Err(e)) => return Err(*e),
            None => return Err(libc::EFAULT),
        };
        let gen = self.gen.load(Ordering::Acquire);
        if gen != local.gen {
            local.forget_dirs();
            local.gen = gen;
        }
        if local.dirs.len() <= dir {
            local.dirs.resize_with(dir + 1, || None);
        }
        if let Some(fd) = &local.dirs[dir] {
            return Ok((fd.as_raw_fd(), name));
        }
        if local.open_dirs >= MAX_CACHED_DIRS {
            local.forget_dirs();
        }
        let fd = self.root.openat(
            &self.paths.dirs[dir],
            (libc::O_PATH | libc::O_DIRECTORY) as i64,
            0,
        )?;
        let raw = fd.as_raw_fd();
        local.dirs[dir] = Some(fd);
        local.open_dirs += 1;
        Ok((raw, name))
    }

    /// Opens a path under the root: through its cached parent directory
    /// where its last component is a plain name ([`Root::open_in`]), else
    /// (`/`, a trailing slash) by the whole path from the root.
    fn open_path(
        &self,
        id: Option<u32>,
        path: &[u8],
        flags: i64,
        mode: u32,
        local: &mut Local,
    ) -> Result<OwnedFd, i32> {
        if !path.ends_with(b"/") {
            if let Ok((d, n)) = self.parent(id, local) {
                return self.root.open_in(d, n, path, flags, mode);
            }
        }
        self.root.openat(path, flags, mode)
    }

    /// The confined lookup of a path with a trailing slash, which follows
    /// a final symlink and must end at a directory (what `link` and
    /// `readlink` do with such a path before anything else).
    fn through_slash(&self, id: Option<u32>) -> Result<(), i32> {
        self.root.lookup(self.string(id), false).map(drop)
    }

    /// Whether the path has a parent directory and a last component.
    fn splits(&self, id: Option<u32>) -> bool {
        id.and_then(|i| self.paths.split.get(i as usize))
            .is_some_and(Result::is_ok)
    }

    /// `fstatat` of the entry itself (never followed) through its cached
    /// parent; None when the confined full lookup must answer instead: a
    /// path without a last component (`/`) or with a trailing slash (which
    /// asks for a directory, through a symlink if need be).
    fn entry_stat(
        &self,
        id: Option<u32>,
        path: &[u8],
        local: &mut Local,
        st: &mut libc::stat,
    ) -> Option<(i64, i32)> {
        if path.ends_with(b"/") {
            return None;
        }
        match self.parent(id, local) {
            Ok((d, n)) => {
                // SAFETY: a descriptor we hold, a C string and a stat buffer.
                let r = unsafe { libc::fstatat(d, n.as_ptr(), st, libc::AT_SYMLINK_NOFOLLOW) };
                Some(ret(r as i64))
            }
            Err(e) if self.splits(id) => Some(err(e)),
            Err(_) => None,
        }
    }

    /// Work a command can do before its time: opening its paths' parent
    /// directories. Whether it had any to do.
    pub fn prepare(&self, kind: Kind, cmd: u32, local: &mut Local) -> bool {
        use Kind::*;
        let c = &self.compiled.commands[cmd as usize];
        let has = matches!(
            kind,
            Open | OpenDir
                | FOpen
                | Stat
                | Lstat
                | Access
                | Mkdir
                | Rmdir
                | Unlink
                | Rename
                | Link
                | Symlink
                | Readlink
                | Mknod
        );
        if has {
            let _ = self.parent(c.path, local);
            if matches!(kind, Rename | Link) {
                let _ = self.parent(c.path2, local);
            }
        }
        has
    }

    /// Opens, before the start, the parent directories of a replay
    /// thread's path calls (`(kind, command index)`, in order), as many
    /// as the thread keeps: each would otherwise be opened (an `openat2`
    /// from the root, a few µs) between two calls when its first command
    /// is due at once. A directory not there yet is opened when first
    /// used, as before.
    pub fn preopen(&self, cmds: impl Iterator<Item = (Kind, u32)>, local: &mut Local) {
        for (kind, cmd) in cmds {
            // Two parents at most per command; at the limit the cache
            // would be emptied.
            if local.open_dirs + 2 > MAX_CACHED_DIRS {
                break;
            }
            self.prepare(kind, cmd, local);
        }
    }

    /// After a call that may change how directory paths resolve.
    fn namespace_changed(&self, r: (i64, i32)) -> (i64, i32) {
        if r.1 == 0 {
            self.gen.fetch_add(1, Ordering::AcqRel);
        }
        r
    }

    fn string(&self, id: Option<u32>) -> &[u8] {
        id.map_or(&[][..], |i| &self.compiled.strings[i as usize])
    }

    /// `len` bytes of a write's data from byte `at`: the traced bytes, or
    /// zeros where the trace kept a digest or nothing.
    fn data<'s>(&'s self, buf: Option<u32>, at: u64, len: u64, local: &'s mut Local) -> &'s [u8] {
        match buf {
            Some(b) => {
                let b = &self.compiled.buffers[b as usize];
                let from = (at as usize).min(b.len());
                &b[from..(from + len as usize).min(b.len())]
            }
            None => local.zeros(len),
        }
    }

    /// Issues the command: a data call from its laid-out arguments, any
    /// other through the whole command (`cmd` is its index).
    #[inline(always)]
    pub fn issue(&self, kind: Kind, a: &DataArgs, cmd: u32, local: &mut Local) -> (i64, i32) {
        if kind.is_data() {
            self.data_call(kind, a, local)
        } else {
            self.run(kind, &self.compiled.commands[cmd as usize], local)
        }
    }

    /// Issues the command; returns (result, errno) as the trace records them.
    pub fn run(&self, kind: Kind, c: &Command, local: &mut Local) -> (i64, i32) {
        use Kind::*;
        match kind {
            Open | OpenDir | FOpen | FdOpen | FdOpenDir | Close => self.open_close(kind, c, local),
            Read | Pread | Write | Pwrite | Fwrite => self.data_call(kind, &DataArgs::of(c), local),
            Lseek | Fstat | Fsync | Fdatasync | Syncfs | SyncFileRange | Ftruncate | Fallocate
            | PosixFallocate | PosixFadvise | Fchmod | Fchown | Futimens | NoOp | Readdir
            | Getdents | Fstatfs | Flock | Fcntl | Sendfile | CopyFileRange => {
                self.fd_call(kind, c, local)
            }
            Fread | Fgets | Getdelim | Fflush | Fseek | Ftell => self.stream_call(kind, c, local),
            Stat | Lstat | Access | Truncate | Chmod | Chown | Utimes | Chdir | Statfs => {
                self.entry_call(kind, c, local)
            }
            Mkdir | Rmdir | Unlink | Rename | Link | Symlink | Readlink | Mknod | Sync => {
                self.namespace_call(kind, c, local)
            }
            Mmap | Msync | Munmap => self.map_call(kind, c),
            MappedRead | MappedWrite => self.touch(kind, c),
        }
    }

    /// Opens and closes: slots filled and emptied.
    fn open_close(&self, kind: Kind, c: &Command, local: &mut Local) -> (i64, i32) {
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
                    match self.open_path(c.path, path, c.flags, c.mode, local) {
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
                _ => err(libc::ENOSYS),
            }
        }
    }

    /// The data calls on a descriptor: the hot path of a replay. Takes
    /// the few arguments it needs ([`DataArgs`], laid out per thread before
    /// the start) rather than the whole command.
    #[inline]
    pub fn data_call(&self, kind: Kind, a: &DataArgs, local: &mut Local) -> (i64, i32) {
        if a.len <= MAX_BUF as u64 {
            return self.data_piece(kind, a, 0, a.len, local);
        }
        in_pieces(a.len, |at, n| self.data_piece(kind, a, at, n, local))
    }

    /// `len` bytes of a data call from byte `at` of it.
    #[inline]
    fn data_piece(
        &self,
        kind: Kind,
        a: &DataArgs,
        at: u64,
        len: u64,
        local: &mut Local,
    ) -> (i64, i32) {
        use Kind::*;
        let s = self.slots;
        let fd = s.fd(a.slot) as i64;
        let off = a.offset.saturating_add(at as i64);
        // read and pread differ only in the call's number (read ignores the
        // offset); so do write and pwrite.
        let (nr, off) = match kind {
            Read => (libc::SYS_read, 0),
            Pread => (libc::SYS_pread64, off),
            Write | Fwrite => (libc::SYS_write, 0),
            Pwrite => (libc::SYS_pwrite64, off),
            _ => return err(libc::ENOSYS),
        };
        if kind.is_read() {
            let b = local.read_buf(len);
            return sys_ret(raw::syscall4(
                nr,
                fd,
                b.as_mut_ptr() as i64,
                b.len() as i64,
                off,
            ));
        }
        let d = self.data(a.buf, at, len, local);
        let f = match kind {
            Fwrite => s.stream(a.slot) as *mut libc::c_void,
            _ => s.ptr(a.slot, FILEP),
        };
        if kind == Fwrite || (kind == Write && !f.is_null()) {
            if f.is_null() {
                return err(libc::EBADF);
            }
            // SAFETY: a FILE* the slot owns and a buffer of d.len() bytes.
            let n = unsafe { libc::fwrite(d.as_ptr() as *const _, 1, d.len(), f as *mut _) };
            return match kind {
                Write if n < d.len() => err(libc::EIO),
                _ => (n as i64, 0),
            };
        }
        sys_ret(raw::syscall4(
            nr,
            fd,
            d.as_ptr() as i64,
            d.len() as i64,
            off,
        ))
    }

    /// The other calls on a descriptor.
    fn fd_call(&self, kind: Kind, c: &Command, local: &mut Local) -> (i64, i32) {
        use Kind::*;
        let s = self.slots;
        let fd = s.fd(c.slot);
        // SAFETY: every libc call below gets descriptors from the slot
        // table (our own, or -1, which the kernel refuses with EBADF),
        // buffers valid for the lengths passed, and C strings.
        unsafe {
            match kind {
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
                Fallocate | PosixFallocate | Sendfile | CopyFileRange => self.sized_call(kind, c),
                PosixFadvise => {
                    match libc::posix_fadvise(fd, c.offset, c.len as i64, c.flags as i32) {
                        0 => (0, 0),
                        e => err(e),
                    }
                }
                Fchmod => self.namespace_changed(ret(libc::fchmod(fd, c.mode) as i64)),
                Fchown => self.namespace_changed(ret(libc::fchown(fd, u32::MAX, u32::MAX) as i64)),
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
                    let b = local.read_buf(c.len.max(4096));
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
                Fcntl => ret(libc::fcntl(fd, c.flags as i32, c.arg) as i64),
                _ => err(libc::ENOSYS),
            }
        }
    }

    /// The calls that take a size and may allocate it, issued in pieces
    /// of at most [`MAX_BUF`] ([`in_pieces`]; the whole is charged
    /// against the replay's budget before the start, [`crate::budget`]).
    fn sized_call(&self, kind: Kind, c: &Command) -> (i64, i32) {
        use Kind::*;
        let s = self.slots;
        let fd = s.fd(c.slot);
        // SAFETY: every libc call below gets descriptors from the slot
        // table (our own, or -1, which the kernel refuses with EBADF).
        unsafe {
            match kind {
                Fallocate => {
                    let mode = c.mode as i32;
                    // Ranges that shift the file's data are not split.
                    let shifts = libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_INSERT_RANGE;
                    let alloc = |at: u64, n: u64| {
                        let r = libc::fallocate(fd, mode, at_offset(c.offset, at), n as i64);
                        ret(if r == 0 { n as i64 } else { -1 })
                    };
                    match if mode & shifts != 0 {
                        alloc(0, c.len)
                    } else {
                        in_pieces(c.len, alloc)
                    } {
                        (_, 0) => (0, 0),
                        e => e,
                    }
                }
                PosixFallocate => {
                    let alloc = |at: u64, n: u64| match libc::posix_fallocate(
                        fd,
                        at_offset(c.offset, at),
                        n as i64,
                    ) {
                        0 => (n as i64, 0),
                        e => err(e),
                    };
                    match in_pieces(c.len, alloc) {
                        (_, 0) => (0, 0),
                        e => e,
                    }
                }
                Sendfile => {
                    // The trace's fd is the file read (as for
                    // copy_file_range), its second fd the output.
                    let out = s.fd(c.slot2);
                    in_pieces(c.len, |_, n| {
                        ret(libc::sendfile(out, fd, std::ptr::null_mut(), n as usize) as i64)
                    })
                }
                CopyFileRange => {
                    let out = s.fd(c.slot2);
                    in_pieces(c.len, |_, n| {
                        ret(libc::copy_file_range(
                            fd,
                            std::ptr::null_mut(),
                            out,
                            std::ptr::null_mut(),
                            n as usize,
                            0,
                        ) as i64)
                    })
                }
                _ => err(libc::ENOSYS),
            }
        }
    }

    /// `mmap` of a slot's file into a slot of its own, `msync` of a range
    /// of it, `munmap`. The replayer's mapping is its own: no address is
    /// taken from the trace (MAP_FIXED and the like are dropped), no page
    /// is executable, nothing is locked in memory; only the sharing and
    /// population flags are kept, so that writes through a shared mapping
    /// reach the file as they did. A range outside the mapping is refused
    /// (ENOMEM, as the kernel says of an unmapped range).
    fn map_call(&self, kind: Kind, c: &Command) -> (i64, i32) {
        let s = self.slots;
        match kind {
            Kind::Mmap => {
                let Some(out) = c.out else {
                    return err(libc::EINVAL);
                };
                if c.len == 0 || c.len > MAX_MAP {
                    return err(libc::ENOMEM);
                }
                let prot = c.mode as i32 & (libc::PROT_READ | libc::PROT_WRITE);
                let flags = c.flags as i32
                    & (libc::MAP_SHARED
                        | libc::MAP_PRIVATE
                        | libc::MAP_SHARED_VALIDATE
                        | libc::MAP_NORESERVE
                        | libc::MAP_POPULATE);
                // SAFETY: descriptors from the slot table (or -1, refused
                // with EBADF); a mapping at an address the kernel picks.
                unsafe {
                    let own = libc::fcntl(s.fd(c.slot), libc::F_DUPFD_CLOEXEC, 0);
                    if own < 0 {
                        return err(last_errno());
                    }
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        c.len as usize,
                        prot,
                        flags,
                        own,
                        c.offset,
                    );
                    if p == libc::MAP_FAILED {
                        let e = last_errno();
                        libc::close(own);
                        return err(e);
                    }
                    s.set(out, MAP, own, p);
                    s.len[out as usize].store(c.len, Ordering::Relaxed);
                    s.prot[out as usize].store(prot as u8, Ordering::Relaxed);
                    (p as i64, 0)
                }
            }
            Kind::Msync => {
                let Some((p, len)) = s.map(c.slot) else {
                    return err(libc::ENOMEM);
                };
                let off = c.offset as u64;
                if off > len || c.len > len - off {
                    return err(libc::ENOMEM);
                }
                let flags = c.flags as i32 & (libc::MS_ASYNC | libc::MS_SYNC | libc::MS_INVALIDATE);
                // SAFETY: a range inside a mapping the slot owns.
                ret(unsafe { libc::msync(p.add(off as usize), c.len as usize, flags) } as i64)
            }
            _ => match s.map(c.slot) {
                Some(_) => s.close(c.slot.expect("a mapping's slot")),
                None => err(libc::EINVAL),
            },
        }
    }

    /// A load from a page of a slot's mapping, or a store to it (of the
    /// traced bytes when the trace has them, else of what is there). A
    /// range outside the mapping is refused (ENOMEM, as msync's), so is
    /// a store to a mapping the trace did not map writable (EACCES: it
    /// would be SIGSEGV); a page beyond the end of the replayed file is
    /// EFAULT ([`crate::touch`]).
    fn touch(&self, kind: Kind, c: &Command) -> (i64, i32) {
        let s = self.slots;
        let Some((p, len)) = s.map(c.slot) else {
            return err(libc::EBADF);
        };
        let off = c.offset as u64;
        let n = c.len.max(1);
        if off >= len || n > len - off {
            return err(libc::ENOMEM);
        }
        let prot =
            s.prot[c.slot.expect("a mapping's slot") as usize].load(Ordering::Relaxed) as i32;
        let at = (p as usize + off as usize) as *mut u8;
        let ok = match kind {
            Kind::MappedWrite if prot & libc::PROT_WRITE == 0 => return err(libc::EACCES),
            Kind::MappedWrite => {
                let bytes = c.buf.map(|b| self.compiled.buffers[b as usize].as_slice());
                // SAFETY: inside the slot's writable mapping (checked).
                unsafe { crate::touch::store(at, n as usize, bytes) }
            }
            _ if prot & (libc::PROT_READ | libc::PROT_WRITE) == 0 => return err(libc::EACCES),
            // SAFETY: inside the slot's readable mapping (checked).
            _ => unsafe { crate::touch::load(at, n as usize) },
        };
        if ok {
            (0, 0)
        } else {
            err(libc::EFAULT)
        }
    }

    /// The stdio calls on a stream.
    fn stream_call(&self, kind: Kind, c: &Command, local: &mut Local) -> (i64, i32) {
        use Kind::*;
        let s = self.slots;
        // SAFETY: every libc call below gets descriptors from the slot
        // table (our own, or -1, which the kernel refuses with EBADF),
        // buffers valid for the lengths passed, and C strings.
        unsafe {
            match kind {
                Fread | Fgets | Getdelim => {
                    let f = s.stream(c.slot);
                    if f.is_null() {
                        return err(libc::EBADF);
                    }
                    let b = local.read_buf(c.len.max(1));
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
                Fflush => {
                    let f = s.stream(c.slot);
                    if f.is_null() {
                        return err(libc::EBADF);
                    }
                    ret(libc::fflush(f) as i64)
                }
                Fseek | Ftell => {
                    let f = s.stream(c.slot);
                    if f.is_null() {
                        return err(libc::EBADF);
                    }
                    if kind == Fseek {
                        ret(libc::fseeko(f, c.offset, c.whence) as i64)
                    } else {
                        ret(libc::ftello(f))
                    }
                }
                _ => err(libc::ENOSYS),
            }
        }
    }

    /// `stat`, `lstat` and `access` of a path: through the cached parent
    /// (the entry itself, never followed), and by the confined lookup from
    /// the root where it is a symlink to follow or has no last component.
    fn look_call(&self, kind: Kind, c: &Command, local: &mut Local) -> (i64, i32) {
        use Kind::*;
        let path = self.string(c.path);
        // SAFETY: descriptors we hold or get from the confined lookup, C
        // strings and stat buffers of our own.
        unsafe {
            match kind {
                Stat | Lstat => {
                    let mut st: libc::stat = std::mem::zeroed();
                    if let Some(r) = self.entry_stat(c.path, path, local, &mut st) {
                        if kind == Lstat || r.1 != 0 || st.st_mode & libc::S_IFMT != libc::S_IFLNK {
                            return r;
                        }
                    }
                    match self.root.lookup(path, kind == Lstat) {
                        Err(e) => err(e),
                        Ok(o) => ret(libc::fstat(o.as_raw_fd(), &mut st) as i64),
                    }
                }
                Access => {
                    let mut st: libc::stat = std::mem::zeroed();
                    match self.entry_stat(c.path, path, local, &mut st) {
                        Some(r) if r.1 != 0 => return r,
                        Some(_) if st.st_mode & libc::S_IFMT != libc::S_IFLNK => {
                            // Cached unless another thread's rename
                            // just made it open it again.
                            let (d, n) = match self.parent(c.path, local) {
                                Ok(p) => p,
                                Err(e) => return err(e),
                            };
                            // Not a symlink a moment ago; should it be one
                            // now, AT_SYMLINK_NOFOLLOW still checks the
                            // link itself, never what it points to.
                            return ret(libc::faccessat(
                                d,
                                n.as_ptr(),
                                c.mode as i32,
                                libc::AT_SYMLINK_NOFOLLOW,
                            ) as i64);
                        }
                        _ => {}
                    }
                    match self.root.lookup(path, false) {
                        Err(e) => err(e),
                        Ok(o) => ret(libc::access(proc_fd(&o).as_ptr(), c.mode as i32) as i64),
                    }
                }
                _ => err(libc::ENOSYS),
            }
        }
    }

    /// Calls that look at or change one entry through its path.
    fn entry_call(&self, kind: Kind, c: &Command, local: &mut Local) -> (i64, i32) {
        use Kind::*;
        let path = self.string(c.path);
        // SAFETY: every libc call below gets descriptors from the slot
        // table (our own, or -1, which the kernel refuses with EBADF),
        // buffers valid for the lengths passed, and C strings.
        unsafe {
            match kind {
                Stat | Lstat | Access => self.look_call(kind, c, local),
                Truncate => match self.root.openat(path, libc::O_WRONLY as i64, 0) {
                    Err(e) => err(e),
                    Ok(o) => ret(libc::ftruncate(o.as_raw_fd(), c.len as i64) as i64),
                },
                Chmod => {
                    let nofollow = c.flags & libc::AT_SYMLINK_NOFOLLOW as i64 != 0;
                    self.namespace_changed(match self.root.lookup(path, nofollow) {
                        Err(e) => err(e),
                        Ok(o) => ret(libc::chmod(proc_fd(&o).as_ptr(), c.mode & 0o7777) as i64),
                    })
                }
                Chown => {
                    let nofollow =
                        c.op.is("lchown") || c.flags & libc::AT_SYMLINK_NOFOLLOW as i64 != 0;
                    self.namespace_changed(match self.root.lookup(path, nofollow) {
                        Err(e) => err(e),
                        Ok(o) => ret(libc::fchownat(
                            o.as_raw_fd(),
                            c"".as_ptr(),
                            u32::MAX,
                            u32::MAX,
                            libc::AT_EMPTY_PATH,
                        ) as i64),
                    })
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
                _ => err(libc::ENOSYS),
            }
        }
    }

    /// `link` of a source with a trailing slash: it resolved as a directory
    /// (through a symlink if need be), so the result is an error, or, for
    /// a directory, the error linking it gives once the new name is free.
    fn link_slashed_source(&self, c: &Command, local: &mut Local) -> (i64, i32) {
        if let Err(e) = self.through_slash(c.path) {
            return err(e);
        }
        match self.parent(c.path2, local) {
            Err(e) => err(e),
            Ok((d, n)) => {
                // SAFETY: `d` is a directory descriptor of the slot table
                // (or -1, refused with EBADF), `n` a C string, `st` ours.
                let exists = unsafe {
                    let mut st: libc::stat = std::mem::zeroed();
                    libc::fstatat(d, n.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW)
                };
                err(if exists == 0 {
                    libc::EEXIST
                } else if n.to_bytes().ends_with(b"/") {
                    // A new name with a slash is never created.
                    libc::ENOENT
                } else {
                    libc::EPERM
                })
            }
        }
    }

    /// `rename` (`renameat2`'s flags kept) and `link` between two
    /// confined parents, each with a single plain component.
    fn rename_or_link(&self, kind: Kind, c: &Command, local: &mut Local) -> (i64, i32) {
        // SAFETY: descriptors of cached parent directories and C strings.
        unsafe {
            let from = self.parent(c.path, local);
            let to = self.parent(c.path2, local);
            match (from, to) {
                (Err(e), _) | (_, Err(e)) => err(e),
                (Ok((d1, n1)), Ok((d2, n2))) => {
                    if kind == Kind::Rename {
                        let flags = if c.op.is("renameat2") {
                            c.flags as u32
                        } else {
                            0
                        };
                        // The system call itself: musl (a static
                        // build) has no renameat2 wrapper.
                        self.namespace_changed(ret(libc::syscall(
                            libc::SYS_renameat2,
                            d1,
                            n1.as_ptr(),
                            d2,
                            n2.as_ptr(),
                            flags,
                        )))
                    } else {
                        // Never AT_SYMLINK_FOLLOW: a symlink to a
                        // file outside the root must not become a
                        // hard link to it inside.
                        ret(libc::linkat(d1, n1.as_ptr(), d2, n2.as_ptr(), 0) as i64)
                    }
                }
            }
        }
    }

    /// Calls that add, remove or rename entries (and `sync`).
    fn namespace_call(&self, kind: Kind, c: &Command, local: &mut Local) -> (i64, i32) {
        use Kind::*;
        // SAFETY: every libc call below gets descriptors from the slot
        // table (our own, or -1, which the kernel refuses with EBADF),
        // buffers valid for the lengths passed, and C strings.
        unsafe {
            match kind {
                Mkdir => match self.parent(c.path, local) {
                    Err(e) => err(e),
                    Ok((d, n)) => ret(libc::mkdirat(d, n.as_ptr(), c.mode) as i64),
                },
                Rmdir | Unlink => match self.parent(c.path, local) {
                    Err(e) => err(e),
                    Ok((d, n)) => {
                        let dir = kind == Rmdir || c.flags & libc::AT_REMOVEDIR as i64 != 0;
                        let f = if dir { libc::AT_REMOVEDIR } else { 0 };
                        self.namespace_changed(ret(libc::unlinkat(d, n.as_ptr(), f) as i64))
                    }
                },
                Link if self.string(c.path).ends_with(b"/") => self.link_slashed_source(c, local),
                Rename | Link => self.rename_or_link(kind, c, local),
                Symlink => match self.parent(c.path, local) {
                    Err(e) => err(e),
                    Ok((d, n)) => {
                        let Ok(target) = CString::new(self.string(c.name).to_vec()) else {
                            return err(libc::EINVAL);
                        };
                        ret(libc::symlinkat(target.as_ptr(), d, n.as_ptr()) as i64)
                    }
                },
                // A directory is not a symlink to read.
                Readlink if self.string(c.path).ends_with(b"/") => {
                    err(self.through_slash(c.path).err().unwrap_or(libc::EINVAL))
                }
                Readlink => match self.parent(c.path, local) {
                    Err(e) => err(e),
                    Ok((d, n)) => {
                        let b = local.read_buf(c.len.max(1));
                        ret(
                            libc::readlinkat(d, n.as_ptr(), b.as_mut_ptr() as *mut _, b.len())
                                as i64,
                        )
                    }
                },
                Mknod => {
                    let t = c.mode & libc::S_IFMT;
                    if t == libc::S_IFCHR || t == libc::S_IFBLK {
                        // Device nodes would reach hardware from inside the root.
                        return err(libc::EPERM);
                    }
                    match self.parent(c.path, local) {
                        Err(e) => err(e),
                        Ok((d, n)) => ret(libc::mknodat(d, n.as_ptr(), c.mode, 0) as i64),
                    }
                }
                Sync => {
                    libc::sync();
                    (0, 0)
                }
                _ => err(libc::ENOSYS),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_trace::replayfile::Command;

    /// Reads land at a page's start and generated writes come from one,
    /// however malloc placed the memory and however it grew.
    #[test]
    fn scratch_memory_starts_on_a_page() {
        let mut local = Local::new();
        for n in [1u64, 100, 3285, 10240, 70_000, 512] {
            let p = local.read_buf(n).as_ptr() as usize;
            assert_eq!(p % PAGE, 0, "read buffer of {n} at {p:#x}");
            assert_eq!(local.read_buf(n).len(), n as usize);
            let z = local.zeros(n);
            assert_eq!(z.as_ptr() as usize % PAGE, 0, "zeros of {n}");
            assert!(z.iter().all(|&b| b == 0));
        }
    }

    /// `stat`s of `paths`, one thread.
    fn stats(paths: &[String]) -> Compiled {
        Compiled {
            strings: paths.iter().map(|p| p.as_bytes().to_vec()).collect(),
            commands: (0..paths.len() as u32)
                .map(|i| Command {
                    op: fsprof_trace::event::Op::from_name("stat").unwrap(),
                    path: Some(i),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// The parent directories of a thread's path calls are opened before
    /// the start, each once, those not there yet left to their first use,
    /// and never more than the thread keeps (the cache is not emptied).
    #[test]
    fn preopen_opens_each_parent_once_and_stays_within_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["a", "b"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let root = Root::open(dir.path()).unwrap();
        let c = stats(&["/a/x", "/b/y", "/a/z", "/missing/w"].map(String::from));
        let (slots, paths) = (Slots::new(0), PathTable::new(&c));
        let exec = Exec::new(&root, &slots, &c, &paths);
        let kinds = Kind::table(&c);
        let mut local = Local::new();
        let cmds = || (0..c.commands.len() as u32).map(|i| (kinds[i as usize].unwrap(), i));
        exec.preopen(cmds(), &mut local);
        assert_eq!(local.open_dirs, 2);
        assert_eq!(local.dirs.iter().flatten().count(), 2);
        // The missing one is tried again when used: there now.
        std::fs::create_dir(dir.path().join("missing")).unwrap();
        assert!(exec.parent(Some(3), &mut local).is_ok());
        assert_eq!(local.open_dirs, 3);

        let many: Vec<String> = (0..2 * MAX_CACHED_DIRS)
            .map(|i| format!("/d{i}/f"))
            .collect();
        for i in 0..many.len() {
            std::fs::create_dir(dir.path().join(format!("d{i}"))).unwrap();
        }
        let c = stats(&many);
        let paths = PathTable::new(&c);
        let exec = Exec::new(&root, &slots, &c, &paths);
        let kinds = Kind::table(&c);
        let mut local = Local::new();
        let cmds = (0..c.commands.len() as u32).map(|i| (kinds[i as usize].unwrap(), i));
        exec.preopen(cmds, &mut local);
        assert_eq!(local.open_dirs, MAX_CACHED_DIRS - 1);
        // The first ones are the ones kept: the replay's first commands.
        assert!(local.dirs[0].is_some());
    }
}
