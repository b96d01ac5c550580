//! The FUSE requests the daemon times, named as the kernel's `fuse` layer
//! names them (`include/uapi/linux/fuse.h`, lower case without `FUSE_`), so
//! that `fusefs/read` (the daemon's time) and `fuse/read` (the kernel's
//! time for the same request, queueing included) line up in one report.
//!
//! Dense indices, not opcode numbers, address the per-thread counters: the
//! opcodes have gaps and run up to 4096 (`cuse_init`).

macro_rules! opcodes {
    ($($variant:ident = $code:literal, $name:literal;)*) => {
        /// A FUSE request kind.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Op {
            $($variant,)*
        }

        impl Op {
            /// Every op, in index order.
            pub const ALL: &'static [Op] = &[$(Op::$variant,)*];

            /// The kernel's opcode number.
            pub fn code(self) -> u32 {
                match self {
                    $(Op::$variant => $code,)*
                }
            }

            /// The name in profiles (`lookup`, `read`, `readdirplus`, ...).
            pub fn name(self) -> &'static str {
                match self {
                    $(Op::$variant => $name,)*
                }
            }
        }
    };
}

opcodes! {
    Lookup = 1, "lookup";
    Forget = 2, "forget";
    Getattr = 3, "getattr";
    Setattr = 4, "setattr";
    Readlink = 5, "readlink";
    Symlink = 6, "symlink";
    Mknod = 8, "mknod";
    Mkdir = 9, "mkdir";
    Unlink = 10, "unlink";
    Rmdir = 11, "rmdir";
    Rename = 12, "rename";
    Link = 13, "link";
    Open = 14, "open";
    Read = 15, "read";
    Write = 16, "write";
    Statfs = 17, "statfs";
    Release = 18, "release";
    Fsync = 20, "fsync";
    Setxattr = 21, "setxattr";
    Getxattr = 22, "getxattr";
    Listxattr = 23, "listxattr";
    Removexattr = 24, "removexattr";
    Flush = 25, "flush";
    Opendir = 27, "opendir";
    Readdir = 28, "readdir";
    Releasedir = 29, "releasedir";
    Fsyncdir = 30, "fsyncdir";
    Access = 34, "access";
    Create = 35, "create";
    Fallocate = 43, "fallocate";
    Readdirplus = 44, "readdirplus";
    Rename2 = 45, "rename2";
    Lseek = 46, "lseek";
    CopyFileRange = 47, "copy_file_range";
}

impl Op {
    /// Dense index, `0..Op::ALL.len()`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Requests that move file data: with kernel passthrough (`--fast`)
    /// the kernel serves them from the backing file and the daemon never
    /// sees them.
    pub fn is_data(self) -> bool {
        matches!(self, Op::Read | Op::Write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_dense_and_codes_unique() {
        for (k, op) in Op::ALL.iter().enumerate() {
            assert_eq!(op.index(), k);
        }
        let mut codes: Vec<u32> = Op::ALL.iter().map(|o| o.code()).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), Op::ALL.len());
    }

    #[test]
    fn names_match_the_kernel_header() {
        // Spot checks against include/uapi/linux/fuse.h.
        assert_eq!((Op::Lookup.code(), Op::Lookup.name()), (1, "lookup"));
        assert_eq!((Op::Read.code(), Op::Read.name()), (15, "read"));
        assert_eq!((Op::Create.code(), Op::Create.name()), (35, "create"));
        assert_eq!(
            (Op::Readdirplus.code(), Op::Readdirplus.name()),
            (44, "readdirplus")
        );
        assert_eq!((Op::Rename2.code(), Op::Rename2.name()), (45, "rename2"));
        assert_eq!(
            (Op::CopyFileRange.code(), Op::CopyFileRange.name()),
            (47, "copy_file_range")
        );
    }
}
