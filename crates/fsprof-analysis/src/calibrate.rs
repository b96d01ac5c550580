//! `fsprof calibrate`: measures this machine's characteristic latencies
//! with small built-in workloads (OSprof's prior-knowledge-based analysis),
//! so that reports can say what a peak probably is.
//!
//! Each workload times single calls with `CLOCK_MONOTONIC` (what `fsprof
//! run` does when there is no usable cycle counter), minus the cost of
//! reading the clock, and keeps the median and the 10th/90th percentiles:
//!
//! | name            | workload                                                                |
//! |-----------------|-------------------------------------------------------------------------|
//! | `null_syscall`  | `syscall(SYS_getppid)`, 20,000 times                                     |
//! | `page_cache_hit`| `pread` of 4 KiB at random offsets of a 4 MiB file just read             |
//! | `device_read`   | `pread` of 4 KiB at random offsets of a 32 MiB file evicted from the page cache (`posix_fadvise(DONTNEED)`, then `/proc/sys/vm/drop_caches` if that did not evict it, else `O_DIRECT`), readahead off |
//! | `fsync`         | `fsync` after a 4 KiB `pwrite`, 40 times                                 |
//! | `futex_handoff` | half a round trip between two threads through a mutex + condvar          |
//! | `sched_quantum` | two busy threads pinned to one CPU: how long one is kept off it          |
//!
//! The files live in a temporary directory under the directory given (so
//! the device measured is the one under it) and are removed afterwards. A
//! characteristic that cannot be measured there (a device read on tmpfs)
//! is left out of the result.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use fsprof_sys::clock::mono_ns;
use fsprof_sys::pagecache::{self, DropCaches};

use crate::labels::{Calibration, Characteristic, FORMAT_NAME, FORMAT_VERSION};

#[derive(Clone, Debug)]
pub struct CalibrateOptions {
    /// Directory on the device to measure (files are created under it).
    pub dir: PathBuf,
    pub host: String,
    pub kernel: String,
    /// RFC 3339 time stamp for the file.
    pub created: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    #[error("cannot create a scratch directory under {dir}: {source} (pass --dir with a writable directory)")]
    Scratch {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> CalibrateError {
    move |source| CalibrateError::Io { what, source }
}

/// Runs every workload. Takes about a second on an idle machine.
pub fn calibrate(opts: &CalibrateOptions) -> Result<Calibration, CalibrateError> {
    let scratch = tempfile::Builder::new()
        .prefix(".fsprof-calibrate-")
        .tempdir_in(&opts.dir)
        .map_err(|source| CalibrateError::Scratch {
            dir: opts.dir.clone(),
            source,
        })?;
    let clock = clock_cost();
    let memory_fs = memory_fs(scratch.path());
    let unmeasured = |name: &str, label: &str, fs: &str| {
        characteristic(
            name,
            label,
            format!("--dir is on {fs}, which has no device: pass a directory on a disk"),
            Vec::new(),
            clock,
        )
    };
    let mut out = vec![
        null_syscall(clock),
        page_cache_hit(scratch.path(), clock)?,
        match memory_fs {
            Some(fs) => unmeasured("device_read", "device read", fs),
            None => device_read(scratch.path(), clock)?,
        },
        match memory_fs {
            Some(fs) => unmeasured("fsync", "fsync", fs),
            None => fsync(scratch.path(), clock)?,
        },
        futex_handoff(),
        sched_quantum(),
    ];
    let skipped = out
        .iter()
        .filter(|c| c.samples == 0)
        .map(|c| format!("{}: {}", c.name, c.method))
        .collect();
    out.retain(|c| c.samples > 0);
    Ok(Calibration {
        format: FORMAT_NAME.into(),
        format_version: FORMAT_VERSION,
        fsprof_version: env!("CARGO_PKG_VERSION").into(),
        host: opts.host.clone(),
        kernel: opts.kernel.clone(),
        created: opts.created.clone(),
        dir: opts.dir.display().to_string(),
        characteristics: out,
        skipped,
    })
}

/// `Some(name)` when `dir` is on a memory file system, whose "device" reads
/// and fsyncs are memory copies and no-ops.
fn memory_fs(dir: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs is plain data; all zeroes is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a writable statfs.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    match st.f_type as i64 {
        0x0102_1994 => Some("tmpfs"),
        0x8584_58f6 => Some("ramfs"),
        _ => None,
    }
}

fn clock_cost() -> f64 {
    let mut v: Vec<f64> = (0..2000)
        .map(|_| {
            let t0 = mono_ns();
            let t1 = mono_ns();
            (t1 - t0) as f64
        })
        .collect();
    quantile(&mut v, 0.5)
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn characteristic(
    name: &str,
    label: &str,
    method: String,
    mut samples: Vec<f64>,
    clock: f64,
) -> Characteristic {
    for s in &mut samples {
        *s = (*s - clock).max(1.0);
    }
    Characteristic {
        name: name.into(),
        label: label.into(),
        median_ns: quantile(&mut samples, 0.5),
        p10_ns: quantile(&mut samples, 0.1),
        p90_ns: quantile(&mut samples, 0.9),
        samples: samples.len() as u64,
        method,
    }
}

fn time(mut f: impl FnMut()) -> f64 {
    let t0 = mono_ns();
    f();
    (mono_ns() - t0) as f64
}

fn null_syscall(clock: f64) -> Characteristic {
    let v = (0..20_000)
        .map(|_| {
            time(|| {
                // SAFETY: getppid has no arguments and cannot fail.
                unsafe { libc::syscall(libc::SYS_getppid) };
            })
        })
        .collect();
    characteristic(
        "null_syscall",
        "null syscall",
        "syscall(SYS_getppid)".into(),
        v,
        clock,
    )
}

/// xorshift: random-looking offsets without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const PAGE: usize = 4096;

fn make_file(path: &Path, bytes: usize) -> Result<File, CalibrateError> {
    let mut f = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io("creating a calibration file"))?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let chunk: Vec<u8> = (0..1 << 20).map(|_| rng.next() as u8).collect();
    for _ in 0..bytes / chunk.len() {
        f.write_all(&chunk)
            .map_err(io("writing a calibration file"))?;
    }
    f.sync_all().map_err(io("syncing a calibration file"))?;
    Ok(f)
}

fn page_cache_hit(dir: &Path, clock: f64) -> Result<Characteristic, CalibrateError> {
    let f = make_file(&dir.join("hit"), 4 << 20)?;
    let mut buf = vec![0u8; PAGE];
    let pages = (4 << 20) / PAGE as u64;
    for p in 0..pages {
        f.read_exact_at(&mut buf, p * PAGE as u64)
            .map_err(io("reading the cached file"))?;
    }
    let mut rng = Rng(7);
    let v = (0..10_000)
        .map(|_| {
            let off = rng.next() % pages * PAGE as u64;
            time(|| {
                let _ = f.read_at(&mut buf, off);
            })
        })
        .collect();
    Ok(characteristic(
        "page_cache_hit",
        "page-cache hit",
        "pread 4 KiB from a cached file".into(),
        v,
        clock,
    ))
}

/// Whether most of `f` is still in the page cache (or that cannot be told).
fn still_cached(f: &File) -> bool {
    pagecache::residency(f).map_or(true, |r| r.fraction() > 0.1)
}

fn device_read(dir: &Path, clock: f64) -> Result<Characteristic, CalibrateError> {
    const LEN: usize = 32 << 20;
    let path = dir.join("miss");
    let f = make_file(&path, LEN)?;
    let fd = f.as_raw_fd();
    let _ = pagecache::evict(&f);
    let mut how = "posix_fadvise(DONTNEED)";
    if still_cached(&f) {
        how = "drop_caches";
        let _ = pagecache::drop_caches(DropCaches::PageCache);
    }
    let direct = still_cached(&f);
    let mut rng = Rng(11);
    let pages = (LEN / PAGE) as u64;
    // Distinct pages, so no sample hits a page an earlier one brought in.
    let mut offsets: Vec<u64> = (0..pages).collect();
    for k in (1..offsets.len()).rev() {
        offsets.swap(k, (rng.next() % (k as u64 + 1)) as usize);
    }
    offsets.truncate(300);
    let v: Vec<f64> = if direct {
        how = "O_DIRECT";
        // A file system without a device (tmpfs) can neither evict nor do
        // O_DIRECT: there is no device read to measure there.
        let Ok(g) = File::options()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
        else {
            return Ok(characteristic(
                "device_read",
                "device read",
                "not measurable: pages stay cached and O_DIRECT is refused (no block device under --dir?)".into(),
                Vec::new(),
                clock,
            ));
        };
        let mut raw = vec![0u8; 2 * PAGE];
        let shift = raw.as_ptr().align_offset(PAGE);
        let buf = &mut raw[shift..shift + PAGE];
        offsets
            .iter()
            .map(|&p| {
                time(|| {
                    let _ = g.read_at(buf, p * PAGE as u64);
                })
            })
            .collect()
    } else {
        // SAFETY: as above.
        unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_RANDOM) };
        let mut buf = vec![0u8; PAGE];
        offsets
            .iter()
            .map(|&p| {
                time(|| {
                    let _ = f.read_at(&mut buf, p * PAGE as u64);
                })
            })
            .collect()
    };
    Ok(characteristic(
        "device_read",
        "device read",
        format!("pread 4 KiB at random offsets, page cache emptied with {how}"),
        v,
        clock,
    ))
}

fn fsync(dir: &Path, clock: f64) -> Result<Characteristic, CalibrateError> {
    let f = File::options()
        .write(true)
        .create_new(true)
        .open(dir.join("sync"))
        .map_err(io("creating the fsync file"))?;
    let buf = vec![1u8; PAGE];
    let mut v = Vec::new();
    for k in 0..40u64 {
        f.write_all_at(&buf, k * PAGE as u64)
            .map_err(io("writing the fsync file"))?;
        let mut r = Ok(());
        v.push(time(|| r = f.sync_all()));
        r.map_err(io("fsync"))?;
    }
    Ok(characteristic(
        "fsync",
        "fsync",
        "fsync after a 4 KiB pwrite".into(),
        v,
        clock,
    ))
}

/// Half the round trip of a token passed back and forth between two
/// threads through a mutex and condition variable (a futex wake and wait
/// each way).
fn futex_handoff() -> Characteristic {
    const ROUNDS: usize = 2000;
    let pair = Arc::new((Mutex::new(0u64), Condvar::new()));
    let peer = Arc::clone(&pair);
    let t = std::thread::spawn(move || {
        let (m, cv) = &*peer;
        let mut g = m.lock().unwrap();
        for k in 0..ROUNDS as u64 {
            g = cv.wait_while(g, |v| *v != 2 * k + 1).unwrap();
            *g += 1;
            cv.notify_one();
        }
    });
    let (m, cv) = &*pair;
    let mut v = Vec::with_capacity(ROUNDS);
    let mut g = m.lock().unwrap();
    for k in 0..ROUNDS as u64 {
        let t0 = mono_ns();
        *g += 1;
        cv.notify_one();
        g = cv.wait_while(g, |x| *x != 2 * k + 2).unwrap();
        v.push((mono_ns() - t0) as f64 / 2.0);
    }
    drop(g);
    let _ = t.join();
    characteristic(
        "futex_handoff",
        "thread hand-off",
        "half a mutex+condvar round trip between two threads".into(),
        v,
        0.0,
    )
}

/// Two busy threads pinned to one CPU: the measuring thread records every
/// gap in its clock reads longer than 200 µs, i.e. the times the scheduler
/// gave the CPU to the other thread — one quantum each. (Shorter gaps are
/// interrupts and other processes' wake-ups, not the competing thread.)
fn sched_quantum() -> Characteristic {
    let method = "gaps seen by one of two busy threads pinned to one CPU".to_string();
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() }.max(0) as usize;
    let pin = move || {
        // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays in bounds
        // for cpu < CPU_SETSIZE.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = Arc::clone(&stop);
    let spinner = std::thread::spawn(move || {
        if !pin() {
            return;
        }
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    let measure = std::thread::spawn(move || {
        let mut gaps = Vec::new();
        if !pin() {
            return gaps;
        }
        let end = mono_ns() + 400_000_000;
        let mut last = mono_ns();
        while last < end && gaps.len() < 100 {
            let t = mono_ns();
            if t - last > 200_000 {
                gaps.push((t - last) as f64);
            }
            last = t;
        }
        gaps
    });
    let gaps = measure.join().unwrap_or_default();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = spinner.join();
    std::thread::sleep(Duration::from_millis(1));
    characteristic("sched_quantum", "scheduler quantum", method, gaps, 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real workloads on this machine: the order of magnitude of each
    /// characteristic is physics, not tuning.
    #[test]
    fn measures_every_characteristic_in_plausible_order() {
        // On the build's disk, not /tmp (which may be a tmpfs without a device).
        let dir = fsprof_testkit::disk_tempdir();
        let c = calibrate(&CalibrateOptions {
            dir: dir.path().to_path_buf(),
            host: "h".into(),
            kernel: "k".into(),
            created: "now".into(),
        })
        .unwrap();
        let get = |n: &str| {
            c.characteristics
                .iter()
                .find(|x| x.name == n)
                .unwrap_or_else(|| panic!("{n} missing: {c:?}"))
                .clone()
        };
        let (sys, hit, miss, sync) = (
            get("null_syscall"),
            get("page_cache_hit"),
            get("device_read"),
            get("fsync"),
        );
        get("futex_handoff");
        get("sched_quantum");
        assert!(sys.median_ns < hit.median_ns, "{c:?}");
        assert!(hit.median_ns * 4.0 < miss.median_ns, "{c:?}");
        assert!(hit.median_ns < sync.median_ns, "{c:?}");
        for x in &c.characteristics {
            assert!(x.p10_ns <= x.median_ns && x.median_ns <= x.p90_ns, "{x:?}");
        }
        // Nothing left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
