//! A forked child of a traced process holds no mapping of its parent's
//! chunk file: the child records into a chunk of its own, and a mapping of
//! the parent's kept alive would hold that file's pages (fsprof deletes or
//! hands back a chunk once it has its records) for as long as the child
//! runs.

/// Makes enough traced calls that its records outgrow its window (a
/// process image's first chunk, in its arena block) into a chunk file,
/// forks; the child does the same and prints how many chunk files
/// (`t<seq>` or a free slot `f<k>` of the run directory) it has mapped.
const FORKER: &str = r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static int is_chunk(const char *line) {
    const char *run = strstr(line, "/fsprof-run-");
    if (!run) return 0;
    const char *base = strrchr(run, '/') + 1;
    if (base[0] != 't' && base[0] != 'f') return 0;
    int digits = 0;
    while (base[1 + digits] >= '0' && base[1 + digits] <= '9') digits++;
    return digits > 0 && (base[1 + digits] == '\n' || base[1 + digits] == ' ');
}
static void outgrow_the_window(void) {
    for (int i = 0; i < 400; i++) {
        int fd = open("/etc/hostname", O_RDONLY);
        close(fd);
    }
}
int main(void) {
    outgrow_the_window();
    pid_t k = fork();
    if (k == 0) {
        outgrow_the_window();
        FILE *f = fopen("/proc/self/maps", "r");
        char line[8192];
        int n = 0;
        while (fgets(line, sizeof line, f)) n += is_chunk(line);
        printf("%d\n", n);
        fflush(stdout);
        _exit(0);
    }
    int st;
    waitpid(k, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
"#;

#[test]
fn a_forked_child_maps_its_own_chunk_only() {
    let d = tempfile::tempdir().unwrap();
    let (o, _) = crate::trace_source("forker", FORKER, d.path());
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "1");
}
