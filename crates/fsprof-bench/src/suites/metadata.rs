//! Bonnie++'s file tests (`-s 0 -n 16:0:0:1024`): `--dirs` directories of
//! `--files-per-dir` empty files, created, `stat`ed and unlinked in
//! creation order, then again in random order (paper §7). A create is
//! `open(O_CREAT|O_EXCL|O_WRONLY)` + `close`, as bonnie++'s `creat` +
//! `close`. The directories are made before and removed after the timed
//! phases. Figures are operations per second.
//!
//! Names are resolved relative to a descriptor held on the benchmark's
//! root (`openat`/`fstatat`/`unlinkat` on `dNNNNN/fNNNNN`), as bonnie++
//! resolves them relative to the directory it `chdir`s into: each op then
//! costs two path components, not the whole scratch path under DIR (which
//! would add its walk to every figure and make figures depend on where
//! DIR is).

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use serde::Deserialize;

use super::{Description, cstring, cvt, median_ns, on_cpu, raw, Ctx, PhaseRun, Suite, OPS_PER_S};
use crate::params::{invalid, Kind, Opt, ParamError, Params};
use fsprof_measure::cache::{CacheCheck, CacheMode};
use fsprof_sys::pagecache::{self, DropCaches};

/// Bonnie++'s file tests (`fsprof bench metadata`).
pub struct Metadata;

#[derive(Deserialize)]
struct Layout {
    dirs: usize,
    files_per_dir: usize,
}

const DIRS: Opt = Opt {
    name: "dirs",
    help: "Directories",
    value_name: "N",
    kind: Kind::Count,
    default: "1024",
};
const FILES_PER_DIR: Opt = Opt {
    name: "files-per-dir",
    help: "Empty files per directory",
    value_name: "N",
    kind: Kind::Count,
    default: "16",
};

const DESCRIPTION: Description = Description {
    name: "metadata",
    about: "Bonnie++-style create/stat/unlink of --dirs × --files-per-dir empty files",
    options: &[DIRS, FILES_PER_DIR],
};

impl Suite for Metadata {
    fn description(&self) -> &'static Description {
        &DESCRIPTION
    }

    fn validate(&self, p: &Params) -> Result<(), ParamError> {
        let l = p.options_as::<Layout>()?;
        if l.dirs == 0 || l.files_per_dir == 0 {
            return invalid("--dirs and --files-per-dir", "must be at least 1");
        }
        if p.cache == CacheMode::Cold && !p.drop_caches {
            return invalid("--cache cold", "for metadata needs --drop-caches (root): dentries and inodes cannot be evicted per file");
        }
        Ok(())
    }

    /// Empty files: an inode and a directory entry each, no data.
    fn working_set(&self, _: &Params) -> u64 {
        0
    }

    fn run_once(&self, ctx: &Ctx, _: u64) -> io::Result<Vec<PhaseRun>> {
        run_once(ctx, &ctx.options()?)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Create,
    Stat,
    Unlink,
}

const PHASES: [(&str, Op, bool); 6] = [
    ("create_seq", Op::Create, false),
    ("stat_seq", Op::Stat, false),
    ("unlink_seq", Op::Unlink, false),
    ("create_rand", Op::Create, true),
    ("stat_rand", Op::Stat, true),
    ("unlink_rand", Op::Unlink, true),
];

fn run_once(ctx: &Ctx, l: &Layout) -> io::Result<Vec<PhaseRun>> {
    let p = ctx.params;
    let root = ctx.scratch.join("metadata");
    std::fs::create_dir(&root)?;
    let root_dir = std::fs::File::open(&root)?;
    let at = root_dir.as_raw_fd();
    let mut names: Vec<CString> = Vec::with_capacity(l.dirs.saturating_mul(l.files_per_dir));
    for d in 0..l.dirs {
        let dir = PathBuf::from(format!("d{d:05}"));
        std::fs::create_dir(root.join(&dir))?;
        for f in 0..l.files_per_dir {
            names.push(cstring(&dir.join(format!("f{f:05}")))?);
        }
    }
    let mut rng = fastrand::Rng::with_seed(p.seed);
    let mut out = Vec::new();
    for (name, op, random) in PHASES {
        let mut order: Vec<usize> = (0..names.len()).collect();
        if random {
            rng.shuffle(&mut order);
        }
        let cache = if op == Op::Create {
            None
        } else {
            prepare_cache(p.cache, at, &names)?
        };
        // A phase of ~1 ms: one preemption or one blocked call can halve
        // its figure, so the run notes who had the CPUs (warnings::slow_runs).
        let samples = ctx.timing().watch_others(true).run(order.len(), |i| {
            let path = names[order[i]].as_ptr();
            // SAFETY: NUL-terminated paths that outlive the loop; the
            // stat buffer is plain data the call fills in.
            unsafe {
                match op {
                    Op::Create => {
                        let fd = cvt(libc::openat(
                            at,
                            path,
                            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                            0o644,
                        ))?;
                        cvt(libc::close(fd)).map(|_| ())
                    }
                    Op::Stat => {
                        let mut st: libc::stat = std::mem::zeroed();
                        cvt(libc::fstatat(at, path, &mut st, 0)).map(|_| ())
                    }
                    Op::Unlink => cvt(libc::unlinkat(at, path, 0)).map(|_| ()),
                }
            }
        })?;
        out.push(PhaseRun {
            name: name.into(),
            unit: OPS_PER_S,
            value: samples.ops_per_sec(),
            file_ns: Vec::new(),
            ops: vec![samples.op_stats(name, ctx.resolution)],
            op_median_ns: median_ns(&[&samples]),
            on_cpu: on_cpu(&[&samples]),
            op_ns: raw(p, &[&samples]),
            cache,
            wait: Some(crate::result::RunWait::of(&samples)),
        });
    }
    drop(root_dir);
    std::fs::remove_dir_all(&root)?;
    Ok(out)
}

/// Dentries and inodes have no residency call: cold drops them machine-
/// wide (`drop_caches` 3, checked up front to be allowed) and warm `stat`s
/// every file; neither can be verified, and the check says so.
fn prepare_cache(
    mode: CacheMode,
    at: libc::c_int,
    names: &[CString],
) -> io::Result<Option<CacheCheck>> {
    let eviction = match mode {
        CacheMode::Asis => return Ok(None),
        CacheMode::Cold => {
            pagecache::drop_caches(DropCaches::All)?;
            Some(fsprof_measure::cache::Eviction::DropCaches)
        }
        CacheMode::Warm => {
            for n in names {
                // SAFETY: as in the timed loop.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: a NUL-terminated path, our directory descriptor
                // and a valid out-pointer.
                unsafe { libc::fstatat(at, n.as_ptr(), &mut st, 0) };
            }
            None
        }
    };
    Ok(Some(CacheCheck::unverified(mode, eviction)))
}
