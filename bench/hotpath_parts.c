/* The shim's per-call cost taken apart: the same wrapper built up one part
 * at a time from the shim's own inline hot path (record.h), each variant a
 * separate non-inlined "wrapper" that the loop calls through a pointer, the
 * way a program reaches an interposed symbol, around the same callee as
 * the bare loop (a no-op, or libc's fstat / pread found with dlsym):
 *
 *   bare      the callee called directly (what an unprofiled program pays)
 *   level     + one call level: a wrapper that loads real_fn and calls it
 *   rdtsc     + the two clock reads around the call (now_ticks)
 *   record    + filing the latency: ticks_to_ns, bucket, min/max, total,
 *               errors, post (record_private into a fixed counter)
 *   enter     + this thread's slot and counter look-up and `pre` (call_begin)
 *   fdclass   + the descriptor's class (call_begin_fd)
 *   own       + the tracing test and the own-cost countdown: the complete
 *               WRAP_FD path of wrappers.c (fstat)
 *   value     + request size and seek distance: the complete WRAP_DATA path
 *               (pread)
 *   floor     (not a step) level + rdtsc + the least any latency histogram
 *               files: pre and post counts, the bucket, the total; no
 *               look-ups, no min/max, no errors, no sampling
 *
 * Variants are interleaved within each round; per variant the median over
 * rounds of ns per call; each part is the difference of adjacent medians.
 * Run pinned and at real-time priority so that the rounds are comparable
 * (bench/hotpath_parts.sh builds it with the shim's flags and runs it so):
 *
 *   bench/hotpath_parts.sh [ROUNDS] [CALLS]
 *
 * Every part is the shim's own inline code: the bench links the shim's
 * C files but wrappers.c and sets up a slot as pool.c would. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"
#include "trace.h"

int fsprof_shim_selftest(const struct fsprof_control *ctl, size_t len, uint32_t iters,
                         struct fsprof_selftest *out);

/* The "libc function" every variant ends in: (fd, buf, n, off). */
typedef long (*callee_fn)(int, void *, size_t, off_t);
static callee_fn g_real;
/* Room for the struct stat that fstat writes. */
static char g_buf[256] __attribute__((aligned(16)));

static __attribute__((noinline)) long noop(int fd, void *b, size_t n, off_t o)
{
    __asm__ volatile("" : : "r"(fd), "r"(b), "r"(n), "r"(o) : "memory");
    return 0;
}

static long (*g_fstat)(int, struct stat *);
static __attribute__((noinline)) long via_fstat(int fd, void *b, size_t n, off_t o)
{
    return g_fstat(fd, (struct stat *)b);
}

#define REAL_CALL(fd, b, n, o) __atomic_load_n(&g_real, __ATOMIC_RELAXED)(fd, b, n, o)
#define KEEP(x) __asm__ volatile("" : : "r"(x))

#define WRAPPER __attribute__((noinline)) static long

WRAPPER w_level(int fd, void *b, size_t n, off_t o)
{
    return REAL_CALL(fd, b, n, o);
}

WRAPPER w_rdtsc(int fd, void *b, size_t n, off_t o)
{
    uint64_t t0 = now_ticks();
    long r = REAL_CALL(fd, b, n, o);
    uint64_t t1 = now_ticks();
    KEEP(t1 - t0);
    return r;
}

/* A timed wrapper: `pre` first, then the counter from `begin` (NULL: the
 * call goes untimed), the call between two clock reads, its filing, then
 * `after` (with the latency `ns`, the result `r`, the fd class `file`). */
#define TIMED_VARIANT(name, pre, begin, after)                                           \
    WRAPPER name(int fd, void *b, size_t n, off_t o)                                     \
    {                                                                                    \
        pre;                                                                             \
        int file = 1;                                                                    \
        struct fsprof_ctr *c = (begin);                                                  \
        if (UNLIKELY(c == NULL))                                                         \
            return REAL_CALL(fd, b, n, o);                                               \
        uint64_t t0 = now_ticks();                                                       \
        long r = REAL_CALL(fd, b, n, o);                                                 \
        uint64_t t1 = now_ticks();                                                       \
        uint64_t ns = call_end(c, t0, t1, r == -1);                                      \
        (void)ns;                                                                        \
        (void)file;                                                                      \
        after;                                                                           \
        return r;                                                                        \
    }

static struct fsprof_ctr *g_fixed;
/* The wrappers' entry: the tracing test and the own-cost stamp. */
#define ENTRY                                                                            \
    if (UNLIKELY(g_trace))                                                               \
        abort();                                                                         \
    uint64_t e = own_begin()

TIMED_VARIANT(w_record, (void)0, g_fixed, (void)0)
TIMED_VARIANT(w_enter, (void)0, call_begin(OP_fstat), (void)0)
TIMED_VARIANT(w_fdclass, (void)0, call_begin_fd(OP_fstat, FDOP_fstat, fd, &file), (void)0)
TIMED_VARIANT(w_own, ENTRY, call_begin_fd(OP_fstat, FDOP_fstat, fd, &file), own_end(e, t0, t1))
TIMED_VARIANT(w_value, ENTRY, call_begin_fd(OP_pread, FDOP_pread, fd, &file),
              if (LIKELY(file)) record_value(CORR_pread, ns, fd, (int64_t)o, n, r);
              own_end(e, t0, t1))

WRAPPER w_floor(int fd, void *b, size_t n, off_t o)
{
    struct fsprof_ctr *c = g_fixed;
    add_private(&c->pre, 1);
    uint64_t t0 = now_ticks();
    long r = REAL_CALL(fd, b, n, o);
    uint64_t t1 = now_ticks();
    uint64_t ns = ticks_to_ns(t1 - t0);
    add_private(&c->buckets[bucket_slot(ns | 1)], 1);
    add_private(&c->total_ns, ns);
    add_private(&c->post, 1);
    return r;
}

static const struct {
    const char *name;
    callee_fn fn; /* NULL: the bare callee */
} VARIANTS[] = {
    {"bare", NULL},         {"level", w_level},     {"rdtsc", w_rdtsc}, {"record", w_record},
    {"enter", w_enter},     {"fdclass", w_fdclass}, {"own", w_own},     {"value", w_value},
    {"floor", w_floor},
};
#define NV (sizeof VARIANTS / sizeof *VARIANTS)

static double run_block(callee_fn f, int fd, long calls)
{
    callee_fn volatile vf = f;
    callee_fn fn = vf;
    uint64_t a = fsprof_mono_ns();
    for (long i = 0; i < calls; i++)
        (void)fn(fd, g_buf, 1, 0);
    return (double)(fsprof_mono_ns() - a) / (double)calls;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A slot laid out as pool.c would: counters for fstat and pread, pread's
 * value table, the fd states; a fixed counter for the `record` variant. */
static void setup_slot(void)
{
    size_t slot_len = (sizeof(struct slot_rec) + 63) & ~(size_t)63;
    size_t corr_len = (size_t)FSPROF_CORR_KINDS * FSPROF_CORR_CELLS * 8;
    size_t fds_len = (size_t)FSPROF_FD_TRACK * sizeof(struct fsprof_fd_state);
    size_t len = slot_len + 3 * (size_t)g_ctr_size + corr_len + fds_len;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        exit(3);
    memset(m, 0, len);
    struct slot_rec *s = (struct slot_rec *)m;
    char *p = m + slot_len;
    s->ctr[OP_fstat] = (struct fsprof_ctr *)p;
    s->ctr[OP_pread] = (struct fsprof_ctr *)(p + g_ctr_size);
    g_fixed = (struct fsprof_ctr *)(p + 2 * (size_t)g_ctr_size);
    s->corr[CORR_pread] = (uint64_t *)(p + 3 * (size_t)g_ctr_size);
    s->fd = (struct fsprof_fd_state *)(p + 3 * (size_t)g_ctr_size + corr_len);
    t_slot = s;
    t_shared = 0;
    t_own_left = FSPROF_OWN_GAP_MIN;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: hotpath_parts noop|fstat|pread [ROUNDS] [CALLS]\n");
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 21;
    long calls = argc > 3 ? atol(argv[3]) : 200000;
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!libc)
        return 3;
    if (strcmp(argv[1], "noop") == 0) {
        g_real = noop;
    } else if (strcmp(argv[1], "fstat") == 0) {
        g_fstat = (long (*)(int, struct stat *))dlsym(libc, "fstat");
        g_real = via_fstat;
    } else if (strcmp(argv[1], "pread") == 0) {
        g_real = (callee_fn)dlsym(libc, "pread");
    } else {
        fprintf(stderr, "hotpath_parts: unknown callee %s\n", argv[1]);
        return 2;
    }
    /* The parameters `fsprof run` hands over: one bucket per power of two,
     * the TSC at this machine's rate (the self-test checks and applies). */
    size_t ctl_len = sizeof(struct fsprof_control) + 65 * 8;
    struct fsprof_control *ctl = calloc(1, ctl_len);
    ctl->magic = FSPROF_CTL_MAGIC;
    ctl->abi_version = FSPROF_ABI_VERSION;
    ctl->resolution = 1;
    ctl->nbuckets = 65;
    ctl->clock = FSPROF_CLOCK_TSC;
    ctl->tsc_mult = 1ull << 31; /* the cost does not depend on the rate */
    ctl->tsc_shift = FSPROF_TICK_SHIFT;
    ctl->max_slots = 2;
    ctl->lost_max = FSPROF_LOST_MAX;
    for (int j = 1; j < 65; j++)
        ctl->thresholds[j] = 1ull << (j - 1);
    struct fsprof_selftest st;
    if (fsprof_shim_selftest(ctl, ctl_len, 1000, &st) != 0) {
        fprintf(stderr, "hotpath_parts: the self-test refused the parameters\n");
        return 3;
    }
    setup_slot();
    int fd = open("/etc/hostname", O_RDONLY);
    if (fd < 0)
        return 3;
    g_fdclass[fd] = FSPROF_FD_FILE;
    double *ns = calloc((size_t)rounds * NV, sizeof *ns);
    for (unsigned v = 0; v < NV; v++) /* warm-up */
        run_block(VARIANTS[v].fn ? VARIANTS[v].fn : g_real, fd, calls / 4);
    for (int r = 0; r < rounds; r++)
        for (unsigned k = 0; k < NV; k++) {
            /* Rotate the order so that no variant always follows another. */
            unsigned v = (k + (unsigned)r) % NV;
            ns[v * (unsigned)rounds + (unsigned)r] =
                run_block(VARIANTS[v].fn ? VARIANTS[v].fn : g_real, fd, calls);
        }
    printf("# callee %s, %d rounds x %ld calls, median ns per call (min..max)\n", argv[1], rounds,
           calls);
    printf("%-8s %8s %8s %8s   %s\n", "variant", "ns/call", "part", "total+", "range");
    double prev = 0, bare = 0;
    for (unsigned v = 0; v < NV; v++) {
        double *row = ns + v * (unsigned)rounds;
        qsort(row, (size_t)rounds, sizeof *row, cmp_d);
        double m = row[rounds / 2];
        if (v == 0)
            bare = prev = m;
        printf("%-8s %8.2f %+8.2f %+8.2f   %.2f..%.2f\n", VARIANTS[v].name, m, m - prev,
               m - bare, row[0], row[rounds - 1]);
        prev = m;
    }
    return 0;
}
