//! SIGUSR1 writes the profile so far to the output file, without stopping
//! the mount. Like the stop signals, SIGUSR1 is taken synchronously by one
//! thread ([`block_sigusr1`] must run before any thread starts, so that
//! every thread inherits the blocked mask and the default action — ending
//! the process — never happens).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::live::Live;

fn usr1_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, initialised by sigemptyset.
    unsafe {
        let mut s: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut s);
        libc::sigaddset(&mut s, libc::SIGUSR1);
        s
    }
}

/// Blocks SIGUSR1 in this thread and the threads it starts from now on.
pub fn block_sigusr1() {
    let s = usr1_set();
    // SAFETY: a valid set; the old mask is not wanted.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &s, std::ptr::null_mut()) };
}

/// The thread that answers SIGUSR1; stops when dropped.
pub struct Dumper {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Dumper {
    /// Starts answering SIGUSR1 by writing `live`'s profile to `path`
    /// (replaced atomically: a reader never sees half a file). `on_error`
    /// hears about a write that failed.
    pub fn start(
        live: Arc<Live>,
        path: PathBuf,
        on_error: impl Fn(String) + Send + 'static,
    ) -> Dumper {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("fsprof-usr1".into())
            .spawn(move || {
                let set = usr1_set();
                let ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 100_000_000,
                };
                while !flag.load(Relaxed) {
                    // SAFETY: a valid set, no siginfo wanted, a timeout.
                    let s = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
                    if s == libc::SIGUSR1 {
                        let json = fsprof_core::format::to_json(&live.profile());
                        if let Err(e) =
                            fsprof_core::format::write_atomic(&path, json.as_bytes(), true)
                        {
                            on_error(format!("SIGUSR1: writing {}: {e}", path.display()));
                        }
                    }
                }
            })
            .ok();
        Dumper { stop, thread }
    }
}

impl Drop for Dumper {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
