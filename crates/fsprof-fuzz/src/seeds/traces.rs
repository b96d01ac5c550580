//! Traces, their record blocks, and the replay files compiled from them.

use fsprof_trace::codec;
use fsprof_trace::event::{Call, Data, FdInfo, Op, ProcessInfo, Record, AT_FDCWD};
use fsprof_trace::file::{TraceHeader, TraceWriter};

/// Records with every field of the trace's model set somewhere.
pub fn records() -> Vec<Record> {
    let process = |pid, start_ns| {
        Record::Process(ProcessInfo {
            start_ns,
            pid,
            ppid: 1,
            seq: pid as u64,
            exe: b"/usr/bin/cat".to_vec(),
            argv: vec![b"cat".to_vec(), b"a b".to_vec()],
            cwd: b"/w".to_vec(),
            fds: vec![FdInfo {
                fd: 1,
                path: b"pipe:[7]".to_vec(),
                flags: 1,
                pos: -1,
            }],
        })
    };
    let mut out = vec![process(10, 100)];
    out.extend(calls());
    out.extend(mapping_calls());
    out.push(process(12, 7_500));
    out.push(Record::Call(Call {
        start_ns: 8_000,
        end_ns: 8_700,
        pid: 12,
        tid: 12,
        op: Op::named("mkdir"),
        path: Some(b"/w/d".to_vec()),
        mode: Some(0o755),
        ..Default::default()
    }));
    out
}

/// A call of pid 10 taking 700 ns that returned 3, for the caller to
/// complete.
fn call(op: &str, start_ns: u64, tid: i32) -> Call {
    Call {
        start_ns,
        end_ns: start_ns + 700,
        pid: 10,
        tid,
        op: Op::named(op),
        ret: 3,
        ..Default::default()
    }
}

/// Calls of pid 10 (threads 10 and 11), each op with the fields it uses.
fn calls() -> Vec<Record> {
    vec![
        Record::Call(Call {
            fd: Some(AT_FDCWD),
            path: Some(b"a/../b.txt".to_vec()),
            flags: Some(0o101),
            mode: Some(0o644),
            ..call("openat", 1_000, 10)
        }),
        Record::Call(Call {
            fd: Some(3),
            len: Some(5),
            ret: 5,
            data: Data::Full(b"hello".to_vec()),
            ..call("write", 2_000, 10)
        }),
        Record::Call(Call {
            fd: Some(3),
            offset: Some(0),
            len: Some(4096),
            ret: 5,
            data: Data::Digest(0x1234_5678),
            ..call("pread", 3_000, 11)
        }),
        Record::Call(Call {
            fd: Some(3),
            offset: Some(-2),
            whence: Some(2),
            ..call("lseek", 3_500, 11)
        }),
        Record::Call(Call {
            path: Some(b"/w/b.txt".to_vec()),
            size: Some(5),
            st_mode: Some(0o100644),
            ret: 0,
            ..call("stat", 4_000, 10)
        }),
        Record::Call(Call {
            path: Some(b"l".to_vec()),
            result: Some(b"b.txt".to_vec()),
            len: Some(4095),
            ret: 5,
            ..call("readlink", 4_500, 10)
        }),
        Record::Call(Call {
            path: Some(b"b.txt".to_vec()),
            path2: Some(b"c.txt".to_vec()),
            ret: 0,
            ..call("rename", 5_000, 11)
        }),
        Record::Call(Call {
            name: Some(b"c.txt".to_vec()),
            path2: Some(b"l2".to_vec()),
            ret: 0,
            ..call("symlink", 5_500, 10)
        }),
        Record::Call(Call {
            path: Some(b"nope".to_vec()),
            ret: -1,
            errno: 2,
            ..call("unlink", 6_000, 10)
        }),
        Record::Call(Call {
            fd: Some(3),
            arg: Some(1),
            ret: 0,
            ..call("fcntl", 6_500, 11)
        }),
    ]
}

/// A shared mapping of the file the calls opened, written through, synced
/// and unmapped before the file is closed (the replayer maps the same range
/// of its own file).
fn mapping_calls() -> Vec<Record> {
    let (at, len) = (0x7f00_0000_0000_i64, Some(8192));
    let mut mmap = call("mmap", 6_600, 10);
    (mmap.fd, mmap.len, mmap.offset, mmap.ret) = (Some(3), len, Some(0), at);
    (mmap.flags, mmap.mode) = (Some(1), Some(3));
    let mut msync = call("msync", 6_700, 10);
    (msync.arg, msync.len, msync.flags, msync.ret) = (Some(at + 4096), Some(4096), Some(4), 0);
    let mut munmap = call("munmap", 6_800, 10);
    (munmap.arg, munmap.len, munmap.ret) = (Some(at), len, 0);
    let mut close = call("close", 7_000, 10);
    (close.fd, close.ret) = (Some(3), 0);
    [mmap, msync, munmap, close]
        .into_iter()
        .map(Record::Call)
        .collect()
}

/// Trace files: the records in one stream (as an import writes them) and
/// spread over per-thread streams (as a capture does), with an origin;
/// and [`record_count_bomb`].
pub fn trace_files() -> Vec<Vec<u8>> {
    let mut out = written_traces();
    out.push(record_count_bomb());
    out
}

/// The traces a `TraceWriter` writes.
fn written_traces() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let mut out = Vec::new();
    for (k, per_thread) in [false, true].into_iter().enumerate() {
        let path = dir.path().join(format!("{k}.trace"));
        let header = TraceHeader::new("shim", "full");
        let mut w = TraceWriter::create(&path, &header, false).expect("a trace");
        for r in records() {
            let stream = match (&r, per_thread) {
                (Record::Call(c), true) => c.tid as u32 % 3,
                _ => 0,
            };
            w.push_to(stream, &r).expect("a record");
        }
        if per_thread {
            w.set_origin(50);
        }
        w.finish(1, 9_000).expect("the end block");
        out.push(std::fs::read(&path).expect("the trace"));
    }
    out
}

/// Encoded record blocks (a trace block before zstd), one per record and
/// one of all of them.
pub fn record_blocks() -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    let mut prev = 0;
    let mut out = Vec::new();
    for r in records() {
        codec::encode(&mut all, &r, &mut prev);
        let mut one = Vec::new();
        codec::encode(&mut one, &r, &mut 0);
        out.push(one);
    }
    out.push(all);
    out
}

/// Compiled replay files of the trace seeds.
pub fn replay_files() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().expect("a scratch directory");
    written_traces()
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let (trace, out) = (
                dir.path().join(format!("{k}.trace")),
                dir.path().join(format!("{k}.replay")),
            );
            std::fs::write(&trace, t).expect("the trace");
            fsprof_trace::compile::compile(&trace, &out, false).expect("compiling a seed trace");
            std::fs::read(&out).expect("the replay file")
        })
        .collect()
}

/// A trace file of one block whose header claims a record per 4 bytes of
/// a 4 MiB block that zstd packs into a few hundred bytes: a reader that
/// makes room for the records the header claims before decoding them
/// holds gigabytes for a file of a kilobyte.
pub fn record_count_bomb() -> Vec<u8> {
    let header = serde_json::to_vec(&TraceHeader::new("shim", "none")).expect("a header");
    let mut f = b"fsprtrc\0".to_vec();
    f.extend(2u32.to_le_bytes());
    f.extend((header.len() as u32).to_le_bytes());
    f.extend(&header);
    let raw = vec![0u8; 4 << 20];
    let z = zstd::bulk::compress(&raw, 19).expect("zstd");
    let words = [
        1u32,
        z.len() as u32,
        raw.len() as u32,
        (raw.len() / 4) as u32,
        0,
        0,
    ];
    for w in words {
        f.extend(w.to_le_bytes());
    }
    f.extend(0u64.to_le_bytes());
    f.extend(&z);
    let end = br#"{"records":1,"calls":1,"processes":0,"duration_ns":1}"#;
    for w in [2u32, end.len() as u32, end.len() as u32, 0, 0, 0] {
        f.extend(w.to_le_bytes());
    }
    f.extend(0u64.to_le_bytes());
    f.extend(end);
    f
}
