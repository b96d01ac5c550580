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

use super::{cstring, cvt, cvt_size, mb_per_s, median_ns, on_cpu, raw, Ctx, PhaseRun, MB_PER_S};
use crate::params::Align;
use fsprof_measure::cache::{self, CacheCheck};
use fsprof_measure::timing::Samples;

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

pub fn phase_names() -> Vec<&'static str> {
    PHASES.iter().map(|p| p.0).collect()
}

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
pub fn run_once(ctx: &Ctx, file_size: u64) -> io::Result<Vec<PhaseRun>> {
    let p = ctx.params;
    let paths: Vec<PathBuf> = (0..p.files)
        .map(|k| ctx.scratch.join(format!("sprite-{k:03}")))
        .collect();
    let mut buf = Buffer::new(p.io_size as usize);
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
            let f = run_file(ctx, path, file_size, k, pattern, dir, &mut buf)?;
            file_ns.push(f.total_ns);
            io_samples.push(f.io);
            if let Some(s) = f.fsync {
                fsync_samples.push(s);
            }
        }
        let kept_bytes = (paths.len() as u64 - 1) * blocks(file_size, p.io_size) * p.io_size;
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
    path: &std::path::Path,
    file_size: u64,
    k: usize,
    pattern: Pattern,
    dir: Dir,
    buf: &mut Buffer,
) -> io::Result<FileRun> {
    let p = ctx.params;
    let io = p.io_size;
    let n = blocks(file_size, io);
    let flags = match dir {
        Dir::Read => libc::O_RDONLY,
        Dir::Write if pattern == Pattern::Seq => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        Dir::Write => libc::O_WRONLY,
    };
    let cpath = cstring(path)?;
    // Same seed for a file in every run and phase: identical accesses run
    // after run, different ones from file to file.
    let mut rng = fastrand::Rng::with_seed(p.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k as u64);
    let misalign = p.align == Align::None;
    let pad = p.pad_syscalls;
    let lp = ctx.timing();
    let ptr = buf.ptr();
    let len = io as usize;
    let ((io_samples, fsync), total_ns) = lp.once(|| {
        // SAFETY: a NUL-terminated path.
        let fd = cvt(unsafe { libc::open(cpath.as_ptr(), flags | libc::O_CLOEXEC, 0o644) })?;
        let body = (|| {
            let samples = lp.run(n as usize, |_| {
                if pattern == Pattern::Rand {
                    // Misaligned offsets stay below the last block, so a
                    // full I/O always fits in the file.
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
                // SAFETY: `ptr` points at `len` bytes of `buf`, alive and
                // not otherwise borrowed during the loop.
                let r = unsafe {
                    match dir {
                        Dir::Read => libc::read(fd, ptr, len),
                        Dir::Write => libc::write(fd, ptr, len),
                    }
                };
                cvt_size(r, len)
            })?;
            let fsync = if dir == Dir::Write {
                let mut s = Samples::default();
                let ((), ns) = lp.once(|| {
                    // SAFETY: fsync on our descriptor.
                    cvt(unsafe { libc::fsync(fd) }).map(|_| ())
                })?;
                s.ns.push(ns);
                s.wall_ns = ns;
                Some(s)
            } else {
                None
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
