//! What a trace holds: calls, the processes that made them, and the loads
//! and stores they made through file mappings.
//!
//! Ops are named with the user layer's vocabulary (`fsprof_core::ops::libc`,
//! the names `fsprof run` profiles use), so a trace and a profile of the
//! same run speak of the same `openat`, `pread`, `fstatat`; after them come
//! [`MAPPED_OPS`], the accesses through a mapping, which no libc function
//! makes (a compiled trace replays them, a profile times them).

use std::fmt;

use fsprof_core::ops::libc::OPS;

/// The ops after the libc ones: a page fault of a load (the first touch
/// of a page not mapped yet) or of a store (the first write to a page not
/// writable yet) through a file mapping.
pub const MAPPED_OPS: [&str; 2] = ["mapped_read", "mapped_write"];

/// An operation: an index into [`fsprof_core::ops::libc::OPS`], then
/// [`MAPPED_OPS`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Op(pub u16);

impl Op {
    pub fn from_name(name: &str) -> Option<Op> {
        OPS.iter()
            .map(|o| o.name)
            .chain(MAPPED_OPS)
            .position(|o| o == name)
            .map(|i| Op(i as u16))
    }

    /// The op called `name`; panics on a name not in the vocabulary (for
    /// names written in fsprof's own code).
    pub fn named(name: &str) -> Op {
        Op::from_name(name).unwrap_or_else(|| panic!("{name} is not an op of ops.def"))
    }

    pub fn name(self) -> &'static str {
        let i = self.0 as usize;
        match OPS.get(i) {
            Some(o) => o.name,
            None => MAPPED_OPS.get(i - OPS.len()).copied().unwrap_or("?"),
        }
    }

    /// Ops in the vocabulary.
    pub fn count() -> usize {
        OPS.len() + MAPPED_OPS.len()
    }

    /// Every op's name, by index.
    pub fn names() -> Vec<String> {
        OPS.iter()
            .map(|o| o.name)
            .chain(MAPPED_OPS)
            .map(str::to_string)
            .collect()
    }

    /// A load or store through a mapping ([`MAPPED_OPS`]).
    pub fn is_mapped(self) -> bool {
        self.0 as usize >= OPS.len() && (self.0 as usize) < Op::count()
    }

    pub fn is(self, name: &str) -> bool {
        self.name() == name
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The bytes a call wrote, as far as the trace kept them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Data {
    #[default]
    None,
    /// XXH64 (seed 0) of the bytes.
    Digest(u64),
    /// The bytes themselves.
    Full(Vec<u8>),
}

/// `AT_FDCWD` as traces give it.
pub const AT_FDCWD: i32 = -100;

/// One call. Times are ns since the trace's start (CLOCK_MONOTONIC).
/// Arguments a call does not have are `None`; see `docs/trace-format.md`
/// for which op fills which field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Call {
    pub start_ns: u64,
    pub end_ns: u64,
    pub pid: i32,
    pub tid: i32,
    pub op: Op,
    /// The result; FILE* and DIR* results as their fd (-1 for NULL).
    pub ret: i64,
    /// errno when the call failed, else 0.
    pub errno: i32,
    /// The fd operated on, or the directory fd of a `*at` call.
    pub fd: Option<i32>,
    /// A second fd or directory fd (renameat's new dirfd; sendfile's and
    /// copy_file_range's output, `fd` being the file they read).
    pub fd2: Option<i32>,
    /// The path as the program gave it.
    pub path: Option<Vec<u8>>,
    pub path2: Option<Vec<u8>>,
    /// The path joined with the cwd or directory fd it is relative to
    /// (lexically: symlinks and `..` are left for the kernel), or for fd
    /// calls the path the fd was opened with.
    pub resolved: Option<Vec<u8>>,
    pub resolved2: Option<Vec<u8>>,
    pub flags: Option<i64>,
    pub mode: Option<u32>,
    pub offset: Option<i64>,
    pub len: Option<u64>,
    pub whence: Option<i32>,
    /// A further integer argument (fcntl's argument, getdelim's delimiter).
    pub arg: Option<i64>,
    /// Another string argument: a symlink's target, an xattr name, fopen's mode.
    pub name: Option<Vec<u8>>,
    /// Size and mode a stat-family call returned.
    pub size: Option<u64>,
    pub st_mode: Option<u32>,
    /// Bytes a call returned in a buffer that replay needs (readlink's target).
    pub result: Option<Vec<u8>>,
    /// The bytes a write wrote; with `--data full`, also the bytes a read
    /// returned.
    pub data: Data,
}

impl Call {
    pub fn failed(&self) -> bool {
        self.errno != 0 || self.ret == -1
    }

    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// An fd a process image had when it started (inherited, or opened before
/// the shim was loaded).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FdInfo {
    pub fd: i32,
    /// What /proc/self/fd/N says: a path, `pipe:[N]`, `socket:[N]`, ...
    pub path: Vec<u8>,
    pub flags: i64,
    /// File position, -1 where there is none (pipes).
    pub pos: i64,
}

/// A process image: a program started (exec) or a process forked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessInfo {
    pub start_ns: u64,
    pub pid: i32,
    pub ppid: i32,
    /// Numbers the images of one trace (an exec makes a new one, same pid).
    pub seq: u64,
    pub exe: Vec<u8>,
    pub argv: Vec<Vec<u8>>,
    pub cwd: Vec<u8>,
    pub fds: Vec<FdInfo>,
}

/// A descriptor a process image used before the trace saw it made
/// (inherited, or made by a call the capture does not see: `dup2`, `pipe`,
/// `socket`), as it was just before that first use. Times are ns since the
/// trace's start, like a call's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Descriptor {
    pub start_ns: u64,
    pub pid: i32,
    pub tid: i32,
    pub fd: FdInfo,
}

/// What a [`Mapped`] record saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Access {
    /// A load faulted: the first touch of a page not mapped yet.
    #[default]
    Read,
    /// A store faulted: the first write to a page since it was mapped or
    /// last written back.
    Write,
    /// The bytes of pages written through a shared mapping, as they were
    /// just before an `msync` or `munmap` (`--data full`).
    Contents,
}

impl Access {
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "mapped_read",
            Access::Write => "mapped_write",
            Access::Contents => "mapped_contents",
        }
    }
}

/// An access through a file mapping: a page fault, or the contents of
/// written pages. Times are ns since the trace's start, like a call's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mapped {
    pub start_ns: u64,
    /// When the kernel was done with the fault (= `start_ns` when not
    /// measured, and for contents).
    pub end_ns: u64,
    pub pid: i32,
    pub tid: i32,
    pub access: Access,
    /// The fault waited for its page (a device read).
    pub major: bool,
    /// A system call touched the mapping on the program's behalf (a
    /// `write` from a mapped buffer).
    pub in_kernel: bool,
    /// Contents of every page present in the mapping, not only of those
    /// known to be dirty (the capture could not read page flags).
    pub superset: bool,
    /// The address touched (faults), or where the bytes start (contents).
    pub addr: u64,
    /// File pages (first, last) the kernel mapped around the fault without
    /// faults of their own: later loads of them are not observable.
    pub around: Option<(u64, u64)>,
    /// The mapped file, as the reader resolves it from the `mmap` that
    /// made the mapping.
    pub resolved: Option<Vec<u8>>,
    /// The file offset of `addr` (faults: of its page).
    pub offset: Option<u64>,
    /// Contents: the bytes (or their digest).
    pub data: Data,
}

impl Mapped {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// The op a fault is replayed and profiled as (contents have none).
    pub fn op(&self) -> Option<Op> {
        match self.access {
            Access::Read => Op::from_name(MAPPED_OPS[0]),
            Access::Write => Op::from_name(MAPPED_OPS[1]),
            Access::Contents => None,
        }
    }
}

// Calls are most records; boxing them would cost an allocation each.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Process(ProcessInfo),
    Call(Call),
    Mapped(Mapped),
    Descriptor(Descriptor),
}

impl Record {
    pub fn start_ns(&self) -> u64 {
        match self {
            Record::Process(p) => p.start_ns,
            Record::Call(c) => c.start_ns,
            Record::Mapped(m) => m.start_ns,
            Record::Descriptor(d) => d.start_ns,
        }
    }
}
