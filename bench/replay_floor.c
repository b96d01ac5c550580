/* The floor of a replay's CPU per command: the same calls as a traced
 * program's, made back to back by a plain C loop through glibc (as the
 * program made them), with no pacing, timing or recording. What
 * bench/trace_replay.py part 5 prints beside the replayer's CPU per
 * command, so that "halved" can be judged against what the calls
 * themselves cost.
 *
 * Input (standard input, written by the bench from `fsprof trace show
 * --format jsonl`), one call a line, descriptors as the trace numbered
 * them, paths already under the replay's root, the path last (the rest of
 * the line):
 *   o DIRFD FLAGS MODE OUTFD PATH   openat (DIRFD -100: the working directory)
 *   k MODE OUTFD PATH               creat
 *   a DIRFD FLAGS PATH              fstatat
 *   s FD                            fstat
 *   r FD LEN                        read
 *   w FD LEN                        write
 *   c FD                            close
 *   D FD                            fdopendir
 *   d FD                            readdir
 *   C FD                            closedir
 * usage: replay_floor DIR PASSES < calls
 * chdir(DIR) first (the traced working directory under the root), then
 * PASSES passes over the calls; prints per pass
 *   calls cpu_ns wall_ns
 * (the thread's CPU time, user and system, and the wall time of the pass).
 * Calls that fail are counted as made (a replay makes them too). */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 4096

struct call {
    char op;
    int fd, flags, mode, out;
    long len;
    char *path;
};

static int fds[MAXFD];
static DIR *dirs[MAXFD];

static long long ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int mapped(int fd)
{
    if (fd == -100)
        return AT_FDCWD;
    return fd >= 0 && fd < MAXFD ? fds[fd] : -1;
}

static void set(int traced, int fd)
{
    if (traced >= 0 && traced < MAXFD)
        fds[traced] = fd;
}

static void run(const struct call *c, char *buf)
{
    struct stat st;
    int fd = mapped(c->fd);
    switch (c->op) {
    case 'o':
        set(c->out, openat(fd, c->path, c->flags, c->mode));
        break;
    case 'k':
        set(c->out, creat(c->path, c->mode));
        break;
    case 'a':
        fstatat(fd, c->path, &st, c->flags);
        break;
    case 's':
        fstat(fd, &st);
        break;
    case 'r':
        (void)!read(fd, buf, c->len);
        break;
    case 'w':
        (void)!write(fd, buf, c->len);
        break;
    case 'c':
        close(fd);
        set(c->fd, -1);
        break;
    case 'D':
        if (c->fd >= 0 && c->fd < MAXFD)
            dirs[c->fd] = fdopendir(fd);
        break;
    case 'd':
        if (c->fd >= 0 && c->fd < MAXFD && dirs[c->fd])
            readdir(dirs[c->fd]);
        break;
    case 'C':
        if (c->fd >= 0 && c->fd < MAXFD && dirs[c->fd]) {
            closedir(dirs[c->fd]);
            dirs[c->fd] = NULL;
            set(c->fd, -1);
        }
        break;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 || chdir(argv[1]) != 0)
        return 2;
    int passes = atoi(argv[2]);
    size_t n = 0, cap = 1024;
    long maxlen = 4096;
    struct call *calls = malloc(cap * sizeof *calls);
    char line[8192];
    while (calls && fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        struct call c = {0};
        int at = 0;
        c.op = line[0];
        const char *p = line + 1;
        int ok;
        switch (c.op) {
        case 'o':
            ok = sscanf(p, "%d %d %d %d %n", &c.fd, &c.flags, &c.mode, &c.out, &at) == 4;
            break;
        case 'k':
            ok = sscanf(p, "%d %d %n", &c.mode, &c.out, &at) == 2;
            break;
        case 'a':
            ok = sscanf(p, "%d %d %n", &c.fd, &c.flags, &at) == 2;
            break;
        case 'r':
        case 'w':
            ok = sscanf(p, "%d %ld", &c.fd, &c.len) == 2 && c.len >= 0 && c.len <= (64 << 20);
            break;
        default:
            ok = strchr("scDdC", c.op) && sscanf(p, "%d", &c.fd) == 1;
        }
        if (!ok) {
            fprintf(stderr, "replay_floor: bad line: %s\n", line);
            return 2;
        }
        if (at)
            c.path = strdup(p + at);
        if (c.len > maxlen)
            maxlen = c.len;
        if (n == cap && !(calls = realloc(calls, (cap *= 2) * sizeof *calls)))
            return 3;
        calls[n++] = c;
    }
    if (!calls || passes < 1)
        return 2;
    /* A program's I/O buffer: page-aligned, written once (its pages in). */
    char *buf = aligned_alloc(4096, (maxlen + 4095) / 4096 * 4096);
    if (!buf)
        return 3;
    memset(buf, 'x', maxlen);
    for (int k = 0; k < passes; k++) {
        for (int i = 0; i < MAXFD; i++)
            fds[i] = -1;
        long long c0 = ns(CLOCK_THREAD_CPUTIME_ID), w0 = ns(CLOCK_MONOTONIC);
        for (size_t i = 0; i < n; i++)
            run(&calls[i], buf);
        long long c1 = ns(CLOCK_THREAD_CPUTIME_ID), w1 = ns(CLOCK_MONOTONIC);
        printf("%zu %lld %lld\n", n, c1 - c0, w1 - w0);
        /* Whatever the trace left open (a pass starts from none). */
        for (int i = 0; i < MAXFD; i++) {
            if (dirs[i]) {
                closedir(dirs[i]);
                dirs[i] = NULL;
            } else if (fds[i] >= 0) {
                close(fds[i]);
            }
        }
    }
    return 0;
}
