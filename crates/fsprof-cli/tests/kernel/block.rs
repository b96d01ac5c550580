//! The block layer's request counts against the kernel's own accounting:
//! a workload with fsync, fdatasync of an overwrite (an empty write
//! carrying a preflush), discards and cold reads on a loop-mounted xfs,
//! compared kind by kind with the `/sys/block/loopN/stat` deltas. (xfs, not
//! ext4: another test's `sync(2)` sends every ext4 device a flush even when
//! it is clean, which fsprof would rightly not count if it came just
//! before or after its window.)
//!
//! Known loss on the shared development VM: now and then one request
//! short (a flush, a write, a read or a discard; once two flushes). The
//! kernel did not run any of fsprof's BPF programs for that completion
//! while a tracefs instance on the same tracepoint recorded it; the
//! evidence (two more witness programs, the kernel's `run_cnt` and
//! `recursion_misses`) is in the module doc of `fsprof_kernel::blockrq`.
//! The programs are raw tracepoints already; the loss is not a guard fsprof
//! can avoid. Runs of this file's test binary (the debug build; CI runs
//! both tests at once, like the "both" rows), main c48a91a:
//! - main test alone, load 1.9–3.2: 1 failing run of 200;
//! - both tests at once, load 4–8: 11 of 200 (6 main, 5 fallback);
//! - main test alone beside two CPU-bound `getppid` loops: 4 of 46; beside
//!   two loops of `bpf()` map updates (which hold `bpf_prog_active`): 3
//!   of 56 — no more than plain CPU load, so not that guard.
//!
//!
//! Since a re-issued request with an unconsumed start entry is counted as
//! undelivered, a lost completion of a request issued again in the window
//! is reported by fsprof ("issued again before fsprof saw them complete",
//! per device and kind); the failure message carries fsprof's stderr. With
//! that (c1671b1), both tests at once, load 6.7–10.6: 17 failing runs of
//! 320 (main test 9, fallback 10); 8 of the 9 main-test failures carried
//! the warning, and where the test's device is known it named the missing
//! kind (`loop0:write 1` for a write short by one); the ninth lost three
//! reads that were not issued again, and said nothing.
//!
//! So the main test holds fsprof to its accounting rather than to the
//! kernel's delivery: every request the kernel counted must be in
//! fsprof's `pre` — completed, or entered and never seen completing
//! (issued again undelivered, or still held when recording stopped), which
//! `pre - post` and `fsprof check` show — and no more than
//! `MOST_UNDELIVERED` of them may be untimed. A pairing that lost or
//! mis-paired requests fails the first; a kernel that delivered fewer
//! completions than seen in these runs fails the second.

use std::process::{Command, Stdio};

use crate::loopfs::{DiskStat, LoopFs};
use fsprof_core::format::read_profile;
use fsprof_core::Profile;
use fsprof_testkit::{fsprof_path, need_program, need_root, succeeds};

/// Thaws the file system (frozen by the test before it read the device's
/// counters), 40 × (extend + fsync, overwrite + fdatasync), fstrim, a cold
/// read back; then freezes it again and waits until the device has no
/// request in flight. The kernel's counters are read while the file system
/// is frozen, before fsprof attaches and after it detaches, so they count
/// exactly the requests of the traced window. (Without the freeze, the xfs
/// log worker, which wakes every 30 s and writes back metadata and covers
/// the log with flushed writes, could add a request between a counter read
/// and the attach or detach: seen as 122 flushes against 121, all 121
/// traced ones paired.)
const WORKLOAD: &str = r#"
import os, sys, time
d = sys.argv[1]
def freeze(how):
    if os.system("fsfreeze " + how + " " + d): sys.exit("fsfreeze " + how + " failed")
freeze("-u")
fd = os.open(d + "/f", os.O_CREAT | os.O_WRONLY, 0o644)
for i in range(40):
    os.pwrite(fd, b"x" * 4096, i * 4096); os.fsync(fd)
    os.pwrite(fd, b"y" * 4096, 0); os.fdatasync(fd)
os.close(fd)
os.system("fstrim " + d)
fd = os.open(d + "/f", os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
while os.read(fd, 4096): pass
os.close(fd)
freeze("-f")
inflight = "/sys/block/" + sys.argv[2] + "/inflight"
for _ in range(600):
    if open(inflight).read().split() == ["0", "0"]: break
    time.sleep(0.01)
else:
    sys.exit("requests still in flight on the frozen device")
# On a mismatch, tells a request completed after fsprof stopped from one
# fsprof lost: these counters are the kernel's at the end of the window.
sys.stderr.write("/sys/block/" + sys.argv[2] + "/stat at exit: " + open("/sys/block/" + sys.argv[2] + "/stat").read())
"#;

fn profile_workload(fs: &LoopFs, extra: &[&str]) -> (Profile, DiskStat, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.json");
    fs.settle();
    let frozen = fs.freeze();
    let before = fs.stat();
    eprintln!("/sys/block/{}/stat before: {before:?}", fs.name());
    let o = Command::new(fsprof_path())
        .args(["kernel", "-f", "--layers", "block", "-o"])
        .arg(&out)
        .args(extra)
        .args(["--", "python3", "-c", WORKLOAD])
        .arg(fs.mnt())
        .arg(fs.name())
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let delta = fs.stat().since(&before);
    drop(frozen);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    let p = read_profile(&out).unwrap();
    succeeds(Command::new(fsprof_path()).arg("check").arg(&out));
    (p, delta, stderr)
}

fn counted(p: &Profile, layer: &str, op: &str) -> u64 {
    p.layer(layer).and_then(|l| l.op(op)).map_or(0, |o| o.post)
}

/// Requests of `kind` fsprof saw issued on `dev` (completed or not).
fn issued(p: &Profile, dev: &str, kind: &str) -> u64 {
    p.layer("block")
        .and_then(|l| l.op(&format!("{dev}:{kind}")))
        .map_or(0, |o| o.pre)
}

fn fsprof_counts(p: &Profile, dev: &str, layer: &str) -> DiskStat {
    per_kind(|kind| counted(p, layer, &format!("{dev}:{kind}")))
}

fn per_kind(c: impl Fn(&str) -> u64) -> DiskStat {
    DiskStat {
        reads: c("read"),
        writes: c("write"),
        discards: c("discard"),
        flushes: c("flush"),
    }
}

/// Requests the kernel counted that fsprof saw complete in no more than
/// this many cases in one run (see the module doc: at most 3 in the runs
/// recorded there). More means a pairing bug, not the kernel's loss.
const MOST_UNDELIVERED: u64 = 3;

#[test]
#[ignore = "needs root, mkfs.xfs, python3"]
fn block_counts_equal_sys_block_stat_for_reads_writes_flushes_and_discards() {
    need_root("eBPF and a loop mount");
    need_program("python3", "python3");
    let fs = LoopFs::xfs(300);
    let (p, stat, stderr) = profile_workload(&fs, &[]);
    let got = fsprof_counts(&p, &fs.name(), "block");
    eprintln!(
        "fsprof {got:?}\n/sys/block/{}/stat delta {stat:?}",
        fs.name()
    );
    assert!(
        stat.flushes >= 40 && stat.discards >= 1 && stat.reads >= 1,
        "the workload did not exercise every kind: {stat:?}"
    );
    let entered = per_kind(|kind| issued(&p, &fs.name(), kind));
    assert_eq!(
        entered, stat,
        "every request the kernel counted is in fsprof's block layer, completed or (pre - post) not seen completing; completed {got:?}; {stderr}"
    );
    let untimed = [
        (stat.reads, got.reads),
        (stat.writes, got.writes),
        (stat.discards, got.discards),
        (stat.flushes, got.flushes),
    ]
    .iter()
    .map(|&(k, f)| {
        k.checked_sub(f)
            .expect("fsprof completed more than the kernel counted")
    })
    .sum::<u64>();
    assert!(
        untimed <= MOST_UNDELIVERED,
        "{untimed} requests not seen completing: {got:?} against {stat:?}; {stderr}"
    );
    assert_eq!(
        fsprof_counts(&p, &fs.name(), "block-size"),
        got,
        "block-size files every request of block"
    );
    assert!(!stderr.contains("paired on (device, sector)"), "{stderr}");
}

#[test]
#[ignore = "needs root, mkfs.xfs, python3"]
fn fallback_pairing_counts_flushes_and_says_what_it_misses() {
    need_root("eBPF and a loop mount");
    need_program("python3", "python3");
    let fs = LoopFs::xfs(300);
    let (p, stat, stderr) = profile_workload(&fs, &["--perf-tracepoints"]);
    let got = fsprof_counts(&p, &fs.name(), "block");
    eprintln!(
        "fsprof {got:?}\n/sys/block/{}/stat delta {stat:?}",
        fs.name()
    );
    assert!(
        stderr.contains("paired on (device, sector)")
            && stderr.contains("empty write carrying a preflush is not counted"),
        "{stderr}"
    );
    assert_eq!(
        (got.reads, got.flushes, got.discards),
        (stat.reads, stat.flushes, stat.discards),
        "issued flushes {}; {stderr}",
        issued(&p, &fs.name(), "flush")
    );
    // fdatasync of an overwrite sends an empty preflush write per call:
    // counted by the kernel, not seen by the tracefs pairing; each is
    // served by a flush, so there are no more of them than flushes.
    assert!(
        got.writes < stat.writes && stat.writes - got.writes <= stat.flushes,
        "{got:?} {stat:?}"
    );
}
