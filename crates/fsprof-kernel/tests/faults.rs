//! The fault programs against the real kernel: a program that reads pages
//! of a cold file through a private mapping (MADV_RANDOM: no read-ahead,
//! so every page is a major fault of its own) and writes every third page
//! of a shared mapping; the session reports exactly those faults.

use std::io::Write;
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
    printf("%p %p %u\n", (void *)r, (void *)w, s);
    return 0;
}
"#;

#[test]
#[ignore = "needs root"]
fn faults_of_a_followed_process_are_reported_one_per_first_touch() {
    need_root("eBPF");
    let (_d, dir) = fsprof_testkit::canonical_tempdir();
    let exe = fsprof_testkit::compile_source("faulter", PROG, &dir, &[]);
    let file = dir.join("data");
    std::fs::write(&file, vec![1u8; 64 * 4096]).unwrap();
    let mut child = Command::new(&exe)
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut s = FaultSession::start(pid).unwrap();
    child.stdin.take().unwrap().write_all(b"g").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
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
