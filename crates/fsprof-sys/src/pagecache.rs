//! Controlling and observing the page cache, for measurements whose result
//! depends on whether data is cached (a cold read is a device read, a warm
//! one a memory copy): emptying it for one file or for the whole system,
//! and asking how much of a file it holds.
//!
//! Residency comes from `cachestat(2)` (Linux 6.5+), which asks the kernel
//! directly, and otherwise from `mincore(2)` on a read-only mapping of the
//! file.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// What [`drop_caches`] empties (the values of /proc/sys/vm/drop_caches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropCaches {
    /// The page cache (file data).
    PageCache = 1,
    /// The page cache, dentries and inodes.
    All = 3,
}

/// Writes all dirty data back, then empties the system's caches. Needs
/// root; dirty pages cannot be dropped, hence the `sync` first.
pub fn drop_caches(what: DropCaches) -> io::Result<()> {
    // SAFETY: sync has no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", format!("{}\n", what as u8)).map_err(|e| {
        if e.kind() == io::ErrorKind::PermissionDenied {
            io::Error::new(e.kind(), "emptying the page cache needs root")
        } else {
            e
        }
    })
}

/// Drops `f`'s clean pages from the page cache after writing its dirty
/// ones back. The kernel may keep pages that are mapped or in use, so
/// check with [`residency`] when it matters.
pub fn evict(f: &File) -> io::Result<()> {
    f.sync_data()?;
    // SAFETY: advice on an open descriptor; no memory is passed.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// How residency was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Cachestat,
    Mincore,
}

/// How much of a file the page cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Residency {
    pub cached_pages: u64,
    /// Pages in the file (its size rounded up to pages).
    pub total_pages: u64,
    pub method: Method,
}

impl Residency {
    /// The cached share of the file, 0 to 1 (1 for an empty file).
    pub fn fraction(&self) -> f64 {
        if self.total_pages == 0 {
            1.0
        } else {
            self.cached_pages as f64 / self.total_pages as f64
        }
    }
}

/// How many of `f`'s pages are in the page cache.
pub fn residency(f: &File) -> io::Result<Residency> {
    let len = f.metadata()?.len();
    let total_pages = len.div_ceil(crate::host::page_size() as u64);
    let (cached_pages, method) = match cachestat(f) {
        Ok(n) => (n, Method::Cachestat),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
            (mincore(f, len)?, Method::Mincore)
        }
        Err(e) => return Err(e),
    };
    Ok(Residency {
        cached_pages,
        total_pages,
        method,
    })
}

/// The `cachestat(2)` system call number (the same on every architecture
/// that has it: it was added after the numbers were unified).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    /// 0: to the end of the file.
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn cachestat(f: &File) -> io::Result<u64> {
    let range = CachestatRange { off: 0, len: 0 };
    let mut out = Cachestat::default();
    // SAFETY: the kernel reads `range` and writes `out`, both live, correctly
    // laid out (repr(C), as in include/uapi/linux/mman.h); flags must be 0.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            f.as_raw_fd(),
            &range as *const CachestatRange,
            &mut out as *mut Cachestat,
            0u32,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(out.nr_cache)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn cachestat(_: &File) -> io::Result<u64> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

fn mincore(f: &File, len: u64) -> io::Result<u64> {
    if len == 0 {
        return Ok(0);
    }
    let len = usize::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    let page = crate::host::page_size();
    let m = crate::mmap::SharedMap::new(f, len)?;
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: the whole mapping `m`, page aligned; mincore writes one byte
    // per page into `vec`, which has that many.
    if unsafe { libc::mincore(m.as_ptr() as *mut libc::c_void, len, vec.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(vec.iter().filter(|&&b| b & 1 != 0).count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file on a disk-backed file system (tmpfs pages cannot be evicted;
    /// /var/tmp is on disk where /tmp may not be).
    fn disk_file(pages: usize) -> Option<(tempfile::TempDir, File)> {
        let dir = tempfile::tempdir_in("/var/tmp").ok()?;
        let mut f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .ok()?;
        f.write_all(&vec![1u8; pages * crate::host::page_size()])
            .ok()?;
        Some((dir, f))
    }

    #[test]
    fn written_pages_are_resident_and_both_methods_agree() {
        let (_d, f) = disk_file(64).unwrap();
        let r = residency(&f).unwrap();
        assert_eq!(r.total_pages, 64);
        assert_eq!(r.cached_pages, 64, "{r:?}");
        assert_eq!(mincore(&f, f.metadata().unwrap().len()).unwrap(), 64);
    }

    #[test]
    fn evicted_pages_leave_the_cache() {
        let (_d, f) = disk_file(64).unwrap();
        evict(&f).unwrap();
        let r = residency(&f).unwrap();
        assert!(
            r.fraction() < 0.1,
            "{r:?}: posix_fadvise(DONTNEED) left the pages cached"
        );
    }

    #[test]
    fn an_empty_file_is_wholly_resident() {
        let (_d, f) = disk_file(0).unwrap();
        let r = residency(&f).unwrap();
        assert_eq!((r.cached_pages, r.total_pages, r.fraction()), (0, 0, 1.0));
    }

    #[test]
    fn dropping_caches_empties_them_as_root_and_says_why_not_otherwise() {
        let (_d, f) = disk_file(64).unwrap();
        f.sync_all().unwrap();
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        match drop_caches(DropCaches::PageCache) {
            Ok(()) => {
                assert!(root, "drop_caches worked without root");
                let r = residency(&f).unwrap();
                assert!(r.fraction() < 0.1, "{r:?}");
            }
            Err(e) => {
                assert!(!root, "as root: {e}");
                assert!(e.to_string().contains("needs root"), "{e}");
            }
        }
    }
}
