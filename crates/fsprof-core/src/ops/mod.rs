//! The one op vocabulary: every op name a fsprof layer files latencies
//! under, and where each op's operands are among its arguments.
//!
//! - [`libc`]: the libc entry points the preload shim wraps (`user` layer).
//!   Their order is the shim's ABI; `fsprof-shim/shim/ops.def` is checked
//!   against it by the shim's tests.
//! - [`syscall`]: syscall numbers and the names strace prints (`syscall`
//!   layer), the default file-system set, and their arguments.
//! - [`fuse`]: FUSE opcodes (`fuse` and `fusefs` layers).
//! - [`block`]: block request kinds (`block` and `block-size` layers).
//!
//! Layer names are in [`crate::layer`].

pub mod block;
pub mod fuse;
pub mod libc;
pub mod syscall;
mod syscall_table;

/// What an argument of a call is, for the ops whose operands a tool may
/// need (a trace, a replay, a size or seek histogram).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The file descriptor the call works on.
    Fd,
    /// A second descriptor (`sendfile`'s output, `copy_file_range`'s and
    /// `splice`'s destination).
    Fd2,
    /// A `FILE *` (stdio calls).
    Stream,
    /// A `DIR *` (`readdir`, `closedir`).
    DirStream,
    /// The directory descriptor a relative [`Role::Path`] is resolved from.
    DirFd,
    /// The path the call resolves or creates.
    Path,
    /// The other name: `rename`'s and `link`'s new name, `symlink`'s target.
    Path2,
    /// A file offset passed by value.
    Offset,
    /// A pointer to a file offset that the call reads and updates
    /// (`sendfile`, `copy_file_range`, `splice`).
    OffsetPtr,
    /// A byte count: asked for (`read`), or a length (`truncate`,
    /// `fallocate`).
    Size,
    /// An `iovec` array; the byte count is the sum of its lengths.
    Iov,
    /// The number of entries of the [`Role::Iov`] array.
    IovCount,
    /// The size of one item (`fread`, `fwrite`); the byte count is
    /// `ItemSize × Items`.
    ItemSize,
    /// The number of items (`fread`, `fwrite`).
    Items,
    /// The directory descriptor a relative [`Role::Path2`] is resolved
    /// from (`renameat`'s, `linkat`'s new dirfd).
    DirFd2,
    /// Flags or a command: `open`'s flags, `fcntl`'s command, `*at`'s
    /// `AT_*` flags, `posix_fadvise`'s advice, `mmap`'s flags.
    Flags,
    /// A mode: permission bits (`open`, `mkdir`, `chmod`), `access`'s
    /// mode, `fallocate`'s mode.
    Mode,
    /// `lseek`'s and `fseek`'s whence.
    Whence,
    /// A string that names no file: an xattr's name, `fopen`'s mode.
    Name,
    /// Another integer a trace keeps: `fcntl`'s argument, `getdelim`'s
    /// delimiter.
    Int,
}

/// Direction of a data op: which way file data moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    Read,
    Write,
}

/// Where an op's operands are: `(role, 0-based argument position)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Args(pub &'static [(Role, u8)]);

impl Args {
    pub const NONE: Args = Args(&[]);

    /// The position of the argument with this role, if the op has one.
    pub fn position(&self, role: Role) -> Option<u8> {
        self.0.iter().find(|(r, _)| *r == role).map(|&(_, i)| i)
    }
}
