//! The FUSE requests the daemon times. Their names come from the one op
//! vocabulary ([`fsprof_core::ops::fuse`]), the same the kernel's `fuse`
//! layer uses, so that `fusefs/read` (the daemon's time) and `fuse/read`
//! (the kernel's time for the same request, queueing included) line up in
//! one report.
//!
//! Dense indices, not opcode numbers, address the per-thread counters: the
//! opcodes have gaps and run up to 4096 (`cuse_init`).

use fsprof_core::ops::fuse::OPCODES;

macro_rules! opcodes {
    ($($variant:ident = $code:literal;)*) => {
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
                let code = self.code();
                OPCODES
                    .iter()
                    .find(|(c, _)| *c == code)
                    .map(|(_, n)| *n)
                    .expect("every op the daemon times is in the FUSE opcode table")
            }
        }
    };
}

opcodes! {
    Lookup = 1;
    Forget = 2;
    Getattr = 3;
    Setattr = 4;
    Readlink = 5;
    Symlink = 6;
    Mknod = 8;
    Mkdir = 9;
    Unlink = 10;
    Rmdir = 11;
    Rename = 12;
    Link = 13;
    Open = 14;
    Read = 15;
    Write = 16;
    Statfs = 17;
    Release = 18;
    Fsync = 20;
    Setxattr = 21;
    Getxattr = 22;
    Listxattr = 23;
    Removexattr = 24;
    Flush = 25;
    Opendir = 27;
    Readdir = 28;
    Releasedir = 29;
    Fsyncdir = 30;
    Access = 34;
    Create = 35;
    Fallocate = 43;
    Readdirplus = 44;
    Rename2 = 45;
    Lseek = 46;
    CopyFileRange = 47;
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
    fn every_op_has_its_name_in_the_shared_table() {
        for op in Op::ALL {
            assert!(!op.name().is_empty());
        }
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
