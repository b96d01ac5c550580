//! Whose file is it: the daemon acts on LOWER with its own credentials,
//! except where the result depends on who asked.
//!
//! A mount shared with other users (`allow_other`) uses
//! `default_permissions`, so the kernel checks every request's permissions
//! against the caller's full credentials before the daemon sees it; the
//! lower operations can then run as the daemon. A mount that is not shared
//! admits only processes whose uids and gids all equal the daemon's, and
//! leaves the checks to LOWER with the daemon's credentials: the same
//! verdicts, except for a process that kept the uid but dropped
//! capabilities (a uid-0 service without CAP_DAC_OVERRIDE), which acts
//! with the daemon's — `--allow-other` rules that out. What cannot run as
//! the daemon is creating an inode (create, mknod, mkdir, symlink): its owner,
//! group (or the set-group-ID directory's) and the clearing of S_ISGID for
//! non-members come from the creator. For those, a daemon running as root
//! takes on the caller's file-system uid, gid and supplementary groups
//! (read from `/proc/PID/status`) in the worker thread for the length of
//! the call: `setfsuid`/`setfsgid` and the raw `setgroups` system call are
//! per thread (glibc's `setgroups` would change every thread). A daemon
//! that is not root cannot do this: files are then created as its user,
//! which is also what a FUSE mount without `allow_other` only lets its owner
//! see anyway.

use std::sync::OnceLock;

use fuser::{Errno, Request};

use crate::sys::Res;

/// The daemon's own credentials, restored after each switch.
struct Own {
    uid: u32,
    gid: u32,
    groups: Vec<libc::gid_t>,
}

fn own() -> &'static Own {
    static OWN: OnceLock<Own> = OnceLock::new();
    OWN.get_or_init(|| {
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        // SAFETY: size query, then a buffer of that size.
        let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) }.max(0) as usize;
        let mut groups = vec![0; n];
        // SAFETY: the buffer holds n entries.
        let got = unsafe { libc::getgroups(n as libc::c_int, groups.as_mut_ptr()) }.max(0);
        groups.truncate(got as usize);
        Own { uid, gid, groups }
    })
}

/// Whether the daemon can act as its callers (it is root).
pub fn can_switch() -> bool {
    own().uid == 0
}

thread_local! {
    static OWN_UMASK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The kernel has applied the caller's umask to every mode it sends
/// (create, mkdir, mknod, symlink): the daemon's must not apply again. The
/// worker thread gets a file-system context of its own (`unshare(CLONE_FS)`)
/// with umask 0, so the daemon's other files (the profile) keep the umask
/// the user gave it.
pub fn no_umask_in_this_thread() {
    if OWN_UMASK.get() {
        return;
    }
    // SAFETY: unsharing the calling thread's fs context; umask cannot fail.
    unsafe {
        if libc::unshare(libc::CLONE_FS) == 0 {
            libc::umask(0);
        }
    }
    OWN_UMASK.set(true);
}

/// The caller's credentials in this thread until dropped.
pub struct AsCaller {
    switched: bool,
}

impl Drop for AsCaller {
    fn drop(&mut self) {
        if self.switched {
            let o = own();
            set_groups(&o.groups);
            // SAFETY: per-thread credential calls with the daemon's own ids.
            unsafe {
                libc::syscall(libc::SYS_setfsgid, o.gid);
                libc::syscall(libc::SYS_setfsuid, o.uid);
            }
        }
    }
}

fn set_groups(groups: &[libc::gid_t]) -> libc::c_long {
    // SAFETY: the raw system call changes this thread only; the slice is
    // valid for its length.
    unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) }
}

/// Takes on the caller's credentials when `enabled` and they differ from
/// the daemon's.
pub fn as_caller(req: &Request, enabled: bool) -> Res<AsCaller> {
    no_umask_in_this_thread();
    let o = own();
    if !enabled || o.uid != 0 || (req.uid() == o.uid && req.gid() == o.gid) {
        return Ok(AsCaller { switched: false });
    }
    let groups = caller_groups(req.pid()).unwrap_or_default();
    let guard = AsCaller { switched: true };
    if set_groups(&groups) != 0 {
        return Err(Errno::EPERM);
    }
    // SAFETY: per-thread credential changes; undone by the guard.
    unsafe {
        libc::syscall(libc::SYS_setfsgid, req.gid());
        libc::syscall(libc::SYS_setfsuid, req.uid());
    }
    Ok(guard)
}

/// The supplementary groups of process `pid`, from `/proc/PID/status`.
fn caller_groups(pid: u32) -> Option<Vec<libc::gid_t>> {
    if pid == 0 {
        return None;
    }
    fsprof_sys::proc_status::ProcStatus::of(pid).ok()?.groups()
}
