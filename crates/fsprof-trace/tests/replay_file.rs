//! Compiled replay files: corrupt, truncated and hostile files are refused
//! with an error by `Compiled::read`, never a panic, and what it accepts
//! is safe to hand to the replayer (every index in range, sizes bounded).

use std::path::{Path, PathBuf};

use fsprof_testkit::HandTrace;
use fsprof_trace::compile::compile;
use fsprof_trace::event::{Call, Data, Op};
use fsprof_trace::replayfile::{Compiled, MAX_SLOTS, MAX_THREADS};
use proptest::prelude::*;

/// A compiled trace of two threads writing, reading and renaming files.
fn compiled(dir: &Path) -> PathBuf {
    let t = dir.join("t.trace");
    let mut w = HandTrace::create(&t, "full", "/d");
    let mut call =
        |tid: i32, op: &str, fd: i32, path: Option<&str>, ret: i64, f: &dyn Fn(&mut Call)| {
            let mut c = w.next(tid, op, path, ret);
            c.fd = Some(fd);
            f(&mut c);
            w.push(c);
        };
    let creat = |c: &mut Call| {
        c.flags = Some((libc::O_CREAT | libc::O_RDWR) as i64);
        c.mode = Some(0o644);
    };
    for (tid, name, fd) in [(1, "/d/a", 3), (2, "/d/b", 4)] {
        call(tid, "openat", -100, Some(name), fd as i64, &creat);
        call(tid, "pwrite", fd, None, 5, &|c| {
            c.len = Some(5);
            c.offset = Some(0);
            c.data = Data::Full(b"hello".to_vec());
        });
    }
    call(2, "pread", 3, None, 5, &|c| {
        c.len = Some(5);
        c.offset = Some(0);
    });
    call(1, "close", 3, None, 0, &|_| {});
    call(2, "close", 4, None, 0, &|_| {});
    call(1, "rename", -100, Some("/d/a"), 0, &|c| {
        c.path2 = Some(b"/d/c".to_vec());
        c.resolved2 = Some(b"/d/c".to_vec());
    });
    w.finish();
    let r = dir.join("t.replay");
    compile(&t, &r, true).unwrap();
    r
}

#[test]
fn the_sample_compiles_into_several_sections() {
    let d = tempfile::tempdir().unwrap();
    let c = Compiled::read(&compiled(d.path())).unwrap();
    assert_eq!(c.header.threads, 2);
    assert_eq!(c.commands.len(), 8);
    assert!(!c.buffers.is_empty() && !c.initial.is_empty());
    assert!(c.commands.iter().any(|k| !k.waits.is_empty()));
}

/// A change that makes a compiled file hostile.
type Spoil = Box<dyn Fn(&mut Compiled)>;

#[test]
fn hostile_tables_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let good = Compiled::read(&compiled(d.path())).unwrap();
    let out = d.path().join("bad.replay");
    let cases: Vec<(&str, Spoil)> = vec![
        ("threads", Box::new(|c| c.header.threads = MAX_THREADS + 1)),
        ("slots", Box::new(|c| c.header.slots = MAX_SLOTS + 1)),
        ("thread", Box::new(|c| c.commands[0].thread = 7)),
        ("slot", Box::new(|c| c.commands[1].slot = Some(99))),
        ("string", Box::new(|c| c.commands[0].path = Some(99))),
        ("buffer", Box::new(|c| c.commands[1].buf = Some(99))),
        ("op", Box::new(|c| c.commands[0].op = Op(9999))),
        (
            "wait on itself",
            Box::new(|c| {
                let t = c.commands[0].thread;
                c.commands[0].waits = vec![(t, 0)];
            }),
        ),
        (
            "wait ahead",
            Box::new(|c| {
                let last = c.commands.len() - 1;
                let other = 1 - c.commands[last].thread;
                c.commands[0].waits = vec![(other, 50)];
            }),
        ),
        ("initial path", Box::new(|c| c.initial[0].path = 99)),
    ];
    for (what, spoil) in cases {
        let mut c = good.clone();
        spoil(&mut c);
        c.write(&out, true).unwrap();
        let e = Compiled::read(&out).expect_err(what);
        assert!(!e.to_string().contains('\n'), "{what}: {e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    /// Any bytes changed or a cut anywhere: an error or a file that passes
    /// every check the replayer relies on, never a panic.
    #[test]
    fn corrupt_replay_files_never_panic(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in proptest::option::of(any::<usize>()),
    ) {
        let d = tempfile::tempdir().unwrap();
        let path = compiled(d.path());
        let mut bytes = std::fs::read(&path).unwrap();
        for (at, v) in edits {
            let at = at % bytes.len();
            bytes[at] = v;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        std::fs::write(&path, &bytes).unwrap();
        if let Ok(c) = Compiled::read(&path) {
            prop_assert!(c.validate().is_ok());
        }
    }

    /// Garbage after a valid magic.
    #[test]
    fn garbage_replay_files_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..600)) {
        let d = tempfile::tempdir().unwrap();
        let good = std::fs::read(compiled(d.path())).unwrap();
        let mut bytes = good[..8].to_vec();
        bytes.extend_from_slice(&tail);
        let path = d.path().join("g.replay");
        std::fs::write(&path, &bytes).unwrap();
        prop_assert!(Compiled::read(&path).is_err());
    }
}
