//! Descriptors the trace did not see made: a forked child's inherited
//! ones, the ones a `dup2` put in place (a shell's redirections), and
//! ones moved where the shim cannot see (a raw system call), replay onto
//! the files the traced program used.

use std::path::Path;

use fsprof_testkit::canonical_tempdir;

use super::command::{c_program, compile_trace, ok, replay, trace_in, STRICT};

/// Traces `exe` in `base/work` (files made there by `setup` first) with
/// `--data full`, compiles and replays it strictly into `base/root`;
/// returns what the replay said and the replayed `work` directory.
pub(super) fn replayed(
    base: &Path,
    exe: &Path,
    setup: &[(&str, &[u8])],
) -> (String, std::path::PathBuf) {
    replayed_cmd(base, &[exe.as_os_str()], setup, "full")
}

/// [`replayed`] of command `cmd` traced with `--data DATA`; the trace is
/// `base/d.trace`.
pub(super) fn replayed_cmd(
    base: &Path,
    cmd: &[&std::ffi::OsStr],
    setup: &[(&str, &[u8])],
    data: &str,
) -> (String, std::path::PathBuf) {
    let work = base.join("work");
    std::fs::create_dir(&work).unwrap();
    for (name, bytes) in setup {
        std::fs::write(work.join(name), bytes).unwrap();
    }
    let (t, r, root) = (
        base.join("d.trace"),
        base.join("d.replay"),
        base.join("root"),
    );
    trace_in(&work, &["--data", data], &t, cmd);
    let compiled = compile_trace(base, &t, &r);
    std::fs::create_dir(&root).unwrap();
    let msgs = ok(&replay(base, &r, &root, &STRICT));
    assert!(msgs.contains("mismatches: 0"), "{compiled}\n{msgs}");
    (msgs, root.join(work.strip_prefix("/").unwrap()))
}

/// The parent closes the descriptor it forked with and opens another file
/// on the same number before the child's first call: the child's write
/// still replays onto the file it inherited. The child's first record
/// comes after the parent's calls; its image is dated at the fork (the
/// shim stamps it in the parent just before), so `compile` copies the
/// parent's table as it was then.
#[test]
fn a_forked_child_writes_the_file_it_inherited_not_what_its_parent_opened_since() {
    let (_d, base) = canonical_tempdir();
    let exe = c_program(
        &base,
        "reused_fd",
        r#"#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    int go[2];
    int a = open("a", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (a < 0 || pipe(go)) return 1;
    pid_t k = fork();
    if (k == 0) {
        char c;
        /* Raw: the shim does not see it, so the child's first call is
         * its write, after the parent's. */
        if (syscall(SYS_read, go[0], &c, 1) != 1) _exit(2);
        _exit(write(a, "child", 5) == 5 ? 0 : 3);
    }
    if (close(a)) return 4;
    int b = open("b", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (b != a || write(b, "parent", 6) != 6) return 5;
    int status;
    if (syscall(SYS_write, go[1], "g", 1) != 1 || waitpid(k, &status, 0) != k || status) return 6;
    return close(b);
}
"#,
    );
    let (msgs, work) = replayed(&base, &exe, &[]);
    let read = |name: &str| std::fs::read(work.join(name)).unwrap_or_default();
    assert_eq!(read("a"), b"child", "the child's write: {msgs}");
    assert_eq!(read("b"), b"parent", "the parent's write: {msgs}");
}

/// A program that moves files onto its stdin and stdout as a shell's
/// `<in >out` does, but with a raw `dup2` system call, which the shim does
/// not see (`posix_spawn`'s file actions make theirs inside libc): its reads of fd 0, its writes, stdio writes
/// and a copy of "everything" from a file that was there before the trace
/// (`copy_file_range` of 2^62 bytes, as `cat` makes) to fd 1 all replay,
/// and the replayed `out` is the traced one where the trace has its bytes.
/// The descriptors are opened anew before their first use, at their
/// recorded position, by set-up commands the replay counts apart.
#[test]
fn redirected_stdin_and_stdout_replay_onto_their_files() {
    let (_d, base) = canonical_tempdir();
    let exe = c_program(
        &base,
        "redirected",
        r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
static int onto(const char *path, int flags, int fd) {
    int f = open(path, flags, 0644);
    return f < 0 || syscall(SYS_dup2, f, fd) != fd || close(f) ? -1 : 0;
}
int main(void) {
    char buf[64];
    /* Read past the start before the move: fd 0's first use is 3 bytes
     * in, where its reopened descriptor must be too. */
    int in = open("in", O_RDONLY);
    if (in < 0 || read(in, buf, 3) != 3 || syscall(SYS_dup2, in, 0) || close(in)) return 1;
    if (onto("out", O_CREAT | O_WRONLY | O_TRUNC, 1)) return 2;
    ssize_t n = read(0, buf, sizeof buf);
    if (n != 6 || write(1, buf, n) != n) return 3;
    /* As `cat more >>out` copies: `more` was there before the trace,
     * which saw nothing of its bytes but the size of the copy. */
    int more = open("more", O_RDONLY);
    if (more < 0 || copy_file_range(more, NULL, 1, NULL, (size_t)1 << 62, 0) != 5) return 4;
    /* A copy moves the position: the read that follows it starts 5
     * bytes in (the trace has its bytes, and where they lie). */
    int rest = open("rest", O_RDONLY);
    if (rest < 0 || copy_file_range(rest, NULL, 1, NULL, 5, 0) != 5) return 4;
    if (read(rest, buf, sizeof buf) != 4 || close(rest)) return 4;
    if (fwrite("stdio\n", 1, 6, stdout) != 6 || fflush(stdout)) return 5;
    return close(more) | fclose(stdout);
}
"#,
    );
    let (msgs, work) = replayed(
        &base,
        &exe,
        &[
            ("in", b"ski+input"),
            ("more", b"more\n"),
            ("rest", b"head+rest"),
        ],
    );
    assert_eq!(
        std::fs::read(base.join("work/out")).unwrap(),
        b"+inputmore\nhead+stdio\n"
    );
    let read = |name: &str| std::fs::read(work.join(name)).unwrap_or_default();
    // The copies' 10 bytes are of `more` and `rest` as the replay made
    // them: the trace has their sizes, not their bytes.
    let out = read("out");
    assert_eq!(out.len(), 22, "{msgs}");
    assert_eq!(
        (&out[..6], &out[16..]),
        (&b"+input"[..], &b"stdio\n"[..]),
        "{msgs}"
    );
    // What fd 0 read lies 3 bytes in: the initial state says so only if
    // the reopened descriptor was put there.
    assert_eq!(read("in"), b"ski+input", "{msgs}");
    // fd 0 opened and moved 3 bytes in, fd 1 opened.
    assert!(msgs.contains("; 3 set-up command(s)"), "{msgs}");
}

/// `dup2` and `dup3` onto a number the trace already has a file for put
/// another open file there: the writes that follow replay onto that file,
/// or, from /dev/null, onto none, not onto the file the number held.
#[test]
fn a_number_moved_onto_another_file_replays_onto_that_file() {
    let (_d, base) = canonical_tempdir();
    replays_into(
        &base,
        "moved_fd",
        r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
int main(void) {
    int a = open("a", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    int b = open("b", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    int c = open("c", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (a < 0 || b < 0 || c < 0 || write(a, "x", 1) != 1) return 1;
    /* b's file stays open through b when a lets it go. */
    if (dup2(b, a) != a || write(a, "y", 1) != 1 || close(a) || write(b, "z", 1) != 1) return 2;
    if (dup3(c, a, O_CLOEXEC) != a || write(a, "w", 1) != 1) return 3;
    int null = open("/dev/null", O_WRONLY);
    if (null < 0 || dup2(null, c) != c || write(c, "-", 1) != 1) return 4;
    return close(a) | close(b) | close(c) | close(null);
}
"#,
        &[],
        &[("a", "x"), ("b", "yz"), ("c", "w")],
    );
}

/// A program whose stdout is a file it used starts a command with its
/// stdout moved onto another file (`dup2` in the child, as a shell's
/// `cmd >out` does), then execs `head`: the exec'd image's fd 1 is `out`,
/// not the file the child inherited on that number. head's output
/// replays into out, the parent's writes around it into log.
#[test]
fn an_execd_commands_redirected_stdout_replays_onto_its_file() {
    let (_d, base) = canonical_tempdir();
    replays_into(
        &base,
        "exec_moved",
        r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    int log = open("log", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (log < 0 || dup2(log, 1) != 1 || close(log) || write(1, "one\n", 4) != 4) return 1;
    pid_t k = fork();
    if (k == 0) {
        int out = open("out", O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (out < 0 || dup2(out, 1) != 1 || close(out)) _exit(2);
        execlp("head", "head", "-n", "2", "f", (char *)0);
        _exit(3);
    }
    int status;
    if (waitpid(k, &status, 0) != k || status) return 4;
    return write(1, "two\n", 4) != 4;
}
"#,
        &[("f", b"1\n2\n3\n")],
        &[("out", "1\n2\n"), ("log", "one\ntwo\n")],
    );
}

/// Compiles C program `src`, traces and replays it ([`replayed`]), and
/// checks that the replayed files `want` hold their texts.
fn replays_into(
    base: &Path,
    name: &str,
    src: &str,
    setup: &[(&str, &[u8])],
    want: &[(&str, &str)],
) {
    let exe = c_program(base, name, src);
    let (msgs, work) = replayed(base, &exe, setup);
    for (file, text) in want {
        let got = std::fs::read(work.join(file)).unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&got), *text, "{file}: {msgs}");
    }
}
