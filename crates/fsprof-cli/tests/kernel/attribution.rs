//! Layered attribution against an independent ground truth: the time each
//! system call spent off the CPU in uninterruptible sleep (D state) in a
//! kernel stack that waits for I/O, from a tracefs recording of
//! `sched_switch` (with the stack of every D switch-out) and
//! `raw_syscalls` made beside fsprof. Cold reads, warm reads and buffered
//! writes followed by fsyncs,
//! on a loop-mounted ext4 (the loop device stacked on the machine's disk,
//! whose requests must not be counted twice), and reads that wait for
//! another process's read-ahead, held back by a block I/O throttle so that
//! the wait happens on any machine.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::loopfs::{LoopFs, Throttle};
use fsprof_testkit::{compile_source, fsprof_path, need_program, need_root};

/// Prints its pid, waits for a byte on stdin (so that the recordings can
/// attach first), then reads a file with `bs`-byte reads (sequentially, or
/// 400 at random offsets with readahead off), asks for the whole file to
/// be read ahead (`willneed`), or writes 4096 blocks of `bs` bytes with an
/// fsync after every 1024 (four fsyncs, so that one call's journal commit
/// is not the whole sample).
const WORKLOAD: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    static char buf[1 << 16];
    char c;
    size_t bs = (size_t)atoi(argv[3]);
    printf("%d\n", getpid());
    fflush(stdout);
    if (read(0, &c, 1) != 1) return 2;
    if (!strcmp(argv[1], "read")) {
        int fd = open(argv[2], O_RDONLY);
        while (read(fd, buf, bs) > 0) {}
        close(fd);
    } else if (!strcmp(argv[1], "random")) {
        int fd = open(argv[2], O_RDONLY);
        off_t blocks = lseek(fd, 0, SEEK_END) / bs;
        unsigned long x = 12345;
        posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
        for (int i = 0; i < 400; i++) {
            x = x * 6364136223846793005UL + 1442695040888963407UL;
            if (pread(fd, buf, bs, (off_t)((x >> 33) % blocks) * bs) < 0) return 3;
        }
        close(fd);
    } else if (!strcmp(argv[1], "willneed")) {
        int fd = open(argv[2], O_RDONLY);
        if (posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED)) return 3;
        close(fd);
    } else {
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        memset(buf, 'x', sizeof buf);
        for (int i = 0; i < 4096; i++) {
            if (write(fd, buf, bs) != (ssize_t)bs) return 3;
            if (i % 1024 == 1023 && fsync(fd)) return 4;
        }
        close(fd);
    }
    return 0;
}
"#;

/// Per syscall: calls, calls that waited, total time and waiting time (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Shares {
    calls: u64,
    waited: u64,
    time: f64,
    wait: f64,
}

impl Shares {
    fn calls_pct(&self) -> f64 {
        100.0 * self.waited as f64 / self.calls.max(1) as f64
    }
    fn time_pct(&self) -> f64 {
        if self.time > 0.0 {
            100.0 * self.wait / self.time
        } else {
            0.0
        }
    }
}

/// A tracefs instance of its own (so that other users of tracefs are not
/// disturbed), removed on drop. Its clock is CLOCK_MONOTONIC, the clock
/// fsprof's programs read, so that events of different CPUs merge in the
/// order they happened; every uninterruptible switch-out of the workload
/// records the kernel stack it sleeps in.
struct Recording {
    dir: PathBuf,
}

impl Recording {
    fn start(pid: u32) -> Recording {
        let root = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.join("instances").is_dir())
            .expect("tracefs is mounted (fsprof kernel mounts it; run any kernel test first)");
        let dir = root
            .join("instances")
            .join(format!("fsprof_attr_{}", std::process::id()));
        let _ = std::fs::create_dir(&dir);
        let r = Recording { dir };
        r.write("trace_clock", "mono");
        // A CPU's share of a 4096-call workload with its stacks takes
        // under 1 MiB; an overrun fails the test (stop).
        r.write("buffer_size_kb", "2048");
        r.write("set_event_pid", &pid.to_string());
        r.write("trace", "");
        r.write(
            "events/sched/sched_switch/trigger",
            &format!("stacktrace if prev_pid == {pid} && prev_state & 2"),
        );
        r.write("events/sched/sched_switch/enable", "1");
        r.write("events/raw_syscalls/enable", "1");
        r
    }

    fn write(&self, file: &str, what: &str) {
        std::fs::write(self.dir.join(file), what)
            .unwrap_or_else(|e| panic!("{}/{file}: {e}", self.dir.display()));
    }

    /// The trace, after checking that the ring buffer overwrote nothing.
    fn stop(&self) -> String {
        self.write("events/sched/sched_switch/enable", "0");
        self.write("events/raw_syscalls/enable", "0");
        self.write("events/sched/sched_switch/trigger", "!stacktrace");
        for cpu in std::fs::read_dir(self.dir.join("per_cpu")).unwrap() {
            let stats = std::fs::read_to_string(cpu.unwrap().path().join("stats")).unwrap();
            for line in stats.lines() {
                if let Some(n) = ["overrun: ", "dropped events: "]
                    .iter()
                    .find_map(|k| line.strip_prefix(k))
                {
                    assert_eq!(n.trim(), "0", "the recording lost events:\n{stats}");
                }
            }
        }
        std::fs::read_to_string(self.dir.join("trace")).unwrap()
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Whether a sleep's kernel stack says it waits for I/O: `io_schedule`
/// (the kernel's own iowait mark, which page-lock, writeback, request-tag,
/// write-throttle and flush waits go through) or jbd2's commit wait (an
/// `fsync` waiting for the journal thread to write its transaction).
fn waits_for_io(frame: &str) -> bool {
    frame.starts_with("io_schedule") || frame.starts_with("jbd2_log_wait_commit")
}

/// The ground truth per syscall number: each call's time in D state
/// (switched out in state D until switched back in), from the trace. `io`
/// counts the sleeps whose kernel stack waits for I/O ([`waits_for_io`]),
/// `all` every D sleep; `other` sums the rest by stack, for the table. A
/// sleep ends when the thread is switched in, or at its next event in its
/// own context if the recording lacks that switch-in.
#[derive(Default)]
struct Truth {
    io: BTreeMap<u32, Shares>,
    all: BTreeMap<u32, Shares>,
    other: BTreeMap<String, (u32, f64)>,
    /// `io` without the sleeps whose switch-in the recording lacks.
    io_known: BTreeMap<u32, Shares>,
    /// Sleeps whose switch-in the recording lacks: now and then a thread
    /// runs again with no `sched_switch` to it recorded (no overrun
    /// counted), and fsprof, on the same tracepoint, may miss it too.
    missing: u32,
}

impl Truth {
    /// Lines for the table: sleeps without a switch-in record, and D
    /// sleeps not waiting for I/O by stack.
    fn notes(&self, case: &str) -> String {
        let mut out = String::new();
        if self.missing > 0 {
            out.push_str(&format!(
                "  {case}: {} D sleeps without a switch-in record, ended at the thread's next own event; without them:",
                self.missing
            ));
            let waited = |nr| self.io.get(nr).is_some_and(|s| s.waited > 0);
            for (nr, k) in self.io_known.iter().filter(|(nr, _)| waited(*nr)) {
                out.push_str(&format!(
                    " nr {nr} {:.1}% {:.1}%",
                    k.calls_pct(),
                    k.time_pct()
                ));
            }
            out.push('\n');
        }
        for (stack, (n, ns)) in &self.other {
            out.push_str(&format!(
                "  {case}: {n} D sleeps, {:.3} ms, not waiting for I/O: {stack}\n",
                ns / 1e6
            ));
        }
        out
    }
}

/// A D sleep inside the trace: since when, whether its stack waits for
/// I/O, its first frames below the scheduler, and the CPU whose next
/// stack record is its own (none once that record was read).
struct Sleep {
    since: f64,
    io: bool,
    frames: Vec<String>,
    cpu: Option<u32>,
}

/// A call in progress: its number, start, and D time (waiting for I/O,
/// of that in sleeps without a switch-in record, all).
struct Call {
    nr: u32,
    start: f64,
    io: f64,
    io_lost: f64,
    all: f64,
}

/// The value after `key` in a trace line's arguments.
fn field(s: &str, key: &str) -> Option<String> {
    let at = s.find(key)? + key.len();
    Some(s[at..].split_whitespace().next()?.to_string())
}

/// The parse's state: the workload's call in progress and its sleep.
struct Parse {
    pid: u32,
    out: Truth,
    call: Option<Call>,
    asleep: Option<Sleep>,
    in_stack: bool,
}

impl Parse {
    fn frame(&mut self, frame: &str) {
        if let Some(s) = self.asleep.as_mut().filter(|_| self.in_stack) {
            s.io |= waits_for_io(frame);
            if s.frames.len() < 4 && !frame.contains("sched") {
                s.frames
                    .push(frame.split('+').next().unwrap_or(frame).to_string());
            }
        }
    }

    /// The stack is recorded on the sleeper's CPU right after its
    /// switch-out; other CPUs' events may come in between.
    fn stack(&mut self, cpu: Option<u32>) {
        if let Some(s) = self
            .asleep
            .as_mut()
            .filter(|s| s.cpu.is_some() && s.cpu == cpu)
        {
            s.cpu = None;
            self.in_stack = true;
        }
    }

    /// The thread runs again at `t`: its sleep, if any, ends.
    fn runs(&mut self, t: f64, seen: bool) {
        let Some(s) = self.asleep.take() else {
            return;
        };
        let Some(c) = self.call.as_mut() else {
            return;
        };
        let d = t - s.since.max(c.start);
        c.all += d;
        if s.io {
            c.io += d;
            if !seen {
                c.io_lost += d;
            }
        } else {
            let o = self.out.other.entry(s.frames.join(" <- ")).or_default();
            o.0 += 1;
            o.1 += d;
        }
    }

    /// An event in the thread's own context (a syscall's entry or exit,
    /// its own switch-out): it is running, so a sleep still open lost its
    /// switch-in record and ends here, later than it did by the run
    /// between the two.
    fn own_event(&mut self, t: f64) {
        if self.asleep.is_some() {
            self.out.missing += 1;
            self.runs(t, false);
        }
    }

    fn exit(&mut self, t: f64, nr: u32) {
        self.own_event(t);
        if let Some(c) = self.call.take().filter(|c| c.nr == nr) {
            for (map, waited) in [
                (&mut self.out.io, c.io),
                (&mut self.out.io_known, c.io - c.io_lost),
                (&mut self.out.all, c.all),
            ] {
                let s = map.entry(c.nr).or_default();
                s.calls += 1;
                s.waited += u64::from(waited > 0.0);
                s.time += t - c.start;
                s.wait += waited;
            }
        }
    }

    fn switch(&mut self, t: f64, cpu: Option<u32>, args: &str) {
        let pid = |key| field(args, key).and_then(|p| p.parse::<u32>().ok());
        let state = field(args, "prev_state=").unwrap_or_default();
        if pid("prev_pid=") == Some(self.pid) {
            self.own_event(t);
            if state.contains('D') {
                self.asleep = Some(Sleep {
                    since: t,
                    io: false,
                    frames: Vec::new(),
                    cpu,
                });
            }
        }
        if pid("next_pid=") == Some(self.pid) {
            self.runs(t, true);
        }
    }
}

fn d_state(trace: &str, pid: u32) -> Truth {
    let mut p = Parse {
        pid,
        out: Truth::default(),
        call: None,
        asleep: None,
        in_stack: false,
    };
    for line in trace.lines().filter(|l| !l.starts_with('#')) {
        if let Some(frame) = line.strip_prefix(" => ") {
            p.frame(frame);
            continue;
        }
        p.in_stack = false;
        let Some((head, rest)) = line.split_once(": ") else {
            continue;
        };
        let cpu = head
            .split_once('[')
            .and_then(|(_, c)| c.split_once(']'))
            .and_then(|(c, _)| c.parse::<u32>().ok());
        if rest.trim() == "<stack trace>" {
            p.stack(cpu);
            continue;
        }
        let (Some(t), Some((event, args))) = (
            head.split_whitespace()
                .last()
                .and_then(|t| t.parse::<f64>().ok()),
            rest.split_once(": "),
        ) else {
            continue;
        };
        let t = t * 1e9;
        let nr = || {
            field(args, "NR ")
                .and_then(|n| n.parse::<u32>().ok())
                .unwrap_or(u32::MAX)
        };
        match event {
            "sys_enter" => {
                p.own_event(t);
                p.call = Some(Call {
                    nr: nr(),
                    start: t,
                    io: 0.0,
                    io_lost: 0.0,
                    all: 0.0,
                });
            }
            "sys_exit" => p.exit(t, nr()),
            "sched_switch" => p.switch(t, cpu, args),
            _ => {}
        }
    }
    p.out
}

/// fsprof's figures for one syscall from its profile's `syscall` and
/// `block-wait` layers, checked against what `report --attribution` prints.
fn fsprof_shares(profile: &Path, op: &str) -> Shares {
    let p = fsprof_core::format::read_profile(profile).unwrap();
    let get = |layer: &str| p.layer(layer).and_then(|l| l.op(op)).cloned();
    let sys = get("syscall").unwrap_or_else(|| panic!("no syscall/{op}"));
    let w = get("block-wait");
    let s = Shares {
        calls: sys.post,
        waited: w.as_ref().map_or(0, |w| w.post),
        time: sys.total_ns as f64,
        wait: w.map_or(0.0, |w| w.total_ns as f64),
    };
    let o = Command::new(fsprof_path())
        .args(["report", "--attribution"])
        .arg(profile)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("syscall/{op} ")))
        .unwrap_or_else(|| panic!("no syscall/{op} row, 0% included, in\n{text}"));
    assert!(
        row.contains(&format!("{:.1}%", s.calls_pct()))
            && row.contains(&format!("{:.1}%", s.time_pct())),
        "{row} against {s:?}"
    );
    s
}

/// Starts the workload, which waits for a byte on stdin; returns it and its
/// pid.
fn spawn_waiting(exe: &Path, args: &[&str]) -> (std::process::Child, u32) {
    let mut w = Command::new(exe)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(w.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    (w, line.trim().parse().unwrap())
}

/// Runs the workload under `fsprof kernel --pid` and the tracefs
/// recording at once, `before` just before it starts; returns (fsprof's
/// profile, the ground truth).
fn measure(
    exe: &Path,
    dir: &Path,
    name: &str,
    args: &[&str],
    before: &dyn Fn(u32),
) -> (PathBuf, Truth) {
    let (mut w, pid) = spawn_waiting(exe, args);
    let mut line = String::new();
    let profile = dir.join(format!("{name}.json"));
    let mut k = Command::new(fsprof_path())
        .args(["kernel", "-q", "-f", "--layers", "syscall,block", "--pid"])
        .arg(pid.to_string())
        .arg("-o")
        .arg(&profile)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(k.stderr.take().unwrap());
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "fsprof exited before attaching: {:?}",
            k.wait()
        );
        if line.contains("fsprof: tracing") {
            break;
        }
    }
    // After fsprof: a tracepoint runs its probes in the order they were
    // attached, so fsprof's programs read the clock just before the
    // recording stamps the same event, on the same side of the stack
    // capture at a switch-out (about 2 us, which fsprof would otherwise
    // not see as sleep).
    let rec = Recording::start(pid);
    before(pid);
    w.stdin.take().unwrap().write_all(b"g").unwrap();
    assert!(w.wait().unwrap().success(), "workload {args:?} failed");
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(k.wait().unwrap().success(), "fsprof: {rest}");
    let truth = d_state(&rec.stop(), pid);
    (profile, truth)
}

fn evict(path: &Path) {
    let f = std::fs::File::open(path).unwrap();
    fsprof_sys::pagecache::evict(&f).unwrap();
    let r = fsprof_sys::pagecache::residency(&f).unwrap();
    assert!(
        r.cached_pages * 100 <= r.total_pages,
        "{} still cached: {r:?}",
        path.display()
    );
}

/// Another process, in `throttle`, asks for `path` to be read ahead; the
/// call returns once the (held back) reads are queued.
fn read_ahead_elsewhere(exe: &Path, path: &str, throttle: &Throttle) {
    let (mut h, pid) = spawn_waiting(exe, &["willneed", path, "4096"]);
    throttle.add(pid);
    h.stdin.take().unwrap().write_all(b"g").unwrap();
    assert!(h.wait().unwrap().success(), "fadvise(WILLNEED) failed");
}

const READ: u32 = 0;
const PREAD: u32 = 17;
const WRITE: u32 = 1;
const FSYNC: u32 = 74;

#[test]
#[ignore = "needs root, mkfs.ext4, cc"]
fn block_waits_agree_with_d_state_time_from_sched_switch() {
    need_root("eBPF, tracefs, a loop mount and a block I/O cgroup");
    need_program("cc", "gcc");
    let fs = LoopFs::ext4(128);
    let work = tempfile::tempdir().unwrap();
    let exe = compile_source("attrwork", WORKLOAD, work.path(), &[]);
    let data = fs.mnt().join("data");
    std::fs::write(&data, vec![7u8; 16 << 20]).unwrap();
    let shared = fs.mnt().join("shared");
    std::fs::write(&shared, vec![5u8; 4 << 20]).unwrap();
    fs.settle();
    let out = work.path();
    let data_s = data.to_str().unwrap();
    let shared_s = shared.to_str().unwrap();
    let written = fs.mnt().join("written");
    let nothing = |_| {};

    // Each tracer's probes cost about a microsecond at a call's entry,
    // exit and switches, and whichever attached first reads the clock
    // first, so the two measure a call's time and its sleep a fraction of
    // a microsecond apart; on a fast machine a random read of a loop
    // device backed by cached pages takes 5-15 us, where that is 5 points.
    // Held to 8 MiB/s, each read waits about a millisecond, as on a disk.
    evict(&data);
    let rand_throttle = Throttle::reads(&fs.name(), 8 << 20);
    let (rand, rand_truth) = measure(&exe, out, "random", &["random", data_s, "4096"], &|pid| {
        rand_throttle.add(pid)
    });
    drop(rand_throttle);
    // Sequential cold reads wait on read-ahead that their own earlier
    // calls issued only when the device is slower than the reader: on a
    // fast idle machine a loop device backed by cached pages keeps ahead
    // (D state 1-6% of the time), so the reader is held to 32 MiB/s.
    evict(&data);
    let seq_throttle = Throttle::reads(&fs.name(), 32 << 20);
    let (cold, cold_truth) = measure(&exe, out, "cold", &["read", data_s, "4096"], &|pid| {
        seq_throttle.add(pid)
    });
    drop(seq_throttle);
    let (warm, warm_truth) = measure(&exe, out, "warm", &["read", data_s, "4096"], &nothing);
    // 4 MiB at 4 MiB/s: the reader waits about a second for requests that
    // another process queued and a kernel worker issued.
    evict(&shared);
    let throttle = Throttle::reads(&fs.name(), 4 << 20);
    let (other, other_truth) = measure(&exe, out, "other", &["read", shared_s, "4096"], &|_| {
        read_ahead_elsewhere(&exe, shared_s, &throttle)
    });
    drop(throttle);
    let written = written.to_str().unwrap();
    let (wr, wr_truth) = measure(&exe, out, "write", &["write", written, "4096"], &nothing);

    let cases = [
        ("cold random read", &rand, &rand_truth, "pread64", PREAD),
        ("cold read", &cold, &cold_truth, "read", READ),
        ("warm read", &warm, &warm_truth, "read", READ),
        ("others' read-ahead", &other, &other_truth, "read", READ),
        ("buffered write", &wr, &wr_truth, "write", WRITE),
        ("fsync after writes", &wr, &wr_truth, "fsync", FSYNC),
    ];
    let mut table = String::new();
    let mut pairs = Vec::new();
    for (what, p, truth, op, nr) in cases {
        let f = fsprof_shares(p, op);
        let t = truth.io.get(&nr).copied().unwrap_or_default();
        let all = truth.all.get(&nr).copied().unwrap_or_default();
        table.push_str(&format!(
            "{what:<20} {op:<7} fsprof {:>5.1}% of calls {:>5.1}% of time; I/O wait {:>5.1}% {:>5.1}%; all D state {:>5.1}% {:>5.1}% ({} calls)\n",
            f.calls_pct(),
            f.time_pct(),
            t.calls_pct(),
            t.time_pct(),
            all.calls_pct(),
            all.time_pct(),
            t.calls
        ));

        assert_eq!(f.calls, t.calls, "{what}: the same calls\n{table}");
        let known = truth.io_known.get(&nr).copied().unwrap_or_default();
        pairs.push((what, f, t, known));
    }
    for (case, truth) in [
        ("random", &rand_truth),
        ("cold", &cold_truth),
        ("other", &other_truth),
        ("write", &wr_truth),
    ] {
        table.push_str(&truth.notes(case));
    }
    eprint!("{table}");
    // The workloads did wait where they must, so agreeing is not agreeing
    // on nothing: random cold reads (read-ahead off) sleep in most calls,
    // sequential ones (held to 32 MiB/s) on read-ahead, and the reader of
    // the throttled file for most of its time.
    assert!(rand_truth.io[&PREAD].calls_pct() > 50.0, "{table}");
    assert!(cold_truth.io[&READ].time_pct() > 50.0, "{table}");
    assert!(other_truth.io[&READ].time_pct() > 50.0, "{table}");
    // A sleep the recording saw no switch-in for may or may not have been
    // seen by fsprof: the truth is then a range, from without those sleeps
    // to with them (ended at the thread's next own event); with none, the
    // range is one figure.
    let near = |f: f64, a: f64, b: f64| f >= a.min(b) - 10.0 && f <= a.max(b) + 10.0;
    for (what, f, t, known) in pairs {
        assert!(
            near(f.calls_pct(), known.calls_pct(), t.calls_pct())
                && near(f.time_pct(), known.time_pct(), t.time_pct()),
            "{what}: more than 10 points from the I/O-wait truth\n{table}"
        );
    }
}
