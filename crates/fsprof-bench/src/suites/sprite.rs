//! The Sprite LFS large-file benchmark as the paper's §4.6.5 fixed it:
//! five phases — sequential write (+fsync), sequential read, random write
//! (+fsync), random read, sequential read again — each over `--files`
//! files in a fixed order, with the first file's figures dropped.
//!
//! Each operation is the classic one: `write`/`read` of `--io-size` bytes
//! from a page-aligned buffer; random phases draw a block with the random
//! generator and `lseek` to it in the loop (as Sprite did), so with
//! `--pad-syscalls` the sequential phases do the same dummy `lseek`
//! (`SEEK_CUR`, 0) and the same random draw (§6): then only the access
//! pattern differs. `--align none` shifts every random offset by a random
//! non-zero amount below the I/O size (the misaligned reads of §5).

use std::hint::black_box;
use std::io;
use std::path::PathBuf;

use fsprof_core::histogram::OpStats;

use serde::Deserialize;

use super::{Description, 
    cstring, cvt, cvt_size, mb_per_s, median_ns, on_cpu, raw, Ctx, PhaseRun, Suite, MB_PER_S,
};
use crate::params::{human_bytes, Align, Kind, Opt, ParamError, Params};
use fsprof_measure::cache::{self, CacheCheck};
use fsprof_measure::timing::Samples;

/// The Sprite LFS large-file benchmark (`fsprof bench sprite`).
pub struct Sprite;

pub const FILES: Opt = Opt {
    name: "files",
    help: "Files per phase; the first one's figures are dropped",
    value_name: "N",
    kind: Kind::Count,
    default: "11",
};
const FILE_SIZE: Opt = Opt {
    name: "file-size",
    help: "File size",
    value_name: "SIZE",
    kind: Kind::Size,
    default: "1M",
};
pub const IO_SIZE: Opt = Opt {
    name: "io-size",
    help: "Bytes per read/write",
    value_name: "SIZE",
    kind: Kind::Size,
    default: "4k",
};
pub const ALIGN: Opt = Opt {
    name: "align",
    help: "Random offsets at multiples of --io-size (page) or shifted by a random amount below it (none)",
    value_name: "ALIGN",
    kind: Kind::Choice(&["page", "none"]),
    default: "page",
};
pub const PAD_SYSCALLS: Opt = Opt {
    name: "pad-syscalls",
    help: "Sequential phases make the same dummy lseek and random draw as random ones",
    value_name: "",
    kind: Kind::Flag,
    default: "false",
};

/// How the files of every phase are read and written (sprite's and the
/// sweep's options).
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct Io {
    pub files: usize,
    pub io_size: u64,
    pub align: Align,
    pub pad_syscalls: bool,
}

#[derive(Deserialize)]
struct Own {
    file_size: u64,
}

impl Io {
    /// The checks of a run over files of at least `size` bytes (`what`
    /// names where that size comes from).
    pub fn check(&self, size: u64, what: &str) -> Result<(), ParamError> {
        let bad = |option, fix: String| Err(ParamError::Invalid { option, fix });
        if self.files < 2 {
            return bad(
                "--files",
                "must be at least 2: the first file's figures are dropped as warm-up".into(),
            );
        }
        if self.io_size == 0 {
            return bad("--io-size", "must be at least 1 byte".into());
        }
        if self.io_size > size {
            return bad(
                "--io-size",
                format!(
                    "{} is larger than {what} {}: use a smaller --io-size or larger files",
                    human_bytes(self.io_size),
                    human_bytes(size)
                ),
            );
        }
        if self.align == Align::None && (self.io_size < 2 || size < 2 * self.io_size) {
            return bad("--align", "none needs --io-size of at least 2 bytes and files of at least two I/Os (an offset is shifted by less than one I/O)".into());
        }
        Ok(())
    }

    /// `11 files, 4 KiB I/O[, unaligned][, padded]`.
    pub fn summary(&self) -> String {
        format!(
            "{} files, {} I/O{}{}",
            self.files,
            human_bytes(self.io_size),
            if self.align == Align::None {
                ", unaligned"
            } else {
                ""
            },
            if self.pad_syscalls { ", padded" } else { "" },
        )
    }

    /// The note under the text table.
    pub fn note(&self) -> String {
        format!(
            "figures: files 2..{} of each run (the first file is dropped as warm-up)",
            self.files
        )
    }
}

const DESCRIPTION: Description = Description {
    name: "sprite",
    about: "Sprite LFS large-file: seq/random write and read over --files files",
    options: &[FILES, FILE_SIZE, IO_SIZE, ALIGN, PAD_SYSCALLS],
};

impl Suite for Sprite {
    fn description(&self) -> &'static Description {
        &DESCRIPTION
    }

    fn validate(&self, p: &Params) -> Result<(), ParamError> {
        let size = p.options_as::<Own>()?.file_size;
        p.options_as::<Io>()?.check(size, "the file size")
    }

    fn working_set(&self, p: &Params) -> u64 {
        match (p.options_as::<Io>(), p.options_as::<Own>()) {
            (Ok(io), Ok(o)) => (io.files as u64).saturating_mul(o.file_size),
            _ => 0,
        }
    }

    fn run_once(&self, ctx: &Ctx, _: u64) -> io::Result<Vec<PhaseRun>> {
        let size = ctx.options::<Own>()?.file_size;
        run_phases(ctx, &ctx.options()?, size)
    }

    fn figures_note(&self, p: &Params) -> Option<String> {
        p.options_as::<Io>().ok().map(|io| io.note())
    }

    fn summary(&self, p: &Params) -> String {
        p.options_as::<Io>().map(|io| io.summary()).unwrap_or_default()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pattern {
    Seq,
    Rand,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Read,
    Write,
}

/// The phases, in the order they run.
const PHASES: [(&str, Pattern, Dir); 5] = [
    ("seq_write", Pattern::Seq, Dir::Write),
    ("seq_read", Pattern::Seq, Dir::Read),
    ("rand_write", Pattern::Rand, Dir::Write),
    ("rand_read", Pattern::Rand, Dir::Read),
    ("seq_reread", Pattern::Seq, Dir::Read),
];

/// A page-aligned buffer (misalignment is `--align`'s business, not the
/// allocator's).
struct Buffer {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl Buffer {
    fn new(len: usize) -> Buffer {
        let page = fsprof_sys::host::page_size();
        let raw = vec![0x5a; len + page];
        let start = raw.as_ptr().align_offset(page);
        Buffer { raw, start, len }
    }
    fn ptr(&mut self) -> *mut libc::c_void {
        self.raw[self.start..self.start + self.len]
            .as_mut_ptr()
            .cast()
    }
}

/// One run of the five phases on files of `file_size` bytes.
pub fn run_phases(ctx: &Ctx, o: &Io, file_size: u64) -> io::Result<Vec<PhaseRun>> {
    let p = ctx.params;
    let paths: Vec<PathBuf> = (0..o.files)
        .map(|k| ctx.scratch.join(format!("sprite-{k:03}")))
        .collect();
    let mut buf = Buffer::new(o.io_size as usize);
    let mut out = Vec::new();
    for (name, pattern, dir) in PHASES {
        let check = if name == "seq_write" {
            None
        } else {
            Some(prepare_cache(ctx, &paths)?)
        };
        let mut file_ns = Vec::with_capacity(paths.len());
        let mut io_samples = Vec::with_capacity(paths.len());
        let mut fsync_samples = Vec::new();
        for (k, path) in paths.iter().enumerate() {
            let f = run_file(ctx, o, path, (file_size, k), (pattern, dir), &mut buf)?;
            file_ns.push(f.total_ns);
            io_samples.push(f.io);
            if let Some(s) = f.fsync {
                fsync_samples.push(s);
            }
        }
        let kept_bytes = (paths.len() as u64 - 1) * blocks(file_size, o.io_size) * o.io_size;
        let kept_ns: u64 = file_ns[1..].iter().sum();
        let mut ops = vec![merged(name, &io_samples[1..], ctx)];
        if !fsync_samples.is_empty() {
            ops.push(merged(&format!("{name}:fsync"), &fsync_samples[1..], ctx));
        }
        out.push(PhaseRun {
            name: name.into(),
            unit: MB_PER_S,
            value: mb_per_s(kept_bytes, kept_ns),
            file_ns,
            ops,
            op_median_ns: median_ns(&io_samples[1..].iter().collect::<Vec<_>>()),
            on_cpu: on_cpu(&io_samples[1..].iter().collect::<Vec<_>>()),
            op_ns: raw(p, &io_samples.iter().collect::<Vec<_>>()),
            cache: check,
            wait: None,
        });
    }
    for path in &paths {
        let _ = std::fs::remove_file(path);
    }
    Ok(out)
}

fn merged(name: &str, samples: &[Samples], ctx: &Ctx) -> OpStats {
    let mut op = OpStats::new(name);
    for s in samples {
        op.merge(&s.op_stats(name, ctx.resolution));
    }
    op
}

fn blocks(file_size: u64, io: u64) -> u64 {
    file_size / io
}

fn prepare_cache(ctx: &Ctx, paths: &[PathBuf]) -> io::Result<CacheCheck> {
    let files = paths
        .iter()
        .map(std::fs::File::open)
        .collect::<io::Result<Vec<_>>>()?;
    let mut refs: Vec<&std::fs::File> = files.iter().collect();
    cache::prepare(&mut refs, ctx.params.cache, ctx.params.drop_caches)
}

struct FileRun {
    total_ns: u64,
    io: Samples,
    fsync: Option<Samples>,
}

/// One file of one phase: open, the timed I/O loop, fsync after writes,
/// close — all inside the file's time.
fn run_file(
    ctx: &Ctx,
    o: &Io,
    path: &std::path::Path,
    (file_size, k): (u64, usize),
    (pattern, dir): (Pattern, Dir),
    buf: &mut Buffer,
) -> io::Result<FileRun> {
    let flags = match dir {
        Dir::Read => libc::O_RDONLY,
        Dir::Write if pattern == Pattern::Seq => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        Dir::Write => libc::O_WRONLY,
    };
    let cpath = cstring(path)?;
    let lp = ctx.timing();
    let ((io_samples, fsync), total_ns) = lp.once(|| {
        // SAFETY: a NUL-terminated path.
        let fd = cvt(unsafe { libc::open(cpath.as_ptr(), flags | libc::O_CLOEXEC, 0o644) })?;
        let body = (|| {
            let samples = io_loop(ctx, o, fd, (file_size, k), (pattern, dir), buf)?;
            let fsync = match dir {
                Dir::Write => Some(timed_fsync(&lp, fd)?),
                Dir::Read => None,
            };
            Ok::<_, io::Error>((samples, fsync))
        })();
        // SAFETY: closing the descriptor opened above, once.
        let closed = cvt(unsafe { libc::close(fd) });
        let r = body?;
        closed?;
        Ok(r)
    })?;
    Ok(FileRun {
        total_ns,
        io: io_samples,
        fsync,
    })
}

/// The timed reads or writes of one file, through `fd`.
fn io_loop(
    ctx: &Ctx,
    o: &Io,
    fd: libc::c_int,
    (file_size, k): (u64, usize),
    (pattern, dir): (Pattern, Dir),
    buf: &mut Buffer,
) -> io::Result<Samples> {
    let io = o.io_size;
    let n = blocks(file_size, io);
    // Same seed for a file in every run and phase: identical accesses run
    // after run, different ones from file to file.
    let seed = ctx.params.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k as u64;
    let mut rng = fastrand::Rng::with_seed(seed);
    let misalign = o.align == Align::None;
    let pad = o.pad_syscalls;
    let ptr = buf.ptr();
    let len = io as usize;
    ctx.timing().run(n as usize, |_| {
        if pattern == Pattern::Rand {
            // Misaligned offsets stay below the last block, so a full I/O
            // always fits in the file.
            let off = if misalign {
                rng.u64(0..n - 1) * io + rng.u64(1..io)
            } else {
                rng.u64(0..n) * io
            };
            // SAFETY: lseek on our descriptor.
            if unsafe { libc::lseek(fd, off as libc::off_t, libc::SEEK_SET) } < 0 {
                return Err(io::Error::last_os_error());
            }
        } else if pad {
            black_box(rng.u64(0..n));
            // SAFETY: lseek on our descriptor.
            if unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: `ptr` points at `len` bytes of `buf`, alive and not
        // otherwise borrowed during the loop.
        let r = unsafe {
            match dir {
                Dir::Read => libc::read(fd, ptr, len),
                Dir::Write => libc::write(fd, ptr, len),
            }
        };
        cvt_size(r, len)
    })
}

/// One timed `fsync` of `fd`.
fn timed_fsync(lp: &fsprof_measure::timing::TimingLoop, fd: libc::c_int) -> io::Result<Samples> {
    // SAFETY: fsync on our descriptor.
    let ((), ns) = lp.once(|| cvt(unsafe { libc::fsync(fd) }).map(|_| ()))?;
    Ok(Samples {
        ns: vec![ns],
        wall_ns: ns,
        ..Samples::default()
    })
}
