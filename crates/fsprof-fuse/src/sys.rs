//! Thin wrappers over the system calls the pass-through makes on the lower
//! file system, each returning the errno the FUSE reply carries. Inodes are
//! held as `O_PATH` descriptors; operations that cannot take one (open,
//! xattrs, link, chmod, utimes) go through `/proc/self/fd/N`, as libfuse's
//! passthrough_hp does, so no path of LOWER is ever resolved twice.

use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

use fuser::Errno;

pub type Res<T> = Result<T, Errno>;

/// The errno of the last failed call.
pub fn last() -> Errno {
    Errno::from_i32(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}

/// `-1` → the errno, anything else → the value.
pub fn check(ret: libc::c_long) -> Res<libc::c_long> {
    if ret == -1 {
        Err(last())
    } else {
        Ok(ret)
    }
}

fn check_int(ret: libc::c_int) -> Res<libc::c_int> {
    if ret == -1 {
        Err(last())
    } else {
        Ok(ret)
    }
}

/// A name from the kernel (never contains NUL; EINVAL if it somehow does).
pub fn cname(name: &OsStr) -> Res<CString> {
    CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)
}

pub const EMPTY: &CStr = c"";

/// `/proc/self/fd/N`: the inode behind an `O_PATH` descriptor, for calls
/// that take a path.
pub fn proc_path(fd: RawFd) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a number")
}

pub fn stat_at(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> Res<libc::stat> {
    // SAFETY: stat is plain data the kernel fills in.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor, NUL-terminated name and out-pointer.
    check_int(unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, flags) })?;
    Ok(st)
}

/// The attributes of the inode a descriptor refers to (`O_PATH` ones too).
pub fn stat_fd(fd: BorrowedFd<'_>) -> Res<libc::stat> {
    stat_at(fd, EMPTY, libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW)
}

pub fn open_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> Res<OwnedFd> {
    // SAFETY: a valid descriptor and NUL-terminated name.
    let fd = check_int(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: openat returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `/proc/self/fd`, opened once (lazily: after the daemon has forked) so
/// that reopening a descriptor is one `openat(dir, "N")` that resolves a
/// single name, not a walk of `/proc`, `self` and `fd` at every open and
/// create.
fn proc_fd_dir() -> Res<RawFd> {
    static DIR: OnceLock<Option<OwnedFd>> = OnceLock::new();
    DIR.get_or_init(|| {
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: a NUL-terminated absolute path.
        let fd = unsafe { libc::open(c"/proc/self/fd".as_ptr(), flags) };
        // SAFETY: open returned a new descriptor that nothing else owns.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    })
    .as_ref()
    .map(|d| d.as_raw_fd())
    .ok_or(Errno::EIO)
}

/// A descriptor number as a NUL-terminated name, without allocating.
struct FdName {
    buf: [u8; 12],
    start: usize,
}

impl FdName {
    fn new(fd: RawFd) -> FdName {
        let mut buf = [0u8; 12];
        let mut at = buf.len() - 1; // the NUL stays at the end
        let mut n = fd.unsigned_abs();
        loop {
            at -= 1;
            buf[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        FdName { buf, start: at }
    }

    fn as_cstr(&self) -> &CStr {
        CStr::from_bytes_with_nul(&self.buf[self.start..]).expect("digits and one NUL")
    }
}

/// Reopens an `O_PATH` descriptor's inode for I/O.
pub fn reopen(fd: BorrowedFd<'_>, flags: libc::c_int) -> Res<RawFd> {
    let dir = proc_fd_dir()?;
    let name = FdName::new(fd.as_raw_fd());
    // SAFETY: a directory descriptor we hold and a NUL-terminated name.
    check_int(unsafe { libc::openat(dir, name.as_cstr().as_ptr(), flags | libc::O_CLOEXEC) })
}

/// Raises the descriptor limit as far as the daemon may: it holds one
/// `O_PATH` descriptor per inode the kernel knows, and the kernel keeps
/// inodes cached as long as memory allows (a `grep -r` over a tree, 10,000
/// created files), so a limit of a few thousand would turn lookups into
/// EMFILE. Anyone may lift the soft limit to the hard one; with
/// CAP_SYS_RESOURCE the hard limit goes up to `fs.nr_open`. Returns the
/// limit now in force.
pub fn raise_fd_limit() -> u64 {
    // SAFETY: plain data the kernel fills in.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: an out-pointer to a rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    // The kernel refuses more than nr_open (an unlimited hard limit too).
    let cap = |n: u64| if nr_open > 0 { n.min(nr_open) } else { n };
    for want in [cap(nr_open.max(lim.rlim_max)), cap(lim.rlim_max)] {
        let new = libc::rlimit {
            rlim_cur: want,
            rlim_max: want.max(lim.rlim_max),
        };
        // SAFETY: a pointer to a rlimit; raising the hard limit fails
        // without CAP_SYS_RESOURCE and then changes nothing.
        if want > lim.rlim_cur && unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } == 0 {
            return want;
        }
    }
    lim.rlim_cur
}

pub fn close(fd: RawFd) -> Res<()> {
    // SAFETY: the caller owns fd (a file handle it handed out).
    check_int(unsafe { libc::close(fd) }).map(drop)
}

pub fn pread(fd: RawFd, buf: &mut [u8], off: u64) -> Res<usize> {
    loop {
        // SAFETY: buf is valid for its length.
        let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), off as libc::off_t) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = last();
        if e != Errno::EINTR {
            return Err(e);
        }
    }
}

/// Reads until `buf` is full or end of file: a FUSE read reply shorter
/// than asked means end of file to the kernel.
pub fn pread_full(fd: RawFd, buf: &mut [u8], off: u64) -> Res<usize> {
    let mut done = 0;
    while done < buf.len() {
        let n = pread(fd, &mut buf[done..], off + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

/// Writes all of `data` (a short write would be taken as an error by the
/// kernel's caller), or fails with the first error before any byte.
pub fn pwrite_full(fd: RawFd, data: &[u8], off: u64) -> Res<usize> {
    let mut done = 0;
    while done < data.len() {
        // SAFETY: the slice is valid for its length.
        let n = unsafe {
            libc::pwrite(
                fd,
                data[done..].as_ptr().cast(),
                data.len() - done,
                (off + done as u64) as libc::off_t,
            )
        };
        if n < 0 {
            let e = last();
            if e == Errno::EINTR {
                continue;
            }
            if done > 0 {
                break;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        done += n as usize;
    }
    Ok(done)
}

/// The `d_off`, `d_ino`, `d_type` and name of each entry `getdents64`
/// returned in `buf[..len]`.
pub struct Dirents<'a> {
    buf: &'a [u8],
    pos: usize,
}

pub struct Dirent<'a> {
    pub ino: u64,
    pub off: u64,
    pub kind: u8,
    pub name: &'a [u8],
}

impl<'a> Iterator for Dirents<'a> {
    type Item = Dirent<'a>;
    fn next(&mut self) -> Option<Dirent<'a>> {
        // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        let rest = self.buf.get(self.pos..)?;
        if rest.len() < 19 {
            return None;
        }
        let ino = u64::from_ne_bytes(rest[0..8].try_into().ok()?);
        let off = u64::from_ne_bytes(rest[8..16].try_into().ok()?);
        let reclen = u16::from_ne_bytes(rest[16..18].try_into().ok()?) as usize;
        let kind = rest[18];
        if reclen < 19 || reclen > rest.len() {
            return None;
        }
        let raw = &rest[19..reclen];
        let name = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
        self.pos += reclen;
        Some(Dirent {
            ino,
            off,
            kind,
            name,
        })
    }
}

/// One `getdents64` batch of the directory open on `fd`, from `offset`
/// (a `d_off` cookie of an earlier entry, or 0).
pub fn getdents<'a>(fd: RawFd, offset: u64, buf: &'a mut [u8]) -> Res<Dirents<'a>> {
    // SAFETY: lseek on a descriptor we own.
    check(unsafe { libc::lseek(fd, offset as libc::off_t, libc::SEEK_SET) } as libc::c_long)?;
    // SAFETY: buf is valid for its length.
    let n = check(unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) })?;
    Ok(Dirents {
        buf: &buf[..n as usize],
        pos: 0,
    })
}

/// The file type bits of a `d_type`.
pub fn dtype_mode(t: u8) -> u32 {
    match t {
        libc::DT_DIR => libc::S_IFDIR,
        libc::DT_LNK => libc::S_IFLNK,
        libc::DT_FIFO => libc::S_IFIFO,
        libc::DT_SOCK => libc::S_IFSOCK,
        libc::DT_CHR => libc::S_IFCHR,
        libc::DT_BLK => libc::S_IFBLK,
        _ => libc::S_IFREG,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_names_are_their_decimal_digits() {
        for fd in [0, 7, 10, 123, 4096, i32::MAX] {
            assert_eq!(FdName::new(fd).as_cstr().to_str().unwrap(), fd.to_string());
        }
    }

    #[test]
    fn reopen_reaches_the_inode_behind_an_o_path_descriptor() {
        use std::io::Read;
        use std::os::fd::AsFd;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), "abc").unwrap();
        let dir = std::fs::File::open(d.path()).unwrap();
        let p = open_at(dir.as_fd(), c"f", libc::O_PATH, 0).unwrap();
        let fd = reopen(p.as_fd(), libc::O_RDONLY).unwrap();
        // SAFETY: reopen returned a new descriptor nothing else owns.
        let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
        let mut got = String::new();
        f.read_to_string(&mut got).unwrap();
        assert_eq!(got, "abc");
        assert_eq!(
            reopen(p.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY),
            Err(Errno::ENOTDIR)
        );
    }
}
