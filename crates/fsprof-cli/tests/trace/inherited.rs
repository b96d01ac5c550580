//! The descriptors a process image uses before the trace saw it make them
//! (inherited, or made by a call the shim does not trace), as its trace
//! records them: one descriptor record each, just before its first use,
//! with its path, access mode and position then; none for a descriptor
//! the image never used, opened itself, or that is not open, and none for
//! the shim's own (the run directory it makes its first chunk in).

use fsprof_trace::event::{Call, Descriptor, ProcessInfo, Record};
use fsprof_trace::TraceReader;

/// Opens a file (position 5), a pipe, a socket pair, a file with
/// O_CLOEXEC and 150 copies of /dev/null at fds 300..449, then execs
/// itself with their numbers. The exec'd image reads 2 bytes of the file,
/// writes to the pipe, fstats the copies at 300..399 and the closed
/// O_CLOEXEC number, opens and reads its own executable, dup2s the file
/// onto that number and fstats it, then forks a child that fstats the file. It never
/// uses the socket, /dev/null at `n`, or the copies at 400..449.
const EXECER: &str = r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct stat st;
    char b[4];
    if (argc > 1) {
        int f = atoi(argv[2]), p = atoi(argv[3]), c = atoi(argv[4]);
        if (read(f, b, 2) != 2 || write(p, "x", 1) != 1) return 6;
        for (int i = 300; i < 400; i++)
            if (fstat(i, &st)) return 7;
        if (fstat(c, &st) == 0) return 8;
        int own = open(argv[0], O_RDONLY);
        if (own < 0 || read(own, b, 1) != 1) return 9;
        if (dup2(f, own) != own || fstat(own, &st)) return 10;
        pid_t k = fork();
        if (k == 0) _exit(fstat(f, &st) ? 1 : 0);
        int status;
        return waitpid(k, &status, 0) == k && status == 0 ? 0 : 11;
    }
    int f = open("data", O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (f < 0 || write(f, "0123456789", 10) != 10 || lseek(f, 5, SEEK_SET) != 5) return 2;
    int p[2], s[2];
    if (pipe(p) || socketpair(AF_UNIX, SOCK_STREAM, 0, s)) return 3;
    int c = open("data", O_RDONLY | O_CLOEXEC);
    int n = open("/dev/null", O_RDONLY);
    for (int i = 300; i < 450; i++)
        if (dup2(n, i) != i) return 4;
    printf("%d %d %d %d %d\n", f, p[1], s[0], c, n);
    fflush(stdout);
    char fs[16], ps[16], cs[16];
    snprintf(fs, sizeof fs, "%d", f);
    snprintf(ps, sizeof ps, "%d", p[1]);
    snprintf(cs, sizeof cs, "%d", c);
    execl(argv[0], argv[0], "exec'd", fs, ps, cs, (char *)0);
    return 5;
}
"#;

/// Every record of the trace at `out`.
fn records_of(out: &std::path::Path) -> Vec<Record> {
    TraceReader::open(out)
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// The exec'd image's first call that `pred` picks.
fn call_of<'a>(
    records: &'a [Record],
    image: &ProcessInfo,
    pred: impl Fn(&Call) -> bool,
) -> &'a Call {
    records
        .iter()
        .find_map(|r| match r {
            Record::Call(c) if c.pid == image.pid && c.start_ns >= image.start_ns && pred(c) => {
                Some(c)
            }
            _ => None,
        })
        .expect("the exec'd image's call")
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
    let records = records_of(&out);
    let image = records
        .iter()
        .find_map(|r| match r {
            Record::Process(p) if p.argv.get(1).is_some_and(|a| a == b"exec'd") => Some(p),
            _ => None,
        })
        .expect("the exec'd image's process record");
    assert!(image.fds.is_empty(), "no listing at the start: {image:?}");
    // The exec'd image's own records, from its process record on, until
    // the child's.
    let child = records.iter().find_map(|r| match r {
        Record::Process(p) if p.ppid == image.pid => Some(p.pid),
        _ => None,
    });
    let child = child.expect("the forked child's process record");
    let fds = |pid: i32| -> Vec<&Descriptor> {
        records
            .iter()
            .filter_map(|r| match r {
                Record::Descriptor(d) if d.pid == pid && d.start_ns >= image.start_ns => Some(d),
                _ => None,
            })
            .collect()
    };
    let mine = fds(image.pid);
    let one = |n: i32| -> &Descriptor {
        let v: Vec<_> = mine.iter().filter(|d| d.fd.fd == n).collect();
        assert_eq!(v.len(), 1, "fd {n}: one record, at its first use: {mine:?}");
        v[0]
    };

    let f = one(file);
    assert!(f.fd.path.ends_with(b"/data"), "{f:?}");
    assert_eq!(
        (f.fd.pos, f.fd.flags & 3),
        (5, libc::O_RDWR as i64),
        "the position before the first read, and the access mode: {f:?}"
    );
    let first_read = call_of(&records, image, |c| c.fd == Some(file));
    assert!(
        f.start_ns <= first_read.start_ns,
        "{f:?} after {first_read:?}"
    );
    let p = one(pipe);
    assert!(p.fd.path.starts_with(b"pipe:["), "{p:?}");
    assert_eq!(
        (p.fd.pos, p.fd.flags & 3),
        (-1, libc::O_WRONLY as i64),
        "a pipe has no position: {p:?}"
    );
    for n in 300..400 {
        let c = one(n);
        assert_eq!(
            (c.fd.path.as_slice(), c.fd.pos),
            (&b"/dev/null"[..], 0),
            "{c:?}"
        );
    }
    let own = call_of(&records, image, |c| {
        c.path.as_ref().is_some_and(|p| p.ends_with(b"execer"))
    })
    .ret as i32;
    let dup = one(own);
    assert!(
        dup.fd.path.ends_with(b"/data"),
        "a number it opened, made anew by dup2, recorded at its next use: {dup:?}"
    );

    let unused = [sock, null, cloexec];
    let other: Vec<_> = mine
        .iter()
        // The O_CLOEXEC number may be the one its open reuses (one record
        // for it, above).
        .filter(|d| d.fd.fd != own)
        .filter(|d| unused.contains(&d.fd.fd) || (400..450).contains(&d.fd.fd))
        .collect();
    assert!(
        other.is_empty(),
        "unused, closed on exec or not open, yet recorded: {other:?}"
    );
    let expected = 2 + 100 + 1;
    assert_eq!(
        mine.len(),
        expected,
        "its own open, or the shim's, recorded: {mine:?}"
    );

    let kid = fds(child);
    assert!(
        kid.len() == 1 && kid[0].fd.fd == file && kid[0].fd.path.ends_with(b"/data"),
        "a forked child records what it uses itself: {kid:?}"
    );
}

/// Flushes stderr with nothing in it, closes it and stdin (all inherited,
/// never used otherwise), then prints into stdout's buffer and flushes it.
const LETS_GO: &str = r#"#include <stdio.h>
#include <unistd.h>
int main(void) {
    if (fflush(stderr) || fclose(stderr) || close(0)) return 2;
    printf("%d\n", 27);
    return fflush(stdout) ? 3 : 0;
}
"#;

/// A call that only lets an inherited descriptor go (close, an fclose or
/// fflush with nothing to write) is in the trace but is no first use: no
/// descriptor record for it. A flush that writes is one.
#[test]
fn closing_or_flushing_nothing_records_no_descriptor_and_a_flush_that_writes_does() {
    let d = tempfile::tempdir().unwrap();
    let (o, out) = crate::trace_source("letsgo", LETS_GO, d.path());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "27\n");
    let records = records_of(&out);
    let image = records
        .iter()
        .find_map(|r| match r {
            Record::Process(p) if p.exe.ends_with(b"letsgo") => Some(p),
            _ => None,
        })
        .expect("the program's process record");
    let calls: Vec<(&str, Option<i32>)> = records
        .iter()
        .filter_map(|r| match r {
            Record::Call(c) if c.pid == image.pid => Some((c.op.name(), c.fd)),
            _ => None,
        })
        .collect();
    for call in [("fflush", Some(2)), ("fclose", Some(2)), ("close", Some(0))] {
        assert!(calls.contains(&call), "{call:?} not in {calls:?}");
    }
    let fds: Vec<&Descriptor> = records
        .iter()
        .filter_map(|r| match r {
            Record::Descriptor(d) if d.pid == image.pid => Some(d),
            _ => None,
        })
        .collect();
    assert!(
        fds.len() == 1 && fds[0].fd.fd == 1,
        "only stdout, at the flush that wrote: {fds:?}"
    );
    let flush = call_of(&records, image, |c| {
        c.op.name() == "fflush" && c.fd == Some(1)
    });
    assert!(fds[0].start_ns <= flush.start_ns, "{fds:?} after {flush:?}");
}

/// An image's working directory as its process record has it, short (in
/// the shim's first buffer) and longer than that buffer (read again).
#[test]
fn a_process_record_holds_its_working_directory_short_or_long() {
    in_a_short_and_a_long_dir(|dir| {
        let (_, out) = crate::trace_source("cwd", "int main(void) { return 0; }", dir);
        let cwd = records_of(&out)
            .into_iter()
            .find_map(|r| match r {
                Record::Process(p) if p.exe.ends_with(b"/cwd") => Some(p.cwd),
                _ => None,
            })
            .expect("the program's process record");
        assert_names(&cwd, dir);
    });
}

/// Runs `f` in a temporary directory, then in one whose path is over 400
/// bytes long (longer than the shim's short buffers).
fn in_a_short_and_a_long_dir(mut f: impl FnMut(&std::path::Path)) {
    let d = tempfile::tempdir().unwrap();
    let long = d.path().join("d".repeat(200)).join("e".repeat(200));
    std::fs::create_dir_all(&long).unwrap();
    for dir in [d.path(), &long] {
        f(dir);
    }
}

/// A recorded path is what the kernel calls `want`.
fn assert_names(got: &[u8], want: &std::path::Path) {
    let want = want.canonicalize().unwrap();
    assert_eq!(
        String::from_utf8_lossy(got),
        want.to_string_lossy(),
        "{} bytes",
        want.as_os_str().len()
    );
}

/// Opens `data` in its working directory and moves it to number 10 with
/// dup2 (which the trace does not see), then reads a byte through it: the
/// read is the number's first use.
const MOVED: &str = r#"#include <fcntl.h>
#include <unistd.h>
int main(void) {
    char b;
    int f = open("data", O_RDONLY);
    if (f < 0 || dup2(f, 10) != 10 || read(10, &b, 1) != 1) return 2;
    return 0;
}
"#;

/// A descriptor's path is recorded whole whatever its length: one that
/// fits the shim's short buffer on the stack, and one of 400 bytes and
/// more, read again into its long one.
#[test]
fn a_descriptor_record_holds_its_path_short_or_long() {
    in_a_short_and_a_long_dir(|dir| {
        std::fs::write(dir.join("data"), b"x").unwrap();
        let (_, out) = crate::trace_source("moved", MOVED, dir);
        let path = records_of(&out)
            .into_iter()
            .find_map(|r| match r {
                Record::Descriptor(d) if d.fd.fd == 10 => Some(d.fd.path),
                _ => None,
            })
            .expect("the record of fd 10 at its first use");
        assert_names(&path, &dir.join("data"));
    });
}

/// Writes a byte to /dev/null, /dev/zero and a null device of its own
/// (`mynull`, made with mknod: the same device numbers, another inode),
/// each through a number made with dup2 (which the trace does not see), so
/// that each write is its descriptor's first use.
const NULLS: &str = r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
int main(void) {
    int n = open("/dev/null", O_WRONLY), z = open("/dev/zero", O_WRONLY);
    if (n < 0 || z < 0) return 2;
    if (mknod("mynull", S_IFCHR | 0600, makedev(1, 3))) return 3;
    int m = open("mynull", O_WRONLY);
    if (m < 0) return 4;
    if (dup2(n, 10) != 10 || dup2(z, 11) != 11 || dup2(m, 12) != 12) return 5;
    for (int fd = 10; fd <= 12; fd++)
        if (write(fd, "x", 1) != 1) return 6;
    return 0;
}
"#;

/// A descriptor that is /dev/null (its inode) is recorded as /dev/null
/// without the /proc lookup that costs a short process more than anything
/// else the trace does; any other device, and a null device made
/// elsewhere, still have the path /proc gives. strace (of the traced
/// program, under the trace) shows which descriptors were looked up and
/// which positions asked for (/dev/null's is always 0).
#[test]
#[ignore = "needs root (mknod) and strace"]
fn a_descriptor_that_is_dev_null_is_recorded_without_asking_proc() {
    fsprof_testkit::need_root("mknod of a null device");
    let strace = fsprof_testkit::need_program("strace", "strace");
    let d = tempfile::tempdir().unwrap();
    let exe = fsprof_testkit::compile_source("nulls", NULLS, d.path(), &[]);
    let out = d.path().join("t.trace");
    let log = d.path().join("strace.log");
    let o = fsprof_testkit::capture_in(
        d.path(),
        &["trace", "-f"],
        &out,
        &[
            strace.to_str().unwrap(),
            "-qq",
            "-e",
            "trace=readlinkat,lseek",
            "-o",
            log.to_str().unwrap(),
            exe.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records = records_of(&out);
    let image = records
        .iter()
        .find_map(|r| match r {
            Record::Process(p) if p.exe.ends_with(b"/nulls") => Some(p),
            _ => None,
        })
        .expect("the program's process record");
    let paths: Vec<(i32, String, i64, i64)> = records
        .iter()
        .filter_map(|r| match r {
            Record::Descriptor(d) if d.pid == image.pid && d.fd.fd >= 10 => Some((
                d.fd.fd,
                String::from_utf8_lossy(&d.fd.path).into_owned(),
                d.fd.flags & i64::from(libc::O_ACCMODE),
                d.fd.pos,
            )),
            _ => None,
        })
        .collect();
    let mynull = d.path().canonicalize().unwrap().join("mynull");
    let w = i64::from(libc::O_WRONLY);
    let want = [
        (10, "/dev/null".to_string(), w, 0),
        (11, "/dev/zero".to_string(), w, 0),
        (12, mynull.to_string_lossy().into_owned(), w, 0),
    ];
    assert_eq!(paths, want);
    let looked_up = std::fs::read_to_string(&log).unwrap();
    // /dev/null's position is 0 without an lseek; the others are asked.
    assert!(
        !looked_up.contains("/proc/self/fd/10\"")
            && !looked_up.contains("lseek(10,")
            && looked_up.contains("/proc/self/fd/11\"")
            && looked_up.contains("lseek(11,")
            && looked_up.contains("/proc/self/fd/12\"")
            && looked_up.contains("lseek(12,"),
        "{looked_up}"
    );
}
