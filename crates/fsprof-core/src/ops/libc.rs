//! The libc entry points the preload shim wraps: the `user` layer's ops.
//!
//! One entry per op; the shim folds aliases into it (`pread64`,
//! `__pread_chk` → `pread`; `__xstat` → `stat`; `fread_unlocked` →
//! `fread`). The order is the ABI of the shim's counter files: it indexes
//! the counters, so it is append-only, and a change bumps the shim's
//! `FSPROF_ABI_VERSION`. `fsprof-shim/shim/ops.def` (the C side's X-macro
//! list) must match [`OPS`] name for name; the shim's tests check it and
//! print the file to paste when it does not.

use super::Role::*;
use super::{Args, Direction};

/// One wrapped libc entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LibcOp {
    pub name: &'static str,
    /// Where its operands are, by the libc prototype (`pread(fd, buf,
    /// count, offset)`).
    pub args: Args,
    /// For data ops, which way the data moves. Data ops get request-size
    /// and seek-distance tables in the shim ([`data_ops`]).
    pub data: Option<Direction>,
}

const fn op(name: &'static str, args: &'static [(super::Role, u8)]) -> LibcOp {
    LibcOp {
        name,
        args: Args(args),
        data: None,
    }
}

const fn read(name: &'static str, args: &'static [(super::Role, u8)]) -> LibcOp {
    LibcOp {
        data: Some(Direction::Read),
        ..op(name, args)
    }
}

const fn write(name: &'static str, args: &'static [(super::Role, u8)]) -> LibcOp {
    LibcOp {
        data: Some(Direction::Write),
        ..op(name, args)
    }
}

const FD: &[(super::Role, u8)] = &[(Fd, 0)];
const PATH: &[(super::Role, u8)] = &[(Path, 0)];
const AT: &[(super::Role, u8)] = &[(DirFd, 0), (Path, 1)];
const STREAM: &[(super::Role, u8)] = &[(Stream, 0)];
const RW: &[(super::Role, u8)] = &[(Fd, 0), (Size, 2)];
const PRW: &[(super::Role, u8)] = &[(Fd, 0), (Size, 2), (Offset, 3)];
const RWV: &[(super::Role, u8)] = &[(Fd, 0), (Iov, 1), (IovCount, 2)];
const PRWV: &[(super::Role, u8)] = &[(Fd, 0), (Iov, 1), (IovCount, 2), (Offset, 3)];
const ITEMS: &[(super::Role, u8)] = &[(ItemSize, 1), (Items, 2), (Stream, 3)];
const TWO_PATHS: &[(super::Role, u8)] = &[(Path, 0), (Path2, 1)];
const TWO_AT_PATHS: &[(super::Role, u8)] = &[(DirFd, 0), (Path, 1), (Path2, 3)];
const XATTR_GET: &[(super::Role, u8)] = &[(Path, 0), (Size, 3)];
const FXATTR_GET: &[(super::Role, u8)] = &[(Fd, 0), (Size, 3)];
const XATTR_LIST: &[(super::Role, u8)] = &[(Path, 0), (Size, 2)];
const FXATTR_LIST: &[(super::Role, u8)] = &[(Fd, 0), (Size, 2)];

/// The user layer's ops in ABI order (see the module doc).
pub const OPS: &[LibcOp] = &[
    op("open", PATH),
    op("openat", AT),
    op("creat", PATH),
    op("close", FD),
    read("read", RW),
    write("write", RW),
    read("pread", PRW),
    write("pwrite", PRW),
    read("readv", RWV),
    write("writev", RWV),
    read("preadv", PRWV),
    write("pwritev", PRWV),
    // An offset of -1 means "at the file position" for the v2 calls.
    read("preadv2", PRWV),
    write("pwritev2", PRWV),
    op("lseek", &[(Fd, 0), (Offset, 1)]),
    op("stat", PATH),
    op("lstat", PATH),
    op("fstat", FD),
    op("fstatat", AT),
    op("statx", AT),
    op("access", PATH),
    op("faccessat", AT),
    op("fsync", FD),
    op("fdatasync", FD),
    op("sync", &[]),
    op("syncfs", FD),
    op("sync_file_range", &[(Fd, 0), (Offset, 1), (Size, 2)]),
    op("truncate", &[(Path, 0), (Size, 1)]),
    op("ftruncate", &[(Fd, 0), (Size, 1)]),
    op("fallocate", &[(Fd, 0), (Offset, 2), (Size, 3)]),
    op("posix_fallocate", &[(Fd, 0), (Offset, 1), (Size, 2)]),
    op("posix_fadvise", &[(Fd, 0), (Offset, 1), (Size, 2)]),
    op("mkdir", PATH),
    op("mkdirat", AT),
    op("rmdir", PATH),
    op("unlink", PATH),
    op("unlinkat", AT),
    op("rename", TWO_PATHS),
    op("renameat", TWO_AT_PATHS),
    op("renameat2", TWO_AT_PATHS),
    op("link", TWO_PATHS),
    op("linkat", TWO_AT_PATHS),
    op("symlink", &[(Path2, 0), (Path, 1)]),
    op("symlinkat", &[(Path2, 0), (DirFd, 1), (Path, 2)]),
    op("readlink", &[(Path, 0), (Size, 2)]),
    op("readlinkat", &[(DirFd, 0), (Path, 1), (Size, 3)]),
    op("mknod", PATH),
    op("mknodat", AT),
    op("chmod", PATH),
    op("fchmod", FD),
    op("fchmodat", AT),
    op("chown", PATH),
    op("fchown", FD),
    op("lchown", PATH),
    op("fchownat", AT),
    op("utimensat", AT),
    op("futimens", FD),
    op("utime", PATH),
    op("utimes", PATH),
    op("futimes", FD),
    op("lutimes", PATH),
    op("chdir", PATH),
    op("fchdir", FD),
    op("opendir", PATH),
    op("fdopendir", FD),
    op("readdir", &[(DirStream, 0)]),
    op("closedir", &[(DirStream, 0)]),
    op("getdents64", RW),
    op("mmap", &[(Size, 1), (Fd, 4), (Offset, 5)]),
    op("msync", &[(Size, 1)]),
    op("munmap", &[(Size, 1)]),
    op("sendfile", &[(Fd2, 0), (Fd, 1), (OffsetPtr, 2), (Size, 3)]),
    op(
        "copy_file_range",
        &[(Fd, 0), (OffsetPtr, 1), (Fd2, 2), (Size, 4)],
    ),
    op("getxattr", XATTR_GET),
    op("lgetxattr", XATTR_GET),
    op("fgetxattr", FXATTR_GET),
    op("setxattr", XATTR_GET),
    op("lsetxattr", XATTR_GET),
    op("fsetxattr", FXATTR_GET),
    op("listxattr", XATTR_LIST),
    op("llistxattr", XATTR_LIST),
    op("flistxattr", FXATTR_LIST),
    op("removexattr", PATH),
    op("lremovexattr", PATH),
    op("fremovexattr", FD),
    op("statfs", PATH),
    op("fstatfs", FD),
    op("statvfs", PATH),
    op("fstatvfs", FD),
    op("fcntl", FD),
    op("flock", FD),
    op("fopen", PATH),
    op("freopen", &[(Path, 0), (Stream, 2)]),
    op("fdopen", FD),
    op("fclose", STREAM),
    read("fread", ITEMS),
    write("fwrite", ITEMS),
    op("fgets", &[(Size, 1), (Stream, 2)]),
    op("fputs", &[(Stream, 1)]),
    op("fflush", STREAM),
    op("getline", &[(Stream, 2)]),
    op("getdelim", &[(Stream, 3)]),
    op("fseek", &[(Stream, 0), (Offset, 1)]),
    op("ftell", STREAM),
];

/// How many of [`OPS`] are data ops.
pub const DATA_OP_COUNT: usize = {
    let (mut n, mut i) = (0, 0);
    while i < OPS.len() {
        n += OPS[i].data.is_some() as usize;
        i += 1;
    }
    n
};

/// The names of the data ops, in ABI order: the order of the shim's value
/// tables (request size, seek distance).
pub const DATA_OPS: [&str; DATA_OP_COUNT] = {
    let mut out = [""; DATA_OP_COUNT];
    let (mut k, mut i) = (0, 0);
    while i < OPS.len() {
        if OPS[i].data.is_some() {
            out[k] = OPS[i].name;
            k += 1;
        }
        i += 1;
    }
    out
};

/// The op named `name`.
pub fn find(name: &str) -> Option<&'static LibcOp> {
    OPS.iter().find(|o| o.name == name)
}

/// The ABI index of the op named `name`.
pub fn index(name: &str) -> Option<usize> {
    OPS.iter().position(|o| o.name == name)
}

/// The data ops, in ABI order: the order of the shim's value tables.
pub fn data_ops() -> impl Iterator<Item = &'static LibcOp> {
    OPS.iter().filter(|o| o.data.is_some())
}

/// The text of `fsprof-shim/shim/ops.def` for [`OPS`].
pub fn ops_def() -> String {
    let mut s = String::from(OPS_DEF_HEADER);
    for o in OPS {
        s.push_str(&format!("X({})\n", o.name));
    }
    s
}

const OPS_DEF_HEADER: &str = "\
/* The operations of the user layer, one per libc entry point family.
 * The order is the ABI: it indexes the counters in the shared files.
 * Append only; bump FSPROF_ABI_VERSION when changing it.
 * Made from fsprof_core::ops::libc::OPS (the shim's tests check that it
 * matches); read by the C shim as an X-macro list. */
";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Role;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = OPS.iter().map(|o| o.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), OPS.len());
    }

    #[test]
    fn data_ops_are_the_shims_value_table_order() {
        let names: Vec<_> = data_ops().map(|o| o.name).collect();
        assert_eq!(names, DATA_OPS);
        assert_eq!(
            names,
            [
                "read", "write", "pread", "pwrite", "readv", "writev", "preadv", "pwritev",
                "preadv2", "pwritev2", "fread", "fwrite"
            ]
        );
    }

    #[test]
    fn every_data_op_has_a_handle_and_a_byte_count() {
        for o in data_ops() {
            let a = o.args;
            assert!(
                a.position(Role::Fd).is_some() || a.position(Role::Stream).is_some(),
                "{}",
                o.name
            );
            assert!(
                a.position(Role::Size).is_some()
                    || a.position(Role::Iov).is_some()
                    || a.position(Role::Items).is_some(),
                "{}",
                o.name
            );
        }
        assert_eq!(find("pread").unwrap().args.position(Role::Offset), Some(3));
        assert_eq!(find("fwrite").unwrap().args.position(Role::Stream), Some(3));
    }

    #[test]
    fn ops_def_lists_every_op_in_order() {
        let def = ops_def();
        let names: Vec<_> = def
            .lines()
            .filter_map(|l| l.strip_prefix("X(")?.strip_suffix(')'))
            .collect();
        assert_eq!(names, OPS.iter().map(|o| o.name).collect::<Vec<_>>());
    }
}
