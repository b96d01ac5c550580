//! Going to the background the way mount helpers do: the parent stays
//! until the child has mounted (or failed to), prints the outcome and
//! exits with it, so `fsprof mount A B && ls B` works and a failure is one
//! line on the terminal with exit status 2. Must run before any thread
//! starts (fork copies only the calling thread).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, IntoRawFd};

/// Which side of the fork this is.
pub enum Detached {
    /// The terminal's side: wait for the child's word.
    Parent(File),
    /// The daemon: tell the parent how the mount went.
    Child(Ready),
}

/// Forks; the child starts a new session (no controlling terminal, so a
/// hang-up of the terminal does not reach it).
pub fn detach() -> std::io::Result<Detached> {
    let mut fds = [0; 2];
    // SAFETY: a two-element array for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two new descriptors nothing else owns.
    let (r, w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
    // SAFETY: no other thread runs yet (the caller's promise), so the child
    // may go on running Rust code.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => {
            drop(r);
            // SAFETY: a plain system call in the child.
            unsafe { libc::setsid() };
            Ok(Detached::Child(Ready { pipe: Some(w) }))
        }
        _ => {
            drop(w);
            Ok(Detached::Parent(r))
        }
    }
}

/// What the parent prints and its exit status: the child's message, or a
/// note that it died before saying anything.
pub fn wait_for_child(mut pipe: File) -> (i32, String) {
    let mut msg = String::new();
    let _ = pipe.read_to_string(&mut msg);
    match msg.split_once(' ') {
        Some(("ok", rest)) => (0, rest.trim_end().to_string()),
        Some(("err", rest)) => (2, rest.trim_end().to_string()),
        _ => (2, "the mount daemon exited before mounting".to_string()),
    }
}

/// The daemon's end of the pipe.
pub struct Ready {
    pipe: Option<File>,
}

impl Ready {
    /// Mounted: the parent prints `msg` and exits 0; standard input,
    /// output and error now go to /dev/null (the terminal is the parent's).
    pub fn ok(&mut self, msg: &str) {
        if let Some(mut p) = self.pipe.take() {
            let _ = write!(p, "ok {msg}");
            drop(p);
            to_dev_null();
        }
    }

    /// Failed: the parent prints `msg` and exits 2; what the daemon
    /// would print itself now goes to /dev/null (the line is said once).
    pub fn fail(&mut self, msg: &str) {
        if let Some(mut p) = self.pipe.take() {
            let _ = write!(p, "err {msg}");
            drop(p);
            to_dev_null();
        }
    }
}

fn to_dev_null() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let fd = null.into_raw_fd();
        for target in 0..3 {
            // SAFETY: dup2 onto the standard descriptors.
            unsafe { libc::dup2(fd, target) };
        }
        if fd > 2 {
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
        }
    }
}
