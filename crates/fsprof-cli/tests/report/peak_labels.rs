//! Peak labels against workloads whose cause is known: cold 4 KiB and
//! 128 KiB reads (evicted with posix_fadvise(DONTNEED), readahead off),
//! warm reads, buffered writes, fsyncs, opens and closes — each profiled on
//! its own, each peak labelled with two separate calibrations of the
//! machine. A peak may get the label of its cause or none, never another;
//! every workload with a calibrated cause must have it named; and on a
//! loop-mounted ext4, nine in ten of the reads the block layer counts carry
//! the device-read label.

use std::path::Path;
use std::process::Command;

use crate::loopfs::LoopFs;
use fsprof_testkit::{disk_tempdir, fsprof, fsprof_path, need_program, stdout, succeeds};

/// Files the workloads use, written (and synced) before anything is
/// profiled.
const SETUP: &str = r#"
import os, sys
d = sys.argv[1]
for name, length in [("cold4k", 16 << 20), ("cold128k", 32 << 20), ("warm", 4 << 20)]:
    with open(os.path.join(d, name), "wb") as f:
        f.write(os.urandom(length)); f.flush(); os.fsync(f.fileno())
"#;

/// One workload per run; distinct 128 KiB chunks so no cold read finds a
/// page an earlier one brought in.
const WORK: &str = r#"
import os, sys, random
kind, d = sys.argv[1], sys.argv[2]
rng = random.Random(1)
def cold(name, size, n):
    fd = os.open(os.path.join(d, name), os.O_RDONLY)
    length = os.fstat(fd).st_size
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    for c in rng.sample(range(length // 131072), n):
        os.pread(fd, size, c * 131072)
if kind == "cold4k": cold("cold4k", 4096, 120)
elif kind == "cold128k": cold("cold128k", 131072, 120)
elif kind == "warm":
    fd = os.open(os.path.join(d, "warm"), os.O_RDONLY)
    # Cached first, with reads (not preads, whose peaks are checked): idle
    # page cache is reclaimed within a minute on some machines (DAMON).
    while os.read(fd, 1 << 20): pass
    pages = (4 << 20) // 4096
    for p in range(pages): os.pread(fd, 4096, p * 4096)
    for _ in range(3000): os.pread(fd, 4096, rng.randrange(pages) * 4096)
elif kind == "writes":
    fd = os.open(os.path.join(d, "warm"), os.O_WRONLY)
    for _ in range(3000): os.pwrite(fd, b"w" * 4096, rng.randrange(1024) * 4096)
elif kind == "fsync":
    fd = os.open(os.path.join(d, "sync"), os.O_CREAT | os.O_WRONLY, 0o644)
    for i in range(40): os.pwrite(fd, b"s" * 4096, i * 4096); os.fsync(fd)
elif kind == "opens":
    p = os.path.join(d, "warm")
    for _ in range(3000): os.close(os.open(p, os.O_RDONLY))
"#;

/// (workload, ops whose peaks are checked, labels allowed on them).
const CASES: [(&str, &[&str], &[&str]); 6] = [
    ("cold4k", &["pread"], &["≈ device read (4 KiB)"]),
    ("cold128k", &["pread"], &["≈ device read (128 KiB)"]),
    ("warm", &["pread"], &["≈ page-cache hit (4 KiB)"]),
    ("writes", &["pwrite"], &["≈ buffered write (4 KiB)"]),
    ("fsync", &["fsync"], &["≈ fsync"]),
    ("opens", &["open", "close"], &[]),
];

fn run(cmd: &mut Command) -> String {
    stdout(&succeeds(cmd))
}

/// A peak of a report: op, number, mode bucket, calls, label, and the
/// label's note (its distance, or why there is none).
type Row = (String, u64, i64, u64, Option<String>, Option<String>);

/// Every peak of `ops` in `profile`, labelled with `cal`.
fn labels(profile: &Path, cal: &Path, ops: &[&str]) -> Vec<Row> {
    let out = run(fsprof()
        .args([
            "report",
            "--peaks",
            "--format",
            "json",
            "--layer",
            "user",
            "--calibration",
        ])
        .arg(cal)
        .arg(profile));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["peaks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| ops.contains(&r["op"].as_str().unwrap()))
        .map(|r| {
            (
                r["op"].as_str().unwrap().to_string(),
                r["number"].as_u64().unwrap(),
                r["peak"]["mode"].as_i64().unwrap(),
                r["peak"]["count"].as_u64().unwrap(),
                r["label"].as_str().map(String::from),
                r["label_note"].as_str().map(String::from),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs python3"]
fn known_causes_get_their_label_or_none_on_two_calibrations() {
    need_program("python3", "python3");
    // On the build's disk: /tmp may be a tmpfs, which has no device reads.
    let dir = disk_tempdir();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    run(Command::new("python3").args(["-c", SETUP]).arg(&data));
    // Every workload with a calibrated cause has it named: cold reads, warm
    // reads, writes, fsyncs. By both calibrations, unless one measured the
    // cause in rounds that disagreed and the peak says so; the other must
    // name it. Within ATTEMPTS attempts, each with new calibrations: fsyncs
    // on a disk other work shares took 4-8 ms in a run against 330 µs
    // calibrated seconds before (no label: 18× slower). No wrong label in
    // any attempt.
    let mut missing = Vec::new();
    for attempt in 1..=ATTEMPTS {
        missing = known_causes_attempt(dir.path(), &data, attempt);
        if missing.is_empty() {
            return;
        }
        eprintln!("attempt {attempt}: not named: {missing:?}");
    }
    panic!("in {ATTEMPTS} attempts; not named in the last: {missing:?}");
}

/// Each workload of [`CASES`] profiled and labelled with two new
/// calibrations (asserting every label is its cause's): the workloads
/// whose cause a calibration left unnamed without saying it was
/// unstable, with that calibration.
fn known_causes_attempt(dir: &Path, data: &Path, attempt: u32) -> Vec<String> {
    let cals: Vec<_> = (1..=2)
        .map(|k| {
            let c = dir.join(format!("cal{attempt}-{k}.json"));
            run(fsprof()
                .args(["calibrate", "--dir"])
                .arg(data)
                .arg("-o")
                .arg(&c));
            c
        })
        .collect();
    let (mut named, mut unstable) = (Vec::new(), Vec::new());
    for (work, ops, allowed) in CASES {
        let p = dir.join(format!("{work}.json"));
        run(fsprof()
            .args(["run", "-q", "-f", "-o"])
            .arg(&p)
            .args(["--", "python3", "-c", WORK, work])
            .arg(data));
        for (k, cal) in cals.iter().enumerate() {
            let rows = labels(&p, cal, ops);
            assert!(!rows.is_empty(), "{work}: no peaks of {ops:?}");
            for (op, n, mode, _, label, note) in rows {
                eprintln!(
                    "{work} cal{} {op} peak {n} at 2^{mode} ns: {label:?} {note:?}",
                    k + 1
                );
                if note
                    .as_deref()
                    .is_some_and(|n| n.contains("unstable during calibration"))
                {
                    unstable.push((work, k));
                }
                if let Some(l) = &label {
                    assert!(
                        allowed.contains(&l.as_str()),
                        "{work}: {op} peak {n} (2^{mode} ns) labelled {l:?} with calibration {}; allowed: {allowed:?}\n{}",
                        k + 1,
                        std::fs::read_to_string(cal).unwrap()
                    );
                    named.push((work, k));
                }
            }
        }
    }
    let mut missing = Vec::new();
    for (work, _, _) in CASES.iter().filter(|c| !c.2.is_empty()) {
        let by_any = (0..cals.len()).any(|k| named.contains(&(work, k)));
        for (k, cal) in cals.iter().enumerate() {
            if !by_any || !(named.contains(&(work, k)) || unstable.contains(&(work, k))) {
                missing.push(format!(
                    "{work} by calibration {}: {}",
                    k + 1,
                    std::fs::read_to_string(cal).unwrap()
                ));
            }
        }
    }
    missing
}

/// Cold reads of one size on the loop-mounted file system: 32 KiB or
/// 128 KiB chunks, each a distinct 128 KiB-aligned chunk, evicted and with
/// read-ahead off, so that every pread goes to the device.
const COLD: &str = r#"
import os, sys, random
path, size, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
for c in random.Random(size).sample(range(os.fstat(fd).st_size // 131072), n):
    os.pread(fd, size, c * 131072)
"#;

/// fsprof at the highest CPU priority (nice -20, inherited by what it
/// runs): on a machine whose cores other work keeps busy, a read the
/// device answered in 50 µs otherwise waits milliseconds more for a CPU
/// to return on, and is then as much a scheduling delay as a device read
/// (its peak says "no label: 17× slower than the nearest calibrated
/// cause"). This test is about naming the device's reads, so it takes
/// most of that delay out, for the calibration and the profiled reads
/// alike (a calibration slowed by the load and reads that were not run
/// far faster than it measured: no label). Not SCHED_FIFO: `calibrate`
/// measures the scheduler's quantum with two busy threads on one CPU,
/// which under it never yield.
fn first_in_line() -> Command {
    let mut c = Command::new("nice");
    c.args(["-n", "-20"]).arg(fsprof_path());
    c.env("XDG_CONFIG_HOME", "/nonexistent-fsprof-test");
    c
}

/// Issue 24 §2's target: after `fsprof calibrate` on a loop-mounted ext4,
/// cold 32 KiB and 128 KiB preads (read-ahead off) — as many device reads
/// as preads by `/sys/block/loopN/stat` — carry the device-read label of
/// their size for at least nine in ten of them (in one of [`ATTEMPTS`]
/// attempts), and no peak of theirs carries another label (in any).
#[test]
#[ignore = "needs root, mkfs.ext4 and python3"]
fn cold_reads_on_a_loop_ext4_carry_the_device_read_label() {
    need_program("python3", "python3");
    let fs = LoopFs::ext4(256);
    let data = fs.mnt().join("data");
    std::fs::create_dir(&data).unwrap();
    let write = |name: &str, mib: usize| {
        let bytes: Vec<u8> = (0..mib << 20).map(|i| (i * 31 + i / 4096) as u8).collect();
        let path = data.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let files = [
        (write("cold32k", 32), 32768u64),
        (write("cold128k", 64), 131072),
    ];
    fs.settle();
    run(Command::new("blockdev").args(["--setra", "0"]).arg(&fs.dev));
    let out = disk_tempdir();
    let calibrate = |name: &str| {
        let cal = out.path().join(name);
        run(first_in_line()
            .arg("calibrate")
            .arg(&data)
            .arg("-o")
            .arg(&cal));
        cal
    };
    let mut cal = calibrate("cal.json");
    for (path, size) in &files {
        // Nine in ten within ATTEMPTS attempts; no wrong label in any. Other
        // work on a shared machine comes in bursts: a burst starves the
        // loop device's worker threads (which no priority of the reader
        // helps), and its reads then take milliseconds, which no label can
        // tell from a page-cache hit kept off the CPU as long; a burst
        // during calibration makes the device reads it measures slower
        // than the program's. So each attempt after the first calibrates
        // again.
        let mut last = String::new();
        let named = (1..=ATTEMPTS).any(|attempt| {
            if attempt > 1 {
                cal = calibrate(&format!("cal-{size}-{attempt}.json"));
            }
            let (labelled, report) =
                cold_attempt(&fs, &out.path().join("p.json"), &cal, path, *size);
            eprintln!("{size}, attempt {attempt}: {labelled} of {COLD_READS} preads labelled");
            last = report;
            labelled * 10 >= COLD_READS * 9
        });
        assert!(
            named,
            "{size}: fewer than 9 in 10 device reads labelled in {ATTEMPTS} attempts; the last:\n{last}"
        );
    }
}

const COLD_READS: u64 = 200;

/// Seen at a load of 15 on 2 CPUs: up to a quarter of the reads of an
/// attempt took 30–60 ms (a starved loop worker), and one attempt in two
/// or three had nine in ten within reach.
const ATTEMPTS: u32 = 5;

/// One profile of [`COLD_READS`] cold preads of `size` bytes from `path`:
/// how many carry the device-read label of their size (asserting that
/// every pread went to the device and no peak carries another label), and
/// the peaks with the calibration for a failure's message.
fn cold_attempt(fs: &LoopFs, profile: &Path, cal: &Path, path: &Path, size: u64) -> (u64, String) {
    let n = COLD_READS;
    let want = format!("≈ device read ({} KiB)", size / 1024);
    fs.settle();
    let before = fs.stat();
    run(first_in_line()
        .args(["run", "-q", "-f", "-o"])
        .arg(profile)
        .args(["--", "python3", "-c", COLD])
        .arg(path)
        .arg(size.to_string())
        .arg(n.to_string()));
    let device = fs.stat().since(&before).reads;
    let rows = labels(profile, cal, &["pread"]);
    let report = format!("{rows:?}\n{}", std::fs::read_to_string(cal).unwrap());
    // Every pread went to the device (the block layer counts one read or
    // more per chunk: a request may be split), so all n must be labelled
    // as the device reads they are.
    assert!(device >= n, "{size}: {device} device reads for {n} preads");
    let labelled: u64 = rows
        .iter()
        .filter(|r| r.4.as_deref() == Some(want.as_str()))
        .map(|r| r.3)
        .sum();
    let wrong: Vec<&Row> = rows
        .iter()
        .filter(|r| r.4.as_ref().is_some_and(|l| *l != want))
        .collect();
    eprintln!(
        "{size}: {labelled} of {n} preads labelled {want:?}; {device} device reads; {rows:?}"
    );
    assert!(wrong.is_empty(), "{size}: wrong labels {wrong:?}\n{report}");
    (labelled, report)
}
