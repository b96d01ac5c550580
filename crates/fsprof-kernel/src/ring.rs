//! A BPF ring buffer (`BPF_MAP_TYPE_RINGBUF`, Linux 5.8) and its reader:
//! the one way fsprof's programs stream events to user space, for what
//! cannot be aggregated in the kernel (each mapped-page fault of a traced
//! program, [`crate::faults`]). Everything else fsprof-kernel does files
//! its observations into per-CPU maps and copies nothing out.
//!
//! Hand-written rather than taken from libbpf-rs: the reader is the
//! kernel's documented layout (a consumer page, a producer page, the data
//! pages mapped twice so a record never wraps) and two atomics, and the
//! rest of this crate loads its programs without libbpf.

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::sys::{Map, MAP_RINGBUF};

/// Record header bits (`BPF_RINGBUF_BUSY_BIT`, `BPF_RINGBUF_DISCARD_BIT`).
const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;
/// Bytes of a record's header (`BPF_RINGBUF_HDR_SZ`).
const HDR: u64 = 8;

/// A ring buffer map, mapped for reading.
pub struct Ring {
    map: Map,
    /// The consumer page (read-write) and the producer page followed by
    /// the data pages twice (read-only).
    cons: *mut libc::c_void,
    prod: *mut libc::c_void,
    page: usize,
    size: usize,
}

// SAFETY: the mappings belong to this value; the kernel is the only other
// writer, through the atomics the reader uses.
unsafe impl Send for Ring {}

/// A ring buffer map not mapped for reading yet ([`RingMap::read`]): the
/// programs may write to it already. Mapping it (its data pages twice,
/// ~0.1 ms for 512 KiB on this project's 2-CPU test machine) is only the
/// reader's business, and can come after what the programs need.
pub struct RingMap {
    map: Map,
    page: usize,
    size: usize,
}

impl RingMap {
    /// A ring of `size` bytes (a power of two, a multiple of the page size).
    pub fn create(name: &str, size: usize) -> io::Result<RingMap> {
        let page = fsprof_sys::host::page_size();
        if !size.is_power_of_two() || !size.is_multiple_of(page) || size > 1 << 30 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a ring buffer's size is a power of two pages",
            ));
        }
        let map = Map::create(name, MAP_RINGBUF, 0, 0, size as u32, 0)?;
        Ok(RingMap { map, page, size })
    }

    pub fn fd(&self) -> i32 {
        self.map.fd()
    }

    /// Maps it for reading.
    pub fn read(self) -> io::Result<Ring> {
        let RingMap { map, page, size } = self;
        // SAFETY: mappings of the ring map's fd at the offsets and with
        // the protections the kernel documents; checked for failure.
        unsafe {
            let cons = libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.fd(),
                0,
            );
            if cons == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let prod = libc::mmap(
                std::ptr::null_mut(),
                page + 2 * size,
                libc::PROT_READ,
                libc::MAP_SHARED,
                map.fd(),
                page as libc::off_t,
            );
            if prod == libc::MAP_FAILED {
                let e = io::Error::last_os_error();
                libc::munmap(cons, page);
                return Err(e);
            }
            Ok(Ring {
                map,
                cons,
                prod,
                page,
                size,
            })
        }
    }
}

impl Ring {
    /// A ring of `size` bytes (a power of two, a multiple of the page
    /// size), mapped for reading.
    pub fn create(name: &str, size: usize) -> io::Result<Ring> {
        RingMap::create(name, size)?.read()
    }

    pub fn fd(&self) -> i32 {
        self.map.fd()
    }

    fn consumer(&self) -> &AtomicU64 {
        // SAFETY: the consumer position is the first u64 of its page.
        unsafe { &*(self.cons as *const AtomicU64) }
    }

    fn producer(&self) -> &AtomicU64 {
        // SAFETY: the producer position is the first u64 of its page.
        unsafe { &*(self.prod as *const AtomicU64) }
    }

    /// Hands each committed record to `f`, in the order the programs
    /// reserved them, and gives their room back; returns how many.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let data = (self.prod as usize + self.page) as *const u8;
        let mask = self.size as u64 - 1;
        let mut cons = self.consumer().load(Ordering::Acquire);
        let mut n = 0;
        loop {
            let prod = self.producer().load(Ordering::Acquire);
            if cons >= prod {
                break;
            }
            // SAFETY: the header is inside the data area (masked), 8-byte
            // aligned as the kernel lays records out.
            let hdr = unsafe { &*(data.add((cons & mask) as usize) as *const AtomicU32) };
            let len = hdr.load(Ordering::Acquire);
            if len & BUSY != 0 {
                break;
            }
            let body = (len & !(BUSY | DISCARD)) as u64;
            if body + HDR > self.size as u64 {
                // Not a layout the kernel writes: stop rather than read
                // outside the mapping.
                break;
            }
            if len & DISCARD == 0 {
                // SAFETY: the data pages are mapped twice in a row, so a
                // record near the end continues in the second copy.
                let b = unsafe {
                    std::slice::from_raw_parts(
                        data.add(((cons & mask) + HDR) as usize),
                        body as usize,
                    )
                };
                f(b);
                n += 1;
            }
            cons += (body + HDR).next_multiple_of(8);
            self.consumer().store(cons, Ordering::Release);
        }
        n
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mappings made in `create`, unmapped once.
        unsafe {
            libc::munmap(self.cons, self.page);
            libc::munmap(self.prod, self.page + 2 * self.size);
        }
    }
}
