//! Shared mappings of files another process writes while we read them (the
//! shim's counter and trace-chunk files, its control file and arena), and
//! of files whose page residency is asked (`mincore`). Words the other side
//! updates are read and written with atomic operations, so a value is
//! never torn.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// `len` bytes of a file, mapped read-only and shared; unmapped on drop.
pub struct SharedMap {
    ptr: *mut libc::c_void,
    len: usize,
    /// The writer may shrink the file under the mapping (crate::mapfault).
    covered: crate::mapfault::Covered,
}

impl SharedMap {
    /// Maps the first `len` (> 0) bytes of `file`; the caller knows the file
    /// is at least that long (a mapping past the end faults when read).
    pub fn new(file: &File, len: usize) -> io::Result<SharedMap> {
        SharedMap::map(file, len, libc::PROT_READ)
    }

    /// The same, writable (the file must be open for writing); bytes past
    /// the file's end must not be touched until the file has them.
    pub fn new_writable(file: &File, len: usize) -> io::Result<SharedMap> {
        SharedMap::map(file, len, libc::PROT_READ | libc::PROT_WRITE)
    }

    fn map(file: &File, len: usize, prot: libc::c_int) -> io::Result<SharedMap> {
        // SAFETY: a fresh shared mapping of a file we hold open; nothing
        // else in this process refers to the address range.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let covered = crate::mapfault::cover(ptr as usize, len);
        Ok(SharedMap { ptr, len, covered })
    }

    /// Stores `v` at the aligned u64 at `off` with release ordering (a
    /// count that publishes what was written before it). The mapping must
    /// be writable.
    ///
    /// # Panics
    /// If the word is not inside the mapping or not aligned.
    pub fn store_u64(&self, off: usize, v: u64) {
        assert!(off.checked_add(8).is_some_and(|e| e <= self.len) && off.is_multiple_of(8));
        // SAFETY: in bounds and aligned (asserted), and the caller mapped
        // it writable; other processes read it concurrently, hence atomic.
        unsafe { AtomicU64::from_ptr(self.as_ptr().add(off) as *mut u64) }
            .store(v, Ordering::Release)
    }

    /// Stores `v` at the aligned u32 at `off` with release ordering (a
    /// flag that publishes what was written before it). The mapping must
    /// be writable.
    ///
    /// # Panics
    /// If the word is not inside the mapping or not aligned.
    pub fn store_u32_release(&self, off: usize, v: u32) {
        assert!(off.checked_add(4).is_some_and(|e| e <= self.len) && off.is_multiple_of(4));
        // SAFETY: as in `store_u64`.
        unsafe { AtomicU32::from_ptr(self.as_ptr().add(off) as *mut u32) }
            .store(v, Ordering::Release)
    }

    /// Stores `v` at the aligned u32 at `off` (relaxed). The mapping must
    /// be writable.
    ///
    /// # Panics
    /// If the word is not inside the mapping or not aligned.
    pub fn store_u32(&self, off: usize, v: u32) {
        assert!(off.checked_add(4).is_some_and(|e| e <= self.len) && off.is_multiple_of(4));
        // SAFETY: as in `store_u64`.
        unsafe { AtomicU32::from_ptr(self.as_ptr().add(off) as *mut u32) }
            .store(v, Ordering::Relaxed)
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start of the mapping (page aligned).
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr as *const u8
    }

    /// The aligned u64 at `off`, loaded atomically (relaxed).
    ///
    /// # Panics
    /// If the word is not inside the mapping or not aligned.
    #[inline]
    pub fn u64_at(&self, off: usize) -> u64 {
        self.u64_with(off, Ordering::Relaxed)
    }

    /// The aligned u64 at `off`, loaded with acquire ordering (a count that
    /// publishes the bytes written before it).
    ///
    /// # Panics
    /// If the word is not inside the mapping or not aligned.
    #[inline]
    pub fn u64_acquire_at(&self, off: usize) -> u64 {
        self.u64_with(off, Ordering::Acquire)
    }

    #[inline]
    fn u64_with(&self, off: usize, order: Ordering) -> u64 {
        assert!(off.checked_add(8).is_some_and(|e| e <= self.len) && off.is_multiple_of(8));
        // SAFETY: in bounds and aligned (asserted); the writer updates these
        // words concurrently, hence the atomic load.
        unsafe { AtomicU64::from_ptr(self.as_ptr().add(off) as *mut u64) }.load(order)
    }

    /// The `n` aligned u64 words from `off`, for loads one at a time: one
    /// bounds check for a whole counter or table rather than one a word.
    ///
    /// # Panics
    /// If the words are not inside the mapping or not aligned.
    #[inline]
    pub fn u64_words(&self, off: usize, n: usize) -> &[AtomicU64] {
        let end = n.checked_mul(8).and_then(|b| off.checked_add(b));
        assert!(end.is_some_and(|e| e <= self.len) && off.is_multiple_of(8));
        // SAFETY: in bounds and aligned (asserted); AtomicU64 has u64's
        // layout, and the writer's concurrent updates are seen through
        // atomic loads only.
        unsafe { std::slice::from_raw_parts(self.as_ptr().add(off) as *const AtomicU64, n) }
    }

    /// The `n` aligned u32 words from `off`, as [`SharedMap::u64_words`].
    ///
    /// # Panics
    /// If the words are not inside the mapping or not aligned.
    #[inline]
    pub fn u32_words(&self, off: usize, n: usize) -> &[AtomicU32] {
        let end = n.checked_mul(4).and_then(|b| off.checked_add(b));
        assert!(end.is_some_and(|e| e <= self.len) && off.is_multiple_of(4));
        // SAFETY: as in `u64_words`.
        unsafe { std::slice::from_raw_parts(self.as_ptr().add(off) as *const AtomicU32, n) }
    }

    /// Stores zeros over `[off, off + len)`, both multiples of 8 (relaxed;
    /// a later release store publishes them). The mapping must be
    /// writable. On tmpfs a page this process has mapped by reading it is
    /// mapped writable too: no fault, and no system call, as writing
    /// through the file would cost a page each.
    ///
    /// # Panics
    /// If the range is not inside the mapping or not aligned.
    pub fn zero(&self, off: usize, len: usize) {
        assert!(len.is_multiple_of(8), "whole words");
        for w in self.u64_words(off, len / 8) {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// Copies `dst.len()` bytes (whole words) from the aligned `off` into
    /// `dst`, a word at a time with relaxed atomic loads: a copy of bytes
    /// another process may be writing, taken with no system call (a read
    /// of the file costs one, and the page is mapped already). Bytes the
    /// writer changes during the copy may be old or new, word by word;
    /// the caller reads only what a release store it loaded (acquire)
    /// before published.
    ///
    /// # Panics
    /// If the range is not inside the mapping, or `off` or the length is
    /// not a multiple of 8.
    pub fn copy_words(&self, off: usize, dst: &mut [u8]) {
        assert!(dst.len().is_multiple_of(8), "whole words");
        let words = self.u64_words(off, dst.len() / 8);
        for (d, w) in dst.chunks_exact_mut(8).zip(words) {
            d.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
        }
    }

    /// The aligned u32 at `off`, loaded with acquire ordering (a flag that
    /// publishes what was written before it).
    ///
    /// # Panics
    /// If the word is not inside the mapping or not aligned.
    #[inline]
    pub fn u32_at(&self, off: usize) -> u32 {
        assert!(off.checked_add(4).is_some_and(|e| e <= self.len) && off.is_multiple_of(4));
        // SAFETY: as in `u64_at`.
        unsafe { AtomicU32::from_ptr(self.as_ptr().add(off) as *mut u32) }.load(Ordering::Acquire)
    }
}

/// Whether `file` has the page holding byte `off`, asked of the file
/// (`lseek` SEEK_DATA), never by touching it: on tmpfs a load from a hole
/// through a shared mapping makes a page (taking the traced program's
/// room on /dev/shm), and on a full one raises SIGBUS instead, which
/// fsprof's guard answers with a private page of zeros that no later
/// write of the file shows through (crate::mapfault). A page written
/// since it was made, or swapped out since, is there (`mincore` says a
/// swapped-out page is not); a hole is not, nor, on tmpfs, a page
/// `fallocate` reserved that nothing has written yet. False also where
/// the kernel cannot say. Moves the descriptor's offset, which fsprof's
/// readers of shared files never use (they read at offsets).
pub fn file_has_page(file: &File, off: u64) -> bool {
    let Ok(at) = libc::off_t::try_from(off) else {
        return false;
    };
    // SAFETY: lseek on a descriptor the caller holds open.
    unsafe { libc::lseek(file.as_raw_fd(), at, libc::SEEK_DATA) == at }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        self.covered.release();
        // SAFETY: the mapping this value owns, unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_the_words_of_a_file() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&7u64.to_ne_bytes()).unwrap();
        f.write_all(&9u32.to_ne_bytes()).unwrap();
        let m = SharedMap::new(&f, 12).unwrap();
        assert_eq!((m.len(), m.u64_at(0), m.u32_at(8)), (12, 7, 9));
        let past = std::panic::catch_unwind(|| m.u64_at(8));
        assert!(past.is_err(), "a word past the end is refused");
        let words = m.u32_words(8, 1);
        assert_eq!(words[0].load(Ordering::Relaxed), 9);
        for (off, n) in [(8, 1), (4, 1), (0, usize::MAX / 4)] {
            let bad = std::panic::catch_unwind(|| m.u64_words(off, n).len());
            assert!(bad.is_err(), "{n} words at {off} are refused");
        }
    }

    #[test]
    fn copies_whole_words_in_bounds_only() {
        let mut f = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..32u8).collect();
        f.write_all(&bytes).unwrap();
        let m = SharedMap::new(&f, 32).unwrap();
        let mut got = [0u8; 16];
        m.copy_words(8, &mut got);
        assert_eq!(got[..], bytes[8..24]);
        for (off, n) in [(24, 16), (4, 8), (8, 12)] {
            let bad = std::panic::catch_unwind(|| m.copy_words(off, &mut vec![0u8; n]));
            assert!(bad.is_err(), "{n} bytes at {off} are refused");
        }
    }

    /// A tmpfs file (memfd) of four pages: one written through a
    /// mapping, one with pwrite, one reserved by fallocate and never
    /// written, one a hole; asking makes no page.
    #[test]
    fn says_which_pages_a_tmpfs_file_has_without_making_any() {
        use std::os::fd::FromRawFd;
        use std::os::unix::fs::{FileExt, MetadataExt};
        // SAFETY: a new anonymous tmpfs file, owned by the File.
        let f = unsafe {
            let fd = libc::memfd_create(c"fsprof-test".as_ptr(), libc::MFD_CLOEXEC);
            assert!(fd >= 0, "{}", io::Error::last_os_error());
            File::from_raw_fd(fd)
        };
        f.set_len(4 * 4096).unwrap();
        let m = SharedMap::new_writable(&f, 4 * 4096).unwrap();
        m.store_u64(0, 1);
        f.write_all_at(&[1], 4096 + 5).unwrap();
        // SAFETY: fallocate on a descriptor we own, in the file.
        let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 2 * 4096, 4096) };
        assert_eq!(rc, 0);
        let blocks = f.metadata().unwrap().blocks();
        let has: Vec<bool> = (0..4).map(|k| file_has_page(&f, k * 4096 + 8)).collect();
        assert_eq!(has, [true, true, false, false]);
        assert_eq!(
            f.metadata().unwrap().blocks(),
            blocks,
            "no page made by asking"
        );
        assert!(!file_has_page(&f, 5 * 4096), "past the end");
        assert!(!file_has_page(&f, u64::MAX), "past off_t");
    }

    #[test]
    fn zeroes_a_range_of_a_writable_mapping() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&[0xffu8; 32]).unwrap();
        let m = SharedMap::new_writable(&f, 32).unwrap();
        m.zero(8, 16);
        let words: Vec<u64> = (0..4).map(|k| m.u64_at(8 * k)).collect();
        assert_eq!(words, [u64::MAX, 0, 0, u64::MAX]);
    }
}
