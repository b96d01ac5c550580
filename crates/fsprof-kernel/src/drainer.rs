//! A ring that empties itself when it fills: a thread that sleeps in
//! `poll` on the ring and copies its records out when the programs wake
//! it, which they do only once a quarter of the ring is taken
//! ([`WAKE_SHARE`]); the
//! owner takes those records, then the ring's, in order, whenever it
//! likes (`fsprof trace` every 5 ms).
//!
//! So the ring holds what the programs make in the time it takes the
//! thread to be woken, not what they make between two of the owner's
//! reads: the page-fault ring ([`crate::faults`]) is made small, which the
//! kernel allocates and zeroes on the path before a traced command's
//! first mapping goes on (2 MiB took ~0.55 ms on this project's 2-CPU test
//! machine, 512 KiB ~0.15 ms, mapped for this reader included; the
//! mapping and this thread now come after). A program that faults slowly
//! never wakes the thread.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::ring::Ring;

/// The programs wake the reader once 1/`WAKE_SHARE` of the ring is taken
/// (`bpf_ringbuf_query(BPF_RB_AVAIL_DATA)`): the rest is what they may
/// make before it has read, which on a busy machine is milliseconds.
pub const WAKE_SHARE: usize = 4;

/// What the thread read and the owner has not taken yet, and the ring.
struct Shared {
    ring: Ring,
    read: Vec<u8>,
}

/// A ring and the thread that empties it.
pub struct Drainer {
    shared: Arc<Mutex<Shared>>,
    /// Written to stop the thread.
    stop: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

/// Each record is kept as its length (u32) and bytes.
fn keep(read: &mut Vec<u8>, b: &[u8]) {
    read.extend_from_slice(&(b.len() as u32).to_ne_bytes());
    read.extend_from_slice(b);
}

impl Drainer {
    /// Starts the thread on `ring`.
    pub fn start(ring: Ring) -> io::Result<Drainer> {
        // SAFETY: eventfd with valid flags; the fd is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just returned to this process.
        let stop = unsafe { OwnedFd::from_raw_fd(fd) };
        let ring_fd = ring.fd();
        let shared = Arc::new(Mutex::new(Shared {
            ring,
            read: Vec::new(),
        }));
        let (s, stop_fd) = (Arc::clone(&shared), stop.as_raw_fd());
        let thread = std::thread::Builder::new()
            .name("fsprof-drain".into())
            .spawn(move || run(&s, ring_fd, stop_fd))?;
        Ok(Drainer {
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// Hands each record made since the last call to `f`, in the order
    /// the programs made them; returns how many.
    pub fn drain(&self, mut f: impl FnMut(&[u8])) -> usize {
        let mut s = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        let mut n = 0;
        let read = std::mem::take(&mut s.read);
        let mut at = 0;
        while let Some(len) = read.get(at..at + 4) {
            let len = u32::from_ne_bytes(len.try_into().unwrap()) as usize;
            f(&read[at + 4..at + 4 + len]);
            at += 4 + len;
            n += 1;
        }
        n + s.ring.drain(f)
    }
}

/// The thread: reads the ring each time it is woken with records in it,
/// until `stop` is written.
fn run(s: &Mutex<Shared>, ring_fd: i32, stop_fd: i32) {
    let mut fds = [
        libc::pollfd {
            fd: ring_fd,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop_fd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: two pollfds of this frame.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if r < 0 || fds[1].revents != 0 {
            return;
        }
        if fds[0].revents & libc::POLLIN != 0 {
            let mut g = s.lock().unwrap_or_else(PoisonError::into_inner);
            let Shared { ring, read } = &mut *g;
            ring.drain(|b| keep(read, b));
        } else if fds[0].revents != 0 {
            return;
        }
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: an 8-byte write to the eventfd this value owns.
        unsafe { libc::write(self.stop.as_raw_fd(), one.as_ptr().cast(), 8) };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
