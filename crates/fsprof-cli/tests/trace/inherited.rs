//! The descriptors a process image starts with, as its trace records them
//! (one FD record each, from `/proc/self/fd`): every one the exec kept,
//! with its path, access mode and position, and none the exec closed or
//! the shim used for its own set-up (the run directory it makes its first
//! chunk in).

use fsprof_trace::event::{FdInfo, Record};
use fsprof_trace::TraceReader;

/// Opens a file (position 5), a pipe, a socket pair, a file with
/// O_CLOEXEC and 150 copies of /dev/null at fds 300..449 (more than one
/// 2 KiB listing of /proc/self/fd holds), prints those fds, then execs
/// itself with an argument: that image makes no call of its own.
const EXECER: &str = r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1) return 0;
    int f = open("data", O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (f < 0 || write(f, "0123456789", 10) != 10 || lseek(f, 5, SEEK_SET) != 5) return 2;
    int p[2], s[2];
    if (pipe(p) || socketpair(AF_UNIX, SOCK_STREAM, 0, s)) return 3;
    int c = open("data", O_RDONLY | O_CLOEXEC);
    int n = open("/dev/null", O_RDONLY);
    for (int i = 300; i < 450; i++)
        if (dup2(n, i) != i) return 4;
    printf("%d %d %d %d %d\n", f, p[0], s[0], c, n);
    fflush(stdout);
    execl(argv[0], argv[0], "exec'd", (char *)0);
    return 5;
}
"#;

fn fd(fds: &[FdInfo], n: i32) -> Option<&FdInfo> {
    fds.iter().find(|f| f.fd == n)
}

#[test]
fn an_exec_d_image_records_the_descriptors_it_kept_and_no_other() {
    let d = tempfile::tempdir().unwrap();
    let (o, out) = crate::trace_source("execer", EXECER, d.path());
    let printed: Vec<i32> = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    let [file, pipe, sock, cloexec, null] = printed[..] else {
        panic!("the program printed {printed:?}");
    };
    let mut r = TraceReader::open(&out).unwrap_or_else(|e| panic!("{e}"));
    let image = r
        .by_ref()
        .filter_map(|rec| match rec.unwrap_or_else(|e| panic!("{e}")) {
            Record::Process(p) if p.argv.len() == 2 => Some(p),
            _ => None,
        })
        .next()
        .expect("the exec'd image's process record");
    let fds = &image.fds;

    let f = fd(fds, file).expect("the file");
    assert!(f.path.ends_with(b"/data"), "{f:?}");
    assert_eq!((f.pos, f.flags & 3), (5, libc::O_RDWR as i64), "{f:?}");
    let p = fd(fds, pipe).expect("the pipe");
    assert!(p.path.starts_with(b"pipe:["), "{p:?}");
    assert_eq!(p.pos, -1, "a pipe has no position: {p:?}");
    let s = fd(fds, sock).expect("the socket");
    assert!(s.path.starts_with(b"socket:["), "{s:?}");
    assert_eq!(s.pos, -1, "{s:?}");
    assert!(fd(fds, null).is_some_and(|n| n.path == b"/dev/null"));
    let copies = (300..450)
        .filter(|&n| fd(fds, n).is_some_and(|f| f.path == b"/dev/null" && f.pos == 0))
        .count();
    assert_eq!(copies, 150, "every fd of a listing longer than one read");

    assert!(fd(fds, cloexec).is_none(), "closed on exec, yet recorded");
    let own: Vec<_> = fds
        .iter()
        .filter(|f| {
            let path = String::from_utf8_lossy(&f.path);
            path.contains("fsprof-run-") || path.starts_with("/proc/")
        })
        .collect();
    assert!(
        own.is_empty(),
        "the shim's own descriptors recorded: {own:?}"
    );
}
