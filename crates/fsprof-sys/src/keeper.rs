//! A process that holds fsprof's address space and one descriptor until
//! fsprof has exited, so that their release is not on the user's wait.
//!
//! Why: after `fsprof run`'s command exits, the user waits for fsprof's
//! own exit, and the kernel tears down fsprof's address space (`exit_mm`)
//! and closes its last descriptors (the control file's last close frees
//! its pages) before it tells fsprof's parent. A process that shares the
//! address space (`CLONE_VM`) and holds the control file makes both a
//! count going down at fsprof's exit; the release itself happens when the
//! keeper dies, which the kernel makes it do at fsprof's exit
//! (`PR_SET_PDEATHSIG`), beside the user's next command rather than
//! before it. The keeper is made while the command runs.
//!
//! The keeper shares fsprof's memory, so it runs only a few system calls
//! that cannot fail (no `errno` written into the thread-local storage it
//! shares with fsprof's main thread) on a stack of its own, with every
//! signal blocked: only SIGKILL ends it. It holds no descriptor but the
//! one given: a pipe fsprof writes (standard output, say) ends when
//! fsprof exits, as before. Hand-written: no crate makes a `CLONE_VM`
//! process.

use std::os::fd::RawFd;

/// The keeper's name (its `comm`).
pub const NAME: &std::ffi::CStr = c"fsprof-keeper";

/// `close_range`'s flags (and its first descriptor, 0), as a full-width
/// variadic word.
const NO_FLAGS: libc::c_ulong = 0;

/// The keeper's stack: it makes a few system calls.
const STACK: usize = 16 * 1024;

/// Whether a keeper is to be made (see [`keep_after_exit`]).
fn wanted() -> bool {
    let under_valgrind = std::env::var_os("LD_PRELOAD")
        .is_some_and(|p| p.as_encoded_bytes().windows(10).any(|w| w == b"vgpreload_"));
    std::env::var_os("FSPROF_NO_KEEPER").is_none() && !under_valgrind
}

/// A keeper of a control file, made once, when the capture's command
/// runs (a capture's `Progress::started`, which `run` and `trace` both
/// see); None: none to make.
#[derive(Default)]
pub struct OnStart(Option<RawFd>);

impl OnStart {
    pub fn new(fd: Option<RawFd>) -> OnStart {
        OnStart(fd)
    }

    /// Makes the keeper ([`keep_after_exit`]) the first time only.
    pub fn start(&mut self) {
        if let Some(fd) = self.0.take() {
            keep_after_exit(fd);
        }
    }
}

/// What the keeper reads (in the shared memory, never freed).
struct Keep {
    parent: libc::pid_t,
    fd: RawFd,
}

/// Starts a keeper of this process's memory and of `fd`. False when it
/// could not be started (the release then stays where it was), or is not
/// wanted: `FSPROF_NO_KEEPER` set, or fsprof runs under valgrind, which
/// kills its client at a `CLONE_VM` clone that is not a thread
/// (bench/startup_order.py runs fsprof under callgrind).
pub fn keep_after_exit(fd: RawFd) -> bool {
    if !wanted() {
        return false;
    }
    // The keeper's `close_range` (Linux 5.9) must not fail: asked here
    // first, on a range that closes nothing.
    // Variadic arguments as the kernel reads them: full-width words.
    let max = libc::c_ulong::from(libc::c_uint::MAX);
    // SAFETY: closes no descriptor (no descriptor is that high).
    let has_close_range = unsafe { libc::syscall(libc::SYS_close_range, max, max, NO_FLAGS) } == 0;
    if fd < 0 || !has_close_range {
        return false;
    }
    // Leaked: the keeper uses both until it dies, after this process.
    // SAFETY: an anonymous private mapping; owned by the keeper from here.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return false;
    }
    let keep = Box::leak(Box::new(Keep {
        // SAFETY: getpid has no preconditions.
        parent: unsafe { libc::getpid() },
        fd,
    }));
    let top = (stack as usize + STACK) & !15;
    // SAFETY: the keeper starts with every signal blocked and runs
    // `keeper` on its own stack with `keep`, both leaked above.
    let (pid, _) = unsafe {
        let arg = (keep as *mut Keep).cast();
        crate::process::clone_with_signals_blocked(keeper, top, libc::CLONE_VM | libc::SIGCHLD, arg)
    };
    pid > 0
}

/// The keeper: dies with its parent, holds nothing but the memory and the
/// descriptor, and sleeps until then. (The calls' glibc wrappers read
/// the thread-local storage, shared with fsprof's thread, only where a
/// call fails, which these do not.)
extern "C" fn keeper(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the leaked `Keep`; the calls below cannot fail with
    // these arguments (so no errno is written), and `pause` never returns
    // with every signal blocked (a stop and continue restarts it).
    unsafe {
        let k = &*arg.cast::<Keep>();
        // Variadic: full-width words, or the kernel may see stray high bits.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        // Named for `ps` (and the tests): otherwise a second `fsprof`.
        libc::prctl(libc::PR_SET_NAME, NAME.as_ptr());
        if libc::getppid() != k.parent {
            // fsprof is gone already: nothing left to wait for.
            return 0;
        }
        let fd = k.fd as libc::c_ulong;
        let max = libc::c_ulong::from(libc::c_uint::MAX);
        if fd > 0 {
            libc::syscall(libc::SYS_close_range, NO_FLAGS, fd - 1, NO_FLAGS);
        }
        libc::syscall(libc::SYS_close_range, fd + 1, max, NO_FLAGS);
        loop {
            libc::pause();
        }
    }
}
