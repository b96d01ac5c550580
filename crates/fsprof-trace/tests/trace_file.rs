//! The trace file: round trips, and corrupt or truncated files give clear
//! errors (never a panic, never a silent short read).

use fsprof_trace::event::{Call, Data, Op, ProcessInfo, Record};
use fsprof_trace::file::{TraceError, TraceHeader, TraceReader, TraceWriter};
use proptest::prelude::*;

fn records(n: u64) -> Vec<Record> {
    let mut v = vec![Record::Process(ProcessInfo {
        pid: 1,
        seq: 0,
        cwd: b"/".to_vec(),
        ..Default::default()
    })];
    for i in 0..n {
        v.push(Record::Call(Call {
            start_ns: 10 + i * 100,
            end_ns: 10 + i * 100 + 50,
            pid: 1,
            tid: 1 + (i % 3) as i32,
            op: Op::named(if i % 2 == 0 { "pwrite" } else { "pread" }),
            ret: 4096,
            fd: Some(3),
            offset: Some((i * 4096) as i64),
            len: Some(4096),
            data: if i % 2 == 0 {
                Data::Digest(i * 77)
            } else {
                Data::None
            },
            ..Default::default()
        }));
    }
    v
}

fn write(dir: &std::path::Path, n: u64) -> std::path::PathBuf {
    let path = dir.join("t.trace");
    let mut w = TraceWriter::create(&path, &TraceHeader::new("test", "digest"), true).unwrap();
    for r in records(n) {
        w.push(&r).unwrap();
    }
    w.finish(0, 1_000_000).unwrap();
    path
}

fn read_all(path: &std::path::Path) -> Result<Vec<Record>, TraceError> {
    TraceReader::open(path)?.collect()
}

#[test]
fn trace_files_round_trip_across_blocks() {
    let d = tempfile::tempdir().unwrap();
    // Enough records for several blocks.
    let path = write(d.path(), 30_000);
    let mut r = TraceReader::open(&path).unwrap();
    assert_eq!(r.header.source, "test");
    let got: Vec<Record> = r.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(got, records(30_000));
    let s = r.summary().unwrap();
    assert_eq!(
        (s.calls, s.processes, s.duration_ns),
        (30_000, 1, 1_000_000)
    );
}

#[test]
fn a_trace_without_its_end_is_refused_as_truncated() {
    let d = tempfile::tempdir().unwrap();
    let path = write(d.path(), 10_000);
    let bytes = std::fs::read(&path).unwrap();
    for cut in [bytes.len() - 1, bytes.len() / 2, 20, 12] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let e = read_all(&path).unwrap_err();
        assert!(
            matches!(e, TraceError::Truncated { .. }),
            "cut at {cut}: {e}"
        );
        assert!(e.to_string().contains("truncated trace"), "{e}");
    }
    std::fs::write(&path, b"{\"format\":\"fsprof-profile\"}").unwrap();
    let e = read_all(&path).unwrap_err();
    assert!(e.to_string().contains("not an fsprof trace"), "{e}");
}

fn call(pid: i32, tid: i32, start_ns: u64, op: &str, fd: i32, path: Option<&str>) -> Record {
    Record::Call(Call {
        start_ns,
        end_ns: start_ns + 5,
        pid,
        tid,
        op: Op::named(op),
        // openat's fd is its directory fd; it returns fd 3.
        ret: if op == "openat" { 3 } else { 0 },
        fd: Some(fd),
        path: path.map(|p| p.as_bytes().to_vec()),
        ..Default::default()
    })
}

/// A capture writes each thread's records as a stream of its own, blocks
/// of different streams interleaved in the file in no time order; readers
/// get every record once, by start time, with times relative to the
/// origin, and paths resolved in that order across threads (a fd opened
/// by one thread and read by another).
#[test]
fn streams_are_merged_by_time_and_paths_resolved_across_threads() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("s.trace");
    let origin = 1_000_000_000;
    let mut w = TraceWriter::create(&path, &TraceHeader::new("shim", "none"), true).unwrap();
    let proc_rec = Record::Process(ProcessInfo {
        start_ns: origin + 1,
        pid: 9,
        cwd: b"/work".to_vec(),
        ..Default::default()
    });
    // Thread 9 opens, thread 10 reads; thread 10's block is written first.
    let t10: Vec<Record> = (0..3)
        .map(|i| call(9, 10, origin + 20 + i * 20, "read", 3, None))
        .collect();
    for r in &t10 {
        w.push_to(2, r).unwrap();
    }
    w.end_block().unwrap();
    let t9 = vec![
        proc_rec,
        call(9, 9, origin + 10, "openat", -100, Some("dir/f")),
        call(9, 9, origin + 30, "fstat", 3, None),
    ];
    for r in &t9 {
        w.push_to(1, r).unwrap();
    }
    w.end_block().unwrap();
    let later: Vec<Record> = (0..2)
        .map(|i| call(9, 10, origin + 100 + i, "read", 3, None))
        .collect();
    for r in &later {
        w.push_to(2, r).unwrap();
    }
    w.end_block().unwrap();
    w.set_origin(origin);
    w.finish(0, 200).unwrap();
    let got = read_all(&path).unwrap();
    let order: Vec<(u64, i32)> = got
        .iter()
        .map(|r| match r {
            Record::Call(c) => (c.start_ns, c.tid),
            Record::Process(p) => (p.start_ns, 0),
            Record::Mapped(m) => (m.start_ns, m.tid),
            Record::Descriptor(d) => (d.start_ns, d.tid),
        })
        .collect();
    assert_eq!(
        order,
        [
            (1, 0),
            (10, 9),
            (20, 10),
            (30, 9),
            (40, 10),
            (60, 10),
            (100, 10),
            (101, 10)
        ]
    );
    for r in &got[1..] {
        let Record::Call(c) = r else { panic!() };
        assert_eq!(c.resolved.as_deref(), Some(&b"/work/dir/f"[..]), "{c:?}");
    }
}

/// Version 1 traces used two conventions for sendfile's descriptors (the
/// output first, later the input first) under the same version number;
/// this fsprof cannot tell which one a file has, so it refuses them, in
/// one line that says what to do.
#[test]
fn version_1_traces_are_refused_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("old.trace");
    // A complete version 1 file: header, one end block (16-byte block
    // headers in version 1).
    let header = br#"{"format":"fsprof-trace","format_version":1,"fsprof_version":"0.1.0","source":"shim","data":"none","ops":["sendfile"]}"#;
    let end = br#"{"records":0,"calls":0,"processes":0,"duration_ns":0}"#;
    let mut b = b"fsprtrc\0".to_vec();
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&(header.len() as u32).to_le_bytes());
    b.extend_from_slice(header);
    for v in [2u32, end.len() as u32, end.len() as u32, 0] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(end);
    std::fs::write(&path, &b).unwrap();
    let e = read_all(&path).unwrap_err().to_string();
    assert!(matches!(
        TraceReader::open(&path).err(),
        Some(TraceError::Version { found: 1, .. })
    ));
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("trace format version 1") && e.contains("again with this fsprof"),
        "{e}"
    );
}

#[test]
fn an_existing_file_is_not_replaced_without_asking() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("mine");
    std::fs::write(&path, "keep").unwrap();
    let e = TraceWriter::create(&path, &TraceHeader::new("test", "none"), false)
        .err()
        .unwrap();
    assert!(e.to_string().contains("already exists"), "{e}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    /// Any byte changed or any cut: an error or the same records, never a
    /// panic and never different records without an error.
    #[test]
    fn corrupt_traces_give_errors(at in 0usize..4000, val in any::<u8>(), cut in any::<bool>()) {
        let d = tempfile::tempdir().unwrap();
        let path = write(d.path(), 200);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = at % bytes.len();
        if cut {
            bytes.truncate(at);
        } else {
            bytes[at] = val;
        }
        std::fs::write(&path, &bytes).unwrap();
        if let Ok(got) = read_all(&path) {
            // Only bytes that do not matter may change: the JSON header's
            // whitespace-free text or a value that equals the old one.
            prop_assert_eq!(got.len(), records(200).len());
        }
    }
}

/// The tags of a trace file's blocks, in file order, with each block's
/// count (a group's: its parts).
fn block_tags(path: &std::path::Path) -> Vec<(u32, u32)> {
    let b = std::fs::read(path).unwrap();
    let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let mut at = 16 + word(12) as usize;
    let mut tags = Vec::new();
    while at < b.len() {
        tags.push((word(at), word(at + 12)));
        at += 32 + word(at + 4) as usize;
    }
    tags
}

/// A capture of many short processes: each thread's stream is one small
/// block, ended when the thread is gone; some threads are long, and one
/// short thread goes on after its first small block with a large one.
fn short_and_long_streams(path: &std::path::Path) -> Vec<Record> {
    let mut w = TraceWriter::create(path, &TraceHeader::new("shim", "none"), true).unwrap();
    let mut all = Vec::new();
    let mut push = |w: &mut TraceWriter, stream: u32, r: Record| {
        w.push_to(stream, &r).unwrap();
        all.push(r);
    };
    for s in 1..=600u32 {
        let pid = s as i32;
        // Apart in time: no two records start at once.
        let t0 = u64::from(s) * 1_000_000;
        push(&mut w, s, call(pid, pid, t0, "openat", -100, Some("f")));
        push(&mut w, s, call(pid, pid, t0 + 7, "fstat", 3, None));
        if s % 100 == 0 {
            // A long thread: blocks of its own.
            for i in 0..3_000 {
                push(&mut w, s, call(pid, pid, t0 + 10 + i, "read", 3, None));
            }
        }
        w.close_stream(s).unwrap();
        if s == 5 {
            // The same stream again: a large block after its small one.
            for i in 0..3_000 {
                push(&mut w, s, call(pid, pid, t0 + 100_000 + i, "read", 3, None));
            }
            w.close_stream(s).unwrap();
        }
    }
    w.finish(0, 1).unwrap();
    all.sort_by_key(|r| r.start_ns());
    all
}

/// Short processes' small blocks are written together, a few hundred to a
/// frame (groups, version 5), large ones in frames of their own; the
/// reader gets every record once, in time order, each stream's in its
/// own order (a stream's large block written after the group that holds
/// its small one).
#[test]
fn small_blocks_of_many_streams_are_grouped_and_read_back_in_order() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("g.trace");
    let want = short_and_long_streams(&path);
    let tags = block_tags(&path);
    let groups: Vec<u32> = tags.iter().filter(|t| t.0 == 3).map(|t| t.1).collect();
    let parts: u32 = groups.iter().sum();
    assert!(
        !groups.is_empty() && groups.len() < 20 && parts >= 594,
        "{tags:?}"
    );
    assert!(tags.iter().any(|t| t.0 == 1), "{tags:?}");
    let got = read_all(&path).unwrap();
    let first_off = got.iter().zip(&want).position(|(g, w)| g != w);
    assert_eq!(
        (got.len(), first_off),
        (want.len(), None),
        "the first record out of place: {:?}",
        first_off.map(|i| (&got[i], &want[i]))
    );
}

/// Version 4 files (no groups) are read as before; a group in one is
/// refused, and so is a group whose directory does not add up to its
/// records, in one line.
#[test]
fn version_4_files_are_read_and_groups_checked() {
    let d = tempfile::tempdir().unwrap();
    // Large blocks only: what a version 4 writer wrote.
    let path = write(d.path(), 30_000);
    assert!(block_tags(&path).iter().all(|t| t.0 != 3));
    let mut b = std::fs::read(&path).unwrap();
    b[8..12].copy_from_slice(&4u32.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    assert_eq!(read_all(&path).unwrap(), records(30_000));

    let grouped = d.path().join("g.trace");
    short_and_long_streams(&grouped);
    let mut b = std::fs::read(&grouped).unwrap();
    b[8..12].copy_from_slice(&4u32.to_le_bytes());
    std::fs::write(&grouped, &b).unwrap();
    let e = read_all(&grouped).unwrap_err().to_string();
    assert!(e.contains("unknown block kind 3"), "{e}");

    // The first group's first part one byte longer.
    let mut b = std::fs::read(&grouped).unwrap();
    b[8..12].copy_from_slice(&5u32.to_le_bytes());
    let word = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let mut at = 16 + word(&b, 12) as usize;
    while word(&b, at) != 3 {
        at += 32 + word(&b, at + 4) as usize;
    }
    let rlen = word(&b, at + 32 + 4) + 1;
    b[at + 36..at + 40].copy_from_slice(&rlen.to_le_bytes());
    std::fs::write(&grouped, &b).unwrap();
    let e = read_all(&grouped).unwrap_err().to_string();
    assert!(e.contains("group directory is implausible"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}
