//! Read-only shared mappings of files another process writes while we read
//! them (the shim's counter and trace-chunk files), and of files whose page
//! residency is asked (`mincore`). Words the writer updates are read with
//! atomic loads, so a value is never torn.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// `len` bytes of a file, mapped read-only and shared; unmapped on drop.
pub struct SharedMap {
    ptr: *mut libc::c_void,
    len: usize,
}

impl SharedMap {
    /// Maps the first `len` (> 0) bytes of `file`; the caller knows the file
    /// is at least that long (a mapping past the end faults when read).
    pub fn new(file: &File, len: usize) -> io::Result<SharedMap> {
        // SAFETY: a fresh read-only mapping of a file we hold open; nothing
        // else in this process refers to the address range.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMap { ptr, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start of the mapping (page aligned).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr as *const u8
    }

    /// The aligned u64 at `off`, loaded atomically (relaxed).
    ///
    /// # Panics
    /// If the word is not inside the mapping or not aligned.
    pub fn u64_at(&self, off: usize) -> u64 {
        self.u64_with(off, Ordering::Relaxed)
    }

    /// The aligned u64 at `off`, loaded with acquire ordering (a count that
    /// publishes the bytes written before it).
    ///
    /// # Panics
    /// If the word is not inside the mapping or not aligned.
    pub fn u64_acquire_at(&self, off: usize) -> u64 {
        self.u64_with(off, Ordering::Acquire)
    }

    fn u64_with(&self, off: usize, order: Ordering) -> u64 {
        assert!(off.checked_add(8).is_some_and(|e| e <= self.len) && off.is_multiple_of(8));
        // SAFETY: in bounds and aligned (asserted); the writer updates these
        // words concurrently, hence the atomic load.
        unsafe { AtomicU64::from_ptr(self.as_ptr().add(off) as *mut u64) }.load(order)
    }

    /// The aligned u32 at `off`, loaded with acquire ordering (a flag that
    /// publishes what was written before it).
    ///
    /// # Panics
    /// If the word is not inside the mapping or not aligned.
    pub fn u32_at(&self, off: usize) -> u32 {
        assert!(off.checked_add(4).is_some_and(|e| e <= self.len) && off.is_multiple_of(4));
        // SAFETY: as in `u64_at`.
        unsafe { AtomicU32::from_ptr(self.as_ptr().add(off) as *mut u32) }.load(Ordering::Acquire)
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
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
    }
}
