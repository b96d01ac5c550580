//! Descriptors the trace saw only at their first use, reopened.
//!
//! A shell redirection (`cmd <in >out`) opens the file, moves it onto
//! fd 0 or 1 with `dup2`, which the capture does not see, and closes the
//! number it was opened on: the command then reads or writes a descriptor
//! the trace never saw made, and every call on it used to be left out of
//! the replay, so a replayed pipeline wrote none of its output files. A
//! descriptor inherited from outside the trace (`fsprof trace -- cmd
//! <file`) is the same. Since format 4 an image's first use of such a
//! descriptor is recorded with what `/proc/self/fd` says it is: its path,
//! open flags and position. For a regular file under a path the replay may
//! touch, the compiler opens it there anew, just before that first use,
//! at the recorded position: set-up commands ([`CMD_SETUP`]) that the
//! replayer issues like any other but leaves out of its timing and its
//! profile, since the traced program made no such call.
//!
//! A descriptor the compiler already has a slot for keeps it, even where
//! the recorded path differs: paths are joined lexically (resolve.rs)
//! while `/proc/self/fd` names the file through its symlinks and renames,
//! so a difference alone does not say the slot is wrong.

use super::{clean, special, Compiler};
use crate::event::{Call, Descriptor, Op};
use crate::replayfile::CMD_SETUP;

/// The open flags a reopened descriptor keeps: how the file is accessed
/// and written. Creation flags are not in `F_GETFL`'s answer (the file
/// exists: it was open), and the others (`O_NONBLOCK`, `O_CLOEXEC`) do
/// not change what a file-system call does.
const KEPT_FLAGS: i64 = (libc::O_ACCMODE
    | libc::O_APPEND
    | libc::O_SYNC
    | libc::O_DSYNC
    | libc::O_DIRECT
    | libc::O_NOATIME) as i64;

impl Compiler {
    /// A descriptor first used by an image (see the module's doc).
    pub(super) fn descriptor(&mut self, d: &Descriptor) {
        if self.slot_of(d.pid, Some(d.fd.fd)).is_some() {
            return;
        }
        let Some(path) = reopenable(&d.fd.path, d.fd.flags) else {
            return;
        };
        let flags = d.fd.flags & KEPT_FLAGS;
        let open = Call {
            start_ns: d.start_ns,
            end_ns: d.start_ns,
            pid: d.pid,
            tid: d.tid,
            op: Op::named("open"),
            ret: d.fd.fd.into(),
            path: Some(path.clone()),
            resolved: Some(path.clone()),
            flags: Some(flags),
            mode: Some(0),
            ..Default::default()
        };
        let first = self.commands.len();
        self.call(&open);
        if d.fd.pos > 0 && flags & libc::O_APPEND as i64 == 0 {
            let seek = Call {
                op: Op::named("lseek"),
                fd: Some(d.fd.fd),
                offset: Some(d.fd.pos),
                whence: Some(libc::SEEK_SET),
                ret: d.fd.pos,
                path: None,
                resolved: Some(path),
                flags: None,
                mode: None,
                ..open
            };
            self.call(&seek);
        }
        for cmd in &mut self.commands[first..] {
            cmd.cflags |= CMD_SETUP;
        }
    }
}

/// The cleaned path of a descriptor that can be reopened in the replay: a
/// file by absolute path, not under /proc, /sys or /dev, not deleted, not
/// a directory (the initial state would make it a file) nor an `O_PATH`
/// handle; None for pipes, sockets and the rest.
fn reopenable(target: &[u8], flags: i64) -> Option<Vec<u8>> {
    if target.first() != Some(&b'/')
        || target.ends_with(b" (deleted)")
        || flags & libc::O_DIRECTORY as i64 != 0
        || flags & libc::O_PATH as i64 != 0
    {
        return None;
    }
    let path = clean(target);
    (!special(&path)).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_by_absolute_path_outside_proc_sys_dev_are_reopened() {
        let rd = libc::O_RDONLY as i64;
        assert_eq!(
            reopenable(b"/tmp//a/./b.txt", rd),
            Some(b"/tmp/a/b.txt".to_vec())
        );
        for target in [
            &b"pipe:[1234]"[..],
            b"socket:[99]",
            b"anon_inode:[eventfd]",
            b"/dev/null",
            b"/proc/self/status",
            b"/tmp/gone (deleted)",
        ] {
            assert_eq!(reopenable(target, rd), None, "{}", target.escape_ascii());
        }
        assert_eq!(reopenable(b"/tmp", rd | libc::O_DIRECTORY as i64), None);
        assert_eq!(reopenable(b"/tmp/x", libc::O_PATH as i64), None);
    }
}
