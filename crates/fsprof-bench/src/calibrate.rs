//! `fsprof calibrate`'s workloads: this machine's characteristic latencies
//! (OSprof's prior-knowledge-based analysis), measured so that reports can
//! say what a peak probably is. The file format and the labelling rules
//! are fsprof-analysis's ([`fsprof_analysis::labels`],
//! [`fsprof_analysis::peak_labels`]); this module only measures.
//!
//! Every characteristic is measured in several **rounds**, interleaved
//! (each round measures all of them once, so a change of load during the
//! calibration shows as rounds that disagree); the file keeps each round's
//! median, and a characteristic whose rounds disagree by more than a power
//! of two labels nothing. Each workload runs in [`TimingLoop`] (one clock
//! read per call), minus the loop's own measured cost:
//!
//! | name             | sizes           | workload |
//! |------------------|-----------------|----------|
//! | `null_syscall`   | —               | `syscall(SYS_getppid)` |
//! | `page_cache_hit` | 4, 32, 128 KiB  | `pread` at random offsets of an 8 MiB file just read |
//! | `device_read`    | 4, 32, 128 KiB  | `pread` of distinct 128 KiB-aligned chunks of a 64 MiB file evicted at the start of each round ([`fsprof_measure::cache`]: `posix_fadvise(DONTNEED)`, verified; `O_DIRECT` if the pages stay), readahead off |
//! | `buffered_write` | 4, 128 KiB      | `pwrite` over a cached 8 MiB file |
//! | `fsync`          | —               | `fsync` after a 4 KiB `pwrite` |
//! | `futex_handoff`  | —               | half a mutex+condvar round trip between two threads |
//! | `sched_quantum`  | —               | two busy threads pinned to one CPU: how long one is kept off it |
//!
//! The files live in a temporary directory under the directory given (so
//! the device measured is the one under it) and are removed afterwards. On
//! a memory file system the device read and fsync are left out.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use fsprof_analysis::labels::{Calibration, Characteristic, Conditions};
use fsprof_core::stats::quantile;
use fsprof_sys::clock::mono_ns;

use crate::machine::DirInfo;
use fsprof_measure::cache::{self, CacheMode};
use fsprof_measure::timing::{Clock, Overhead, TimingLoop};
use fsprof_sys::host::load_average;

/// Request sizes of the read characteristics.
pub const READ_SIZES: [u64; 3] = [4 << 10, 32 << 10, 128 << 10];
/// Request sizes of the buffered-write characteristic.
pub const WRITE_SIZES: [u64; 2] = [4 << 10, 128 << 10];

#[derive(Clone, Debug)]
pub struct CalibrateOptions {
    /// Directory on the device to measure (files are created under it).
    pub dir: PathBuf,
    pub host: String,
    pub kernel: String,
    /// RFC 3339 time stamp for the file.
    pub created: String,
    /// Rounds per characteristic (at least 2 for anything to label).
    pub rounds: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    #[error("cannot create a scratch directory under {dir}: {source} (pass --dir with a writable directory)")]
    Scratch { dir: PathBuf, source: io::Error },
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: io::Error,
    },
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> CalibrateError {
    move |source| CalibrateError::Io { what, source }
}

/// One characteristic (at one size) being measured: every round's samples.
struct Series {
    name: &'static str,
    label: &'static str,
    size: Option<u64>,
    method: String,
    rounds: Vec<Vec<f64>>,
}

/// Samples by (name, size), in the order first measured.
#[derive(Default)]
struct Collected {
    series: Vec<Series>,
    index: BTreeMap<(&'static str, u64), usize>,
}

impl Collected {
    fn add(
        &mut self,
        (name, label): (&'static str, &'static str),
        size: Option<u64>,
        method: impl Into<String>,
        samples: Vec<f64>,
    ) {
        let key = (name, size.unwrap_or(0));
        let i = *self.index.entry(key).or_insert_with(|| {
            self.series.push(Series {
                name,
                label,
                size,
                method: method.into(),
                rounds: Vec::new(),
            });
            self.series.len() - 1
        });
        self.series[i].rounds.push(samples);
    }
}

const NULL_SYSCALL: (&str, &str) = ("null_syscall", "null syscall");
const HIT: (&str, &str) = ("page_cache_hit", "page-cache hit");
const MISS: (&str, &str) = ("device_read", "device read");
const WRITE: (&str, &str) = ("buffered_write", "buffered write");
const FSYNC: (&str, &str) = ("fsync", "fsync");
const HANDOFF: (&str, &str) = ("futex_handoff", "thread hand-off");
const QUANTUM: (&str, &str) = ("sched_quantum", "scheduler quantum");

/// The files every round uses.
struct Files {
    hit: File,
    miss: File,
    miss_path: PathBuf,
    write: File,
    sync: File,
}

/// What each timed workload of a round uses: the files, the clock and its
/// own cost per reading (subtracted), and the round's number (it seeds the
/// offsets, so that rounds read different places).
struct Round<'a> {
    f: &'a Files,
    clock: Clock,
    cost: f64,
    n: u32,
}

impl Round<'_> {
    /// [`timed`] with this round's clock.
    fn timed(&self, n: usize, op: impl FnMut(usize) -> io::Result<()>) -> io::Result<Vec<f64>> {
        timed(self.clock, self.cost, n, op)
    }
}

/// Runs every workload `opts.rounds` times. A few seconds on an idle
/// machine.
pub fn calibrate(opts: &CalibrateOptions) -> Result<Calibration, CalibrateError> {
    let scratch = tempfile::Builder::new()
        .prefix(".fsprof-calibrate-")
        .tempdir_in(&opts.dir)
        .map_err(|source| CalibrateError::Scratch {
            dir: opts.dir.clone(),
            source,
        })?;
    let info = DirInfo::of(scratch.path()).ok();
    let memory_fs = info.as_ref().is_some_and(DirInfo::is_memory_fs);
    let load_before = load_average();
    let clock = Clock::best();
    let cost = Overhead::measure(clock).per_op_ns;
    let files = Files::create(scratch.path())?;
    let mut got = Collected::default();
    let mut eviction = String::new();
    for n in 0..opts.rounds.max(1) {
        let r = Round {
            f: &files,
            clock,
            cost,
            n,
        };
        null_syscall(&r, &mut got)?;
        page_cache_hits(&r, &mut got)?;
        buffered_writes(&r, &mut got)?;
        if !memory_fs {
            eviction = device_reads(&r, &mut got)?;
            fsyncs(&r, &mut got)?;
        }
        futex_handoff(&mut got);
        sched_quantum(&mut got);
    }
    let mut skipped = Vec::new();
    if memory_fs {
        let fs = info.as_ref().map_or("a memory file system", |i| &i.fs_type);
        for n in ["device_read", "fsync"] {
            skipped.push(format!(
                "{n}: --dir is on {fs}, which has no device: pass a directory on a disk"
            ));
        }
    }
    let mut characteristics = Vec::new();
    for s in got.series {
        match characteristic(&s) {
            Some(c) => characteristics.push(c),
            None => skipped.push(format!("{}: no samples ({})", s.name, s.method)),
        }
    }
    Ok(Calibration {
        host: opts.host.clone(),
        kernel: opts.kernel.clone(),
        created: opts.created.clone(),
        dir: opts.dir.display().to_string(),
        skipped,
        conditions: Conditions {
            rounds: opts.rounds.max(1),
            load_before,
            load_after: load_average(),
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
            fs_type: info.map(|i| i.fs_type).unwrap_or_default(),
            eviction,
        },
        ..Calibration::new(characteristics)
    })
}

fn characteristic(s: &Series) -> Option<Characteristic> {
    let mut all: Vec<f64> = s.rounds.iter().flatten().copied().collect();
    if all.is_empty() {
        return None;
    }
    all.sort_by(f64::total_cmp);
    let rounds = s
        .rounds
        .iter()
        .filter(|r| !r.is_empty())
        .map(|r| {
            let mut r = r.clone();
            r.sort_by(f64::total_cmp);
            quantile(&r, 0.5).unwrap_or(0.0)
        })
        .collect();
    Some(Characteristic {
        name: s.name.into(),
        label: s.label.into(),
        size_bytes: s.size,
        median_ns: quantile(&all, 0.5)?,
        p10_ns: quantile(&all, 0.1)?,
        p90_ns: quantile(&all, 0.9)?,
        samples: all.len() as u64,
        method: s.method.clone(),
        rounds,
    })
}

/// Latencies of `n` timed calls of `op`, less the loop's own cost.
fn timed(
    clock: Clock,
    cost: f64,
    n: usize,
    op: impl FnMut(usize) -> io::Result<()>,
) -> io::Result<Vec<f64>> {
    let s = TimingLoop::new(clock).run(n, op)?;
    Ok(s.ns.iter().map(|&ns| (ns as f64 - cost).max(1.0)).collect())
}

/// xorshift: reproducible offsets.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const PAGE: u64 = 4096;
const CACHED_LEN: u64 = 8 << 20;
const MISS_LEN: u64 = 64 << 20;
/// Distinct chunks each size reads per round in `device_read`.
const MISS_READS: usize = 80;
const CHUNK: u64 = 128 << 10;

impl Files {
    fn create(dir: &Path) -> Result<Files, CalibrateError> {
        let hit = make_file(&dir.join("hit"), CACHED_LEN)?;
        let miss_path = dir.join("miss");
        let miss = make_file(&miss_path, MISS_LEN)?;
        let write = make_file(&dir.join("write"), CACHED_LEN)?;
        let sync = File::options()
            .write(true)
            .create_new(true)
            .open(dir.join("sync"))
            .map_err(io_err("creating the fsync file"))?;
        // SAFETY: a valid fd; advice only.
        unsafe { libc::posix_fadvise(miss.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        Ok(Files {
            hit,
            miss,
            miss_path,
            write,
            sync,
        })
    }
}

fn make_file(path: &Path, bytes: u64) -> Result<File, CalibrateError> {
    let mut f = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_err("creating a calibration file"))?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let chunk: Vec<u8> = (0..1 << 20).map(|_| rng.next() as u8).collect();
    for _ in 0..bytes / chunk.len() as u64 {
        f.write_all(&chunk)
            .map_err(io_err("writing a calibration file"))?;
    }
    f.sync_all().map_err(io_err("syncing a calibration file"))?;
    Ok(f)
}

fn null_syscall(r: &Round, got: &mut Collected) -> Result<(), CalibrateError> {
    let v = r
        .timed(20_000, |_| {
            // SAFETY: getppid has no arguments and cannot fail.
            unsafe { libc::syscall(libc::SYS_getppid) };
            Ok(())
        })
        .map_err(io_err("getppid"))?;
    got.add(NULL_SYSCALL, None, "syscall(SYS_getppid)", v);
    Ok(())
}

/// Random `size`-aligned offsets inside `len` bytes.
fn offsets(seed: u64, n: usize, size: u64, len: u64) -> Vec<u64> {
    let mut rng = Rng(seed | 1);
    let slots = (len / size).max(1);
    (0..n).map(|_| rng.next() % slots * size).collect()
}

fn page_cache_hits(r: &Round, got: &mut Collected) -> Result<(), CalibrateError> {
    let mut buf = vec![0u8; CHUNK as usize];
    for p in 0..CACHED_LEN / CHUNK {
        r.f.hit
            .read_exact_at(&mut buf, p * CHUNK)
            .map_err(io_err("reading the cached file"))?;
    }
    for size in READ_SIZES {
        let n = (12 << 20) / size as usize;
        let offs = offsets(7 + r.n as u64 + size, n, size, CACHED_LEN);
        let b = &mut buf[..size as usize];
        let v = r
            .timed(n, |i| r.f.hit.read_at(b, offs[i]).map(|_| ()))
            .map_err(io_err("reading the cached file"))?;
        got.add(HIT, Some(size), "pread from a file just read", v);
    }
    Ok(())
}

fn buffered_writes(r: &Round, got: &mut Collected) -> Result<(), CalibrateError> {
    let buf = vec![7u8; CHUNK as usize];
    for size in WRITE_SIZES {
        let n = (8 << 20) / size as usize;
        let offs = offsets(13 + r.n as u64 + size, n, size, CACHED_LEN);
        let b = &buf[..size as usize];
        let v = r
            .timed(n, |i| r.f.write.write_at(b, offs[i]).map(|_| ()))
            .map_err(io_err("writing the cached file"))?;
        got.add(WRITE, Some(size), "pwrite over a cached file", v);
    }
    Ok(())
}

/// Device reads of every size from chunks not read before in this round;
/// returns how the cache was emptied.
fn device_reads(r: &Round, got: &mut Collected) -> Result<String, CalibrateError> {
    let eviction = cache::make_cold(&[&r.f.miss], false).ok();
    let cold = cache::check(&[&r.f.miss], CacheMode::Cold, eviction).passed;
    let direct;
    let (file, how) = if cold {
        (&r.f.miss, "posix_fadvise(DONTNEED)")
    } else {
        // Pages that stay cached (a file system that ignores the advice):
        // read around the cache instead.
        direct = File::options()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&r.f.miss_path)
            .map_err(io_err(
                "the page cache cannot be emptied and O_DIRECT is refused",
            ))?;
        (&direct, "O_DIRECT")
    };
    let chunks = MISS_LEN / CHUNK;
    let mut order: Vec<u64> = (0..chunks).collect();
    let mut rng = Rng(0x51 + r.n as u64);
    for k in (1..order.len()).rev() {
        order.swap(k, (rng.next() % (k as u64 + 1)) as usize);
    }
    // O_DIRECT needs an aligned buffer.
    let mut raw = vec![0u8; (CHUNK + PAGE) as usize];
    let shift = raw.as_ptr().align_offset(PAGE as usize);
    let buf = &mut raw[shift..shift + CHUNK as usize];
    for (k, size) in READ_SIZES.into_iter().enumerate() {
        let mine = &order[k * MISS_READS..(k + 1) * MISS_READS];
        let b = &mut buf[..size as usize];
        let v = r
            .timed(MISS_READS, |i| file.read_at(b, mine[i] * CHUNK).map(|_| ()))
            .map_err(io_err("reading the evicted file"))?;
        let method = format!("pread of chunks evicted with {how}, readahead off");
        got.add(MISS, Some(size), method, v);
    }
    Ok(how.to_string())
}

fn fsyncs(r: &Round, got: &mut Collected) -> Result<(), CalibrateError> {
    let buf = vec![1u8; PAGE as usize];
    let base = r.n as u64 * 64 * PAGE;
    let mut v = Vec::new();
    for k in 0..24u64 {
        r.f.sync
            .write_all_at(&buf, base + k * PAGE)
            .map_err(io_err("writing the fsync file"))?;
        v.extend(
            r.timed(1, |_| r.f.sync.sync_all())
                .map_err(io_err("fsync"))?,
        );
    }
    got.add(FSYNC, None, "fsync after a 4 KiB pwrite", v);
    Ok(())
}

/// Half the round trip of a token passed back and forth between two
/// threads through a mutex and condition variable (a futex wake and wait
/// each way).
///
/// The lock guards a plain counter, valid whatever a thread that held it
/// did: a poisoned lock (the other thread panicked) is taken as it is
/// rather than turned into a panic of fsprof's own.
fn futex_handoff(got: &mut Collected) {
    const ROUNDS: usize = 1000;
    let pair = Arc::new((Mutex::new(0u64), Condvar::new()));
    let peer = Arc::clone(&pair);
    let t = std::thread::spawn(move || {
        let (m, cv) = &*peer;
        let mut g = m.lock().unwrap_or_else(PoisonError::into_inner);
        for k in 0..ROUNDS as u64 {
            g = cv
                .wait_while(g, |v| *v != 2 * k + 1)
                .unwrap_or_else(PoisonError::into_inner);
            *g += 1;
            cv.notify_one();
        }
    });
    let (m, cv) = &*pair;
    let mut v = Vec::with_capacity(ROUNDS);
    let mut g = m.lock().unwrap_or_else(PoisonError::into_inner);
    for k in 0..ROUNDS as u64 {
        let t0 = mono_ns();
        *g += 1;
        cv.notify_one();
        g = cv
            .wait_while(g, |x| *x != 2 * k + 2)
            .unwrap_or_else(PoisonError::into_inner);
        v.push((mono_ns() - t0) as f64 / 2.0);
    }
    drop(g);
    let _ = t.join();
    let method = "half a mutex+condvar round trip between two threads";
    got.add(HANDOFF, None, method, v);
}

/// Two busy threads pinned to one CPU: the measuring thread records every
/// gap in its clock reads longer than 200 µs, i.e. the times the scheduler
/// gave the CPU to the other thread — one quantum each. (Shorter gaps are
/// interrupts and other processes' wake-ups, not the competing thread.)
///
/// Both threads run under the ordinary policy whatever calibrate was
/// started with: the quantum is what ordinary programs get, and under
/// `chrt -f` the spinner, never preempted by a thread of its own
/// priority, kept the measuring thread off the CPU for ever (calibrate
/// hung). The spinner also stops by itself after a second.
fn sched_quantum(got: &mut Collected) {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() }.max(0) as usize;
    let pin = move || {
        let ordinary = sched_param(0);
        // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays in
        // bounds for cpu < CPU_SETSIZE; pid 0 is the calling thread, and
        // `ordinary` outlives the call.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut set);
            libc::sched_setscheduler(0, libc::SCHED_OTHER, &ordinary) == 0
                && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = Arc::clone(&stop);
    let spinner = std::thread::spawn(move || {
        if !pin() {
            return;
        }
        let end = mono_ns() + 1_000_000_000;
        while !s2.load(Ordering::Relaxed) && mono_ns() < end {
            std::hint::spin_loop();
        }
    });
    let measure = std::thread::spawn(move || {
        let mut gaps = Vec::new();
        if !pin() {
            return gaps;
        }
        let end = mono_ns() + 150_000_000;
        let mut last = mono_ns();
        while last < end && gaps.len() < 40 {
            let t = mono_ns();
            if t - last > 200_000 {
                gaps.push((t - last) as f64);
            }
            last = t;
        }
        gaps
    });
    let gaps = measure.join().unwrap_or_default();
    stop.store(true, Ordering::Relaxed);
    let _ = spinner.join();
    let method = "gaps seen by one of two busy threads pinned to one CPU";
    got.add(QUANTUM, None, method, gaps);
}

/// Field by field would not build for musl, whose `sched_param` has four
/// more fields.
fn sched_param(priority: i32) -> libc::sched_param {
    // SAFETY: sched_param is plain integers, for which zero is valid.
    let mut p: libc::sched_param = unsafe { std::mem::zeroed() };
    p.sched_priority = priority;
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Started from a SCHED_FIFO thread (`chrt -f`), the quantum is
    /// measured on ordinary threads and comes back: it used to hang.
    #[test]
    #[ignore = "needs root (SCHED_FIFO)"]
    fn the_quantum_is_measured_under_a_real_time_caller() {
        fsprof_testkit::need_root("a SCHED_FIFO thread");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let fifo = sched_param(1);
            // SAFETY: pid 0 is this thread; `fifo` outlives the call.
            let rt = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } == 0;
            let mut got = Collected::default();
            sched_quantum(&mut got);
            let _ = tx.send((
                rt,
                got.series
                    .iter()
                    .flat_map(|s| &s.rounds)
                    .map(Vec::len)
                    .sum::<usize>(),
            ));
        });
        let (rt, samples) = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("sched_quantum returned");
        assert!(rt, "the caller became SCHED_FIFO");
        assert!(samples > 0, "no quantum measured");
    }

    /// The real workloads on this machine: the order of magnitude of each
    /// characteristic is physics, not tuning.
    #[test]
    fn measures_every_characteristic_in_rounds_and_in_plausible_order() {
        // On the build's disk, not /tmp (which may be a tmpfs without a device).
        let dir = fsprof_testkit::disk_tempdir();
        let c = calibrate(&CalibrateOptions {
            dir: dir.path().to_path_buf(),
            host: "h".into(),
            kernel: "k".into(),
            created: "now".into(),
            rounds: 2,
        })
        .unwrap();
        let get = |n: &str, size: Option<u64>| {
            c.characteristics
                .iter()
                .find(|x| x.name == n && x.size_bytes == size)
                .unwrap_or_else(|| panic!("{n} {size:?} missing: {c:?}"))
                .clone()
        };
        let sys = get("null_syscall", None);
        let hit4 = get("page_cache_hit", Some(4096));
        let hit128 = get("page_cache_hit", Some(128 << 10));
        let miss4 = get("device_read", Some(4096));
        let miss128 = get("device_read", Some(128 << 10));
        let sync = get("fsync", None);
        get("buffered_write", Some(4096));
        get("futex_handoff", None);
        get("sched_quantum", None);
        assert!(sys.median_ns < hit4.median_ns, "{c:?}");
        assert!(
            hit4.median_ns < hit128.median_ns,
            "copying 32x the bytes: {c:?}"
        );
        assert!(hit4.median_ns * 4.0 < miss4.median_ns, "{c:?}");
        assert!(miss4.median_ns < miss128.median_ns, "{c:?}");
        assert!(hit4.median_ns < sync.median_ns, "{c:?}");
        for x in &c.characteristics {
            assert!(x.p10_ns <= x.median_ns && x.median_ns <= x.p90_ns, "{x:?}");
            assert_eq!(x.rounds.len(), 2, "{x:?}");
        }
        assert_eq!(c.conditions.rounds, 2);
        // Nothing left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
