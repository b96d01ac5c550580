//! 8 threads × mixed operations through one mount: no deadlock (a
//! watchdog fails the test), data read back is what was written, live
//! snapshots and the final profile pass `fsprof check`, and successful
//! creates are counted exactly.
//!
//! Runs FSPROF_CONC_SECS seconds (5 by default, to fit CI; bench/ runs the
//! 30 s version).

use std::fs::{self, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::kit::*;

const THREADS: usize = 8;

struct Tally {
    creates: AtomicU64,
    ops: AtomicU64,
}

fn worker(root: PathBuf, t: usize, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let mine = root.join(format!("t{t}"));
    fs::create_dir(&mine).unwrap();
    let shared = root.join("shared");
    let mut k: u64 = 0;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ t as u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    while !stop.load(Relaxed) {
        k += 1;
        let f = mine.join(format!("f{}", k % 16));
        let data = pattern(1 + (rnd() % 20_000) as usize, k ^ t as u64);
        match OpenOptions::new().write(true).create_new(true).open(&f) {
            Ok(mut h) => {
                tally.creates.fetch_add(1, Relaxed);
                std::io::Write::write_all(&mut h, &data).unwrap();
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => fs::write(&f, &data).unwrap(),
            Err(e) => panic!("thread {t}: create {}: {e}", f.display()),
        }
        assert!(
            fs::read(&f).unwrap() == data,
            "thread {t}: read back {}",
            f.display()
        );
        match rnd() % 8 {
            0 => {
                let g = mine.join(format!("g{}", k % 4));
                fs::rename(&f, &g).unwrap();
                fs::hard_link(&g, mine.join("h")).ok();
                fs::remove_file(mine.join("h")).ok();
            }
            1 => {
                let d = mine.join(format!("d{}", k % 3));
                if fs::create_dir(&d).is_ok() {
                    fs::remove_dir(&d).unwrap();
                }
            }
            2 => {
                fs::set_permissions(&f, fs::Permissions::from_mode(0o600 | (k as u32 & 0o44)))
                    .unwrap();
                fs::metadata(&f).unwrap();
            }
            3 => {
                let n = fs::read_dir(&mine).unwrap().count();
                assert!(n <= 16 + 4 + 3 + 1, "thread {t}: {n} entries");
                fs::read_dir(&shared).unwrap().for_each(drop);
            }
            4 => {
                let s = shared.join(format!("s{}", rnd() % 8));
                if OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&s)
                    .is_ok()
                {
                    tally.creates.fetch_add(1, Relaxed);
                }
            }
            5 => {
                let s = shared.join(format!("s{}", rnd() % 8));
                let _ = fs::remove_file(&s);
            }
            6 => {
                fs::remove_file(&f).unwrap();
            }
            _ => {
                let _ = fs::symlink_metadata(shared.join(format!("s{}", rnd() % 8)));
            }
        }
        tally.ops.fetch_add(1, Relaxed);
    }
}

fn live_check(mp: &Path, dir: &Path, n: usize) {
    let p = stat_json(mp);
    let f = dir.join(format!("live{n}.json"));
    fs::write(&f, fsprof_core::format::to_json(&p)).unwrap();
    check_ok(&f);
}

#[test]
#[ignore = "needs root"]
fn eight_threads_of_mixed_ops_neither_deadlock_nor_miscount() {
    mixed_ops(&["--threads", "4", "--interval", "500ms"]);
}

/// `--fast` serves data requests without handles from descriptors the
/// inodes share (see fsprof-fuse's `inodes`), and the control file from
/// renderings per process: the same, with its caches on.
#[test]
#[ignore = "needs root"]
fn the_same_in_fast_mode() {
    mixed_ops(&["--fast", "--threads", "4", "--interval", "500ms"]);
}

fn mixed_ops(extra: &[&str]) {
    let secs: u64 = std::env::var("FSPROF_CONC_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let d = dirs();
    fs::create_dir_all(d.lower.join("shared")).unwrap();
    let m = d.mount(extra);
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally {
        creates: AtomicU64::new(0),
        ops: AtomicU64::new(0),
    });
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (root, stop, tally) = (d.mp.clone(), stop.clone(), tally.clone());
            std::thread::spawn(move || worker(root, t, stop, tally))
        })
        .collect();
    let t0 = Instant::now();
    let mut n = 0;
    while t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(700));
        live_check(&d.mp, d.path(), n);
        n += 1;
    }
    stop.store(true, Relaxed);
    // Watchdog: a deadlocked mount leaves workers stuck in the kernel.
    let deadline = Instant::now() + Duration::from_secs(60);
    while workers.iter().any(|w| !w.is_finished()) {
        assert!(
            Instant::now() < deadline,
            "workers stuck for 60 s after the stop: deadlock"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for w in workers {
        w.join().expect("a worker failed");
    }
    let p = m.umount();
    check_ok(&d.out);
    let create = op(&p, "create").unwrap();
    assert_eq!(
        create.post - create.errors,
        tally.creates.load(Relaxed),
        "successful creates: {create:?}"
    );
    assert!(!p.intervals.is_empty());
    eprintln!(
        "concurrency: {} ops by {THREADS} threads in {secs} s, {} requests",
        tally.ops.load(Relaxed),
        p.total_calls()
    );
}
