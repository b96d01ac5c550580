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

use super::{cvt_size, median_ns, on_cpu, raw, Ctx, PhaseRun, OPS_PER_S};
use fsprof_measure::cache;
use fsprof_measure::timing::Samples;

pub fn phase_names() -> Vec<&'static str> {
    vec!["pread"]
}

pub fn run_once(ctx: &Ctx) -> std::io::Result<Vec<PhaseRun>> {
    let p = ctx.params;
    let path = ctx.scratch.join("pread");
    let mut f = std::fs::File::create(&path)?;
    f.write_all(&vec![0x5a; p.buffer_size as usize])?;
    drop(f);
    let file = std::fs::File::open(&path)?;
    let check = cache::prepare(&mut [&file], p.cache, false)?;
    let barrier = Barrier::new(p.threads);
    let reader = || -> std::io::Result<Samples> {
        let f = std::fs::File::open(&path)?;
        let fd = f.as_raw_fd();
        let len = p.buffer_size as usize;
        let mut buf = vec![0u8; len];
        let ptr = buf.as_mut_ptr().cast::<libc::c_void>();
        barrier.wait();
        ctx.timing().warmup(1000.min(p.ops)).run(p.ops, |_| {
            // SAFETY: `buf` holds `len` bytes for the loop's life.
            cvt_size(unsafe { libc::pread(fd, ptr, len, 0) }, len)
        })
    };
    let results: Vec<std::io::Result<Samples>> = if p.threads == 1 {
        vec![reader()]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..p.threads).map(|_| s.spawn(reader)).collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a pread thread panicked"))
                .collect()
        })
    };
    let samples = results.into_iter().collect::<std::io::Result<Vec<_>>>()?;
    let _ = std::fs::remove_file(&path);
    let slowest = samples.iter().map(|s| s.wall_ns).max().unwrap_or(0);
    let total = (p.ops * p.threads) as f64;
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
    }])
}
