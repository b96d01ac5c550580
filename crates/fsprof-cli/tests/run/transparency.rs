//! The profiled program behaves exactly as without fsprof: same stdout,
//! same exit status, same errno values, same signal deaths; exec'd children
//! are profiled too.

use std::process::Command;

use fsprof_testkit::*;

/// Runs `args` bare and under `fsprof run`, asserting identical stdout and
/// exit status; returns the profile.
fn same_behaviour(args: &[&str]) -> fsprof_core::Profile {
    // Each run starts from its own empty directory, so side effects of the
    // first (a database file, say) can't change what the second sees.
    let (bare_dir, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let bare = Command::new(args[0])
        .args(&args[1..])
        .current_dir(bare_dir.path())
        .output()
        .unwrap();
    let (prof, path) = run_profiled(dir.path(), args);
    assert_eq!(
        String::from_utf8_lossy(&bare.stdout),
        String::from_utf8_lossy(&prof.stdout),
        "stdout differs for {args:?}"
    );
    assert_eq!(
        bare.status.code(),
        prof.status.code(),
        "exit status differs for {args:?}: {}",
        String::from_utf8_lossy(&prof.stderr)
    );
    let p = load(&path);
    let rep = fsprof_core::check::check_profile(&p);
    assert!(rep.ok(), "{args:?}: {:?}", rep.errors);
    p
}

#[test]
fn cat_reads_and_writes() {
    let p = same_behaviour(&["cat", "/etc/passwd", "/etc/hostname"]);
    assert!(count(&p, "read") >= 2);
    assert!(count(&p, "openat") + count(&p, "open") >= 2);
    // Its stdout is the test's pipe: those writes are not file-system I/O.
    let nonfile = p.layer("user-nonfile").expect("writes to a pipe");
    assert!(nonfile.op("pipe_write").is_some_and(|o| o.post >= 1));
    assert_eq!(count(&p, "write"), 0);
}

#[test]
fn cat_of_missing_file_fails_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let bare = Command::new("cat").arg("/nonexistent/x").output().unwrap();
    let (prof, path) = run_profiled(dir.path(), &["cat", "/nonexistent/x"]);
    assert_eq!(bare.status.code(), Some(1));
    assert_eq!(prof.status.code(), Some(1));
    // cat's own message (with strerror of the errno it saw) is unchanged.
    let msg = String::from_utf8_lossy(&bare.stderr).to_string();
    assert!(
        String::from_utf8_lossy(&prof.stderr).contains(msg.trim()),
        "{msg}"
    );
    let p = load(&path);
    let failed_opens: u64 = ["open", "openat"]
        .iter()
        .filter_map(|op| user_op(&p, op))
        .map(|o| o.errors)
        .sum();
    assert_eq!(failed_opens, 1);
}

#[test]
fn grep_recursive() {
    let p = same_behaviour(&["grep", "-r", "-c", "define", "/usr/include/linux"]);
    assert!(count(&p, "read") > 10);
    assert!(count(&p, "openat") > 10);
    // grep found nothing?  Then exit 1 both ways, also fine: checked above.
}

#[test]
fn tar_archive_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let tarball = dir.path().join("inc.tar");
    let t = tarball.to_str().unwrap();
    let p = same_behaviour(&["tar", "-cf", t, "-C", "/usr/include", "linux"]);
    assert!(count(&p, "write") > 0);
    let listing = same_behaviour(&["tar", "-tf", t]);
    assert!(count(&listing, "read") > 0);
}

#[test]
#[ignore = "needs python3"]
fn python_with_stdio_and_exec_child() {
    need_program("python3", "python3");
    let script = "import subprocess,sys\n\
                  open('f.txt','w').write('x'*10000)\n\
                  d=open('f.txt').read()\n\
                  r=subprocess.run(['cat','f.txt'],capture_output=True)\n\
                  print(len(d), len(r.stdout))\n\
                  sys.exit(3)\n";
    let p = same_behaviour(&["python3", "-c", script]);
    // The exec'd `cat` child is profiled through the inherited LD_PRELOAD.
    assert!(
        p.processes.iter().any(|pr| pr.exe.ends_with("/cat")),
        "{:?}",
        p.processes.iter().map(|x| &x.exe).collect::<Vec<_>>()
    );
    assert!(p.processes.iter().any(|pr| pr.exe.contains("python3")));
    assert_eq!(p.meta.exit, Some(fsprof_core::profile::ExitStatus::Code(3)));
}

#[test]
#[ignore = "needs sqlite3"]
fn sqlite3_database() {
    need_program("sqlite3", "sqlite3");
    let sql = "create table t(a,b); insert into t values(1,'one'),(2,'two'); select sum(a), group_concat(b) from t;";
    let p = same_behaviour(&["sqlite3", "db.sqlite", sql]);
    assert!(
        count(&p, "fsync") + count(&p, "fdatasync") > 0,
        "sqlite syncs its journal"
    );
    assert!(count(&p, "pwrite") + count(&p, "write") > 0);
}

#[test]
fn errno_values_and_readdir_end_are_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("known_calls", dir.path(), &["-pthread"]);
    let work = dir.path().join("w");
    std::fs::create_dir(&work).unwrap();
    let p = same_behaviour(&[
        exe.to_str().unwrap(),
        work.to_str().unwrap(),
        "2",
        "10",
        "5",
    ]);
    assert_eq!(count(&p, "pread"), 25);
}

#[test]
fn stdout_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = run_profiled(dir.path(), &["printf", "exact\\n"]);
    assert_eq!(out.stdout, b"exact\n");
}

#[test]
fn signal_deaths_pass_through_as_128_plus_signal() {
    let dir = tempfile::tempdir().unwrap();
    for (sig, code) in [("TERM", 143), ("KILL", 137), ("SEGV", 139)] {
        let script = format!("cat /etc/hostname >/dev/null; kill -{sig} $$");
        let bare = Command::new("sh").args(["-c", &script]).status().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(bare.signal().map(|s| 128 + s), Some(code));
        let (out, path) = run_profiled(dir.path(), &["sh", "-c", &script]);
        assert_eq!(out.status.code(), Some(code), "{sig}");
        let p = load(&path);
        assert_eq!(p.meta.exit.as_ref().map(|e| e.shell_code()), Some(code));
        std::fs::remove_file(path).unwrap();
    }
}

#[test]
fn tmpdir_with_a_space_still_loads_the_shim() {
    // LD_PRELOAD splits on spaces: the shim must not be installed there.
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("with space");
    std::fs::create_dir(&odd).unwrap();
    let out_path = dir.path().join("p.json");
    let out = fsprof()
        .env("TMPDIR", &odd)
        .args(["run", "-q", "-o"])
        .arg(&out_path)
        .args(["--", "cat", "/etc/hostname"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("cannot be preloaded"));
    assert!(count(&load(&out_path), "read") >= 1);
}

/// `Sig*` lines of /proc/self/status as `cmd` sees them when started, bare
/// or through fsprof, from a parent that ignores SIGPIPE and SIGUSR1 and
/// blocks SIGUSR2 and SIGINT (the state a shell's `trap '' PIPE` or a
/// supervisor leaves).
fn signal_state(cmd: &mut Command) -> String {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the closure only makes the
    // async-signal-safe calls signal and sigprocmask on local data.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            libc::signal(libc::SIGUSR1, libc::SIG_IGN);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR2);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            Ok(())
        })
    };
    let o = succeeds(cmd);
    let out = stdout(&o);
    assert!(out.contains("SigIgn:") && out.contains("SigBlk:"), "{out}");
    out
}

/// The command starts with the mask and ignored signals fsprof was started
/// with, not fsprof's own (it blocks its stop signals, Rust ignores
/// SIGPIPE), and catches nothing: as without fsprof.
#[test]
fn the_command_inherits_the_signal_state_fsprof_was_started_with() {
    let dir = tempfile::tempdir().unwrap();
    let status = ["grep", "-E", "^Sig(Blk|Ign|Cgt):", "/proc/self/status"];
    let bare = signal_state(Command::new(status[0]).args(&status[1..]));
    let field = |name: &str| {
        let l = bare
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default();
        u64::from_str_radix(l[name.len()..].trim(), 16).unwrap_or_else(|e| panic!("{l}: {e}"))
    };
    let bit = |s: i32| 1u64 << (s - 1);
    let ign = bit(libc::SIGPIPE) | bit(libc::SIGUSR1);
    assert_eq!(field("SigIgn:") & ign, ign, "{bare}");
    let blk = bit(libc::SIGUSR2) | bit(libc::SIGINT);
    assert_eq!(field("SigBlk:") & blk, blk, "{bare}");
    let profiled = signal_state(
        fsprof()
            .current_dir(dir.path())
            .args(["run", "-q", "-o", "-", "--"])
            .args(status),
    );
    // -o - puts the profile after the command's output on stdout.
    let profiled: String = profiled.lines().take(3).map(|l| format!("{l}\n")).collect();
    assert_eq!(profiled, bare);
}

/// fsprof's own process catches no signal but the ones its child resets
/// between `clone` and `execve` (fsprof_sys::inherited::CHANGED): the
/// child shares fsprof's memory until it execs, so a handler of fsprof's
/// must not run there. Read from the command's parent, fsprof.
#[test]
fn fsprof_catches_no_signal_but_the_ones_its_children_reset() {
    let dir = tempfile::tempdir().unwrap();
    let o = succeeds(
        fsprof()
            .current_dir(dir.path())
            .args(["run", "-q", "-o", "-", "--", "sh", "-c"])
            .arg("grep ^SigCgt: /proc/$PPID/status"),
    );
    let line = stdout(&o).lines().next().unwrap_or_default().to_string();
    let caught = u64::from_str_radix(line.trim_start_matches("SigCgt:").trim(), 16)
        .unwrap_or_else(|e| panic!("{line}: {e}"));
    // The stop signals and SIGCHLD once the capture waits on its low
    // water (fsprof_sys::signals::restore_dispositions).
    let reset = fsprof_sys::inherited::CHANGED
        .iter()
        .chain(&fsprof_sys::signals::TAKEN)
        .fold(0u64, |m, s| m | 1 << (s - 1));
    assert_eq!(
        caught & !reset,
        0,
        "fsprof catches {caught:#x}; add the new handler's signal to inherited::CHANGED"
    );
}

/// `access` made to say a missing path exists, for everything else the
/// next definition's.
const FAKE_ACCESS: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
int access(const char *path, int mode)
{
    if (strcmp(path, "/fsprof-test-no-such-file") == 0)
        return 0;
    int (*next)(const char *, int) = (int (*)(const char *, int))dlsym(RTLD_NEXT, "access");
    return next(path, mode);
}
"#;

const ASK_ACCESS: &str = r#"
#include <stdio.h>
#include <unistd.h>
int main(void)
{
    printf("%d %d\n", access("/fsprof-test-no-such-file", F_OK), access("/", F_OK));
    return 0;
}
"#;

/// A library the user preloads comes after the shim (LD_PRELOAD keeps it,
/// behind ours), so the shim's `access` must call through to it, not past
/// it to libc: the program sees that library's answer, and the profile
/// counts both calls.
#[test]
fn a_library_the_user_preloads_still_interposes_behind_the_shim() {
    let dir = tempfile::tempdir().unwrap();
    let lib = compile_source(
        "fake_access",
        FAKE_ACCESS,
        dir.path(),
        &["-shared", "-fPIC", "-ldl"],
    );
    let prog = compile_source("ask_access", ASK_ACCESS, dir.path(), &[]);
    let bare = Command::new(&prog)
        .env("LD_PRELOAD", &lib)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&bare.stdout), "0 0\n");
    let path = dir.path().join("p.json");
    let out = succeeds(
        fsprof()
            .env("LD_PRELOAD", &lib)
            .args(["run", "-q", "-o"])
            .arg(&path)
            .arg("--")
            .arg(&prog),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "0 0\n",
        "the preloaded library was skipped"
    );
    assert_eq!(count(&load(&path), "access"), 2);
}

/// A program linked against the old versioned `__xstat@GLIBC_2.2.5` (a
/// compat symbol only in newer glibc, which dlsym cannot see) binds to
/// the shim's `__xstat`, which must still find the real one.
const OLD_XSTAT: &str = r#"
#include <stdio.h>
#include <sys/stat.h>
extern int __xstat(int ver, const char *path, struct stat *st);
__asm__(".symver __xstat,__xstat@GLIBC_2.2.5");
int main(void)
{
    struct stat st;
    int r = __xstat(1, "/", &st);
    printf("%d %d\n", r, S_ISDIR(st.st_mode));
    return 0;
}
"#;

#[test]
fn a_versioned_compat_symbol_still_reaches_the_real_function() {
    let dir = tempfile::tempdir().unwrap();
    let prog = compile_source("old_xstat", OLD_XSTAT, dir.path(), &[]);
    let p = same_behaviour(&[prog.to_str().unwrap()]);
    assert_eq!(count(&p, "stat"), 1);
}

/// `cat /etc/hostname` under `strace -f -e trace=CALLS` under `fsprof run`
/// (its stdout the test's pipe): the profile, in which `cat` was
/// profiled, and what strace saw.
fn strace_cat_under_run(calls: &str) -> (fsprof_core::Profile, String) {
    strace_under_run(calls, &["/bin/cat", "/etc/hostname"])
}

/// [`strace_cat_under_run`] of `command`, which must run a `cat`.
fn strace_under_run(calls: &str, command: &[&str]) -> (fsprof_core::Profile, String) {
    let strace = need_program("strace", "strace");
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("strace.log");
    let trace = format!("trace={calls}");
    let (o, profile) = run_profiled(
        d.path(),
        &[
            strace.to_str().unwrap(),
            "-qq",
            "-f",
            // Descriptors with their paths: which file a call was on.
            "-y",
            "-e",
            &trace,
            "-o",
            log.to_str().unwrap(),
        ]
        .iter()
        .chain(command)
        .copied()
        .collect::<Vec<_>>(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = load(&profile);
    assert!(
        p.processes.iter().any(|pr| pr.exe.ends_with("/cat")),
        "cat was not profiled: {:?}",
        p.processes.iter().map(|pr| &pr.exe).collect::<Vec<_>>()
    );
    (p, std::fs::read_to_string(&log).unwrap())
}

/// [`strace_cat_under_run`] of a `cat` a shell execs `sleep` seconds into
/// the run.
fn strace_cat_exec_d_after(sleep: &str, calls: &str) -> (fsprof_core::Profile, String) {
    let script = format!("sleep {sleep}; exec /bin/cat /etc/hostname");
    strace_under_run(calls, &["/bin/sh", "-c", &script])
}

/// A process's set-up asks the kernel for nothing the run does not use:
/// no `gettid` (a slot record's thread id, which nothing read, cost every
/// process and thread one). strace of `cat` under `fsprof run`, its calls
/// counted (so the shim was there), sees none.
#[test]
#[ignore = "needs strace"]
fn a_process_set_up_asks_for_no_thread_id() {
    let (_, seen) = strace_cat_under_run("gettid");
    assert!(!seen.contains("gettid"), "{seen}");
}

/// Nor what it already knows: an exec'd image's effective uid is in its
/// auxiliary vector (no `geteuid`). `cat`'s fstat of its inherited stdout
/// (a pipe here) is counted under the class the shim found for it.
#[test]
#[ignore = "needs strace"]
fn an_exec_d_image_asks_not_for_its_uid() {
    let (p, seen) = strace_cat_under_run("geteuid");
    let cat = p
        .processes
        .iter()
        .find(|pr| pr.exe.ends_with("/cat"))
        .expect("cat was profiled");
    let pipe_fstat = cat
        .layers
        .iter()
        .find(|l| l.name == "user-nonfile")
        .and_then(|l| l.op("pipe_fstat"))
        .map_or(0, |o| o.post);
    assert_eq!(pipe_fstat, 1, "{cat:?}");
    assert!(!seen.contains("geteuid"), "{seen}");
}

/// An exec'd image checks the control file with a statx that asks for no
/// time (shim/run.c, ctl_stat): an fstat marked the file's ctime as seen,
/// and the kernel then gave the next write to the file a fine-grained time,
/// the timestamps updated again at the next process's first write fault.
/// strace of `cat` under `fsprof run`: the control file is looked at, and
/// never with fstat or a statx asking for a time.
#[test]
#[ignore = "needs strace"]
fn an_exec_d_image_asks_the_control_file_for_no_time() {
    let (_, seen) = strace_cat_under_run("fstat,newfstatat,statx");
    let on_control: Vec<&str> = seen.lines().filter(|l| l.contains("/control>")).collect();
    assert!(
        !on_control.is_empty(),
        "the control file was not looked at: {seen}"
    );
    for l in &on_control {
        // The call's arguments, not the answer: the kernel says which
        // times it has (stx_mask=...|STATX_ATIME) whatever was asked.
        let asked = l.split(", {").next().unwrap();
        assert!(
            asked.contains("statx(")
                && !["TIME", "STATX_BASIC_STATS", "STATX_ALL"]
                    .iter()
                    .any(|t| asked.contains(t)),
            "{l}"
        );
    }
}

/// A process whose arena block `fsprof run` has reserved lets the block's
/// pages fault in as it writes them: no `madvise(MADV_POPULATE_WRITE)`,
/// which cost an exec'd process more than the faults it saved
/// (shim/pool.c, fsprof_pool_create_in_block). strace of a `cat` exec'd
/// after the run's first refills (a block taken before them is made with
/// one, rightly: its pages may not exist yet).
#[test]
#[ignore = "needs strace"]
fn a_process_in_a_reserved_block_does_not_populate_it() {
    let (_, seen) = strace_cat_exec_d_after("0.3", "execve,madvise");
    let exec = seen
        .lines()
        .position(|l| l.contains("execve(\"/bin/cat\""))
        .unwrap_or_else(|| panic!("no exec of cat: {seen}"));
    let lines: Vec<&str> = seen.lines().collect();
    let pid = lines[exec].split_whitespace().next().unwrap();
    let populated: Vec<&&str> = lines[exec..]
        .iter()
        .filter(|l| l.split_whitespace().next() == Some(pid) && l.contains("MADV_POPULATE"))
        .collect();
    assert!(populated.is_empty(), "{populated:?}\n{seen}");
}

/// An image takes its start time from the run's clock: under the TSC a
/// tick read, not a `clock_gettime` system call (~1.2 us of every new
/// process on this VM; shim/pool.c, fill_header), which fsprof converts at
/// the run's end. strace of a `cat` exec'd 0.2 s into the run: no
/// `clock_gettime` where the run's clock is the TSC, and the process
/// placed where it started whatever the clock.
#[test]
#[ignore = "needs strace"]
fn an_image_reads_its_start_time_without_a_system_call() {
    let (p, seen) = strace_cat_exec_d_after("0.2", "clock_gettime");
    let cat = p
        .processes
        .iter()
        .find(|pr| pr.exe.ends_with("/cat"))
        .expect("cat was profiled");
    assert!(
        (200_000_000..=p.meta.duration_ns).contains(&cat.start_ns),
        "cat started at {} ns of a {} ns run",
        cat.start_ns,
        p.meta.duration_ns
    );
    if p.meta.clock.source == fsprof_core::profile::ClockSource::Tsc {
        assert!(!seen.contains("clock_gettime"), "{seen}");
    }
}
