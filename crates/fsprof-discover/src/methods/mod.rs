//! The measurements, one module per method, and the file helpers they
//! share. Each method measures (latency per offset, per iteration) and
//! infers separately, so that inference can be tested on recorded series.

pub mod block_size;
pub mod direct_blocks;
pub mod page_cache;
pub mod readahead;
pub mod sparse_read;
pub mod write_period;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

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

/// `4 KiB`, `1.5 MiB`, `512 B`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.fract() == 0.0 || v >= 100.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Parses `64M`, `64MiB`, `4k`, `1G`, `4096` (binary multiples).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        format!("invalid size {s:?}: expected a number with an optional unit, e.g. 64M")
    })?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        u => {
            return Err(format!(
                "invalid size {s:?}: unknown unit {u:?} (use K, M or G)"
            ))
        }
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("invalid size {s:?}: too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_and_parse_in_binary_units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(4096), "4 KiB");
        assert_eq!(bytes(1536 * 1024), "1.5 MiB");
        assert_eq!(parse_bytes("64M").unwrap(), 64 << 20);
        assert_eq!(parse_bytes("4KiB").unwrap(), 4096);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert!(parse_bytes("4X").is_err());
        assert!(parse_bytes("99999999999999G").is_err());
        assert!(parse_bytes("").is_err());
    }

    #[test]
    fn aligned_buffers_are_aligned() {
        let mut b = AlignedBuf::new(512, 4096);
        assert_eq!(b.as_mut().as_ptr() as usize % 4096, 0);
        assert_eq!(b.as_mut().len(), 512);
    }
}
