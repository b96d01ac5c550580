//! The page faults of `fsprof trace` (as root) with the map of followed
//! processes made small (`FSPROF_TEST_FOLLOWED_MAX`): processes that exit
//! give their entry back, and processes the map has no room for are
//! counted in the trace's summary and warned about (the program is
//! `followed_tree.c`; its threads are in fsprof-kernel's tests/faults.rs).

use std::collections::BTreeSet;

use fsprof_testkit::{need_root, under_followed_tree, unfollowed_warnings};
use fsprof_trace::event::Record;
use fsprof_trace::file::TraceSummary;
use fsprof_trace::TraceReader;

/// Entries of the map in these tests.
const MAP: u32 = 8;

/// What a trace of `followed_tree` holds: the processes it recorded other
/// than the program, the (pid, tid) of each fault on the data file.
struct Traced {
    children: BTreeSet<i32>,
    faulted: BTreeSet<(i32, i32)>,
    summary: TraceSummary,
    stderr: String,
}

/// `fsprof trace` of `followed_tree MODE N FILE` with a map of [`MAP`]
/// entries; the program must succeed.
fn trace_tree(mode: &str, n: u32) -> Traced {
    need_root("eBPF");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.trace");
    let stderr = under_followed_tree(dir.path(), &["trace"], &out, (mode, n), MAP);
    let file = dir.path().join("data");
    let mut r = TraceReader::open(&out).unwrap_or_else(|e| panic!("{e}"));
    let (mut program, mut children, mut faulted) = (0, BTreeSet::new(), BTreeSet::new());
    for rec in r.by_ref() {
        match rec.unwrap_or_else(|e| panic!("{e}")) {
            Record::Process(p) if p.exe.ends_with(b"followed_tree") && program == 0 => {
                program = p.pid
            }
            Record::Process(p) => {
                children.insert(p.pid);
            }
            Record::Mapped(m)
                if m.resolved.as_deref() == Some(file.as_os_str().as_encoded_bytes()) =>
            {
                faulted.insert((m.pid, m.tid));
            }
            _ => {}
        }
    }
    children.remove(&program);
    let summary = r.summary().cloned().unwrap();
    Traced {
        children,
        faulted,
        summary,
        stderr,
    }
}

/// 40 children one after another, five times the map: each one's entry
/// is removed at its exit, so every child's fault is in the trace.
#[test]
#[ignore = "needs root"]
fn faults_of_processes_that_exit_give_their_entry_back() {
    let t = trace_tree("seq", 40);
    assert_eq!(t.children.len(), 40, "{}", t.stderr);
    let pids: BTreeSet<i32> = t.faulted.iter().map(|&(p, _)| p).collect();
    assert_eq!(pids, t.children, "{}", t.stderr);
    assert_eq!((t.summary.mapped_unfollowed, t.summary.mapped_lost), (0, 0));
    assert_eq!(unfollowed_warnings(&t.stderr), Vec::<&str>::new());
}

/// 20 children alive at once with room for 8 processes: 7 children are
/// followed, the 13 others counted in the summary and warned about.
#[test]
#[ignore = "needs root"]
fn faults_of_processes_the_map_has_no_room_for_are_counted() {
    let t = trace_tree("wide", 20);
    let pids: BTreeSet<i32> = t.faulted.iter().map(|&(p, _)| p).collect();
    assert_eq!(pids.len(), 7, "{:?} {}", t.faulted, t.stderr);
    assert_eq!(t.summary.mapped_unfollowed, 13, "{}", t.stderr);
    let lines = unfollowed_warnings(&t.stderr);
    assert_eq!(lines.len(), 1, "{}", t.stderr);
    assert!(
        lines[0]
            .starts_with("fsprof: warning: 13 process(es) of the followed tree were not followed"),
        "{}",
        t.stderr
    );
}
