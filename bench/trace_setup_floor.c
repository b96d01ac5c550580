/* The floor of a per-process trace stream as the shim makes it today
 * (shim/trace.c): the system calls one new process image makes to set up
 * its stream, timed alone in a loop, µs per image, each the median of
 * ROUNDS rounds of N. No fsprof runs; a scratch directory in /dev/shm
 * stands for the run directory.
 *
 *   fds N      the inherited descriptors recorded from /proc/self/fd
 *              (open, one getdents64, readlinkat + fcntl + lseek of each,
 *              close), with this program's 0-2 plus N-3 more open
 *   chunk      a free chunk claimed as a forked child does: the run
 *              directory opened and checked, listed, a free slot renamed,
 *              opened, checked, mapped, both closed; its first page
 *              written (a fault), unmapped at the end
 *   chunk lent the same with the directory already open (an exec'd
 *              image: its set-up opened it for the control file)
 *   fresh      a chunk made new (no free slot: O_CREAT, fallocate of
 *              64 KiB, map, first page written, unlink)
 *
 * usage: trace_setup_floor [ROUNDS [N]]   (defaults 7, 20000) */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (64 << 10)
#define MAX_ROUNDS 101

static char dir[64];

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void fds(int unused)
{
    (void)unused;
    long dfd = syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    char buf[2048], target[4096];
    long got = syscall(SYS_getdents64, dfd, buf, sizeof buf);
    for (long off = 0; off < got;) {
        struct dirent64 *d = (struct dirent64 *)(buf + off);
        off += d->d_reclen;
        if (d->d_name[0] < '0' || d->d_name[0] > '9')
            continue;
        long fd = strtol(d->d_name, NULL, 10);
        if (fd == dfd)
            continue;
        syscall(SYS_readlinkat, dfd, d->d_name, target, sizeof target);
        syscall(SYS_fcntl, fd, F_GETFL);
        syscall(SYS_lseek, fd, 0L, SEEK_CUR);
    }
    syscall(SYS_close, dfd);
}

static long open_dir(void)
{
    long d = syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    struct stat st;
    syscall(SYS_fstat, d, &st);
    return d;
}

static void claim(long dfd, int i)
{
    char buf[2048], from[8], to[8];
    struct stat st;
    syscall(SYS_getdents64, dfd, buf, sizeof buf);
    snprintf(from, sizeof from, "f%d", i & 1);
    snprintf(to, sizeof to, "f%d", !(i & 1));
    syscall(SYS_renameat, dfd, from, dfd, to);
    long fd = syscall(SYS_openat, dfd, to, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    syscall(SYS_fstat, fd, &st);
    char *m = (char *)syscall(SYS_mmap, 0, CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    syscall(SYS_close, fd);
    m[0] = 1;
    syscall(SYS_munmap, m, CHUNK);
}

static void chunk(int i)
{
    long d = open_dir();
    claim(d, i);
    syscall(SYS_close, d);
}

static long g_lent = -1;

static void chunk_lent(int i)
{
    claim(g_lent, i);
}

static void fresh(int i)
{
    (void)i;
    long d = open_dir();
    long fd = syscall(SYS_openat, d, "t1", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    syscall(SYS_fallocate, fd, 0, 0L, (long)CHUNK);
    char *m = (char *)syscall(SYS_mmap, 0, CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    syscall(SYS_close, fd);
    m[0] = 1;
    syscall(SYS_munmap, m, CHUNK);
    syscall(SYS_unlinkat, d, "t1", 0);
    syscall(SYS_close, d);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run(const char *name, void (*f)(int), int rounds, int n)
{
    double t[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ns();
        for (int i = 0; i < n; i++)
            f(i);
        t[r] = (now_ns() - t0) / n / 1e3;
    }
    qsort(t, (size_t)rounds, sizeof t[0], cmp);
    printf("%-12s %7.2f us an image (rounds %.2f..%.2f)\n", name, t[rounds / 2], t[0],
           t[rounds - 1]);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 7, n = argc > 2 ? atoi(argv[2]) : 20000;
    if (rounds < 1 || rounds > MAX_ROUNDS || n < 1) {
        fprintf(stderr, "usage: trace_setup_floor [ROUNDS (1..%d) [N]]\n", MAX_ROUNDS);
        return 2;
    }
    snprintf(dir, sizeof dir, "/dev/shm/trace-setup-floor-%d", (int)getpid());
    char path[128];
    snprintf(path, sizeof path, "%s/f0", dir);
    if (mkdir(dir, 0700) != 0) {
        perror(dir);
        return 1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || posix_fallocate(fd, 0, CHUNK) != 0) {
        perror(path);
        return 1;
    }
    close(fd);
    for (int k = 3; k < 5; k++)
        dup2(0, k);
    run("fds 5", fds, rounds, n);
    for (int k = 5; k < 10; k++)
        dup2(0, k);
    run("fds 10", fds, rounds, n);
    run("chunk", chunk, rounds, n);
    g_lent = open_dir();
    run("chunk lent", chunk_lent, rounds, n);
    close((int)g_lent);
    run("fresh", fresh, rounds, n);
    snprintf(path, sizeof path, "%s/f0", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/f1", dir);
    unlink(path);
    rmdir(dir);
    return 0;
}
