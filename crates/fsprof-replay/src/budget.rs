//! How much a replay may make the file system under its root allocate,
//! decided before anything is replayed.
//!
//! A trace is input fsprof does not control: a traced `fallocate(fd, 0, 0,
//! 1 TiB)`, replayed as root, would fill the root's file system, and on
//! ext4 the partial allocation stays after ENOSPC. So every command that
//! takes a size is *charged* what it may allocate, in whole blocks of the
//! root's file system: writes (`write`, `pwrite`, `fwrite`, vectored ones),
//! `fallocate`/`posix_fallocate` (not a hole punch), `copy_file_range`,
//! `sendfile`, and one block for each command that may create an entry
//! (`--prepare`'s initial files are charged too). The sum, the replay's
//! *demand*, must fit in one budget (`--max-bytes`, by default half the
//! space free under the root) and in the free space itself; otherwise the
//! replay is refused before its first command, naming the largest charge.
//!
//! The charge bounds what a command can allocate on a file system with
//! holes (ext2/3/4, xfs, btrfs, tmpfs and the others [`holes`] lists),
//! where `ftruncate`/`truncate` to a larger size and an `lseek` far past
//! the end then a write allocate nothing for the gap. On any other file
//! system (vfat, exfat, one fsprof does not know) they would allocate the
//! gap, so there the replay also runs under `RLIMIT_FSIZE` set to the
//! budget: the kernel refuses (EFBIG) any call that would make a file
//! larger, whichever call it is. A replay is therefore bounded without a
//! check on its hot path: the charges are fixed by the compiled trace.

use fsprof_core::units::format_bytes;
use fsprof_trace::replayfile::{Command, Compiled, InitKind};

use crate::exec::Kind;
use crate::root::Root;

/// What the root's file system offers, read once before the replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    /// Bytes an unprivileged writer may still allocate (`f_bavail`).
    pub free: u64,
    /// The allocation unit (`f_frsize`).
    pub block: u64,
    /// Whether a file there may have holes ([`holes`]).
    pub holes: bool,
}

impl Space {
    pub fn of(root: &Root) -> std::io::Result<Space> {
        // SAFETY: plain structs of integers, for which zero is valid; the
        // calls fill them from a descriptor we hold.
        let (vfs, fs) = unsafe {
            let mut vfs: libc::statvfs = std::mem::zeroed();
            let mut fs: libc::statfs = std::mem::zeroed();
            if libc::fstatvfs(root.fd(), &mut vfs) != 0 || libc::fstatfs(root.fd(), &mut fs) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            (vfs, fs)
        };
        // The field types differ between C libraries and word sizes.
        #[allow(clippy::unnecessary_cast)]
        let (frsize, bavail, f_type) = (vfs.f_frsize as u64, vfs.f_bavail as u64, fs.f_type as i64);
        let block = frsize.max(512);
        Ok(Space {
            free: bavail.saturating_mul(block),
            block,
            holes: holes(f_type),
        })
    }
}

/// File systems whose files may have holes: growing a file's size
/// (`truncate`, a write far past the end) allocates nothing for the gap.
pub fn holes(f_type: i64) -> bool {
    const EXT234: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;
    const BTRFS: i64 = 0x9123_683E;
    const TMPFS: i64 = 0x0102_1994;
    const F2FS: i64 = 0xF2F5_2010;
    const BCACHEFS: i64 = 0xCA45_1A4E;
    const ZFS: i64 = 0x2FC1_2FC1;
    const NFS: i64 = 0x6969;
    const OVERLAYFS: i64 = 0x794C_7630;
    [
        EXT234, XFS, BTRFS, TMPFS, F2FS, BCACHEFS, ZFS, NFS, OVERLAYFS,
    ]
    .contains(&(f_type & 0xFFFF_FFFF))
}

/// Bytes of whole `block`s that `len` bytes from `offset` (None: from
/// anywhere) touch.
fn span(len: u64, offset: Option<i64>, block: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let blocks = match offset.and_then(|o| u64::try_from(o).ok()) {
        Some(o) => {
            let first = o / block;
            let last = o.saturating_add(len - 1) / block;
            last - first + 1
        }
        // Unaligned, a length can straddle one block more.
        None => len.div_ceil(block).saturating_add(1),
    };
    blocks.saturating_mul(block)
}

/// Whether open flags may create a file (O_TMPFILE includes the bit of
/// O_DIRECTORY, which alone creates nothing).
fn creates(flags: i64) -> bool {
    let tmpfile = libc::O_TMPFILE as i64;
    flags & libc::O_CREAT as i64 != 0 || flags & tmpfile == tmpfile
}

/// What `c` may make the file system allocate, in bytes of whole blocks.
pub fn charge(kind: Kind, c: &Command, block: u64) -> u64 {
    use Kind::*;
    let frees = (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_COLLAPSE_RANGE) as u32;
    match kind {
        Write | Fwrite => span(c.len, None, block),
        Pwrite => span(c.len, Some(c.offset), block),
        Fallocate if c.mode & frees != 0 => 0,
        Fallocate | PosixFallocate => span(c.len, Some(c.offset), block),
        CopyFileRange | Sendfile => span(c.len, None, block),
        // A store through a shared mapping fills a hole of the file (a
        // page past its end is SIGBUS, caught: nothing is allocated).
        MappedWrite => span(c.len, None, block),
        Open | FOpen if creates(c.flags) => block,
        Mkdir | Symlink | Link | Mknod | Rename => block,
        _ => 0,
    }
}

/// The replay's demand: every command's charge, and `--prepare`'s.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Demand {
    pub total: u64,
    /// The command with the largest charge: (index, bytes).
    pub largest: Option<(usize, u64)>,
    /// `--prepare`'s part of the total.
    pub prepare: u64,
}

pub fn demand(c: &Compiled, kinds: &[Option<Kind>], prepare: bool, block: u64) -> Demand {
    let mut d = Demand::default();
    for (i, (cmd, kind)) in c.commands.iter().zip(kinds).enumerate() {
        let Some(kind) = kind else { continue };
        let b = charge(*kind, cmd, block);
        d.total = d.total.saturating_add(b);
        if b > d.largest.map_or(0, |l| l.1) {
            d.largest = Some((i, b));
        }
    }
    if prepare {
        d.prepare = c
            .initial
            .iter()
            .map(|e| match &e.kind {
                InitKind::File { size, .. } if *size <= crate::prepare::FILL_MAX => {
                    span(*size, Some(0), block)
                }
                InitKind::File { .. } => e.content.iter().fold(0u64, |a, &(off, b)| {
                    let len = c.buffers[b as usize].len() as u64;
                    a.saturating_add(span(len, i64::try_from(off).ok(), block))
                }),
                InitKind::Dir | InitKind::Symlink { .. } => block,
            })
            .fold(0u64, u64::saturating_add);
        d.total = d.total.saturating_add(d.prepare);
    }
    d
}

/// The budget the replay runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub bytes: u64,
    pub space: Space,
}

/// Checks the demand against the budget (`max_bytes`, or half the free
/// space) and the free space; the refusal says what asked for how much.
pub fn check(
    c: &Compiled,
    d: &Demand,
    max_bytes: Option<u64>,
    space: Space,
    root: &std::path::Path,
) -> Result<Budget, String> {
    let b = |n: u64| format_bytes(n as f64);
    let budget = max_bytes.unwrap_or(space.free / 2);
    let largest = d.largest.map_or(String::new(), |(i, n)| {
        let cmd = &c.commands[i];
        format!(
            "; the largest: {} of {} at +{} (command #{i}){}",
            cmd.op,
            b(n),
            fsprof_core::units::format_ns(cmd.t_ns as f64),
            cmd.path
                .map(|p| format!(" on {}", String::from_utf8_lossy(&c.strings[p as usize])))
                .unwrap_or_default()
        )
    });
    let asks = format!(
        "the replay may allocate up to {} under {}{}{}",
        b(d.total),
        root.display(),
        if d.prepare > 0 {
            format!(" ({} of it for --prepare)", b(d.prepare))
        } else {
            String::new()
        },
        largest
    );
    if d.total > space.free {
        return Err(format!(
            "{asks}; only {} is free there. Nothing was replayed",
            b(space.free)
        ));
    }
    if d.total > budget {
        let what = match max_bytes {
            Some(m) => format!("--max-bytes {}", b(m)),
            None => format!("the default budget of {} (half the free space)", b(budget)),
        };
        return Err(format!(
            "{asks}, more than {what}. Nothing was replayed; give a larger --max-bytes if that is intended"
        ));
    }
    Ok(Budget {
        bytes: budget,
        space,
    })
}

/// While alive, on a file system without holes, no file of this process
/// may grow past the budget (RLIMIT_FSIZE; the call fails with EFBIG
/// rather than sending SIGXFSZ, which is ignored meanwhile). Restores
/// both on drop.
pub struct FileSizeLimit {
    old: Option<(libc::rlimit, libc::sighandler_t)>,
}

impl FileSizeLimit {
    pub fn new(budget: &Budget) -> std::io::Result<FileSizeLimit> {
        if budget.space.holes {
            return Ok(FileSizeLimit { old: None });
        }
        // SAFETY: getrlimit/setrlimit with valid structs; signal() with
        // SIG_IGN, whose previous handler we keep to restore.
        unsafe {
            let mut old: libc::rlimit = std::mem::zeroed();
            if libc::getrlimit(libc::RLIMIT_FSIZE, &mut old) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let new = libc::rlimit {
                rlim_cur: budget.bytes.min(old.rlim_cur),
                rlim_max: old.rlim_max,
            };
            let sig = libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if libc::setrlimit(libc::RLIMIT_FSIZE, &new) != 0 {
                let e = std::io::Error::last_os_error();
                libc::signal(libc::SIGXFSZ, sig);
                return Err(e);
            }
            Ok(FileSizeLimit {
                old: Some((old, sig)),
            })
        }
    }

    pub fn active(&self) -> bool {
        self.old.is_some()
    }
}

impl Drop for FileSizeLimit {
    fn drop(&mut self) {
        if let Some((old, sig)) = self.old.take() {
            // SAFETY: restoring what `new` read.
            unsafe {
                libc::setrlimit(libc::RLIMIT_FSIZE, &old);
                libc::signal(libc::SIGXFSZ, sig);
            }
        }
    }
}

/// The errno names of running out of room: the file system's space or
/// the user's quota, or a file-size limit.
pub fn out_of_space(errno: i32) -> bool {
    matches!(errno, libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_trace::event::Op;

    fn cmd(op: &str, len: u64, offset: i64, mode: u32, flags: i64) -> Command {
        Command {
            op: Op::named(op),
            len,
            offset,
            mode,
            flags,
            ..Command::default()
        }
    }

    fn charged(op: &str, len: u64, offset: i64, mode: u32, flags: i64) -> u64 {
        let c = cmd(op, len, offset, mode, flags);
        charge(Kind::of(&c).expect("a replayed op"), &c, 4096)
    }

    const TIB: u64 = 1 << 40;

    /// Every op that takes a size is charged by it, in whole blocks.
    #[test]
    fn every_size_taking_op_is_charged_its_blocks() {
        // One block more for an offset the replay does not know.
        assert_eq!(charged("write", 1, 0, 0, 0), 2 * 4096);
        assert_eq!(charged("write", 8192, 0, 0, 0), 3 * 4096);
        assert_eq!(charged("fwrite", 10, 0, 0, 0), 2 * 4096);
        // A known offset: exactly the blocks the range touches.
        assert_eq!(charged("pwrite", 4096, 0, 0, 0), 4096);
        assert_eq!(charged("pwrite", 2, 4095, 0, 0), 2 * 4096);
        assert_eq!(charged("pwritev", 1, TIB as i64, 0, 0), 4096);
        assert_eq!(charged("fallocate", TIB, 0, 0, 0), TIB);
        assert_eq!(
            charged("fallocate", TIB, 0, libc::FALLOC_FL_KEEP_SIZE as u32, 0),
            TIB
        );
        assert_eq!(charged("posix_fallocate", TIB, 4096, 0, 0), TIB);
        let punch = (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE) as u32;
        assert_eq!(charged("fallocate", TIB, 0, punch, 0), 0);
        assert_eq!(charged("copy_file_range", TIB, 0, 0, 0), TIB + 4096);
        assert_eq!(charged("sendfile", 100, 0, 0, 0), 2 * 4096);
        // Growing a file's size allocates nothing where files have holes
        // (elsewhere RLIMIT_FSIZE bounds it); a seek allocates nothing.
        assert_eq!(charged("ftruncate", TIB, 0, 0, 0), 0);
        assert_eq!(charged("truncate", TIB, 0, 0, 0), 0);
        assert_eq!(charged("lseek", 0, TIB as i64, 0, 0), 0);
        // Creating an entry: a block.
        assert_eq!(charged("openat", 0, 0, 0, libc::O_CREAT as i64), 4096);
        assert_eq!(charged("openat", 0, 0, 0, 0), 0);
        assert_eq!(charged("openat", 0, 0, 0, libc::O_DIRECTORY as i64), 0);
        assert_eq!(charged("openat", 0, 0, 0, libc::O_TMPFILE as i64), 4096);
        assert_eq!(charged("mkdir", 0, 0, 0, 0), 4096);
        // Reads allocate nothing.
        assert_eq!(charged("pread", TIB, 0, 0, 0), 0);
        // No overflow at the ends of the ranges: saturated.
        assert!(charged("pwrite", u64::MAX, i64::MAX, 0, 0) >= 1 << 62);
        assert_eq!(charged("write", u64::MAX, 0, 0, 0), u64::MAX);
    }

    fn compiled(cmds: Vec<Command>) -> Compiled {
        Compiled {
            commands: cmds,
            ..Compiled::default()
        }
    }

    fn space(free: u64) -> Space {
        Space {
            free,
            block: 4096,
            holes: true,
        }
    }

    #[test]
    fn a_demand_over_the_budget_or_the_free_space_is_refused_naming_its_largest_command() {
        let c = compiled(vec![
            cmd("pwrite", 4096, 0, 0, 0),
            cmd("fallocate", TIB, 0, 0, 0),
        ]);
        let kinds = Kind::table(&c);
        let d = demand(&c, &kinds, false, 4096);
        assert_eq!(d.total, TIB + 4096);
        assert_eq!(d.largest, Some((1, TIB)));
        let root = std::path::Path::new("/r");
        let e = check(&c, &d, None, space(64 << 20), root).unwrap_err();
        assert!(
            e.contains("1 TiB") && e.contains("fallocate") && e.contains("64 MiB is free"),
            "{e}"
        );
        // Within the free space, over the default budget (half of it).
        let small = compiled(vec![cmd("pwrite", 40 << 20, 0, 0, 0)]);
        let d = demand(&small, &Kind::table(&small), false, 4096);
        let e = check(&small, &d, None, space(64 << 20), root).unwrap_err();
        assert!(e.contains("default budget of 32 MiB"), "{e}");
        // ... which --max-bytes raises, up to the free space.
        let ok = check(&small, &d, Some(48 << 20), space(64 << 20), root).unwrap();
        assert_eq!(ok.bytes, 48 << 20);
        let e = check(&small, &d, Some(30 << 20), space(64 << 20), root).unwrap_err();
        assert!(e.contains("--max-bytes 30 MiB"), "{e}");
    }

    #[test]
    fn prepare_is_charged_the_files_it_fills() {
        use fsprof_trace::replayfile::InitEntry;
        let mut c = compiled(Vec::new());
        c.buffers = vec![vec![1u8; 10]];
        c.initial = vec![
            InitEntry {
                path: 0,
                kind: InitKind::File {
                    size: 1 << 20,
                    exact: true,
                },
                mode: None,
                content: Vec::new(),
            },
            // Too large to fill: only what the trace read is written.
            InitEntry {
                path: 0,
                kind: InitKind::File {
                    size: TIB,
                    exact: true,
                },
                mode: None,
                content: vec![(8192, 0)],
            },
            InitEntry {
                path: 0,
                kind: InitKind::Dir,
                mode: None,
                content: Vec::new(),
            },
        ];
        let d = demand(&c, &[], true, 4096);
        assert_eq!(d.prepare, (1 << 20) + 4096 + 4096);
        assert_eq!(d.total, d.prepare);
        assert_eq!(demand(&c, &[], false, 4096).total, 0);
    }

    #[test]
    fn file_systems_with_holes_are_known_by_their_magic() {
        assert!(holes(0xEF53) && holes(0x0102_1994) && holes(0x5846_5342));
        // vfat, exfat, FUSE: a larger size may allocate the gap.
        assert!(!holes(0x4d44) && !holes(0x2011_BAB0) && !holes(0x6573_5546));
    }
}
