//! `fsprof kernel` end to end, as root, against real programs, a real
//! loop-mounted ext4, a real FUSE mount (bindfs) and strace.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use fsprof_core::format::read_profile;
use fsprof_core::{BucketLayout, Profile, Resolution};

use crate::loopfs::{LoopFs, Throttle};
use fsprof_testkit::{disk_tempdir, fsprof, fsprof_path, need_program, need_root, succeeds};

/// A scratch directory for a test that loads eBPF programs (as root).
fn ebpf_scratch() -> tempfile::TempDir {
    need_root("eBPF");
    tempfile::tempdir().unwrap()
}

/// [`ebpf_scratch`] and the path `name` in it, for the profile.
fn ebpf_out(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = ebpf_scratch();
    let out = dir.path().join(name);
    (dir, out)
}

/// A copy of cat named `name` in `dir`: a task name (what `--comm`
/// selects) nothing else on the machine has.
fn cat_named(dir: &Path, name: &str) -> PathBuf {
    let cat = dir.join(name);
    std::fs::copy("/bin/cat", &cat).unwrap();
    cat
}

/// Ctrl-C to a running `fsprof kernel`: it exits 130.
fn interrupt(child: &mut std::process::Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

/// Runs `cmd` with its output thrown away; it must succeed.
#[track_caller]
fn quietly(cmd: &mut Command) {
    let st = cmd.stdout(Stdio::null()).status().unwrap();
    assert!(st.success(), "{cmd:?}: {st}");
}

/// The package each tool the kernel tests drive comes from.
fn need_tool(tool: &str) {
    let package = match tool {
        "mkfs.ext4" => "e2fsprogs",
        "losetup" => "mount",
        "setpriv" => "util-linux",
        t => t,
    };
    need_program(tool, package);
}

fn kernel(args: &[&str], out: &Path) -> (Profile, std::process::Output) {
    kernel_run(kernel_cmd(args, out), out)
}

fn kernel_cmd(args: &[&str], out: &Path) -> Command {
    let mut cmd = fsprof();
    cmd.arg("kernel")
        .args(["-q", "-f", "-o"])
        .arg(out)
        .args(args)
        .stdout(Stdio::null());
    cmd
}

fn kernel_run(mut cmd: Command, out: &Path) -> (Profile, std::process::Output) {
    let o = cmd.output().unwrap();
    assert!(
        out.exists(),
        "no profile written; stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let p = read_profile(out).unwrap();
    let rep = fsprof_core::check::check_profile(&p);
    assert!(rep.ok(), "fsprof check failed: {:?}", rep.errors);
    (p, o)
}

fn ops(p: &Profile, layer: &str) -> BTreeMap<String, (u64, u64)> {
    p.layer(layer)
        .map(|l| {
            l.ops
                .iter()
                .map(|o| (o.name.clone(), (o.post, o.errors)))
                .collect()
        })
        .unwrap_or_default()
}

/// `strace -f -c` calls and errors per syscall.
fn strace_counts(cmd: &[&str], dir: &Path) -> BTreeMap<String, (u64, u64)> {
    let out = dir.join("strace.txt");
    let st = Command::new("strace")
        .args(["-f", "-c", "-o"])
        .arg(&out)
        .args(cmd)
        // Same stdio as under `fsprof kernel` in `kernel()`: programs probe
        // their stdio (isatty), so it must match for the counts to match.
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(st.status.code().is_some());
    let mut m = BTreeMap::new();
    for line in std::fs::read_to_string(&out).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 5 && f[0].as_bytes()[0].is_ascii_digit() && *f.last().unwrap() != "total" {
            let errs = if f.len() == 6 {
                f[4].parse().unwrap()
            } else {
                0
            };
            m.insert(f.last().unwrap().to_string(), (f[3].parse().unwrap(), errs));
        }
    }
    m
}

#[test]
#[ignore = "needs root, strace"]
fn syscall_counts_equal_strace_for_real_programs() {
    let dir = ebpf_scratch();
    need_tool("strace");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    for i in 0..20 {
        std::fs::write(data.join(format!("f{i}")), vec![b'x'; 1000 * i]).unwrap();
    }
    let d = data.to_str().unwrap();
    let programs: Vec<Vec<String>> = vec![
        vec!["ls".into(), "-la".into(), "/usr/include".into()],
        vec!["find".into(), "/usr/include".into(), "-name".into(), "*.h".into()],
        vec!["tar".into(), "-cf".into(), "/dev/null".into(), d.into()],
        // Several processes: follows forks.
        vec![
            "sh".into(),
            "-c".into(),
            format!("ls {d} >/dev/null; cat {d}/f3 {d}/f5 >/dev/null; wc -c {d}/f7 >/dev/null; cat /nonexistent 2>/dev/null; true"),
        ],
    ];
    for prog in &programs {
        let argv: Vec<&str> = prog.iter().map(String::as_str).collect();
        let want = strace_counts(&argv, dir.path());
        let mut args = vec!["--all-syscalls", "--layers", "syscall", "--"];
        args.extend(&argv);
        let (p, _) = kernel(&args, &dir.path().join("k.json"));
        let got = ops(&p, "syscall");
        assert!(
            want.len() > 10,
            "strace saw too little of {argv:?}: {want:?}"
        );
        assert_eq!(got, want, "fsprof kernel vs strace -f -c for {argv:?}");

        // The fallback to perf tracepoints counts the same.
        let mut args = vec![
            "--all-syscalls",
            "--perf-tracepoints",
            "--layers",
            "syscall",
            "--",
        ];
        args.extend(&argv);
        let (p, _) = kernel(&args, &dir.path().join("k3.json"));
        assert_eq!(
            ops(&p, "syscall"),
            want,
            "perf tracepoints vs strace for {argv:?}"
        );

        // Default: only the file-system syscalls, with the same counts.
        let mut args = vec!["--layers", "syscall", "--"];
        args.extend(&argv);
        let (p, _) = kernel(&args, &dir.path().join("k2.json"));
        let got = ops(&p, "syscall");
        assert!(
            got.contains_key("openat") && !got.contains_key("mmap"),
            "{got:?}"
        );
        for (name, counts) in &got {
            assert_eq!(Some(counts), want.get(name), "{name} in {argv:?}");
        }
    }
}

#[test]
#[ignore = "needs root"]
fn errors_name_the_problem() {
    let (_dir, out) = ebpf_out("p.json");
    let run = |args: &[&str]| {
        let o = fsprof()
            .arg("kernel")
            .arg("-o")
            .arg(&out)
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // A pid that does not exist.
    let mut pid = 4_000_000;
    while Path::new(&format!("/proc/{pid}")).exists() {
        pid += 1;
    }
    let (code, err) = run(&["--pid", &pid.to_string()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("no process with pid {pid}")), "{err}");
    // A tracepoint this kernel lacks.
    let (code, err) = run(&["--require-tracepoint", "nosuch:event", "--", "true"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("tracepoint nosuch:event is not usable: this kernel does not have it"),
        "{err}"
    );
    // A layer asked for by name whose tracepoint is missing is an error too;
    // nothing to profile is an error.
    let (code, err) = run(&[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("say what to profile"), "{err}");
    let (code, err) = run(&["--", "/nonexistent/cmd"]);
    assert_eq!(code, Some(127), "{err}");
    assert!(err.contains("command not found"), "{err}");
    let (code, err) = run(&["--comm", "a-name-longer-than-15", "--duration", "1s"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("longer than the 15 bytes"), "{err}");
    assert!(!out.exists());
    // Exactly one line per error, no panic.
    assert!(!err.contains("panicked"));
}

#[test]
#[ignore = "needs root, setpriv"]
fn unprivileged_user_gets_a_clear_error() {
    need_tool("setpriv");
    // A copy nobody can execute, outside any private directory.
    let dir = ebpf_scratch();
    let bin = dir.path().join("fsprof");
    std::fs::copy(fsprof_path(), &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "--inh-caps=-all",
            "--",
        ])
        .arg(&bin)
        .args(["kernel", "-o", "/tmp/never-written.json", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("needs root, or CAP_BPF and CAP_PERFMON (missing: CAP_BPF, CAP_PERFMON)"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// Starts `fsprof kernel` and returns once it has attached. The caller
/// waits for the child; on a failed read the test is over anyway.
#[allow(clippy::zombie_processes)]
fn start_attached(
    args: &[&str],
    out: &Path,
) -> (std::process::Child, BufReader<std::process::ChildStderr>) {
    let mut child = fsprof()
        .arg("kernel")
        .args(["-q", "-f", "-o"])
        .arg(out)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 {
            let st = child.wait();
            panic!("fsprof exited before attaching: {st:?}");
        }
        if line.contains("fsprof: tracing") {
            return (child, err);
        }
    }
}

#[test]
#[ignore = "needs root"]
fn ctrl_c_mid_run_writes_the_profile() {
    let dir = ebpf_scratch();
    // With a command: the interrupt is passed on, the profile written.
    let out = dir.path().join("cmd.json");
    let (mut child, mut err) = start_attached(
        &[
            "--all-syscalls",
            "--layers",
            "syscall",
            "--",
            "sh",
            "-c",
            "cat /etc/hostname >/dev/null; exec sleep 60",
        ],
        &out,
    );
    // Wait until sleep runs (the cat is done by then).
    let pid = child.id() as i32;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "sleep never started under fsprof"
        );
        let kids =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        let k = kids.split_whitespace().next().map(str::to_string);
        if let Some(k) = k {
            if std::fs::read_to_string(format!("/proc/{k}/comm"))
                .unwrap_or_default()
                .trim()
                == "sleep"
            {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert_eq!(st.code(), Some(130), "{rest}");
    assert!(rest.contains("interrupted by signal 2"), "{rest}");
    let p = read_profile(&out).unwrap();
    let sc = ops(&p, "syscall");
    assert!(sc.get("execve").is_some_and(|c| c.0 >= 2), "{sc:?}");
    assert!(sc.contains_key("openat"), "{sc:?}");
    assert_eq!(
        p.meta.exit,
        Some(fsprof_core::profile::ExitStatus::Signal(2))
    );

    // Without a command (--comm): the profile is written on SIGINT too.
    let out = dir.path().join("comm.json");
    let (mut child, _err) =
        start_attached(&["--comm", "fsprof-no-such", "--layers", "syscall"], &out);
    interrupt(&mut child);
    read_profile(&out).unwrap();
}

#[test]
#[ignore = "needs root"]
fn pid_mode_follows_a_running_process() {
    let (dir, out) = ebpf_out("pid.json");
    let f = dir.path().join("go");
    // The target waits for a file to appear, then opens files and exits.
    let script = format!(
        "while [ ! -e {0} ]; do sleep 0.01; done; cat /etc/hostname /etc/passwd >/dev/null",
        f.display()
    );
    let mut target = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let pid = target.id().to_string();
    let (mut child, _err) = start_attached(&["--pid", &pid, "--layers", "syscall"], &out);
    std::fs::write(&f, "").unwrap();
    target.wait().unwrap();
    assert_eq!(
        child.wait().unwrap().code(),
        Some(0),
        "fsprof stops when the pid exits"
    );
    let p = read_profile(&out).unwrap();
    let sc = ops(&p, "syscall");
    // cat (a forked child) opened its two files.
    assert!(sc.get("openat").is_some_and(|c| c.0 >= 2), "{sc:?}");
    assert!(sc.contains_key("execve"), "{sc:?}");
}

#[test]
#[ignore = "needs root"]
fn duration_ends_a_run_without_a_command() {
    let dir = ebpf_scratch();
    // A task of the target that, once tracing runs, reads one line from a
    // FIFO and then blocks in read(2) again: that read is still in
    // progress when --duration stops tracing.
    let cat = cat_named(dir.path(), "fsprof-blk-tst");
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut blocked = Command::new("sh")
        .arg("-c")
        .arg("exec 3<>\"$1\"; exec \"$0\" \"$1\"")
        .arg(&cat)
        .arg(&fifo)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let file = dir.path().join("d.json");
    let (mut child, _err) = start_attached(
        &[
            "--comm",
            "fsprof-blk-tst",
            "--duration",
            "500ms",
            "--layers",
            "syscall,block",
        ],
        &file,
    );
    // The block layer is system-wide; on an idle machine nothing else may
    // reach the disk in 500 ms (an official CI run had no block layer and
    // so no scope line): an fsync of new data on the build's disk does.
    let disk = disk_tempdir();
    let mut f = std::fs::File::create(disk.path().join("block")).unwrap();
    f.write_all(&[1u8; 1 << 16]).unwrap();
    f.sync_all().unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .unwrap()
        .write_all(b"line\n")
        .unwrap();
    let status = child.wait().unwrap();
    blocked.kill().unwrap();
    blocked.wait().unwrap();
    let p = read_profile(&file).unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(p.meta.duration_ns >= 500_000_000, "{}", p.meta.duration_ns);
    assert!(p.meta.exit.is_none());
    // The profile says what it covers, not fsprof's own command line.
    assert_eq!(p.meta.target.as_deref(), Some("tasks named fsprof-blk-tst"));
    assert!(p.meta.command.is_empty(), "{:?}", p.meta.command);
    let read = p.layer("syscall").and_then(|l| l.op("read")).unwrap();
    assert_eq!(read.unfinished(), 1, "{read:?}");
    let report = fsprof().arg("report").arg(&file).output().unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.starts_with("fsprof kernel: tasks named fsprof-blk-tst\n"),
        "{text}"
    );
    assert!(
        text.contains("  block layer: system-wide, every task's requests, not only the target's"),
        "{text}"
    );
    assert!(
        text.contains("note: read: 1 call(s) entered but not returned (they were in progress when tracing stopped)"),
        "{text}"
    );
}

#[test]
#[ignore = "needs root"]
fn intervals_add_up_to_the_totals() {
    let dir = ebpf_scratch();
    let (p, o) = kernel(
        &[
            "--interval",
            "20ms",
            "--resolution",
            "4",
            "--layers",
            "syscall",
            "--",
            "sh",
            "-c",
            "for i in 1 2 3 4 5; do cat /etc/hostname >/dev/null; sleep 0.02; done",
        ],
        &dir.path().join("i.json"),
    );
    assert!(o.status.success());
    assert!(p.intervals.len() >= 3, "{} intervals", p.intervals.len());
    assert_eq!(p.meta.resolution.get(), 4);
    // check_profile (in `kernel`) compared the interval sums with the totals.
}

#[test]
#[ignore = "needs root, mkfs.ext4, losetup"]
fn block_and_ext4_layers_see_direct_io_and_fsync_on_a_loop_mount() {
    need_root("eBPF");
    let fs = LoopFs::ext4(64);
    let dir = tempfile::tempdir().unwrap();
    let target = fs.mnt().join("f");
    let of = format!("of={}", target.display());
    let out = dir.path().join("b.json");
    let mut cmd = kernel_cmd(
        &[
            "--layers",
            "syscall,fs,block",
            "--",
            "dd",
            "if=/dev/zero",
            &of,
            "bs=64k",
            "count=16",
            "oflag=direct",
            "conv=fsync",
            "status=none",
        ],
        &out,
    );
    // Each direct write waits for its request, but on a fast machine the
    // loop worker on the other CPU can complete it before the writer goes
    // to sleep, and a call that never slept is not a block wait. Writes
    // held back to 512 KiB/s (about 2 s for the 1 MiB) are completed by
    // the loop worker long after every writer sleeps.
    let throttle = Throttle::writes(&fs.name(), 512 << 10);
    let _procs = throttle.join_on_spawn(&mut cmd);
    let started = std::time::Instant::now();
    let (p, o) = kernel_run(cmd, &out);
    // A lower bound that holds on any machine: proof that the writes
    // were held back (at least 15 of the 16 requests of 64 KiB wait for
    // the limit), so that the count below does not hang on the race.
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(1800),
        "the writes were not throttled: {:?}",
        started.elapsed()
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sc = ops(&p, "syscall");
    assert_eq!(sc.get("write").map(|c| c.0), Some(16), "{sc:?}");
    assert_eq!(sc.get("fsync").map(|c| c.0), Some(1), "{sc:?}");
    let fsl = ops(&p, "fs");
    assert_eq!(fsl.get("ext4_sync_file").map(|c| c.0), Some(1), "{fsl:?}");

    let op = format!("{}:write", fs.name());
    let blk = p.layer("block").expect("block layer");
    let lat = blk
        .op(&op)
        .unwrap_or_else(|| panic!("no {op} in {:?}", ops(&p, "block")));
    assert!(lat.post >= 16, "{op}: {} requests", lat.post);
    let sizes = p.layer("block-size").unwrap().op(&op).unwrap();
    let layout = BucketLayout::new(Resolution::new(1).unwrap());
    let b64k = layout.index(65536).unwrap();
    // The 16 direct writes of 64 KiB are 64 KiB requests on the loop device
    // (journal and metadata writes land in other buckets).
    assert!(
        sizes.histogram.get(b64k) >= 16,
        "size buckets {:?}",
        sizes.histogram
    );
    assert_eq!(sizes.post, lat.post);

    // Every throttled write slept until its own request completed, so is
    // charged; the first may pass within the throttle's first slice and
    // complete before its writer sleeps (15 of 16 at idle, see above).
    let rep = fsprof()
        .args(["report", "--attribution"])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&rep.stdout);
    let table = text
        .split("layered attribution")
        .nth(1)
        .unwrap_or_else(|| panic!("no attribution table in\n{text}"));
    let row = table
        .lines()
        .find(|l| l.trim_start().starts_with("syscall/write"))
        .unwrap_or_else(|| panic!("no syscall/write attribution row in\n{text}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[1], "16", "{row}");
    assert!(matches!(cols[2], "15" | "16"), "{row}");
}

/// A bindfs FUSE mount of a temp dir, unmounted on drop.
struct Bindfs {
    dir: tempfile::TempDir,
    mounted: bool,
}

impl Drop for Bindfs {
    fn drop(&mut self) {
        if self.mounted {
            let mnt = self.dir.path().join("mnt");
            // Root unmounts FUSE like any file system; lazily if busy.
            let ok = Command::new("umount")
                .arg(&mnt)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                let _ = Command::new("umount").arg("-l").arg(&mnt).status();
            }
        }
    }
}

#[test]
#[ignore = "needs root, bindfs"]
fn fuse_layer_sees_the_requests_of_a_bindfs_mount() {
    need_root("eBPF");
    need_tool("bindfs");
    let dir = tempfile::tempdir().unwrap();
    let (src, mnt) = (dir.path().join("src"), dir.path().join("mnt"));
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    std::fs::write(src.join("hello"), vec![b'h'; 100_000]).unwrap();
    let ok = Command::new("bindfs")
        .arg(&src)
        .arg(&mnt)
        .status()
        .unwrap()
        .success();
    assert!(ok, "bindfs mount failed");
    let guard = Bindfs { dir, mounted: true };
    let file = mnt.join("hello");
    let (p, o) = kernel(
        &[
            "--layers",
            "fuse,syscall",
            "--",
            "cat",
            file.to_str().unwrap(),
        ],
        &guard.dir.path().join("f.json"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let fu = ops(&p, "fuse");
    for op in ["lookup", "open", "read"] {
        assert!(fu.get(op).is_some_and(|c| c.0 >= 1), "no FUSE {op}: {fu:?}");
    }
    let l = p.layer("fuse").unwrap();
    // RELEASE is sent in the background when cat closes the file, so its
    // reply may still be on its way when cat has exited; every request cat
    // waited for was answered.
    assert!(
        l.ops.iter().all(|o| o.pre == o.post || o.name == "release"),
        "requests left unanswered: {:?}",
        l.ops
    );
}

#[test]
#[ignore = "needs root"]
fn probe_report_names_every_layer_and_the_fentry_verdict() {
    need_root("eBPF");
    let o = fsprof()
        .args(["kernel", "--probe-report"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout);
    for what in [
        "syscall layer",
        "fs layer (tracepoint pairs)",
        "fs layer (fentry/fexit)",
        "fuse layer",
        "block layer",
    ] {
        let line = s
            .lines()
            .find(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no `{what}` in\n{s}"));
        let verdict = line[28..].trim_start();
        // Either usable, or a reason that is more than a bare "no".
        assert!(
            verdict.starts_with("yes ") || (verdict.starts_with("no ") && verdict.len() > 20),
            "{line}"
        );
    }
    // The layers fsprof uses were attached for real by the probe.
    for what in ["syscall layer", "block layer"] {
        let line = s.lines().find(|l| l.starts_with(what)).unwrap();
        assert!(line[28..].trim_start().starts_with("yes"), "{line}");
    }
}

fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
}

struct Cgroup(PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
#[ignore = "needs root"]
fn comm_and_cgroup_filters_select_tasks_in_the_kernel() {
    let (dir, out) = ebpf_out("comm.json");
    // --comm: a copy of cat under a name nothing else on the machine has.
    let cat = cat_named(dir.path(), "fsprof-cat-tst");
    let (mut child, _e) =
        start_attached(&["--comm", "fsprof-cat-tst", "--layers", "syscall"], &out);
    quietly(Command::new(&cat).args(["/etc/hostname", "/etc/passwd"]));
    interrupt(&mut child);
    let sc = ops(&read_profile(&out).unwrap(), "syscall");
    assert!(sc.get("openat").is_some_and(|c| c.0 >= 2), "{sc:?}");
    assert!(
        !sc.contains_key("execve"),
        "exec happened under the old comm: {sc:?}"
    );

    // --cgroup: a fresh cgroup v2 that only our shell joins.
    let root = cgroup2_root().expect("no cgroup2 mount in /proc/mounts");
    let cg = Cgroup(root.join(format!("fsprof-test-{}", std::process::id())));
    std::fs::create_dir(&cg.0).unwrap();
    let out = dir.path().join("cg.json");
    let (mut child, _e) = start_attached(
        &["--cgroup", cg.0.to_str().unwrap(), "--layers", "syscall"],
        &out,
    );
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec cat /etc/hostname /etc/passwd /etc/group",
        cg.0.display()
    );
    quietly(Command::new("sh").args(["-c", &script]));
    interrupt(&mut child);
    let sc = ops(&read_profile(&out).unwrap(), "syscall");
    // sh's PATH search: failed execves, then the one that worked.
    assert!(sc.get("execve").is_some_and(|c| c.0 - c.1 == 1), "{sc:?}");
    assert!(sc.get("openat").is_some_and(|c| c.0 >= 3), "{sc:?}");
}

fn progs_of(pid: u32) -> usize {
    let prefix = fsprof_kernel::session::prog_prefix(pid);
    fsprof_kernel::sys::loaded_prog_names()
        .expect("listing BPF programs")
        .iter()
        .filter(|n| n.starts_with(&prefix))
        .count()
}

/// Detaching is asynchronous (a helper, or the kernel's exit path, closes
/// the fds), so wait for it, but not forever.
fn assert_programs_gone(pid: u32, how: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while progs_of(pid) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{how}: {} programs of fsprof pid {pid} still loaded after 30 s",
            progs_of(pid)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs root"]
fn programs_are_detached_after_exit_interrupt_and_kill() {
    let dir = ebpf_scratch();
    for (how, sig) in [
        ("exit", 0),
        ("SIGINT", libc::SIGINT),
        ("SIGKILL", libc::SIGKILL),
    ] {
        let out = dir.path().join(format!("{how}.json"));
        let args: &[&str] = if sig == 0 {
            &["--", "sleep", "60"]
        } else {
            &["--comm", "fsprof-none"]
        };
        let (mut child, _err) = start_attached(args, &out);
        let pid = child.id();
        // Every layer's programs are loaded and named after this fsprof.
        assert!(
            progs_of(pid) >= 4,
            "{how}: only {} programs of pid {pid} found",
            progs_of(pid)
        );
        if sig == 0 {
            // The command ends (killed), then fsprof exits normally.
            let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
            for k in kids.split_whitespace() {
                // SAFETY: signalling the test's grandchild.
                unsafe { libc::kill(k.parse().unwrap(), libc::SIGTERM) };
            }
        } else {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid as i32, sig) };
        }
        child.wait().unwrap();
        assert_programs_gone(pid, how);
    }
}

#[test]
#[ignore = "needs root"]
fn fs_layer_uses_fentry_where_allowed_and_says_so_in_one_line_otherwise() {
    let (_dir, out) = ebpf_out("p.json");
    let (p, o) = kernel(&["--layers", "fs", "--", "cat", "/etc/passwd"], &out);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("fentry")).collect();
    let report = fsprof()
        .args(["kernel", "--probe-report"])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&report.stdout);
    let uses = report
        .lines()
        .find(|l| l.starts_with("fs layer uses"))
        .unwrap_or_else(|| panic!("no `fs layer uses` line in\n{report}"));
    match fsprof_kernel::probe::fentry_support() {
        Ok(_) => {
            assert!(lines.is_empty(), "{err}");
            assert!(uses.contains("fentry/fexit on vfs_read"), "{uses}");
            let fs = ops(&p, "fs");
            assert!(fs.get("vfs_read").is_some_and(|c| c.0 > 0), "{fs:?}");
        }
        Err(why) => {
            eprintln!("NOTE: fentry refused here, checking the fallback: {why}");
            assert_eq!(lines.len(), 1, "{err}");
            assert!(
                lines[0].contains("refuses to")
                    && lines[0].contains("os error")
                    && lines[0].contains("tracepoint pairs instead"),
                "{}",
                lines[0]
            );
            assert!(uses.contains("tracepoint pairs only"), "{uses}");
        }
    }
    let o = fsprof()
        .args(["kernel", "-q", "-f", "-o"])
        .arg(&out)
        .args([
            "--layers",
            "fs",
            "--fs-functions",
            "fsprof_no_such_fn",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--fs-functions fsprof_no_such_fn"), "{err}");
}

/// The kernel manual's first `fsprof kernel` example, run as written: it follows
/// the command's children (sh, tar, wc: three execs) and tar reads every
/// file under /usr/include (at least one read per file, counted by walking
/// the directory, not by fsprof). `tar -cf /dev/null` would not: GNU tar
/// skips file data when the archive is /dev/null.
#[test]
#[ignore = "needs root"]
fn the_readme_kernel_example_reads_every_file() {
    need_root("eBPF");
    let readme =
        std::fs::read_to_string(fsprof_testkit::workspace().join("docs/kernel.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("sudo fsprof kernel -- "))
        .expect("a `sudo fsprof kernel -- CMD` example in docs/kernel.md");
    let example = line.split("   #").next().unwrap().trim();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.json");
    // As written, with the profile put where the test can find it.
    let script = example.replacen(
        "sudo fsprof kernel",
        &format!("\"$0\" kernel -q --layers syscall -o '{}'", out.display()),
        1,
    );
    succeeds(
        Command::new("sh")
            .arg("-c")
            .arg(&script)
            .arg(fsprof_path())
            .stdout(Stdio::null()),
    );
    let p = read_profile(&out).unwrap();
    let sc = ops(&p, "syscall");
    let files = walk_files(Path::new("/usr/include"));
    assert!(files > 1000, "{files} files under /usr/include");
    let reads = sc.get("read").map_or(0, |c| c.0);
    assert!(reads >= files, "{reads} reads for {files} files: {sc:?}");
    assert!(sc.get("execve").is_some_and(|c| c.0 >= 3), "{sc:?}");
}

fn walk_files(dir: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let t = e.file_type().unwrap();
        if t.is_dir() {
            n += walk_files(&e.path());
        } else if t.is_file() {
            n += 1;
        }
    }
    n
}
