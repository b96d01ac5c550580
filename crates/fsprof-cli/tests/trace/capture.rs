//! `fsprof trace`: every call of a real program recorded with its
//! arguments, results and data; threads, forks and SIGKILL; bounded
//! memory; the profile of the same run agrees with the trace; `trace show`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fsprof_testkit::{capture_in, compile, fsprof, load};
use fsprof_trace::event::{Call, Data, ProcessInfo, Record};
use fsprof_trace::TraceReader;

/// `fsprof trace -f --data DATA -o dir/t.trace -- trace_calls ARGS...`
/// in `dir`, the test program compiled there first.
fn trace_calls(dir: &Path, data: &str, args: &[&str]) -> (std::process::Output, PathBuf) {
    let exe = compile("trace_calls", dir, &["-pthread"]);
    let mut cmd = vec![exe.to_str().unwrap()];
    cmd.extend(args);
    let out = dir.join("t.trace");
    let o = capture_in(dir, &["trace", "-f", "--data", data], &out, &cmd);
    (o, out)
}

pub(crate) fn records(
    path: &Path,
) -> (
    Vec<ProcessInfo>,
    Vec<Call>,
    fsprof_trace::file::TraceSummary,
) {
    let mut r = TraceReader::open(path).unwrap_or_else(|e| panic!("{e}"));
    let (mut procs, mut calls) = (Vec::new(), Vec::new());
    for rec in r.by_ref() {
        match rec.unwrap_or_else(|e| panic!("{e}")) {
            Record::Process(p) => procs.push(p),
            Record::Call(c) => calls.push(c),
            // Page faults (as root): tests of them are in replay/mmap.rs.
            Record::Mapped(_) | Record::Descriptor(_) => {}
        }
    }
    (procs, calls, r.summary().cloned().unwrap())
}

/// [`trace_calls`] succeeded and lost no call: its processes, calls and
/// trace file.
fn traced_all(dir: &Path, data: &str, args: &[&str]) -> (Vec<ProcessInfo>, Vec<Call>, PathBuf) {
    let (o, t) = trace_calls(dir, data, args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (procs, calls, summary) = records(&t);
    assert_eq!(summary.dropped, 0);
    (procs, calls, t)
}

/// The process record of the test program (the first one, not its forks).
fn the_program(procs: &[ProcessInfo]) -> &ProcessInfo {
    procs
        .iter()
        .find(|p| p.exe.ends_with(b"trace_calls"))
        .expect("the program's process record")
}

fn op_counts(calls: &[Call]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for c in calls {
        *m.entry(c.op.name().to_string()).or_default() += 1;
    }
    m
}

/// The profile written beside the trace counts exactly the traced calls.
fn assert_profile_matches(trace: &Path, calls: &[Call]) {
    let p = load(&trace.with_extension("json"));
    let user = p.layer("user").expect("a user layer");
    let profiled: BTreeMap<String, u64> =
        user.ops.iter().map(|o| (o.name.clone(), o.post)).collect();
    assert_eq!(profiled, op_counts(calls), "profile vs trace op counts");
}

fn find<'a>(calls: &'a [Call], op: &str, path: &str) -> &'a Call {
    calls
        .iter()
        .find(|c| c.op.is(op) && c.path.as_deref() == Some(path.as_bytes()))
        .unwrap_or_else(|| panic!("no {op}({path}) in the trace"))
}

#[test]
fn trace_records_arguments_results_and_data() {
    let d = tempfile::tempdir().unwrap();
    let (procs, calls, _) = traced_all(d.path(), "full", &["basic"]);
    let me = the_program(&procs);
    let cwd = std::fs::canonicalize(d.path()).unwrap();
    assert_eq!(me.cwd, cwd.to_str().unwrap().as_bytes());
    let calls: Vec<Call> = calls.into_iter().filter(|c| c.pid == me.pid).collect();
    let at = |rel: &str| format!("{}/{rel}", cwd.display()).into_bytes();

    let mkdir = find(&calls, "mkdir", "d");
    assert_eq!((mkdir.mode, mkdir.ret), (Some(0o750), 0));
    let open = find(&calls, "open", "d/f");
    assert_eq!(
        open.flags,
        Some((libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as i64)
    );
    assert_eq!(open.mode, Some(0o640));
    assert_eq!(open.resolved.as_deref(), Some(&at("d/f")[..]));
    let fd = open.ret as i32;
    let write = calls
        .iter()
        .find(|c| c.op.is("write") && c.fd == Some(fd))
        .unwrap();
    assert_eq!((write.len, write.ret), (Some(11), 11));
    assert_eq!(write.data, Data::Full(b"hello trace".to_vec()));
    assert_eq!(write.resolved, Some(at("d/f")), "fd calls name their file");
    let pwrite = calls.iter().find(|c| c.op.is("pwrite")).unwrap();
    assert_eq!(
        (pwrite.offset, pwrite.len, pwrite.ret),
        (Some(100), Some(2), 2)
    );
    assert_eq!(pwrite.data, Data::Full(b"XY".to_vec()));
    let stat = find(&calls, "stat", "d/f");
    assert_eq!(stat.size, Some(102));
    assert_eq!(stat.st_mode, Some(libc::S_IFREG | 0o640));
    let dir = find(&calls, "openat", "d");
    assert_eq!(dir.fd, Some(libc::AT_FDCWD));
    let inner = find(&calls, "openat", "f");
    assert_eq!(inner.fd, Some(dir.ret as i32), "dirfd recorded");
    assert_eq!(
        inner.resolved,
        Some(at("d/f")),
        "resolved against the dirfd"
    );
    let pread = calls.iter().find(|c| c.op.is("pread")).unwrap();
    assert_eq!(
        (pread.fd, pread.len, pread.offset, pread.ret),
        (Some(inner.ret as i32), Some(5), Some(0), 5)
    );
    assert_eq!(
        pread.data,
        Data::Full(b"hello".to_vec()),
        "--data full keeps what reads returned"
    );
    let lseek = calls.iter().find(|c| c.op.is("lseek")).unwrap();
    assert_eq!((lseek.whence, lseek.ret), (Some(libc::SEEK_END), 102));
    let rename = find(&calls, "rename", "d/f");
    assert_eq!(rename.path2.as_deref(), Some(&b"d/g"[..]));
    assert_eq!(rename.resolved2.as_deref(), Some(&at("d/g")[..]));
    let nope = find(&calls, "unlink", "d/nope");
    assert_eq!((nope.ret, nope.errno), (-1, libc::ENOENT));
    assert_eq!(find(&calls, "rmdir", "d").ret, 0);
    for c in &calls {
        assert!(c.end_ns >= c.start_ns, "{c:?}");
    }
    assert!(
        calls.windows(2).all(|w| w[0].start_ns <= w[1].start_ns),
        "time order"
    );

    // The default keeps a digest: XXH64 of the bytes.
    let (o, t) = trace_calls(d.path(), "digest", &["basic"]);
    assert!(o.status.success());
    let (_, calls, _) = records(&t);
    let w = calls
        .iter()
        .find(|c| c.op.is("write") && c.len == Some(11))
        .unwrap();
    assert_eq!(
        w.data,
        Data::Digest(xxhash_rust::xxh64::xxh64(b"hello trace", 0))
    );
    assert_profile_matches(&t, &calls);
}

#[test]
fn trace_follows_threads_and_forks() {
    let d = tempfile::tempdir().unwrap();
    let (procs, calls, t) = traced_all(d.path(), "digest", &["threads", "3000"]);
    let parent = the_program(&procs);
    let child = procs
        .iter()
        .find(|p| p.ppid == parent.pid)
        .expect("the forked child has a process record");
    let mut per_tid: BTreeMap<i32, u64> = BTreeMap::new();
    for c in calls
        .iter()
        .filter(|c| c.pid == parent.pid && c.op.is("pwrite"))
    {
        *per_tid.entry(c.tid).or_default() += 1;
    }
    assert_eq!(
        per_tid.values().copied().collect::<Vec<_>>(),
        vec![3000, 3000],
        "{per_tid:?}"
    );
    assert!(
        !per_tid.contains_key(&parent.pid),
        "the threads are not the main thread"
    );
    let kid = calls
        .iter()
        .find(|c| c.pid == child.pid && c.op.is("write"))
        .unwrap();
    assert_eq!(kid.data, Data::Digest(xxhash_rust::xxh64::xxh64(b"kid", 0)));
    assert_eq!(
        kid.resolved.as_deref().map(|p| p.ends_with(b"/child")),
        Some(true)
    );
    assert_profile_matches(&t, &calls);
}

#[test]
fn a_program_killed_by_sigkill_keeps_its_calls() {
    let d = tempfile::tempdir().unwrap();
    let (o, t) = trace_calls(d.path(), "digest", &["spin", "5000", "kill"]);
    assert_eq!(
        o.status.code(),
        Some(128 + 9),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (_, calls, _) = records(&t);
    assert_eq!(calls.iter().filter(|c| c.op.is("pread")).count(), 5000);
}

/// 700 iterations of the spawn tree (2,101 process images, a third of
/// which live for a single call, fork, then exec): every image once in the
/// trace, every call once, each in its own process. Most of their chunks
/// are found after their thread is gone (read as they are, then handed
/// back to the shim for the next process), the rest while it writes.
#[test]
fn two_thousand_processes_each_traced_exactly_once() {
    const N: usize = 700;
    let d = tempfile::tempdir().unwrap();
    let exe = compile("spawn_tree", d.path(), &[]);
    let out = d.path().join("t.trace");
    let o = capture_in(
        d.path(),
        &["trace", "-f", "--data", "none"],
        &out,
        &[exe.to_str().unwrap(), &N.to_string()],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (procs, calls, summary) = records(&out);
    assert_eq!(summary.dropped, 0);
    assert_eq!(procs.len(), 3 * N + 1, "process images");
    let mut images: Vec<_> = procs.iter().map(|p| (p.pid, p.seq)).collect();
    images.sort_unstable();
    images.dedup();
    assert_eq!(images.len(), procs.len(), "an image recorded twice");
    let mut per_pid: BTreeMap<i32, (u64, u64)> = BTreeMap::new();
    for c in &calls {
        let e = per_pid.entry(c.pid).or_default();
        match c.op.name() {
            "access" => e.0 += 1,
            "stat" => e.1 += 1,
            _ => {}
        }
    }
    let (mut singles, mut leaves) = (0, 0);
    for (&pid, &counts) in &per_pid {
        match counts {
            (1, 0) => singles += 1,
            (1, 3) => leaves += 1,
            (0, 0) => {}
            other => panic!("pid {pid} made {other:?} (access, stat) calls"),
        }
    }
    assert_eq!((singles, leaves), (N, N));
}

#[test]
fn chunks_are_moved_out_of_the_run_directory_while_the_program_runs() {
    let d = tempfile::tempdir().unwrap();
    let (o, t) = trace_calls(d.path(), "none", &["phases", "4", "40000", "20000"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (_, calls, summary) = records(&t);
    assert_eq!(calls.iter().filter(|c| c.op.is("pread")).count(), 160_000);
    // 160k records of 72 bytes each; the run directory held about one
    // phase's worth at a time, not the whole run.
    let total = 160_000u64 * 72;
    assert!(
        summary.pending_peak_bytes > 0 && summary.pending_peak_bytes < total / 2,
        "peak {} of {total} bytes waited in the run directory",
        summary.pending_peak_bytes
    );
}

/// `fsprof trace` makes the keeper (fsprof_sys::keeper) once its command
/// runs, as `fsprof run` does: the control file's mapping and fsprof's
/// memory are released after its exit, not on the user's wait. The
/// command, fsprof's child, looks for it among its siblings.
#[test]
fn a_trace_leaves_its_memory_to_a_keeper() {
    let d = tempfile::tempdir().unwrap();
    let look = "sleep 0.3; pgrep -P $PPID -x fsprof-keeper >/dev/null && echo kept";
    let o = fsprof()
        .args(["trace", "-q", "-f", "-o"])
        .arg(d.path().join("t.trace"))
        .args(["--", "sh", "-c", look])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "kept");
}

/// The finished trace writer's memory (the compressor's workspace, ~0.7
/// MB) goes with fsprof's exit too, which the keeper holds: it is not
/// freed between the trace's rename and the exit (two `munmap`s there, ~0.1
/// ms of every trace's end).
#[test]
#[ignore = "needs strace"]
fn a_trace_does_not_free_its_writers_memory_before_it_exits() {
    let strace = fsprof_testkit::need_program("strace", "strace");
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("s.log");
    let o = std::process::Command::new(strace)
        .arg("-f")
        .arg("-o")
        .arg(&log)
        .arg(fsprof_testkit::fsprof_path())
        .args(["trace", "-q", "-f", "-o"])
        .arg(d.path().join("t.trace"))
        .args(["--", "true"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&log).unwrap();
    // fsprof's main thread: the first line's pid (its execve).
    let main = text.split_whitespace().next().unwrap().to_string();
    let after: Vec<&str> = text
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(main.as_str()))
        .skip_while(|l| !(l.contains("rename") && l.contains("\"t.trace\"")))
        .take_while(|l| !l.contains("exit_group("))
        .filter(|l| l.contains("munmap("))
        .collect();
    assert!(
        text.contains("\"t.trace\""),
        "no rename of the trace in the log"
    );
    assert!(
        after.is_empty(),
        "freed after the trace was written: {after:?}"
    );
}

/// Memory stays bounded when fsprof falls behind (here: stopped with
/// SIGSTOP while the program records ~14 MiB): a thread that needs a new
/// chunk while FSPROF_TRACE_PENDING_MAX chunk files wait, waits. Resumed
/// then, fsprof gets every record; never resumed (until the program is
/// done), a thread gives up after 2 s, the records that did not fit are
/// counted as dropped, and the program runs to its end.
#[test]
fn a_capture_that_falls_behind_holds_the_program_rather_than_its_memory() {
    const LIMIT: u64 = 4;
    let n = 200_000u64;
    for when in ["wait", "end"] {
        let d = tempfile::tempdir().unwrap();
        let exe = compile("trace_calls", d.path(), &["-pthread"]);
        let t = d.path().join("t.trace");
        let o = fsprof()
            .env("FSPROF_TRACE_PENDING_MAX", LIMIT.to_string())
            .args(["trace", "-f", "--data", "none", "-o"])
            .arg(&t)
            .arg("--")
            .arg(&exe)
            .args(["stall", &n.to_string(), &LIMIT.to_string(), when])
            .current_dir(d.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{when}: {err}");
        let (_, calls, summary) = records(&t);
        let preads = calls.iter().filter(|c| c.op.is("pread")).count() as u64;
        // The image's window in its arena block waits beside the files.
        assert!(
            summary.pending_peak_bytes <= (LIMIT << 20) + fsprof_shim::trace_abi::TWIN_SIZE as u64,
            "{when}: {} bytes waited in the run directory",
            summary.pending_peak_bytes
        );
        if when == "wait" {
            assert_eq!((preads, summary.dropped), (n, 0), "{when}: {err}");
        } else {
            // The calls after the wait gave up are dropped too (and the
            // helper's, which also found no room).
            assert!(
                preads < n && preads + summary.dropped >= n,
                "{when}: {preads} {err}"
            );
            assert!(err.contains("not recorded"), "{err}");
        }
    }
}

#[test]
fn trace_show_prints_strace_like_text_jsonl_and_csv() {
    let d = tempfile::tempdir().unwrap();
    let (o, t) = trace_calls(d.path(), "full", &["basic"]);
    assert!(o.status.success());
    let show = |fmt: &str| {
        let o = fsprof()
            .args(["trace", "show", "--format", fmt])
            .arg(&t)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let text = show("text");
    let line = text
        .lines()
        .find(|l| l.contains("unlink(\"d/nope\")"))
        .expect(&text);
    // `PID SECONDS.MICROS op(args) = -1 ENOENT (msg) <duration>`
    let parts: Vec<&str> = line.split_whitespace().collect();
    assert!(parts[0].parse::<i32>().is_ok(), "{line}");
    assert!(
        parts[1]
            .split_once('.')
            .is_some_and(|(s, us)| s.len() >= 10 && us.len() == 6),
        "{line}"
    );
    assert!(
        line.contains("= -1 ENOENT (No such file or directory) <0."),
        "{line}"
    );
    let write = text.lines().find(|l| l.contains(" write(")).expect(&text);
    assert!(
        write.contains("/d/f>, \"hello trace\", 11) = 11"),
        "{write}"
    );
    let jsonl = show("jsonl");
    let calls: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let open = calls
        .iter()
        .find(|v| v["op"] == "open" && v["path"] == "d/f")
        .unwrap();
    assert!(open["resolved"].as_str().unwrap().ends_with("/d/f"));
    assert_eq!(open["mode"], 0o640);
    let csv = show("csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header.len(), fsprof_trace::show::CSV_COLUMNS.len());
    let n = lines.clone().count();
    assert_eq!(n, calls.iter().filter(|v| v["type"] == "call").count());
    assert!(lines.any(|l| l.contains(",unlink,-1,2,")), "{csv}");
}

#[test]
fn trace_show_refuses_corrupt_traces_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let (_, t) = trace_calls(d.path(), "digest", &["basic"]);
    let bytes = std::fs::read(&t).unwrap();
    std::fs::write(&t, &bytes[..bytes.len() - 30]).unwrap();
    let o = fsprof().args(["trace", "show"]).arg(&t).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("truncated trace"), "{err}");
    let o = fsprof()
        .args(["trace", "show", "/no/such/trace"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// The inotify descriptors `fsprof trace` makes, by strace, tracing `cmd`.
fn inotify_inits_tracing(cmd: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.trace");
    let mut args = vec!["trace", "-q", "-o", out.to_str().unwrap(), "--"];
    args.extend(cmd);
    let (o, seen) = fsprof_testkit::strace_fsprof(
        dir.path(),
        &["-f", "-e", "trace=inotify_init,inotify_init1"],
        &args,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    seen
}

/// The run directory is watched (inotify) only once a trace has listed
/// it for about a second: closing the watch waits for a grace period,
/// 5 ms at idle, which a short trace would pay at its end for nothing
/// (capture.rs, WATCH_AFTER); a long one is watched, and lists the
/// directory only when a chunk file was made in it. Under strace on a
/// loaded machine a trace of `true` can itself last a second (it did, at
/// load 40): only a short trace that was short says anything.
#[test]
#[ignore = "needs strace"]
fn only_a_trace_longer_than_a_second_watches_its_run_directory() {
    let short = (0..5)
        .find_map(|_| {
            let t = std::time::Instant::now();
            let seen = inotify_inits_tracing(&["true"]);
            (t.elapsed() < std::time::Duration::from_millis(700)).then_some(seen)
        })
        .expect("five traces of `true` under strace each took 0.7 s or more");
    assert!(!short.contains("inotify_init"), "{short}");
    let long = inotify_inits_tracing(&["sleep", "2"]);
    assert_eq!(long.matches("inotify_init1(").count(), 1, "{long}");
}
