//! The measurements, one module per method, and the file helpers they
//! share. Each method measures (latency per offset, per iteration) and
//! infers separately, so that inference can be tested on recorded series.

pub mod block_size;
pub mod direct_blocks;
pub mod page_cache;
pub mod readahead;
pub mod sparse_read;
pub mod sparse_write;
pub mod write_period;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The method of a parameter, in a sentence.
pub fn method_of(p: crate::Parameter) -> &'static str {
    match p {
        crate::Parameter::BlockSize => block_size::METHOD,
        crate::Parameter::Readahead => readahead::METHOD,
        crate::Parameter::PageCache => page_cache::METHOD,
        crate::Parameter::DirectBlocks => direct_blocks::METHOD,
    }
}

/// Creates a new file (never an existing one: the scratch directory is
/// private, so one there is not ours to overwrite).
pub(crate) fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

pub(crate) fn fadvise(f: &File, advice: libc::c_int) -> io::Result<()> {
    // SAFETY: advice on an open descriptor; no memory is passed.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, advice) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

/// A zeroed buffer whose start is aligned for direct I/O.
pub(crate) struct AlignedBuf {
    store: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    pub fn new(len: usize, align: usize) -> AlignedBuf {
        let store = vec![0u8; len + align];
        let start = store.as_ptr().align_offset(align);
        AlignedBuf { store, start, len }
    }

    pub fn as_mut(&mut self) -> &mut [u8] {
        &mut self.store[self.start..self.start + self.len]
    }
}

/// Direct-I/O alignment of a file (STATX_DIOALIGN, Linux 6.1+): (memory,
/// file offset) in bytes; `None` when the file system does not say or does
/// not support direct I/O on it.
pub(crate) fn dio_align(path: &Path) -> Option<(u32, u32)> {
    let c = crate::target::cpath(path).ok()?;
    // SAFETY: statx is plain data the kernel fills in.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    let r = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            0,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if r != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return None;
    }
    Some((stx.stx_dio_mem_align, stx.stx_dio_offset_align))
}

/// `4 KiB`, `1.5 MiB`, `512 B`: [`fsprof_core::units::format_bytes`].
pub fn bytes(n: u64) -> String {
    fsprof_core::units::format_bytes(n as f64)
}

pub use fsprof_core::units::parse_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_are_aligned() {
        let mut b = AlignedBuf::new(512, 4096);
        assert_eq!(b.as_mut().as_ptr() as usize % 4096, 0);
        assert_eq!(b.as_mut().len(), 512);
    }
}
