//! An fsx-style exerciser (after xfstests' ltp/fsx): random writes, reads,
//! truncates, mmap reads and writes, fallocates (plain, punch hole, zero
//! range), reopens and copy_file_range on one file through the mount,
//! every result checked against an in-memory model, and the whole file
//! checked against LOWER read directly every few hundred operations.
//!
//! Fixed seed (FSPROF_FSX_SEED overrides it, FSPROF_FSX_OPS the count);
//! a mismatch panics with the seed, the operation number and the last
//! operations, so the run can be repeated exactly.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::kit::*;

const MAX_SIZE: u64 = 256 << 10;
const MAX_LEN: u64 = 64 << 10;
const PAGE: u64 = 4096;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Write(u64, u64),
    Read(u64, u64),
    Truncate(u64),
    MapRead(u64, u64),
    MapWrite(u64, u64),
    Allocate(u64, u64),
    PunchHole(u64, u64),
    ZeroRange(u64, u64),
    CopyRange(u64, u64, u64),
    Reopen,
}

struct Fsx {
    seed: u64,
    rng: Rng,
    model: Vec<u8>,
    file: File,
    via: std::path::PathBuf,
    direct: std::path::PathBuf,
    log: Vec<(usize, Op)>,
    n: usize,
    pool: Vec<u8>,
}

impl Fsx {
    fn fail(&self, what: String) -> ! {
        let tail: Vec<String> = self
            .log
            .iter()
            .rev()
            .take(20)
            .rev()
            .map(|(k, o)| format!("  #{k} {o:?}"))
            .collect();
        panic!(
            "fsx mismatch at op #{} (seed {:#x}; rerun with FSPROF_FSX_SEED={:#x}): {what}\nlast ops:\n{}",
            self.n,
            self.seed,
            self.seed,
            tail.join("\n")
        );
    }

    fn size(&self) -> u64 {
        self.model.len() as u64
    }

    fn pick(&mut self) -> Op {
        let size = self.size();
        let off = self.rng.below(MAX_SIZE);
        let len = 1 + self.rng.below(MAX_LEN);
        let in_file = |r: &mut Rng| {
            let o = r.below(size.max(1));
            (o, 1 + r.below((size - o.min(size)).clamp(1, MAX_LEN)))
        };
        match self.rng.below(100) {
            0..=24 => Op::Write(off, len.min(MAX_SIZE - off)),
            25..=49 => {
                let (o, l) = in_file(&mut self.rng);
                Op::Read(o, l)
            }
            50..=57 => Op::Truncate(self.rng.below(MAX_SIZE)),
            58..=67 if size > 0 => {
                let (o, l) = in_file(&mut self.rng);
                Op::MapRead(o, l.min(size - o))
            }
            68..=77 if size > 0 => {
                let (o, l) = in_file(&mut self.rng);
                Op::MapWrite(o, l.min(size - o))
            }
            78..=81 => Op::Allocate(off, len.min(MAX_SIZE - off)),
            82..=86 => Op::PunchHole(off, len),
            87..=91 => Op::ZeroRange(off, len.min(MAX_SIZE - off)),
            92..=96 if size > 0 => {
                let (o, l) = in_file(&mut self.rng);
                let dst = self.rng.below(MAX_SIZE - l.min(MAX_SIZE));
                Op::CopyRange(o, dst, l.min(size - o))
            }
            _ => Op::Reopen,
        }
    }

    /// Fresh-looking bytes: a random window of a pool made once (copying
    /// is cheap even in a debug build; generating 64 KiB per op is not).
    fn data(&mut self, len: u64) -> Vec<u8> {
        let at = self.rng.below(self.pool.len() as u64 - len) as usize;
        self.pool[at..at + len as usize].to_vec()
    }

    fn fallocate(&self, mode: i32, off: u64, len: u64) {
        // SAFETY: a descriptor we hold.
        let r = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, off as i64, len as i64) };
        if r != 0 {
            self.fail(format!(
                "fallocate mode {mode}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Write(off, len) => {
                let d = self.data(len);
                if let Err(e) = self.file.write_all_at(&d, off) {
                    self.fail(format!("write: {e}"));
                }
                let end = (off + len) as usize;
                if self.model.len() < end {
                    self.model.resize(end, 0);
                }
                self.model[off as usize..end].copy_from_slice(&d);
            }
            Op::Read(off, len) => {
                let mut buf = vec![0u8; len as usize];
                let n = self
                    .file
                    .read_at(&mut buf, off)
                    .unwrap_or_else(|e| self.fail(format!("read: {e}")));
                let want = &self.model[(off as usize).min(self.model.len())
                    ..((off + len) as usize).min(self.model.len())];
                // One read may return less than asked only at end of file.
                if n != want.len() || buf[..n] != *want {
                    self.fail(format!(
                        "read {n} bytes, model has {}; contents differ: {}",
                        want.len(),
                        buf[..n] != *want
                    ));
                }
            }
            Op::Truncate(size) => {
                if let Err(e) = self.file.set_len(size) {
                    self.fail(format!("truncate: {e}"));
                }
                self.model.resize(size as usize, 0);
            }
            Op::MapRead(off, len) | Op::MapWrite(off, len) => self.mapped(op, off, len),
            Op::Allocate(off, len) => {
                self.fallocate(0, off, len);
                let end = (off + len) as usize;
                if self.model.len() < end {
                    self.model.resize(end, 0);
                }
            }
            Op::PunchHole(off, len) => {
                self.fallocate(
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    off,
                    len,
                );
                let size = self.model.len();
                let (a, b) = ((off as usize).min(size), ((off + len) as usize).min(size));
                self.model[a..b].fill(0);
            }
            Op::ZeroRange(off, len) => {
                self.fallocate(libc::FALLOC_FL_ZERO_RANGE, off, len);
                let end = (off + len) as usize;
                if self.model.len() < end {
                    self.model.resize(end, 0);
                }
                self.model[off as usize..end].fill(0);
            }
            Op::CopyRange(src, dst, len) => {
                let (mut a, mut b) = (src as i64, dst as i64);
                let fd = self.file.as_raw_fd();
                let mut done = 0;
                while done < len {
                    // SAFETY: our descriptor, offsets we own.
                    let n = unsafe {
                        libc::copy_file_range(fd, &mut a, fd, &mut b, (len - done) as usize, 0)
                    };
                    if n < 0 {
                        let e = std::io::Error::last_os_error();
                        // Overlapping ranges in one file are refused: the model
                        // stays as it was.
                        if e.raw_os_error() == Some(libc::EINVAL) && done == 0 {
                            return;
                        }
                        self.fail(format!("copy_file_range: {e}"));
                    }
                    if n == 0 {
                        break;
                    }
                    done += n as u64;
                }
                let chunk = self.model[src as usize..(src + done) as usize].to_vec();
                let end = (dst + done) as usize;
                if self.model.len() < end {
                    self.model.resize(end, 0);
                }
                self.model[dst as usize..end].copy_from_slice(&chunk);
            }
            Op::Reopen => {
                self.file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&self.via)
                    .unwrap();
            }
        }
    }

    fn mapped(&mut self, op: Op, off: u64, len: u64) {
        let start = off / PAGE * PAGE;
        let span = (off + len - start) as usize;
        let data = match op {
            Op::MapWrite(..) => Some(self.data(len)),
            _ => None,
        };
        // SAFETY: a shared mapping inside the file's current size (the model
        // says so), used and unmapped here.
        unsafe {
            let p = map_shared(self.file.as_raw_fd(), span, start as i64)
                .unwrap_or_else(|e| self.fail(format!("mmap: {e}")));
            let at = (p as *mut u8).add((off - start) as usize);
            match &data {
                Some(d) => {
                    std::ptr::copy_nonoverlapping(d.as_ptr(), at, len as usize);
                    libc::msync(p, span, libc::MS_SYNC);
                }
                None => {
                    let got = std::slice::from_raw_parts(at, len as usize).to_vec();
                    libc::munmap(p, span);
                    if got[..] != self.model[off as usize..(off + len) as usize] {
                        self.fail("mapped read differs from the model".into());
                    }
                    return;
                }
            }
            libc::munmap(p, span);
        }
        if let Some(d) = data {
            self.model[off as usize..(off + len) as usize].copy_from_slice(&d);
        }
    }

    fn check_lower(&self) {
        let got = fs::read(&self.direct).unwrap();
        if got != self.model {
            let first = got.iter().zip(&self.model).position(|(a, b)| a != b);
            self.fail(format!(
                "LOWER holds {} bytes, the model {}; first difference at {first:?}",
                got.len(),
                self.model.len()
            ));
        }
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| {
            let v = v.trim();
            match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => v.parse().ok(),
            }
        })
        .unwrap_or(default)
}

fn run(lower: &Path, mp: &Path, extra: &[&str], ops: usize, seed: u64) -> fsprof_core::Profile {
    let out = lower
        .parent()
        .unwrap()
        .join(format!("fsx{}.json", extra.len()));
    let m = Mount::start(lower, mp, &out, extra);
    let via = m.path("fsx.dat");
    File::create(&via).unwrap();
    let mut x = Fsx {
        seed,
        rng: Rng(seed | 1),
        model: Vec::new(),
        file: OpenOptions::new()
            .read(true)
            .write(true)
            .open(&via)
            .unwrap(),
        via,
        direct: lower.join("fsx.dat"),
        log: Vec::new(),
        n: 0,
        pool: pattern(4 << 20, seed),
    };
    let mut time: std::collections::BTreeMap<String, (u64, std::time::Duration)> =
        Default::default();
    for k in 0..ops {
        x.n = k;
        let op = x.pick();
        x.log.push((k, op));
        if x.log.len() > 64 {
            x.log.drain(..32);
        }
        let t = std::time::Instant::now();
        x.apply(op);
        let kind = format!("{op:?}");
        let e = time
            .entry(kind.split('(').next().unwrap().to_string())
            .or_default();
        e.0 += 1;
        e.1 += t.elapsed();
        if k % 500 == 499 {
            x.check_lower();
        }
    }
    x.check_lower();
    // The whole file through the mount, once more, after a fresh open.
    drop(x.file);
    assert!(
        fs::read(m.path("fsx.dat")).unwrap() == x.model,
        "seed {seed:#x}: final read"
    );
    eprintln!(
        "fsx: {ops} ops, seed {seed:#x}, final size {}: no mismatch",
        x.model.len()
    );
    for (k, (n, t)) in &time {
        eprintln!(
            "fsx:   {k:<10} {n:>7} ops {:>10.1?} each",
            *t / (*n as u32).max(1)
        );
    }
    let p = m.umount();
    check_ok(&out);
    p
}

/// A run of `FSPROF_FSX_OPS / share` operations (default 100,000) with
/// `FSPROF_FSX_SEED ^ seed_mix`, through a mount with `extra` options.
fn fsx_in(extra: &[&str], share: usize, seed_mix: u64) -> fsprof_core::Profile {
    let ops = env_u64("FSPROF_FSX_OPS", 100_000) as usize / share;
    let seed = env_u64("FSPROF_FSX_SEED", 0x5eed_f5c0_ffee) ^ seed_mix;
    let d = dirs();
    run(&d.lower, &d.mp, extra, ops, seed)
}

#[test]
#[ignore = "needs root"]
fn fsx_through_the_mount_matches_the_model_and_lower() {
    let p = fsx_in(&["--threads", "2"], 1, 0);
    // The profile saw the exerciser's requests.
    for name in ["write", "read", "setattr", "fallocate"] {
        assert!(calls(&p, name) > 0, "{name}");
    }
    assert_eq!(op(&p, "write").unwrap().errors, 0);
}

#[test]
#[ignore = "needs root"]
fn fsx_in_fast_mode_matches_too() {
    let p = fsx_in(&["--fast"], 5, 0xfa57);
    assert_eq!(p.meta.settings["mode"], "fast");
    assert_eq!(calls(&p, "open"), 0, "the kernel opens files alone");
}

#[test]
#[ignore = "needs root"]
fn fsx_in_fast_passthrough_mode_matches_too() {
    let p = fsx_in(&["--fast", "--passthrough"], 10, 0xfa58);
    assert_eq!(p.meta.settings["data ops"], "kernel passthrough");
}
