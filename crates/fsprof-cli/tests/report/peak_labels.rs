//! Peak labels against workloads whose cause is known: cold 4 KiB and
//! 128 KiB reads (evicted with posix_fadvise(DONTNEED), readahead off),
//! warm reads, buffered writes, fsyncs, opens and closes — each profiled on
//! its own, each peak labelled with two separate calibrations of the
//! machine. A peak may get the label of its cause or none, never another;
//! and the causes that are stable on any machine (a page-cache hit) must
//! be named.

use std::path::Path;
use std::process::Command;

use fsprof_testkit::{disk_tempdir, fsprof, need_program, stdout, succeeds};

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

/// (op, peak number, mode bucket, label) of every peak of `ops`.
fn labels(profile: &Path, cal: &Path, ops: &[&str]) -> Vec<(String, u64, i64, Option<String>)> {
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
                r["label"].as_str().map(String::from),
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
    let cals: Vec<_> = (1..=2)
        .map(|k| {
            let c = dir.path().join(format!("cal{k}.json"));
            run(fsprof()
                .args(["calibrate", "--dir"])
                .arg(&data)
                .arg("-o")
                .arg(&c));
            c
        })
        .collect();
    let mut named = Vec::new();
    for (work, ops, allowed) in CASES {
        let p = dir.path().join(format!("{work}.json"));
        run(fsprof()
            .args(["run", "-q", "-o"])
            .arg(&p)
            .args(["--", "python3", "-c", WORK, work])
            .arg(&data));
        for (k, cal) in cals.iter().enumerate() {
            let rows = labels(&p, cal, ops);
            assert!(!rows.is_empty(), "{work}: no peaks of {ops:?}");
            for (op, n, mode, label) in rows {
                eprintln!(
                    "{work} cal{} {op} peak {n} at 2^{mode} ns: {label:?}",
                    k + 1
                );
                if let Some(l) = &label {
                    assert!(
                        allowed.contains(&l.as_str()),
                        "{work}: {op} peak {n} (2^{mode} ns) labelled {l:?} with calibration {}; allowed: {allowed:?}",
                        k + 1
                    );
                    named.push((work, k));
                }
            }
        }
    }
    // Page-cache hits are stable on any machine: both calibrations name them.
    for (k, cal) in cals.iter().enumerate() {
        assert!(
            named.contains(&("warm", k)),
            "calibration {} labelled no warm read: {:?}",
            k + 1,
            std::fs::read_to_string(cal).unwrap()
        );
    }
}
