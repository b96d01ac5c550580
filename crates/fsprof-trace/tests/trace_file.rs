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
