/* Where a system call is made from, and what the kernel's time for it is
 * (replay13): tar's per-file calls over one directory's regular files --
 * newfstatat(dir, name, AT_SYMLINK_NOFOLLOW), openat(dir, name, tar's
 * flags), newfstatat(fd, "", AT_EMPTY_PATH), close -- with the `syscall`
 * instruction inline in the loop, as fsprof replay made them before, and
 * in a function the loop calls, as glibc's wrappers and the replayer now
 * make them; rdtsc right around the instruction in both. Passes
 * alternate; per way and op, the minimum and median ticks over all files
 * and passes.
 *
 *   cc -O2 -o /tmp/syscall_site bench/syscall_site.c
 *   /tmp/syscall_site /usr/include/linux 5
 *
 * On the project's test VM (AMD EPYC, SRSO "Safe RET"), load 17-20, the
 * called function's were ~25% longer: fstat 1,350 against 1,080 ticks,
 * openat 4,310 against 3,140, close 1,810 against 1,300. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <x86intrin.h>

enum { OPS = 4, MAXN = 1 << 16, NAMES = 4096 };
static const char *op_name[OPS] = {"fstatat", "openat", "fstat", "close"};
static unsigned long ticks[2][OPS][MAXN];
static int count[2][OPS];

/* The instruction inline at the call site, rdtsc around it. */
#define SYSCALL_TIMED(r, t, n, a, b, c, d)                                                  \
    do {                                                                                    \
        register long r10_ __asm__("r10") = (d);                                            \
        unsigned long t0_ = __rdtsc();                                                      \
        __asm__ volatile("syscall"                                                          \
                         : "=a"(r)                                                          \
                         : "a"((long)(n)), "D"((long)(a)), "S"((long)(b)), "d"((long)(c)),  \
                           "r"(r10_)                                                        \
                         : "rcx", "r11", "memory");                                         \
        t = __rdtsc() - t0_;                                                                \
    } while (0)

/* The same inside a function of its own, as a C library makes it. */
__attribute__((noinline)) static long in_function(long n, long a, long b, long c, long d,
                                                  unsigned long *t)
{
    long r;
    SYSCALL_TIMED(r, *t, n, a, b, c, d);
    return r;
}

static void keep(int way, int op, unsigned long t)
{
    if (count[way][op] < MAXN)
        ticks[way][op][count[way][op]++] = t;
}

static void pass(int way, int dfd, char (*names)[256], int n)
{
    const long flags = O_RDONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC;
    struct stat st;
    for (int i = 0; i < n; i++) {
        unsigned long t[OPS];
        long fd;
        if (way == 0) {
            long r;
            SYSCALL_TIMED(r, t[0], SYS_newfstatat, dfd, names[i], &st, AT_SYMLINK_NOFOLLOW);
            (void)r;
            SYSCALL_TIMED(fd, t[1], SYS_openat, dfd, names[i], flags, 0);
            if (fd < 0)
                continue;
            SYSCALL_TIMED(r, t[2], SYS_newfstatat, fd, "", &st, AT_EMPTY_PATH);
            SYSCALL_TIMED(r, t[3], SYS_close, fd, 0, 0, 0);
        } else {
            in_function(SYS_newfstatat, dfd, (long)names[i], (long)&st, AT_SYMLINK_NOFOLLOW, &t[0]);
            fd = in_function(SYS_openat, dfd, (long)names[i], flags, 0, &t[1]);
            if (fd < 0)
                continue;
            in_function(SYS_newfstatat, fd, (long)"", (long)&st, AT_EMPTY_PATH, &t[2]);
            in_function(SYS_close, fd, 0, 0, 0, &t[3]);
        }
        for (int op = 0; op < OPS; op++)
            keep(way, op, t[op]);
    }
}

static int by_value(const void *a, const void *b)
{
    unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: syscall_site DIR [PASSES]\n");
        return 2;
    }
    int passes = argc > 2 ? atoi(argv[2]) : 5;
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 1;
    }
    static char names[NAMES][256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < NAMES)
        if (e->d_type == DT_REG)
            snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    int dfd = dirfd(d);
    for (int p = 0; p < passes; p++)
        for (int way = 0; way < 2; way++)
            pass(way, dfd, names, n);
    static const char *way_name[2] = {"inline", "in a function"};
    for (int way = 0; way < 2; way++) {
        printf("%-14s", way_name[way]);
        for (int op = 0; op < OPS; op++) {
            int c = count[way][op];
            if (c == 0)
                continue;
            qsort(ticks[way][op], c, sizeof ticks[0][0][0], by_value);
            printf("  %s min %lu med %lu", op_name[op], ticks[way][op][0], ticks[way][op][c / 2]);
        }
        printf("  (ticks, %d files x %d passes)\n", n, passes);
    }
    return 0;
}
