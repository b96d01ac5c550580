//! `fsprof import`: a strace log of a run agrees with fsprof's own trace of
//! the same run; fio iologs (v2, v3 as fio 3.x writes them) replay; bad
//! lines name their number or, with --lenient, are counted.

use std::collections::BTreeMap;
use std::path::Path;

use fsprof_testkit::{canonical_tempdir, compile, fsprof, need_program, succeeds};
use fsprof_trace::event::Record;
use fsprof_trace::TraceReader;

/// Per (pid, op) call counts of a trace.
fn counts(path: &Path) -> BTreeMap<(i32, String), u64> {
    let mut m = BTreeMap::new();
    for r in TraceReader::open(path).unwrap() {
        if let Record::Call(c) = r.unwrap() {
            *m.entry((c.pid, c.op.name().to_string())).or_default() += 1;
        }
    }
    m
}

/// `fsprof import FORMAT... LOG -o TRACE`, whatever its status.
fn import(format: &[&str], log: &Path, trace: &Path) -> std::process::Output {
    let mut c = fsprof();
    c.arg("import").args(format).arg(log).arg("-o").arg(trace);
    c.output().unwrap()
}

#[test]
#[ignore = "needs strace"]
fn strace_import_matches_the_native_trace_of_the_same_run() {
    let strace = need_program("strace", "strace");
    let (_d, base) = canonical_tempdir();
    let exe = compile("trace_calls", &base, &["-pthread"]);
    let script = format!("{0} basic && {0} threads 200", exe.display());
    let o = std::process::Command::new(&strace)
        .args(["-f", "-ttt", "-T", "-y", "-o", "s.log", "--"])
        .arg(fsprof_testkit::fsprof_path())
        .args(["trace", "-o", "native.trace", "--", "sh", "-c", &script])
        .current_dir(&base)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = fsprof()
        .args(["import", "strace", "s.log", "-o", "imported.trace", "--cwd"])
        .arg(&base)
        .current_dir(&base)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let native = counts(&base.join("native.trace"));
    let imported = counts(&base.join("imported.trace"));
    // Ops the program makes and neither the loader (which preads ELF
    // headers) nor the shim's own
    // set-up does (those show only in strace).
    let common = ["mkdir", "write", "pwrite", "rename", "unlink", "rmdir"];
    let pids: std::collections::BTreeSet<i32> = native
        .keys()
        .filter(|(_, op)| op == "pwrite" || op == "mkdir")
        .map(|&(p, _)| p)
        .collect();
    assert!(pids.len() >= 2, "the basic and threads runs: {native:?}");
    let mut checked = 0;
    for &pid in &pids {
        for op in common {
            let key = (pid, op.to_string());
            let n = native.get(&key).copied().unwrap_or(0);
            assert_eq!(
                imported.get(&key).copied().unwrap_or(0),
                n,
                "pid {pid} {op}"
            );
            checked += n;
        }
    }
    assert!(checked >= 400 + 4, "checked {checked} calls");
    // The imported trace compiles and replays the program's files.
    let o = fsprof()
        .args(["compile", "imported.trace", "-o", "i.replay"])
        .current_dir(&base)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `strace -ff -o LOG` writes a `LOG.<pid>` file per thread and process;
/// `import strace LOG` reads them all, and gets what the single-file log
/// of the same (deterministic) program gets.
#[test]
#[ignore = "needs strace"]
fn strace_ff_per_pid_files_import_like_one_log() {
    let strace = need_program("strace", "strace");
    let (_d, base) = canonical_tempdir();
    let exe = compile("trace_calls", &base, &["-pthread"]);
    let mut totals = Vec::new();
    for (flags, log) in [(&["-f"][..], "one.log"), (&["-f", "-ff"][..], "ff.log")] {
        let o = std::process::Command::new(&strace)
            .args(flags)
            .args(["-ttt", "-T", "-y", "-o", log, "--"])
            .arg(&exe)
            .args(["threads", "200"])
            .current_dir(&base)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let t = base.join(format!("{log}.trace"));
        let o = import(
            &["strace", "--cwd", base.to_str().unwrap()],
            &base.join(log),
            &t,
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut per_op: BTreeMap<String, u64> = BTreeMap::new();
        let mut threads = std::collections::BTreeSet::new();
        for r in TraceReader::open(&t).unwrap() {
            if let Record::Call(c) = r.unwrap() {
                *per_op.entry(c.op.name().to_string()).or_default() += 1;
                threads.insert(c.tid);
            }
        }
        totals.push((per_op, threads.len()));
    }
    let files = std::fs::read_dir(&base)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("ff.log."))
        })
        .count();
    assert!(files >= 4, "main, two threads and a child: {files} files");
    let (one, ff) = (&totals[0], &totals[1]);
    assert_eq!(one.0.get("pwrite"), Some(&400), "{one:?}");
    for op in ["pwrite", "write", "open", "openat", "close"] {
        assert_eq!(one.0.get(op), ff.0.get(op), "{op}: {one:?} vs {ff:?}");
    }
    assert_eq!(one.1, ff.1, "threads");
}

#[test]
fn fio_iologs_v2_and_v3_import_and_replay() {
    let (_d, base) = canonical_tempdir();
    let f = base.join("data");
    let v2 = format!(
        "fio version 2 iolog\n{0} add\n{0} open\n{0} write 0 4096\n{0} write 4096 4096\n{0} read 0 4096\n{0} sync\n{0} close\n",
        f.display()
    );
    let v3 = format!(
        "fio version 3 iolog\n10 {0} add\n20 {0} open\n30 {0} write 0 8192\n1030 {0} read 4096 4096\n2030 {0} close\n",
        f.display()
    );
    for (name, log, calls, span) in [("v2", v2, 6, 5_000), ("v3", v3, 4, 2_010_000)] {
        let log_path = base.join(format!("{name}.log"));
        std::fs::write(&log_path, log).unwrap();
        let t = base.join(format!("{name}.trace"));
        let o = import(&["fio-iolog"], &log_path, &t);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut r = TraceReader::open(&t).unwrap();
        let n = r
            .by_ref()
            .filter(|x| matches!(x, Ok(Record::Call(_))))
            .count();
        assert_eq!(n, calls, "{name}");
        assert_eq!(
            r.summary().unwrap().duration_ns,
            span,
            "{name}: times from the log"
        );
        let rp = base.join(format!("{name}.replay"));
        let o = fsprof()
            .arg("compile")
            .arg(&t)
            .arg("-o")
            .arg(&rp)
            .output()
            .unwrap();
        assert!(o.status.success());
        let root = base.join(format!("root-{name}"));
        std::fs::create_dir(&root).unwrap();
        succeeds(
            fsprof()
                .arg("replay")
                .arg(&rp)
                .arg("--root")
                .arg(&root)
                .args(["--prepare", "--afap", "--verify", "strict"]),
        );
        let written = root.join(f.strip_prefix("/").unwrap());
        assert_eq!(std::fs::metadata(written).unwrap().len(), 8192, "{name}");
    }
}

#[test]
fn unparseable_lines_are_errors_with_their_number_or_counted() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("s.log");
    std::fs::write(
        &log,
        "7 1.000001 close(3) = 0 <0.000001>\n7 garbage here\n7 1.000003 close(4) = 0 <0.000001>\n",
    )
    .unwrap();
    let t = d.path().join("t.trace");
    let o = import(&["strace"], &log, &t);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 2:"), "{err}");
    assert!(!t.exists(), "no trace from a failed import");
    let o = import(&["strace", "--lenient"], &log, &t);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("skipped 1 line"));
    let o = fsprof()
        .args(["import", "fio-iolog"])
        .arg(&log)
        .arg("-o")
        .arg(d.path().join("f.trace"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a fio iolog"));
}
