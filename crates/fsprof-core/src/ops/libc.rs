//! The libc entry points the preload shim wraps: the `user` layer's ops.
//!
//! One entry per op; the shim folds aliases into it (`pread64`,
//! `__pread_chk` → `pread`; `__xstat` → `stat`; `fread_unlocked` →
//! `fread`). The order is the ABI of the shim's counter files: it indexes
//! the counters, so it is append-only, and a change bumps the shim's
//! `FSPROF_ABI_VERSION`. The C side's X-macro lists are written from
//! here by the shim's build script ([`c_op_lists`]).

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
    /// How many arguments the prototype takes (a trace prints the ones
    /// without a role, buffers, as `...`).
    pub arity: u8,
}

const fn op(name: &'static str, args: &'static [(super::Role, u8)]) -> LibcOp {
    let mut arity = 0;
    let mut i = 0;
    while i < args.len() {
        if args[i].1 + 1 > arity {
            arity = args[i].1 + 1;
        }
        i += 1;
    }
    LibcOp {
        name,
        args: Args(args),
        data: None,
        arity,
    }
}

impl LibcOp {
    /// The op takes `n` arguments, more than its last operand's position
    /// (`stat`'s buffer after its path).
    const fn takes(self, n: u8) -> LibcOp {
        LibcOp { arity: n, ..self }
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
const STREAM: &[(super::Role, u8)] = &[(Stream, 0)];
const RW: &[(super::Role, u8)] = &[(Fd, 0), (Size, 2)];
const PRW: &[(super::Role, u8)] = &[(Fd, 0), (Size, 2), (Offset, 3)];
const RWV: &[(super::Role, u8)] = &[(Fd, 0), (Iov, 1), (IovCount, 2)];
const PRWV: &[(super::Role, u8)] = &[(Fd, 0), (Iov, 1), (IovCount, 2), (Offset, 3)];
const ITEMS: &[(super::Role, u8)] = &[(ItemSize, 1), (Items, 2), (Stream, 3)];
const TWO_PATHS: &[(super::Role, u8)] = &[(Path, 0), (Path2, 1)];
const TWO_AT_PATHS: &[(super::Role, u8)] = &[(DirFd, 0), (Path, 1), (DirFd2, 2), (Path2, 3)];
const TWO_AT_PATHS_FLAGS: &[(super::Role, u8)] =
    &[(DirFd, 0), (Path, 1), (DirFd2, 2), (Path2, 3), (Flags, 4)];
const PATH_MODE: &[(super::Role, u8)] = &[(Path, 0), (Mode, 1)];
const AT_MODE: &[(super::Role, u8)] = &[(DirFd, 0), (Path, 1), (Mode, 2)];
const AT_MODE_FLAGS: &[(super::Role, u8)] = &[(DirFd, 0), (Path, 1), (Mode, 2), (Flags, 3)];
const PATH_NAME: &[(super::Role, u8)] = &[(Path, 0), (Name, 1)];
const PRWV_FLAGS: &[(super::Role, u8)] =
    &[(Fd, 0), (Iov, 1), (IovCount, 2), (Offset, 3), (Flags, 4)];
const XATTR_GET: &[(super::Role, u8)] = &[(Path, 0), (Name, 1), (Size, 3)];
const FXATTR_GET: &[(super::Role, u8)] = &[(Fd, 0), (Name, 1), (Size, 3)];
const XATTR_SET: &[(super::Role, u8)] = &[(Path, 0), (Name, 1), (Size, 3), (Flags, 4)];
const FXATTR_SET: &[(super::Role, u8)] = &[(Fd, 0), (Name, 1), (Size, 3), (Flags, 4)];
const XATTR_LIST: &[(super::Role, u8)] = &[(Path, 0), (Size, 2)];
const FXATTR_LIST: &[(super::Role, u8)] = &[(Fd, 0), (Size, 2)];

/// The user layer's ops in ABI order (see the module doc).
///
/// A `static`, not a `const`: a constant is copied into every codegen unit
/// that names it, and each copy of this one is 217 pointers that the
/// static-PIE binary relocates at every start (nine copies in `fsprof`,
/// 1,736 relocations of its 19,462; docs/benchmarks/history.md, reloc12).
pub static OPS: &[LibcOp] = &[
    op("open", &[(Path, 0), (Flags, 1), (Mode, 2)]),
    op("openat", &[(DirFd, 0), (Path, 1), (Flags, 2), (Mode, 3)]),
    op("creat", PATH_MODE),
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
    read("preadv2", PRWV_FLAGS),
    write("pwritev2", PRWV_FLAGS),
    op("lseek", &[(Fd, 0), (Offset, 1), (Whence, 2)]),
    op("stat", PATH).takes(2),
    op("lstat", PATH).takes(2),
    op("fstat", FD).takes(2),
    op("fstatat", &[(DirFd, 0), (Path, 1), (Flags, 3)]),
    op("statx", &[(DirFd, 0), (Path, 1), (Flags, 2)]).takes(5),
    op("access", PATH_MODE),
    op("faccessat", AT_MODE_FLAGS),
    op("fsync", FD),
    op("fdatasync", FD),
    op("sync", &[]),
    op("syncfs", FD),
    op(
        "sync_file_range",
        &[(Fd, 0), (Offset, 1), (Size, 2), (Flags, 3)],
    ),
    op("truncate", &[(Path, 0), (Size, 1)]),
    op("ftruncate", &[(Fd, 0), (Size, 1)]),
    op("fallocate", &[(Fd, 0), (Mode, 1), (Offset, 2), (Size, 3)]),
    op("posix_fallocate", &[(Fd, 0), (Offset, 1), (Size, 2)]),
    op(
        "posix_fadvise",
        &[(Fd, 0), (Offset, 1), (Size, 2), (Flags, 3)],
    ),
    op("mkdir", PATH_MODE),
    op("mkdirat", AT_MODE),
    op("rmdir", PATH),
    op("unlink", PATH),
    op("unlinkat", &[(DirFd, 0), (Path, 1), (Flags, 2)]),
    op("rename", TWO_PATHS),
    op("renameat", TWO_AT_PATHS),
    op("renameat2", TWO_AT_PATHS_FLAGS),
    op("link", TWO_PATHS),
    op("linkat", TWO_AT_PATHS_FLAGS),
    op("symlink", &[(Path2, 0), (Path, 1)]),
    op("symlinkat", &[(Path2, 0), (DirFd, 1), (Path, 2)]),
    op("readlink", &[(Path, 0), (Size, 2)]),
    op("readlinkat", &[(DirFd, 0), (Path, 1), (Size, 3)]),
    op("mknod", PATH_MODE).takes(3),
    op("mknodat", AT_MODE).takes(4),
    op("chmod", PATH_MODE),
    op("fchmod", &[(Fd, 0), (Mode, 1)]),
    op("fchmodat", AT_MODE_FLAGS),
    op("chown", PATH).takes(3),
    op("fchown", FD).takes(3),
    op("lchown", PATH).takes(3),
    op("fchownat", &[(DirFd, 0), (Path, 1), (Flags, 4)]),
    op("utimensat", &[(DirFd, 0), (Path, 1), (Flags, 3)]),
    op("futimens", FD).takes(2),
    op("utime", PATH).takes(2),
    op("utimes", PATH).takes(2),
    op("futimes", FD).takes(2),
    op("lutimes", PATH).takes(2),
    op("chdir", PATH),
    op("fchdir", FD),
    op("opendir", PATH),
    op("fdopendir", FD),
    op("readdir", &[(DirStream, 0)]),
    op("closedir", &[(DirStream, 0)]),
    op("getdents64", RW),
    // The protection of mmap is its mode; the address msync and munmap
    // take is their integer argument (a trace finds the mapping by it).
    op(
        "mmap",
        &[(Size, 1), (Mode, 2), (Flags, 3), (Fd, 4), (Offset, 5)],
    ),
    op("msync", &[(Int, 0), (Size, 1), (Flags, 2)]),
    op("munmap", &[(Int, 0), (Size, 1)]),
    op("sendfile", &[(Fd2, 0), (Fd, 1), (OffsetPtr, 2), (Size, 3)]),
    op(
        "copy_file_range",
        &[(Fd, 0), (OffsetPtr, 1), (Fd2, 2), (Size, 4), (Flags, 5)],
    ),
    op("getxattr", XATTR_GET),
    op("lgetxattr", XATTR_GET),
    op("fgetxattr", FXATTR_GET),
    op("setxattr", XATTR_SET),
    op("lsetxattr", XATTR_SET),
    op("fsetxattr", FXATTR_SET),
    op("listxattr", XATTR_LIST),
    op("llistxattr", XATTR_LIST),
    op("flistxattr", FXATTR_LIST),
    op("removexattr", PATH_NAME),
    op("lremovexattr", PATH_NAME),
    op("fremovexattr", &[(Fd, 0), (Name, 1)]),
    op("statfs", PATH).takes(2),
    op("fstatfs", FD).takes(2),
    op("statvfs", PATH).takes(2),
    op("fstatvfs", FD).takes(2),
    op("fcntl", &[(Fd, 0), (Flags, 1), (Int, 2)]),
    op("flock", &[(Fd, 0), (Flags, 1)]),
    op("fopen", PATH_NAME),
    op("freopen", &[(Path, 0), (Name, 1), (Stream, 2)]),
    op("fdopen", &[(Fd, 0), (Name, 1)]),
    op("fclose", STREAM),
    read("fread", ITEMS),
    write("fwrite", ITEMS),
    op("fgets", &[(Size, 1), (Stream, 2)]),
    op("fputs", &[(Stream, 1)]),
    op("fflush", STREAM),
    op("getline", &[(Stream, 2)]),
    op("getdelim", &[(Int, 2), (Stream, 3)]),
    op("fseek", &[(Stream, 0), (Offset, 1), (Whence, 2)]),
    op("ftell", STREAM),
    // Formatted and character output, each with the bytes it gave its
    // stream (or, for dprintf, its descriptor) as a last argument the
    // prototype lacks: what `fwrite` and `write` record as their size.
    // `fprintf` is the printf family on a stream (printf, vfprintf, the
    // fortified `__printf_chk` ...), its format the op's string; `puts`
    // gave stdout its string and a newline; `fputc` is putc, putchar and
    // fputc, and also the bytes glibc's putc_unlocked macro put in a
    // stream's buffer without a call, found at the stream's next call.
    op("fprintf", &[(Stream, 0), (Name, 1), (Size, 2)]),
    op("dprintf", &[(Fd, 0), (Name, 1), (Size, 2)]),
    op("puts", &[(Stream, 1), (Size, 2)]),
    op("fputc", &[(Int, 0), (Stream, 1), (Size, 2)]),
    // dup2 and dup3 (their flags as the third argument): a trace follows
    // which open file a number holds through them.
    op("dup2", &[(Fd, 0), (Fd2, 1), (Flags, 2)]),
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

/// The ops on a descriptor whose calls on non-files (pipes, sockets,
/// devices, other kernel objects) the shim counts apart, under non-file
/// twins; their order numbers the twins, so it is ABI too (append only).
pub const FD_OPS: [&str; 36] = [
    "close",
    "read",
    "write",
    "pread",
    "pwrite",
    "readv",
    "writev",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "lseek",
    "fstat",
    "fsync",
    "fdatasync",
    "ftruncate",
    "fstatfs",
    "fstatvfs",
    "mmap",
    "fcntl",
    "flock",
    "fdopen",
    "fclose",
    "fread",
    "fwrite",
    "fgets",
    "fputs",
    "fflush",
    "getline",
    "getdelim",
    "fseek",
    "ftell",
    "fprintf",
    "dprintf",
    "puts",
    "fputc",
];

/// The C shim's X-macro lists, which its build script writes: `ops.def`
/// (`X(name)` for [`OPS`]), `fdops.def` (`F(name)` for [`FD_OPS`]) and
/// `dataops.def` (`C(name)` for [`DATA_OPS`]), as (file name, text).
pub fn c_op_lists() -> [(&'static str, String); 3] {
    let list = |macro_: &str, names: &mut dyn Iterator<Item = &str>| {
        let mut s = String::from(C_LIST_HEADER);
        for n in names {
            s.push_str(&format!("{macro_}({n})\n"));
        }
        s
    };
    [
        ("ops.def", list("X", &mut OPS.iter().map(|o| o.name))),
        ("fdops.def", list("F", &mut FD_OPS.iter().copied())),
        ("dataops.def", list("C", &mut DATA_OPS.iter().copied())),
    ]
}

const C_LIST_HEADER: &str = "\
/* Made by fsprof-shim's build script from fsprof_core::ops::libc; do not
 * edit. The order is the ABI of the shim's counter files. */
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
    fn c_lists_name_every_op_in_order() {
        let names = |text: &str, m: &str| -> Vec<String> {
            text.lines()
                .filter_map(|l| Some(l.strip_prefix(m)?.strip_suffix(')')?.to_string()))
                .collect()
        };
        let [(_, ops), (_, fd), (_, data)] = c_op_lists();
        assert_eq!(
            names(&ops, "X("),
            OPS.iter().map(|o| o.name).collect::<Vec<_>>()
        );
        assert_eq!(names(&fd, "F("), FD_OPS);
        assert_eq!(names(&data, "C("), DATA_OPS);
    }

    #[test]
    fn every_fd_op_is_an_op_on_a_descriptor() {
        for name in FD_OPS {
            let op = find(name).unwrap_or_else(|| panic!("{name} is not an op"));
            let a = op.args;
            assert!(
                a.position(Role::Fd).is_some() || a.position(Role::Stream).is_some(),
                "{name} takes no descriptor"
            );
        }
    }
}
