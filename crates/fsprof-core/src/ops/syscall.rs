//! System calls: the `syscall` layer's op names (as strace prints them),
//! the file-system set `fsprof kernel` records by default, and where each
//! one's operands are.
//!
//! The numbers are x86_64's ([`X86_64`], from `asm/unistd_64.h`; see
//! `scripts/gen-syscall-table` and the test that checks the table against
//! the installed UAPI header). Numbers missing from the table are named
//! `syscall_N`, as strace names numbers it does not know.

use super::Role::*;
use super::{libc, Args, Direction};

pub use super::syscall_table::X86_64;

// X86_64 is read at compile time only: at run time, its numbers and its
// names packed without a pointer per name (crate::name_table).
crate::name_table! { static (NUMBERS, NAMES) = X86_64; }

/// The name strace prints for syscall `nr`.
pub fn name(nr: u32) -> String {
    if cfg!(target_arch = "x86_64") {
        // The table is sorted by number (a test checks it).
        let found = NUMBERS.binary_search(&nr).ok().and_then(|i| NAMES.get(i));
        if let Some(n) = found {
            return n.to_string();
        }
    }
    format!("syscall_{nr}")
}

/// The number of the syscall strace calls `name`.
pub fn nr(name: &str) -> Option<u32> {
    NAMES.position(name).and_then(|i| NUMBERS.get(i).copied())
}

crate::name_table! {
    /// Syscalls recorded by default: those that take a path, a file
    /// descriptor of a file or directory, or move file data.
    /// `--all-syscalls` records the rest (memory, signals, sockets,
    /// scheduling) too.
    pub static FILE_SYSCALLS = FILE_SYSCALL_LIST;
}

const FILE_SYSCALL_LIST: &[&str] = &[
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

/// Syscalls that do not return (no latency; their start entries would
/// pile up): never timed.
pub const NEVER_RETURN: [&str; 2] = ["exit", "exit_group"];

/// Where the operands of syscall `name` are, by the kernel's prototype.
/// A syscall named like a libc entry point the shim wraps takes the same
/// arguments in the same order, so those come from [`libc::OPS`].
pub fn args(name: &str) -> Args {
    let a: &'static [(super::Role, u8)] = match name {
        "pread64" | "pwrite64" => &[(Fd, 0), (Size, 2), (Offset, 3)],
        "newfstatat" | "futimesat" | "name_to_handle_at" | "openat2" | "faccessat2"
        | "fchmodat2" | "execveat" | "setxattrat" | "getxattrat" | "listxattrat"
        | "removexattrat" | "file_getattr" | "file_setattr" => &[(DirFd, 0), (Path, 1)],
        "getdents" => &[(Fd, 0), (Size, 2)],
        "fadvise64" => &[(Fd, 0), (Offset, 1), (Size, 2)],
        "readahead" => &[(Fd, 0), (Offset, 1), (Size, 2)],
        "ioctl" | "dup" | "dup2" | "dup3" | "open_by_handle_at" => &[(Fd, 0)],
        "splice" => &[(Fd, 0), (OffsetPtr, 1), (Fd2, 2), (Size, 4)],
        "tee" => &[(Fd, 0), (Fd2, 1), (Size, 2)],
        "vmsplice" => &[(Fd, 0), (Iov, 1), (IovCount, 2)],
        "getcwd" => &[(Size, 1)],
        "chroot" | "umount2" | "execve" => &[(Path, 0)],
        "mount" => &[(Path2, 0), (Path, 1)],
        _ => return libc::find(name).map_or(Args::NONE, |o| o.args),
    };
    Args(a)
}

/// Which way a data syscall moves file data; `None` for the others.
pub fn data(name: &str) -> Option<Direction> {
    match name {
        "pread64" => Some(Direction::Read),
        "pwrite64" => Some(Direction::Write),
        _ => libc::find(name).and_then(|o| o.data),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strace_names() {
        let cases = [(0, "read"), (17, "pread64"), (262, "newfstatat")];
        for (n, s) in cases.into_iter().chain([(9999, "syscall_9999")]) {
            assert_eq!(name(n), s);
        }
        assert_eq!(nr("openat"), Some(257));
    }

    #[test]
    fn every_default_syscall_is_known() {
        for n in FILE_SYSCALLS.iter() {
            assert!(nr(n).is_some(), "{n} is not in the syscall table");
        }
        for n in NEVER_RETURN {
            assert!(nr(n).is_some() && !FILE_SYSCALLS.contains(n), "{n}");
        }
    }

    #[test]
    fn table_is_sorted_and_unique() {
        for w in X86_64.windows(2) {
            assert!(w[0].0 < w[1].0, "{:?} before {:?}", w[0], w[1]);
        }
        let mut names: Vec<_> = X86_64.iter().map(|(_, n)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), X86_64.len());
    }

    /// The table against the UAPI header the C compiler uses
    /// (linux-libc-dev; the shim cannot be built without it). The header
    /// may be older than the table, never different.
    #[test]
    fn table_matches_the_installed_uapi_header() {
        let path = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";
        // The shim does not build without it either, so this test never
        // needs to be ignored: missing, it fails and names the package.
        fsprof_testkit::need_file(std::path::Path::new(path), "linux-libc-dev");
        let text = std::fs::read_to_string(path).unwrap();
        let mut seen = 0;
        for l in text.lines() {
            let mut w = l.split_whitespace();
            let (Some("#define"), Some(def), Some(num)) = (w.next(), w.next(), w.next()) else {
                continue;
            };
            let (Some(n), Ok(num)) = (def.strip_prefix("__NR_"), num.parse::<u32>()) else {
                continue;
            };
            assert_eq!(name(num), n, "syscall {num} in {path}");
            seen += 1;
        }
        assert!(seen > 300, "only {seen} syscalls in {path}");
    }

    #[test]
    fn data_syscalls_have_a_descriptor_and_a_byte_count() {
        for n in FILE_SYSCALLS.iter().filter(|n| data(n).is_some()) {
            let a = args(n);
            assert_eq!(a.position(Fd), Some(0), "{n}");
            assert!(
                a.position(Size).is_some() || a.position(Iov).is_some(),
                "{n}"
            );
        }
        assert_eq!(args("pread64").position(Offset), Some(3));
        assert_eq!(args("renameat2").position(Path2), Some(3));
        assert_eq!(args("getpid"), Args::NONE);
    }
}
