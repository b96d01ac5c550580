//! The fault programs against the real kernel: a program that reads pages
//! of a cold file through a private mapping (MADV_RANDOM: no read-ahead,
//! so every page is a major fault of its own) and writes every third page
//! of a shared mapping; the session reports exactly those faults.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use fsprof_kernel::faults::{Fault, FaultSession};
use fsprof_testkit::need::need_root;

const PROG: &str = r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char c;
    if (read(0, &c, 1) != 1) return 2; /* wait until the session is on */
    int fd = open(argv[1], O_RDWR);
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    volatile char *r = mmap(0, 64 * 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    madvise((void *)r, 64 * 4096, MADV_RANDOM);
    unsigned s = 0;
    for (int i = 0; i < 64; i++) s += r[i * 4096 + 7];
    char *w = mmap(0, 64 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    for (int i = 0; i < 64; i += 3) w[i * 4096 + 5] = 'x';
    /* A page first touched by the kernel, copying from it. */
    char *k = mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    int m = memfd_create("k", 0);
    if (write(m, k, 16) != 16) return 3;
    printf("%p %p %u %p\n", (void *)r, (void *)w, s, (void *)k);
    return 0;
}
"#;

/// `src` compiled, beside a file `data` of `pages` pages of 1s, in a
/// scratch directory (kept while the first value lives).
fn program_and_file(name: &str, src: &str, pages: u64) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (d, dir) = fsprof_testkit::canonical_tempdir();
    let exe = fsprof_testkit::compile_source(name, src, &dir, &[]);
    let file = dir.join("data");
    std::fs::write(&file, vec![1u8; (pages * 4096) as usize]).unwrap();
    (d, exe, file)
}

/// Runs `cmd`, which waits for a byte on its standard input, followed by a
/// fault session from before that byte on: its pid, the session, and its
/// standard output. It must succeed.
fn followed(cmd: &mut Command) -> (i32, FaultSession, String) {
    followed_by(cmd, |pid| FaultSession::start(pid).unwrap())
}

/// [`followed`], by the session `session` makes for the pid.
fn followed_by(
    cmd: &mut Command,
    session: impl FnOnce(i32) -> FaultSession,
) -> (i32, FaultSession, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let s = session(pid);
    child.stdin.take().unwrap().write_all(b"g").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    (pid, s, String::from_utf8(out.stdout).unwrap())
}

#[test]
#[ignore = "needs root"]
fn faults_of_a_followed_process_are_reported_one_per_first_touch() {
    need_root("eBPF");
    let (_d, exe, file) = program_and_file("faulter", PROG, 64);
    let (pid, mut s, text) = followed(Command::new(&exe).arg(&file));
    let addrs: Vec<u64> = text
        .split_whitespace()
        .take(2)
        .map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap())
        .collect();
    let mut faults: Vec<Fault> = Vec::new();
    s.drain(|f| faults.push(f));
    assert_eq!(s.lost(), 0);
    let pages = |base: u64, write: bool| -> Vec<u64> {
        let mut v: Vec<u64> = faults
            .iter()
            .filter(|f| f.write == write && f.addr >= base && f.addr < base + 64 * 4096)
            .map(|f| (f.addr - base) / 4096)
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        pages(addrs[0], false),
        (0..64).collect::<Vec<_>>(),
        "{faults:?}"
    );
    assert_eq!(
        pages(addrs[1], true),
        (0..64).step_by(3).collect::<Vec<_>>()
    );
    let reads: Vec<&Fault> = faults
        .iter()
        .filter(|f| !f.write && f.addr >= addrs[0] && f.addr < addrs[0] + 64 * 4096)
        .collect();
    // Cold and without read-ahead: each read waited for its page.
    assert!(reads.iter().all(|f| f.major && f.dur_ns > 0), "{reads:?}");
    // Only the followed process: the test's own faults are not reported.
    assert!(faults.iter().all(|f| f.pid == pid), "{faults:?}");
    // One start program serves the user's faults and the kernel's, told
    // apart by the fault's error code.
    let k = u64::from_str_radix(
        text.split_whitespace()
            .nth(3)
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let by_kernel: Vec<&Fault> = faults.iter().filter(|f| f.addr >> 12 == k >> 12).collect();
    assert!(
        by_kernel.len() == 1 && by_kernel[0].in_kernel && !by_kernel[0].write,
        "{by_kernel:?}"
    );
    let mapped = |f: &&Fault| addrs.iter().any(|&a| f.addr >= a && f.addr < a + 64 * 4096);
    assert!(
        faults.iter().filter(mapped).all(|f| !f.in_kernel),
        "{faults:?}"
    );
}

/// Stores into every page of a private file mapping (each a fault of its
/// own: a store is never mapped around), as fast as it can.
const STORM: &str = r#"#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char c;
    if (read(0, &c, 1) != 1) return 2;
    int fd = open(argv[1], O_RDONLY);
    off_t len = lseek(fd, 0, SEEK_END);
    volatile char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    for (off_t at = 0; at < len; at += 4096) p[at] = 1;
    printf("%p\n", (void *)p);
    return 0;
}
"#;

/// A ring far smaller than what the program makes before anyone reads
/// it (this test reads once, at the end): 16,384 faults, 1,024 events of
/// room. The programs wake the ring's reader thread as it fills: without
/// it ~15,000 would be lost. A few hundred may be where the machine keeps
/// the woken reader off the CPUs for milliseconds (a loaded test run);
/// every fault is either reported or counted as lost.
#[test]
#[ignore = "needs root"]
fn a_small_ring_is_emptied_as_it_fills() {
    need_root("eBPF");
    const PAGES: u64 = 16384;
    let (_d, exe, file) = program_and_file("storm", STORM, PAGES);
    std::env::set_var("FSPROF_TEST_FAULT_RING_KIB", "64");
    let (pid, mut s, text) = followed(Command::new(&exe).arg(&file));
    let base = u64::from_str_radix(text.trim().trim_start_matches("0x"), 16).unwrap();
    let mut pages = std::collections::BTreeSet::new();
    s.drain(|f| {
        if f.pid == pid && f.write && f.addr >= base && f.addr < base + PAGES * 4096 {
            pages.insert((f.addr - base) / 4096);
        }
    });
    let lost = s.lost();
    assert!(
        pages.len() as u64 + lost >= PAGES,
        "{} reported, {lost} lost",
        pages.len()
    );
    assert!(lost < PAGES / 4, "{lost} of {PAGES} lost");
}

/// With room for 8 processes, 20 threads alive at once take no entry (the
/// 3 children the program forks while they live are followed), and their
/// faults are still reported after the main thread has exited: the
/// process's entry goes only with its last task.
#[test]
#[ignore = "needs root"]
fn threads_take_no_entry_and_are_followed_after_their_leader_exits() {
    need_root("eBPF");
    std::env::set_var("FSPROF_TEST_FOLLOWED_MAX", "8");
    let (_d, dir) = fsprof_testkit::canonical_tempdir();
    let (exe, file) = fsprof_testkit::followed_tree(&dir);
    let args = [
        "threads".as_ref(),
        "20".as_ref(),
        file.as_os_str(),
        "held".as_ref(),
    ];
    let (pid, mut s, text) = followed(Command::new(&exe).args(args));
    let mut faults: Vec<Fault> = Vec::new();
    s.drain(|f| faults.push(f));
    let loads: Vec<(i32, i32, u64)> = text
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let addr = u64::from_str_radix(w[2].trim_start_matches("0x"), 16).unwrap();
            (w[0].parse().unwrap(), w[1].parse().unwrap(), addr)
        })
        .collect();
    assert_eq!(loads.len(), 23, "{text}");
    assert_eq!(loads.iter().filter(|l| l.0 == pid).count(), 20, "{text}");
    let missing: Vec<&(i32, i32, u64)> = loads
        .iter()
        .filter(|&&(p, t, a)| {
            !faults
                .iter()
                .any(|f| (f.pid, f.tid) == (p, t) && f.addr >> 12 == a >> 12)
        })
        .collect();
    assert_eq!(
        missing,
        Vec::<&(i32, i32, u64)>::new(),
        "loads without their fault"
    );
    assert_eq!((s.unfollowed(), s.lost()), (0, 0));
}

/// Touches a file mapping and anonymous pages, then marks itself (the
/// shim's mark, `faults::MAPPING_MARK`), touches a second mapping of the
/// file, and forks a child that touches the second mapping too (a fork
/// copies no page of a file mapping: the child faults on its own).
const MARKED: &str = r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#define LEN (16 * 4096)
int main(int argc, char **argv) {
    char c;
    if (read(0, &c, 1) != 1) return 2;
    int fd = open(argv[1], O_RDONLY);
    unsigned s = 0;
    volatile char *before = mmap(0, LEN, PROT_READ, MAP_PRIVATE, fd, 0);
    volatile char *anon = mmap(0, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 16; i++) { s += before[i * 4096]; anon[i * 4096] = 1; }
    syscall(SYS_faccessat, AT_FDCWD, (const char *)MARK, F_OK);
    volatile char *after = mmap(0, LEN, PROT_READ, MAP_PRIVATE, fd, 0);
    for (int i = 0; i < 16; i++) s += after[i * 4096];
    pid_t k = fork();
    if (k == 0) {
        for (int i = 0; i < 16; i++) s += after[i * 4096];
        _exit(s == 12345);
    }
    waitpid(k, 0, 0);
    printf("%p %p %p %d %u\n", (void *)before, (void *)anon, (void *)after, k, s);
    return 0;
}
"#;

#[test]
#[ignore = "needs root"]
fn only_marked_processes_and_their_children_report_faults() {
    need_root("eBPF");
    let src = MARKED.replace(
        "MARK",
        &format!("{:#x}", fsprof_kernel::faults::MAPPING_MARK),
    );
    let (_d, exe, file) = program_and_file("marked", &src, 16);
    let (pid, mut s, text) = followed_by(Command::new(&exe).arg(&file), |pid| {
        let s = FaultSession::attach().unwrap();
        assert!(s.marks, "this kernel has exceptions:page_fault_kernel");
        s.follow(pid).unwrap();
        s
    });
    let w: Vec<&str> = text.split_whitespace().collect();
    let hex = |a: &str| u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap();
    let (before, anon, after) = (hex(w[0]), hex(w[1]), hex(w[2]));
    let kid: i32 = w[3].parse().unwrap();
    let mut faults: Vec<Fault> = Vec::new();
    s.drain(|f| faults.push(f));
    let of = |p: i32| faults.iter().filter(move |f| f.pid == p);
    let within = |f: &Fault, base: u64| f.addr >= base && f.addr < base + 16 * 4096;
    // Before its mark, none of the process's faults left the kernel.
    let early: Vec<&Fault> = of(pid)
        .filter(|f| within(f, before) || within(f, anon))
        .collect();
    assert!(early.is_empty(), "faults before the mark: {early:?}");
    assert!(of(pid).any(|f| within(f, after)), "{faults:?}");
    // The child was forked marked.
    assert!(of(kid).any(|f| within(f, after)), "child {kid}: {faults:?}");
    // The kernel's string copy may retry the read a byte at a time.
    assert!((1..=2).contains(&s.marks_taken()), "{}", s.marks_taken());
    // Every fault started ended: the end programs' early stop is back on.
    assert_eq!(s.in_flight(), 0);
    // The mark itself is no fault of the trace.
    assert!(faults.iter().all(|f| f.addr >= 4096), "{faults:?}");
}

/// Linux's (major, minor) version, from `uname -r`.
fn kernel_version() -> (u32, u32) {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut n = r
        .split(|c: char| !c.is_ascii_digit())
        .map(|x| x.parse().unwrap_or(0));
    (n.next().unwrap_or(0), n.next().unwrap_or(0))
}

/// The same faults, the same first touches, with the fault and follower
/// programs loaded one by one, as on a kernel without raw tracepoint
/// cookies (test knob `FSPROF_TEST_RAW_APART`): the fault-around and
/// start programs, then the fork and exit followers, the test above
/// checks, run in a child test process with the knob set.
#[test]
#[ignore = "needs root"]
fn the_programs_loaded_one_by_one_report_the_same_faults() {
    need_root("the fault programs");
    if std::env::var_os("FSPROF_TEST_RAW_APART").is_some() {
        let s = FaultSession::attach().unwrap();
        assert!(!s.shared);
        return;
    }
    let me = std::env::current_exe().unwrap();
    for test in [
        "the_programs_loaded_one_by_one_report_the_same_faults",
        "faults_of_a_followed_process_are_reported_one_per_first_touch",
        "threads_take_no_entry_and_are_followed_after_their_leader_exits",
    ] {
        let o = Command::new(&me)
            .args([test, "--exact", "--ignored", "--nocapture"])
            .env("FSPROF_TEST_RAW_APART", "1")
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && out.contains("1 passed"),
            "{test}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// Where the kernel has raw tracepoint cookies (6.10), the fault-around
/// and start programs are one program, and so are the fork and exit
/// programs (two loads' fixed cost saved on the path before the traced
/// command starts), and the faults tests above run on them.
#[test]
#[ignore = "needs root"]
fn the_raw_tracepoint_programs_are_one_where_the_kernel_has_cookies() {
    need_root("the fault programs");
    if std::env::var_os("FSPROF_TEST_RAW_APART").is_some() {
        return;
    }
    let s = FaultSession::attach().unwrap();
    assert_eq!(
        s.shared,
        kernel_version() >= (6, 10),
        "{:?}",
        kernel_version()
    );
}

/// Forks a child when told to (a byte on standard input: the session
/// follows it then, its fault programs not attached yet); when told again,
/// tells the child (a pipe), which marks itself and reads a mapping of the
/// file.
const FORKED_EARLY: &str = r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#define LEN (16 * 4096)
int main(int argc, char **argv) {
    int go[2];
    char c;
    if (pipe(go) || read(0, &c, 1) != 1) return 4;
    pid_t k = fork();
    if (k == 0) {
        char c;
        if (read(go[0], &c, 1) != 1) _exit(5);
        int fd = open(argv[1], O_RDONLY);
        syscall(SYS_faccessat, AT_FDCWD, (const char *)MARK, F_OK);
        volatile char *m = mmap(0, LEN, PROT_READ, MAP_PRIVATE, fd, 0);
        unsigned s = 0;
        for (int i = 0; i < 16; i++) s += m[i * 4096];
        dprintf(1, "%p\n", (void *)m);
        _exit(s == 12345);
    }
    if (read(0, &c, 1) != 1) return 2;
    if (write(go[1], "g", 1) != 1) return 3;
    int st;
    waitpid(k, &st, 0);
    printf("%d\n", k);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 6;
}
"#;

/// `exe file` started, its standard input and output piped, and a fault
/// session prepared (the followers only) that follows nothing yet.
fn prepared_beside(exe: &Path, file: &Path) -> (std::process::Child, FaultSession) {
    let child = Command::new(exe)
        .arg(file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    (child, FaultSession::prepare().unwrap())
}

/// The fault programs attached after the tree is followed (as `fsprof
/// trace` attaches them, when a process first maps a file): a child
/// forked before the attach, while no fault program ran, is followed all
/// the same, and its faults after its mark are reported.
#[test]
#[ignore = "needs root"]
fn a_child_forked_before_the_fault_programs_are_attached_is_followed() {
    need_root("eBPF");
    let src = FORKED_EARLY.replace(
        "MARK",
        &format!("{:#x}", fsprof_kernel::faults::MAPPING_MARK),
    );
    let (_d, exe, file) = program_and_file("forked_early", &src, 16);
    let (mut child, mut s) = prepared_beside(&exe, &file);
    s.follow(child.id() as i32).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"f").unwrap();
    // The fork happens while nothing but the followers is attached.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let attached = s.fault_load().unwrap().load().unwrap().attach().unwrap();
    stdin.write_all(b"g").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let text = String::from_utf8(out.stdout).unwrap();
    let w: Vec<&str> = text.split_whitespace().collect();
    let base = u64::from_str_radix(w[0].trim_start_matches("0x"), 16).unwrap();
    let kid: i32 = w[1].parse().unwrap();
    let mut faults: Vec<Fault> = Vec::new();
    s.drain(|f| faults.push(f));
    let read: Vec<&Fault> = faults
        .iter()
        .filter(|f| f.pid == kid && f.addr >= base && f.addr < base + 16 * 4096)
        .collect();
    assert!(
        !read.is_empty(),
        "child {kid}: {faults:?} started {} marks {} in flight {} lost {}",
        s.started(),
        s.marks_taken(),
        s.in_flight(),
        s.lost()
    );
    assert_eq!(s.marks_taken().min(1), 1);
    assert_eq!(attached.missed(), 0);
}

/// Reads byte 0 of 16 pages of `argv[1]` through a private mapping at
/// each byte of standard input ('a', then 'b'), printing each mapping's
/// address.
const TWICE: &str = r#"#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDONLY);
    unsigned s = 0;
    char c;
    for (int round = 0; round < 2; round++) {
        if (read(0, &c, 1) != 1) return 2;
        volatile unsigned char *p = mmap(0, 16 * 4096, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) return 3;
        madvise((void *)p, 16 * 4096, MADV_RANDOM);
        for (int i = 0; i < 16; i++) s += p[i * 4096];
        printf("%p ", (void *)p);
        fflush(stdout);
    }
    printf("%u\n", s);
    return 0;
}
"#;

/// The fault programs loaded (`fsprof trace` attaches the start and
/// fault-around programs then, behind a closed gate) keep no fault of a
/// process followed as marked until they are attached: no start in flight
/// that no end would take, and none reported.
#[test]
#[ignore = "needs root"]
fn loaded_fault_programs_keep_no_fault_until_attached() {
    need_root("eBPF");
    let (_d, exe, file) = program_and_file("twice", TWICE, 16);
    let (mut child, mut s) = prepared_beside(&exe, &file);
    s.follow_every_fault(child.id() as i32).unwrap();
    let mut loaded = s.fault_load().unwrap().load().unwrap();
    loaded.attach_waiting();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"a").unwrap();
    // Its reads of the first mapping are done once it has printed it.
    let mut out = child.stdout.take().unwrap();
    let mut first = Vec::new();
    let mut b = [0u8; 1];
    while std::io::Read::read(&mut out, &mut b).unwrap() == 1 && b[0] != b' ' {
        first.push(b[0]);
    }
    assert_eq!((s.started(), s.in_flight()), (0, 0));
    let attached = loaded.attach().unwrap();
    stdin.write_all(b"b").unwrap();
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    let hex = |a: &str| u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap();
    let (a, b) = (
        hex(std::str::from_utf8(&first).unwrap()),
        hex(rest.split_whitespace().next().unwrap()),
    );
    let mut faults: Vec<Fault> = Vec::new();
    s.drain(|f| faults.push(f));
    let within = |f: &Fault, base: u64| f.addr >= base && f.addr < base + 16 * 4096;
    assert!(!faults.iter().any(|f| within(f, a)), "{faults:?}");
    assert!(faults.iter().any(|f| within(f, b)), "{faults:?}");
    assert_eq!(s.in_flight(), 0);
    drop(attached);
}
