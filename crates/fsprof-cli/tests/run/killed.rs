//! A program killed by SIGKILL, or crashing, still yields its counts up to
//! that moment: the counters live in memory `fsprof run` can read.

use fsprof_testkit::*;

/// A shell function: `blocked PID` returns once PID, a `cat`, sleeps
/// interruptibly, which a cat (and the shim in it) does only inside its
/// call on the FIFO; it exits the shell with 3 after 30 s. So the tests
/// end or kill a process inside a call on any machine, not after a pause
/// that a loaded one may not honour. (/proc/PID/syscall would name the
/// call, but reading it is a ptrace attach, which Yama refuses to a
/// non-root sibling.)
const BLOCKED: &str = "blocked() { n=0; \
    until read c </proc/$1/comm && [ \"$c\" = cat ] && grep -q '^State:.S' /proc/$1/status; do \
    n=$((n+1)); [ $n -lt 3000 ] || exit 3; sleep 0.01; done; };";

#[test]
#[ignore = "needs python3"]
fn sigkill_keeps_counts_up_to_the_kill() {
    need_program("python3", "python3");
    let dir = tempfile::tempdir().unwrap();
    let script = "import os,signal\n\
                  fd=os.open('/etc/hostname', os.O_RDONLY)\n\
                  for i in range(777): os.pread(fd, 1, 0)\n\
                  os.kill(os.getpid(), signal.SIGKILL)\n";
    let (out, path) = run_profiled(dir.path(), &["python3", "-c", script]);
    assert_eq!(out.status.code(), Some(137));
    let p = load(&path);
    assert_eq!(count(&p, "pread"), 777);
    assert!(fsprof_core::check::check_profile(&p).ok());
}

#[test]
fn killed_inside_a_blocking_call_is_reported_as_unfinished() {
    let dir = tempfile::tempdir().unwrap();
    // `cat` blocks in read() on a FIFO nobody writes to; once it sleeps
    // there, the shell kills it.
    let script = format!(
        "{BLOCKED} mkfifo f; (exec 3<>f; cat f & pid=$!; blocked $pid; \
         kill -9 $pid; wait $pid; exit 9)"
    );
    let script = script.as_str();
    let (out, path) = run_profiled(dir.path(), &["sh", "-c", script]);
    assert_eq!(out.status.code(), Some(9));
    let p = load(&path);
    let read = user_op(&p, "read").expect("cat's read was entered");
    assert_eq!(read.pre, read.post + 1, "one read never returned");
    let rep = fsprof_core::check::check_profile(&p);
    assert!(rep.ok(), "{:?}", rep.errors);
    assert_noted(&rep.notes, "never returned");
}

/// A process the command leaves behind, still blocked in a call when the
/// run ends, is named as still running, not as having died inside it.
#[test]
fn a_daemon_still_inside_a_call_is_named_as_running() {
    let dir = tempfile::tempdir().unwrap();
    // `cat` blocks in open() of a FIFO nobody opens for writing; the
    // command ends once it sleeps there.
    let script = format!(
        "{BLOCKED} mkfifo f; cat f >/dev/null 2>&1 </dev/null & echo $! > pid; \
         blocked $!"
    );
    let out = fsprof()
        .args(["run", "-f", "-o", "p.json", "--", "sh", "-c", &script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let pid: i32 = std::fs::read_to_string(dir.path().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) on the pid of the test's own leftover cat.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "open: 1 call(s) still in progress when the run ended (pid {pid} still running)"
        )),
        "{err}"
    );
    assert!(!err.contains("the process ended inside them"), "{err}");
}
