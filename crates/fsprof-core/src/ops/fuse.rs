//! FUSE opcodes (`include/uapi/linux/fuse.h`): the op names of the `fuse`
//! layer (the kernel's view) and the `fusefs` layer (`fsprof mount`), lower
//! case without the `FUSE_` prefix.

/// `(opcode, name)`, by opcode.
pub const OPCODES: &[(u32, &str)] = &[
    (1, "lookup"),
    (2, "forget"),
    (3, "getattr"),
    (4, "setattr"),
    (5, "readlink"),
    (6, "symlink"),
    (8, "mknod"),
    (9, "mkdir"),
    (10, "unlink"),
    (11, "rmdir"),
    (12, "rename"),
    (13, "link"),
    (14, "open"),
    (15, "read"),
    (16, "write"),
    (17, "statfs"),
    (18, "release"),
    (20, "fsync"),
    (21, "setxattr"),
    (22, "getxattr"),
    (23, "listxattr"),
    (24, "removexattr"),
    (25, "flush"),
    (26, "init"),
    (27, "opendir"),
    (28, "readdir"),
    (29, "releasedir"),
    (30, "fsyncdir"),
    (31, "getlk"),
    (32, "setlk"),
    (33, "setlkw"),
    (34, "access"),
    (35, "create"),
    (36, "interrupt"),
    (37, "bmap"),
    (38, "destroy"),
    (39, "ioctl"),
    (40, "poll"),
    (41, "notify_reply"),
    (42, "batch_forget"),
    (43, "fallocate"),
    (44, "readdirplus"),
    (45, "rename2"),
    (46, "lseek"),
    (47, "copy_file_range"),
    (48, "setupmapping"),
    (49, "removemapping"),
    (50, "syncfs"),
    (51, "tmpfile"),
    (52, "statx"),
    (4096, "cuse_init"),
];

// OPCODES is read at compile time only: at run time, its numbers and its
// names packed without a pointer per name (crate::name_table).
crate::name_table! { static (CODES, NAMES) = OPCODES; }

/// Row `i` of [`OPCODES`]: the opcode and its name.
pub fn row(i: usize) -> Option<(u32, &'static str)> {
    Some((*CODES.get(i)?, NAMES.get(i)?))
}

/// The name of FUSE opcode `op`; `opcode_N` for one this table lacks.
pub fn name(op: u32) -> String {
    match CODES
        .iter()
        .position(|&n| n == op)
        .and_then(|i| NAMES.get(i))
    {
        Some(s) => s.to_string(),
        None => format!("opcode_{op}"),
    }
}

/// The opcode of the FUSE op named `name`.
pub fn opcode(name: &str) -> Option<u32> {
    NAMES.position(name).and_then(|i| CODES.get(i).copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuse_names() {
        for (op, s) in [(1, "lookup"), (15, "read"), (7, "opcode_7")] {
            assert_eq!(name(op), s);
        }
        assert_eq!(opcode("getattr"), Some(3));
        assert!(OPCODES.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
