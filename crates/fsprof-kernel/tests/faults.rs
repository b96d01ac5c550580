//! The fault programs against the real kernel: a program that reads pages
//! of a cold file through a private mapping (MADV_RANDOM: no read-ahead,
//! so every page is a major fault of its own) and writes every third page
//! of a shared mapping; the session reports exactly those faults.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

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
    printf("%p %p %u\n", (void *)r, (void *)w, s);
    return 0;
}
"#;

/// `exe` started on a new file of `pages` pages in `dir`, held until [`go`].
fn held(exe: &Path, dir: &Path, pages: usize) -> Child {
    let file = dir.join("data");
    std::fs::write(&file, vec![1u8; pages * 4096]).unwrap();
    Command::new(exe)
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Lets a [`held`] program go; its output, once it exited with 0.
fn go(child: &mut Child) -> String {
    child.stdin.take().unwrap().write_all(b"g").unwrap();
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert!(child.wait().unwrap().success());
    text
}

#[test]
#[ignore = "needs root"]
fn faults_of_a_followed_process_are_reported_one_per_first_touch() {
    need_root("eBPF");
    let (_d, dir) = fsprof_testkit::canonical_tempdir();
    let exe = fsprof_testkit::compile_source("faulter", PROG, &dir, &[]);
    let mut child = held(&exe, &dir, 64);
    let pid = child.id() as i32;
    let mut s = FaultSession::start(pid).unwrap();
    let text = go(&mut child);
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
    let (_d, dir) = fsprof_testkit::canonical_tempdir();
    let src = MARKED.replace(
        "MARK",
        &format!("{:#x}", fsprof_kernel::faults::MAPPING_MARK),
    );
    let exe = fsprof_testkit::compile_source("marked", &src, &dir, &[]);
    let mut child = held(&exe, &dir, 16);
    let pid = child.id() as i32;
    let mut s = FaultSession::attach().unwrap();
    assert!(s.marks, "this kernel has exceptions:page_fault_kernel");
    s.follow(pid).unwrap();
    let text = go(&mut child);
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
    // The mark itself is no fault of the trace.
    assert!(faults.iter().all(|f| f.addr >= 4096), "{faults:?}");
}
