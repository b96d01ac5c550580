/* procs' `readdir` mode, reproduced without fsprof (docs/benchmarks/analysis.md).
 *
 * An LD_PRELOAD library for `sh` (dash calls opendir, readdir64, closedir
 * for a glob): it times the directory calls with the TSC and, at opendir
 * and at closedir, a fixed chain of 400 dependent multiplies in a register
 * (the fastest of three): the CPU's speed at that moment, which no file
 * system state can change. At closedir it appends one line to $RDLOG:
 *
 *   chain_open chain_close (ns) open first buffered_median buffered_p90
 *   buffered_sum close (ns) calls cpu unix_ns_at_opendir
 *
 * `first` is the call that reads the directory (getdents64); the others
 * are served from glibc's buffer. A run whose buffered calls are several
 * times their usual time and whose chain is as many times slower ran on a
 * slowed CPU; one whose chain is usual while readdir is slow would be the
 * directory's or the buffer's doing. The wall-clock time lines a run up
 * with machine_speed's samples of the other CPUs.
 *
 *   cc -O2 -shared -fPIC -o readdir_modes.so bench/compare/readdir_modes.c -ldl
 *   CMD='for f in /usr/include/linux/[a-f]*.h; do head -c 64 "$f"; done'
 *   for i in $(seq 200); do
 *       sh -c "$CMD" >/dev/null      # warm, as compare_rates.py does
 *       RDLOG=modes.txt LD_PRELOAD=$PWD/readdir_modes.so sh -c "$CMD" >/dev/null
 *   done
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define MAXCALLS 8192

static uint64_t chain_open, chain_close, d_open, d_close, unix_open;
static uint32_t lat[MAXCALLS];
static int n;
static DIR *(*real_opendir)(const char *);
static struct dirent64 *(*real_readdir64)(DIR *);
static int (*real_closedir)(DIR *);

static uint64_t chain1(void)
{
    uint64_t x = 1, t0 = __rdtsc();
    for (int i = 0; i < 400; i++) {
        x = x * 3 + 1;
        __asm__ volatile("" : "+r"(x));
    }
    uint64_t d = __rdtsc() - t0;
    __asm__ volatile("" ::"r"(x));
    return d;
}

/* The fastest of three: an interrupt slows one chain, a slow CPU all. */
static uint64_t chain(void)
{
    uint64_t a = chain1(), b = chain1(), c = chain1();
    a = b < a ? b : a;
    return c < a ? c : a;
}

__attribute__((constructor)) static void init(void)
{
    real_opendir = (DIR * (*)(const char *)) dlsym(RTLD_NEXT, "opendir");
    real_readdir64 = (struct dirent64 * (*)(DIR *)) dlsym(RTLD_NEXT, "readdir64");
    real_closedir = (int (*)(DIR *))dlsym(RTLD_NEXT, "closedir");
}

/* ns per TSC tick, from the monotonic clock over 2 ms: measured after the
 * directory was read, in the processes that read one only, so that nothing
 * is added before or during what is timed. */
static double ns_per_tick(void)
{
    struct timespec a, b, pause = {0, 2000000};
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t t0 = __rdtsc();
    nanosleep(&pause, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    uint64_t t1 = __rdtsc();
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    return ns / (double)(t1 - t0);
}

DIR *opendir(const char *p)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    unix_open = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    chain_open = chain();
    uint64_t t0 = __rdtsc();
    DIR *d = real_opendir(p);
    d_open = __rdtsc() - t0;
    n = 0;
    return d;
}

struct dirent64 *readdir64(DIR *d)
{
    uint64_t t0 = __rdtsc();
    struct dirent64 *e = real_readdir64(d);
    uint64_t dt = __rdtsc() - t0;
    if (n < MAXCALLS)
        lat[n++] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
    return e;
}

static int cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int closedir(DIR *d)
{
    uint64_t t0 = __rdtsc();
    int r = real_closedir(d);
    d_close = __rdtsc() - t0;
    chain_close = chain();
    const char *log = getenv("RDLOG");
    if (n < 3 || log == NULL)
        return r;
    static uint32_t s[MAXCALLS];
    uint64_t sum = 0;
    for (int i = 1; i < n; i++)
        sum += lat[i];
    memcpy(s, lat + 1, (size_t)(n - 1) * sizeof s[0]);
    qsort(s, (size_t)(n - 1), sizeof s[0], cmp);
    double k = ns_per_tick();
    char buf[256];
    int len = snprintf(buf, sizeof buf, "%.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %d %d %lu\n",
                       chain_open * k, chain_close * k, d_open * k, lat[0] * k,
                       s[(n - 1) / 2] * k, s[(n - 1) * 9 / 10] * k, sum * k, d_close * k, n,
                       sched_getcpu(), (unsigned long)unix_open);
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (write(fd, buf, (size_t)len) != len)
            perror("readdir_modes");
        close(fd);
    }
    return r;
}
