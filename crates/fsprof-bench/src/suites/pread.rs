//! The Replayfs/Buttress micro-benchmark: `--threads` threads, each
//! `pread`ing the same cached `--buffer-size` (1 KiB) block of one file at
//! offset 0, `--ops` times. It measures the cheapest data path there is,
//! so it is also what shows a harness's own cost (fio's ~450 ns a read
//! against this loop's one clock read). Figure: total operations per
//! second over the slowest thread's span.
//!
//! With one thread the reader is the calling thread, not a spawned one: a
//! process that has ever had a second thread pays for it on every
//! `pread` (glibc's cancellation-point bookkeeping once it is no longer
//! single-threaded, and the kernel's reference-counted `fdget` while the
//! file table is shared) — ~60 ns a call on the reference machine, more
//! than the timing loop itself costs (docs/benchmarks.md, harness cost).

use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::Barrier;

use fsprof_core::histogram::OpStats;

use serde::Deserialize;

use super::{Description, cvt_size, median_ns, on_cpu, raw, Ctx, PhaseRun, Suite, OPS_PER_S};
use crate::params::{invalid, Kind, Opt, ParamError, Params};
use fsprof_measure::cache::{self, CacheMode};
use fsprof_measure::timing::Samples;

/// The Replayfs/Buttress micro-benchmark (`fsprof bench pread`).
pub struct Pread;

#[derive(Deserialize)]
struct Readers {
    threads: usize,
    ops: usize,
    buffer_size: u64,
}

const THREADS: Opt = Opt {
    name: "threads",
    help: "Reader threads",
    value_name: "T",
    kind: Kind::Count,
    default: "1",
};
const OPS: Opt = Opt {
    name: "ops",
    help: "preads per thread per run",
    value_name: "N",
    kind: Kind::Count,
    default: "100000",
};
const BUFFER_SIZE: Opt = Opt {
    name: "buffer-size",
    help: "Bytes each pread reads (the whole file, cached)",
    value_name: "SIZE",
    kind: Kind::Size,
    default: "1k",
};

const DESCRIPTION: Description = Description {
    name: "pread",
    about: "T threads pread-ing a cached 1 KiB buffer (the harness-cost benchmark)",
    options: &[THREADS, OPS, BUFFER_SIZE],
};

impl Suite for Pread {
    fn description(&self) -> &'static Description {
        &DESCRIPTION
    }

    fn validate(&self, p: &Params) -> Result<(), ParamError> {
        if p.cache == CacheMode::Cold {
            return invalid("--cache cold", "contradicts the pread suite, which measures cached reads (use warm or asis)"
                    );
        }
        let r = p.options_as::<Readers>()?;
        if r.threads == 0 || r.ops == 0 || r.buffer_size == 0 {
            return invalid("--threads, --ops and --buffer-size", "must be at least 1");
        }
        Ok(())
    }

    fn working_set(&self, p: &Params) -> u64 {
        p.options_as::<Readers>().map_or(0, |r| r.buffer_size)
    }

    fn run_once(&self, ctx: &Ctx, _: u64) -> std::io::Result<Vec<PhaseRun>> {
        run_once(ctx, &ctx.options()?)
    }
}

fn run_once(ctx: &Ctx, r: &Readers) -> std::io::Result<Vec<PhaseRun>> {
    let p = ctx.params;
    let path = ctx.scratch.join("pread");
    let mut f = std::fs::File::create(&path)?;
    f.write_all(&vec![0x5a; r.buffer_size as usize])?;
    drop(f);
    let file = std::fs::File::open(&path)?;
    let check = cache::prepare(&mut [&file], p.cache, false)?;
    // Every reader's descriptor is opened before any thread starts: a
    // reader that failed after others reached the barrier would leave them
    // waiting for it forever.
    let files = (0..r.threads)
        .map(|_| std::fs::File::open(&path))
        .collect::<std::io::Result<Vec<_>>>()?;
    let barrier = Barrier::new(r.threads);
    let reader = |f: &std::fs::File| -> std::io::Result<Samples> {
        let fd = f.as_raw_fd();
        let len = r.buffer_size as usize;
        let mut buf = vec![0u8; len];
        let ptr = buf.as_mut_ptr().cast::<libc::c_void>();
        barrier.wait();
        ctx.timing().warmup(1000.min(r.ops)).run(r.ops, |_| {
            // SAFETY: `buf` holds `len` bytes for the loop's life.
            cvt_size(unsafe { libc::pread(fd, ptr, len, 0) }, len)
        })
    };
    let results: Vec<std::io::Result<Samples>> = if r.threads == 1 {
        vec![reader(&files[0])]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = files.iter().map(|f| s.spawn(|| reader(f))).collect();
            // A reader that panicked (a bug, not an I/O error) fails this
            // run with an error the runner reports, not fsprof with it.
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(std::io::Error::other("a pread reader thread panicked")))
                })
                .collect()
        })
    };
    let samples = results.into_iter().collect::<std::io::Result<Vec<_>>>()?;
    let _ = std::fs::remove_file(&path);
    let slowest = samples.iter().map(|s| s.wall_ns).max().unwrap_or(0);
    let total = (r.ops * r.threads) as f64;
    let mut op = OpStats::new("pread");
    for s in &samples {
        op.merge(&s.op_stats("pread", ctx.resolution));
    }
    Ok(vec![PhaseRun {
        name: "pread".into(),
        unit: OPS_PER_S,
        value: if slowest == 0 {
            0.0
        } else {
            total * 1e9 / slowest as f64
        },
        file_ns: Vec::new(),
        ops: vec![op],
        op_median_ns: median_ns(&samples.iter().collect::<Vec<_>>()),
        on_cpu: on_cpu(&samples.iter().collect::<Vec<_>>()),
        op_ns: raw(p, &samples.iter().collect::<Vec<_>>()),
        cache: Some(check),
        wait: None,
    }])
}
