//! A process image's first chunk is the window at the end of its arena
//! block (`shim/trace_abi.h`, FSPROF_TWIN_SIZE): a short process makes no
//! chunk file. One whose records outgrow the window goes on in a chunk
//! file, and the trace holds every call of both, in order.

/// Counts the chunk files (`t<seq>`) in the run directory (the path after
/// FSPROF_SHM's fourth colon) after a few calls, and again after enough
/// calls to outgrow the window; each open is of a numbered name, so that
/// the trace shows the order.
const OUTGROW: &str = r#"#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int chunk_files(void) {
    const char *v = getenv("FSPROF_SHM");
    for (int colons = 0; v && *v && colons < 4; v++) colons += *v == ':';
    DIR *d = v ? opendir(v) : NULL;
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] == 't' && e->d_name[1] >= '0' && e->d_name[1] <= '9';
    closedir(d);
    return n;
}
static void opens(int from, int to) {
    char name[64];
    for (int i = from; i < to; i++) {
        snprintf(name, sizeof name, "/etc/hostname-%d", i);
        int fd = open(name, O_RDONLY);
        if (fd >= 0) close(fd);
    }
}
int main(void) {
    opens(0, 3);
    int before = chunk_files();
    opens(3, 400);
    int after = chunk_files();
    printf("%d %d\n", before, after);
    return 0;
}
"#;

#[test]
fn a_short_process_makes_no_chunk_file_and_a_longer_one_goes_on_in_one() {
    let d = tempfile::tempdir().unwrap();
    let (out, t) = crate::trace_source("outgrow", OUTGROW, d.path());
    let counts = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // Chunk files before and after outgrowing the window.
    assert_eq!(counts, "0 1");
    let (_, calls, summary) = crate::capture::records(&t);
    assert_eq!(summary.dropped, 0);
    let opened: Vec<String> = calls
        .iter()
        .filter(|c| c.op.is("open"))
        .filter_map(|c| c.path.as_ref())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .filter(|p| p.starts_with("/etc/hostname-"))
        .collect();
    let want: Vec<String> = (0..400).map(|i| format!("/etc/hostname-{i}")).collect();
    assert_eq!(opened, want);
}

/// A process in a block taken before its pages were made makes its
/// window's pages when it takes the window, and leaves a hole where
/// /dev/shm has no room (shim/pool.c, `make_above`); fsprof never reads
/// that hole (arena.rs, `Arena::window_made`). Here `sh` gets its
/// header's pages and not its window's, the processes after it not even
/// a header's, and then `dd` fills /dev/shm: a read of a hole would raise
/// SIGBUS, which fsprof's guard answers with a page of zeros that it
/// takes for a file shrunk under it (fsprof-sys mapfault.rs), and that
/// no later write of the file shows through.
#[test]
#[ignore = "needs root, unshare"]
fn a_window_its_process_could_not_make_is_not_read() {
    let d = tempfile::tempdir().unwrap();
    let cmd = "cat /etc/hostname >/dev/null; \
               dd if=/dev/zero of=/dev/shm/more bs=4k 2>/dev/null; sleep 0.3; exit 3";
    // Room for the control file and sh's first three pages, not for a
    // window's four.
    let args = ["trace", "-q", "-f", "-o", "t.trace"];
    let o = fsprof_testkit::in_small_shm(d.path(), 36, &args, cmd)
        .env("FSPROF_TEST_UNREADY_BLOCKS", "1")
        .output()
        .unwrap();
    let err = fsprof_testkit::stderr(&o);
    assert_eq!(o.status.code(), Some(3), "135 is SIGBUS: {err}");
    assert!(!err.contains("shrank"), "{err}");
    let p = fsprof_testkit::load(&d.path().join("t.json"));
    assert!(
        p.processes.iter().any(|p| p.exe.ends_with("sh")),
        "sh had its block's header: {:?}",
        p.processes
    );
    crate::capture::records(&d.path().join("t.trace"));
    // sh's calls, counted in its block, had no chunk to go to, nor a
    // chunk to count them in: the trace says it lacks them.
    assert!(
        err.contains("are not in the trace, and no process could say so"),
        "{err}"
    );
}

/// A thread fills its window and its first chunk files, which `fsprof
/// trace` hands back once sealed (f0: 64 KiB, f1: 128 KiB, ...); then a
/// thread claims f0 for its first chunk (64 KiB) and a third one f1, a
/// file larger than it asked for. The chunk's header says the file's
/// size: it said the size asked for, and `fsprof trace` skipped the
/// chunk as corrupt ("chunk header disagrees with the file's size"),
/// every call of the third thread lost (seen tracing `strace -f`).
const CLAIMS: &str = r#"#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void opens(const char *who, int n) {
    char name[64];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "/etc/hostname-%s-%d", who, i);
        int fd = open(name, O_RDONLY);
        if (fd >= 0) close(fd);
    }
}
static void *thread(void *who) {
    opens(who, 3);
    return NULL;
}
int main(void) {
    opens("a", 4000);
    usleep(200000);
    const char *who[] = {"b", "c"};
    for (int k = 0; k < 2; k++) {
        pthread_t t;
        pthread_create(&t, NULL, thread, (void *)who[k]);
        pthread_join(t, NULL);
    }
    return 0;
}
"#;

#[test]
fn a_thread_that_claims_a_larger_free_chunk_file_is_traced() {
    let d = tempfile::tempdir().unwrap();
    let (out, t) = crate::trace_source("claims", CLAIMS, d.path());
    let err = fsprof_testkit::stderr(&out);
    assert!(!err.contains("skipped"), "{err}");
    let (_, calls, _) = crate::capture::records(&t);
    for who in ["a", "b", "c"] {
        let prefix = format!("/etc/hostname-{who}-");
        let n = calls
            .iter()
            .filter(|c| c.op.is("open"))
            .filter_map(|c| c.path.as_ref())
            .filter(|p| p.starts_with(prefix.as_bytes()))
            .count();
        assert_eq!(n, if who == "a" { 4000 } else { 3 }, "{who}: {err}");
    }
}
