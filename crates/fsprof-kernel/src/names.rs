//! Op names: syscall names as strace prints them, FUSE opcodes, block kinds.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::syscall_table::X86_64;

fn by_nr() -> &'static HashMap<u32, &'static str> {
    static T: OnceLock<HashMap<u32, &'static str>> = OnceLock::new();
    T.get_or_init(|| X86_64.iter().copied().collect())
}

/// The name strace prints for syscall `nr`.
pub fn syscall_name(nr: u32) -> String {
    if cfg!(target_arch = "x86_64") {
        if let Some(n) = by_nr().get(&nr) {
            return (*n).to_string();
        }
    }
    format!("syscall_{nr}")
}

pub fn syscall_nr(name: &str) -> Option<u32> {
    X86_64.iter().find(|(_, n)| *n == name).map(|(nr, _)| *nr)
}

/// Syscalls recorded by default: those that take a path, a file descriptor
/// of a file or directory, or move file data. `--all-syscalls` records the
/// rest (memory, signals, sockets, scheduling) too.
pub const FILE_SYSCALLS: &[&str] = &[
    "read",
    "write",
    "open",
    "close",
    "stat",
    "fstat",
    "lstat",
    "lseek",
    "ioctl",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "access",
    "dup",
    "dup2",
    "sendfile",
    "fcntl",
    "flock",
    "fsync",
    "fdatasync",
    "truncate",
    "ftruncate",
    "getdents",
    "getcwd",
    "chdir",
    "fchdir",
    "rename",
    "mkdir",
    "rmdir",
    "creat",
    "link",
    "unlink",
    "symlink",
    "readlink",
    "chmod",
    "fchmod",
    "chown",
    "fchown",
    "lchown",
    "mknod",
    "utime",
    "statfs",
    "fstatfs",
    "chroot",
    "sync",
    "mount",
    "umount2",
    "readahead",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "getxattr",
    "lgetxattr",
    "fgetxattr",
    "listxattr",
    "llistxattr",
    "flistxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "getdents64",
    "fadvise64",
    "utimes",
    "openat",
    "mkdirat",
    "mknodat",
    "fchownat",
    "futimesat",
    "newfstatat",
    "unlinkat",
    "renameat",
    "linkat",
    "symlinkat",
    "readlinkat",
    "fchmodat",
    "faccessat",
    "splice",
    "tee",
    "sync_file_range",
    "vmsplice",
    "utimensat",
    "fallocate",
    "dup3",
    "preadv",
    "pwritev",
    "name_to_handle_at",
    "open_by_handle_at",
    "syncfs",
    "renameat2",
    "copy_file_range",
    "preadv2",
    "pwritev2",
    "statx",
    "io_setup",
    "io_destroy",
    "io_getevents",
    "io_submit",
    "io_cancel",
    "io_pgetevents",
    "io_uring_enter",
    "openat2",
    "close_range",
    "faccessat2",
    "fchmodat2",
    "msync",
    "setxattrat",
    "getxattrat",
    "listxattrat",
    "removexattrat",
    "file_getattr",
    "file_setattr",
    "statmount",
    "listmount",
    "execve",
    "execveat",
];

/// FUSE opcode names (include/uapi/linux/fuse.h), lower case without the
/// FUSE_ prefix.
pub fn fuse_opcode(op: u32) -> String {
    let n = match op {
        1 => "lookup",
        2 => "forget",
        3 => "getattr",
        4 => "setattr",
        5 => "readlink",
        6 => "symlink",
        8 => "mknod",
        9 => "mkdir",
        10 => "unlink",
        11 => "rmdir",
        12 => "rename",
        13 => "link",
        14 => "open",
        15 => "read",
        16 => "write",
        17 => "statfs",
        18 => "release",
        20 => "fsync",
        21 => "setxattr",
        22 => "getxattr",
        23 => "listxattr",
        24 => "removexattr",
        25 => "flush",
        26 => "init",
        27 => "opendir",
        28 => "readdir",
        29 => "releasedir",
        30 => "fsyncdir",
        31 => "getlk",
        32 => "setlk",
        33 => "setlkw",
        34 => "access",
        35 => "create",
        36 => "interrupt",
        37 => "bmap",
        38 => "destroy",
        39 => "ioctl",
        40 => "poll",
        41 => "notify_reply",
        42 => "batch_forget",
        43 => "fallocate",
        44 => "readdirplus",
        45 => "rename2",
        46 => "lseek",
        47 => "copy_file_range",
        48 => "setupmapping",
        49 => "removemapping",
        50 => "syncfs",
        51 => "tmpfile",
        52 => "statx",
        4096 => "cuse_init",
        _ => return format!("opcode_{op}"),
    };
    n.to_string()
}

/// Kernel dev_t (major << 20 | minor) → `sda`, `loop3`, or `M:m`.
pub fn block_device(dev: u32) -> String {
    let (major, minor) = (dev >> 20, dev & 0xfffff);
    let uevent = format!("/sys/dev/block/{major}:{minor}/uevent");
    if let Ok(s) = std::fs::read_to_string(uevent) {
        if let Some(n) = s.lines().find_map(|l| l.strip_prefix("DEVNAME=")) {
            return n.to_string();
        }
    }
    format!("{major}:{minor}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strace_names() {
        assert_eq!(syscall_name(0), "read");
        assert_eq!(syscall_name(17), "pread64");
        assert_eq!(syscall_name(262), "newfstatat");
        assert_eq!(syscall_name(9999), "syscall_9999");
        assert_eq!(syscall_nr("openat"), Some(257));
    }

    #[test]
    fn every_default_syscall_is_known() {
        for n in FILE_SYSCALLS {
            assert!(syscall_nr(n).is_some(), "{n} is not in the syscall table");
        }
    }

    #[test]
    fn fuse_names() {
        assert_eq!(fuse_opcode(1), "lookup");
        assert_eq!(fuse_opcode(15), "read");
        assert_eq!(fuse_opcode(7), "opcode_7");
    }
}
