/* The floor of the shim's design, for bench/per_process_cpu.py --floor: a
 * preload library of the shim's kind with nothing but what that kind
 * needs, as bench/run_floor.c is for fsprof's start-up. Against it, the
 * shim shows what its own code, size and set-up add per process; against
 * an empty preloaded library, what the design itself costs.
 *
 * What it has:
 *   - the shim's exported wrappers, every one of them (floor_syms.h, made
 *     by the bench from the installed shim's dynamic symbol table: one
 *     W(name) a line, the fsprof_shim_* entry points left out), so that
 *     the loader binds the same symbols of every program to it;
 *   - each wrapper finds its real function at its first call as the
 *     shim does (nextsym.c's own lookup of what dlsym(RTLD_NEXT) would
 *     return, dlsym where that is unsure), and times it with rdtsc;
 *   - a per-op counter (calls, ticks, a log2 histogram) in a region of a
 *     shared file (FSPROF_FLOOR, on tmpfs) that the constructor opens and
 *     maps; a process takes its region at its first counted call (a
 *     forked child takes its own), and an op's counter at its first call,
 *     packed one after the other as the shim packs a block.
 * What it has not: a collector, a run to join or check, descriptor
 * classes, value tables, a trace, threads' own slots (one writer is
 * assumed: the counters are plain adds), any safety against a hostile
 * file. A floor, not a profiler.
 *
 * Built with -DFLOOR_TRACE it is the floor of `fsprof trace`'s design
 * too (per_process_cpu.py --trace-floor): each region has, after its
 * counters, a window of FLOOR_TWIN bytes (as the shim's trace window sits
 * in the arena block the counters are in, trace_abi.h FSPROF_TWIN_SIZE)
 * with a header (the records' committed length, stored with release as
 * the shim's is, so that a reader may take them while the process runs;
 * the pid and tid that a reader needs to give records to a process and a
 * replay thread) and, after it, one fixed-size record per call: the op,
 * its two clock readings, its result and errno, its first four arguments.
 * No strings, no descriptor or process records, no second chunk (a full
 * window drops and counts): the least any tracer that records every call
 * into shared memory does, and less than a replay needs.
 *
 * Every wrapper has one generic signature: six integer registers in, one
 * out. That forwards any function of the list on x86-64 (none takes a
 * floating-point, by-value structure or stack argument) except the
 * execl family, whose argument lists are variable and NULL-ended: those
 * three are written out by hand below, as the shim writes them, on
 * execv/execve/execvp; and the printf family where the shim exports it
 * (FLOOR_PRINTF), on its v-forms. No libc header that declares a wrapped function is
 * included, as their prototypes would clash with the generic one. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>

#if !defined(__x86_64__)
#error "shim_floor.c forwards arguments by the x86-64 calling convention"
#endif

extern long syscall(long number, ...);
extern char *getenv(const char *name);
extern int *__errno_location(void);
extern int pthread_atfork(void (*)(void), void (*)(void), void (*)(void));

/* FLOOR_HIDDEN (bench/floor_parts.py): the same library with nothing
 * exported, so that no program binds to it. */
#ifdef FLOOR_HIDDEN
#define EXPORT __attribute__((visibility("hidden"), used))
#else
#define EXPORT __attribute__((visibility("default")))
#endif
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

enum {
#define W(name) OPF_##name,
#include "floor_syms.h"
#undef W
    OPF_execl,
    OPF_execle,
    OPF_execlp,
    OPF_COUNT
};

/* One op's counter: what the shim's struct fsprof_ctr holds, less the
 * entry count, errors and extremes. */
struct ctr {
    uint64_t op; /* the op's place in floor_syms.h, plus one */
    uint64_t calls;
    uint64_t ticks;
    uint64_t buckets[64];
};

/* The shared file: a word the processes take regions with, then regions
 * reused round-robin (nothing folds them: counts only add up). Few
 * regions, so that their pages stay allocated from one process to the
 * next, as a run's recycled blocks do. */
#define FLOOR_REGIONS 64u
#ifdef FLOOR_TRACE
/* The window after a region's counters, page aligned (per_process_cpu.py
 * reads it: keep both in step). */
#define FLOOR_TWIN 16384u
#define FLOOR_COUNTERS ((OPF_COUNT * sizeof(struct ctr) + 4095) & ~(size_t)4095)
#define FLOOR_REGION (FLOOR_COUNTERS + FLOOR_TWIN)
#else
#define FLOOR_REGION (OPF_COUNT * sizeof(struct ctr) + 4096)
#endif
#define FLOOR_SIZE (4096 + (size_t)FLOOR_REGIONS * FLOOR_REGION)

static char *g_map;
static char *g_region;
static uint32_t g_used;
static struct ctr *g_ctr[OPF_COUNT];

#ifdef FLOOR_TRACE
struct twin {
    uint64_t committed; /* bytes of records after this header (release) */
    uint64_t dropped;   /* records that found the window full */
    int32_t pid, tid;
    uint64_t reserved[5];
};

struct trec {
    uint32_t op; /* the op's place in floor_syms.h, plus one */
    int32_t err;
    uint64_t t0, t1;
    int64_t ret;
    uint64_t a[4];
};

_Static_assert(sizeof(struct twin) == 64, "window header");
_Static_assert(sizeof(struct trec) == 64, "record");
static struct twin *g_twin;
#endif

__attribute__((constructor)) static void floor_init(void)
{
    const char *path = getenv("FSPROF_FLOOR");
    if (path == NULL)
        return;
    long fd = syscall(SYS_openat, -100, path, 02 | 02000000 /* O_RDWR|O_CLOEXEC */);
    if (fd < 0)
        return;
    long p = syscall(SYS_mmap, 0, FLOOR_SIZE, 3 /* PROT_READ|PROT_WRITE */, 1 /* MAP_SHARED */,
                     fd, 0);
    syscall(SYS_close, fd);
    if (p < 0 && p > -4096)
        return;
    g_map = (char *)p;
}

/* A forked child counts into its own region, taken at its first call. */
static void floor_child(void)
{
    g_region = NULL;
    for (uint32_t i = 0; i < OPF_COUNT; i++)
        g_ctr[i] = NULL;
    g_used = 0;
#ifdef FLOOR_TRACE
    g_twin = NULL;
#endif
}

static void floor_prepare(void);

__attribute__((constructor)) static void floor_atfork(void)
{
    if (getenv("FSPROF_FLOOR") != NULL)
        pthread_atfork(floor_prepare, NULL, floor_child);
}

static __attribute__((noinline)) struct ctr *ctr_slow(int op)
{
    if (g_map == NULL)
        return NULL;
    if (g_region == NULL) {
        uint32_t k = __atomic_fetch_add((uint32_t *)g_map, 1, __ATOMIC_RELAXED);
        g_region = g_map + 4096 + (size_t)(k % FLOOR_REGIONS) * FLOOR_REGION;
#ifdef FLOOR_TRACE
        /* A region is reused round-robin: its window starts empty again. */
        struct twin *w = (struct twin *)(g_region + FLOOR_COUNTERS);
        w->pid = (int32_t)syscall(SYS_getpid);
        w->tid = (int32_t)syscall(SYS_gettid);
        w->dropped = 0;
        __atomic_store_n(&w->committed, 0, __ATOMIC_RELEASE);
        g_twin = w;
#endif
    }
    struct ctr *c = (struct ctr *)g_region + g_used++;
    c->op = (uint64_t)op + 1;
    g_ctr[op] = c;
    return c;
}

static inline __attribute__((always_inline)) void record(struct ctr *c, uint64_t t0, uint64_t t1)
{
    uint64_t d = t1 > t0 ? t1 - t0 : 0;
    c->calls++;
    c->ticks += d;
    c->buckets[d ? 63 - __builtin_clzll(d) : 0]++;
}

#ifdef FLOOR_TRACE
/* One call's record at the end of the window's records, published by the
 * committed length (release), as the shim's trace does. */
static inline __attribute__((always_inline)) void trace_rec(int op, uint64_t t0, uint64_t t1,
                                                            long r, long a, long b, long c, long d)
{
    struct twin *w = g_twin;
    uint64_t at = w->committed;
    if (UNLIKELY(at + sizeof(struct trec) > FLOOR_TWIN - sizeof(struct twin))) {
        w->dropped++;
        return;
    }
    struct trec *t = (struct trec *)((char *)(w + 1) + at);
    t->op = (uint32_t)op + 1;
    t->err = *__errno_location(); /* meaningful when the call failed */
    t->t0 = t0;
    t->t1 = t1;
    t->ret = r;
    t->a[0] = (uint64_t)a;
    t->a[1] = (uint64_t)b;
    t->a[2] = (uint64_t)c;
    t->a[3] = (uint64_t)d;
    __atomic_store_n(&w->committed, at + sizeof(struct trec), __ATOMIC_RELEASE);
}
#define TRACE_REC(op, t0, t1, r, a, b, c, d) trace_rec(op, t0, t1, r, a, b, c, d)
#else
#define TRACE_REC(op, t0, t1, r, a, b, c, d) ((void)0)
#endif

typedef long (*fn6)(long, long, long, long, long, long);

#ifdef FLOOR_RESOLVE_DLSYM
/* The old way (bench/floor_parts.py "dlsym"): dlsym at every first call. */
#define NEXT_SYM(name) dlsym(RTLD_NEXT, name)
#elif defined(FLOOR_RESOLVE_HANDLE)
/* The C library's handle, taken once: dlsym searches it and its
 * dependencies only (a later preload is not seen: a cost, not a design). */
static void *g_libc_handle;
static void *libc_sym(const char *name)
{
    if (g_libc_handle == NULL)
        g_libc_handle = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    return dlsym(g_libc_handle, name);
}
#define NEXT_SYM(name) libc_sym(name)
#else
/* The shim's own lookup (crates/fsprof-shim/shim/nextsym.c), dlsym where
 * it is unsure, as the shim's interpose.h does. */
#include "nextsym.c"
static void *next_sym(const char *name)
{
    void *p = fsprof_next_sym(name);
    return p != NULL ? p : dlsym(RTLD_NEXT, name);
}
#define NEXT_SYM(name) next_sym(name)
#endif

static fn6 resolve(void **slot, const char *name)
{
    void *p = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (UNLIKELY(p == NULL)) {
        p = NEXT_SYM(name);
        if (p == NULL)
            p = dlvsym(RTLD_NEXT, name, "GLIBC_2.2.5");
        __atomic_store_n(slot, p, __ATOMIC_RELAXED);
    }
    return (fn6)p;
}

#define W(name)                                                                          \
    static void *real_##name;                                                            \
    EXPORT long name(long a, long b, long c, long d, long e, long f)                     \
    {                                                                                    \
        fn6 real = resolve(&real_##name, #name);                                         \
        struct ctr *k = g_ctr[OPF_##name];                                               \
        if (UNLIKELY(k == NULL) && (k = ctr_slow(OPF_##name)) == NULL)                   \
            return real(a, b, c, d, e, f);                                               \
        uint64_t t0 = __builtin_ia32_rdtsc();                                            \
        long r = real(a, b, c, d, e, f);                                                 \
        uint64_t t1 = __builtin_ia32_rdtsc();                                            \
        record(k, t0, t1);                                                               \
        TRACE_REC(OPF_##name, t0, t1, r, a, b, c, d);                                    \
        return r;                                                                        \
    }
#include "floor_syms.h"
#undef W

/* Before a process's first fork, the real functions a forked child
 * usually calls before it execs, found in the parent, as the shim does
 * (process.c, before_fork_in_parent: its wrappers.c and exec.c lists): a
 * child that finds them itself faults in the symbol tables again.
 * -DFLOOR_NO_PREFORK (bench/floor_parts.py): each child finds its own. */
static void floor_prepare(void)
{
#ifndef FLOOR_NO_PREFORK
    static int done;
    if (done)
        return;
    done = 1;
#define P(name) (void)resolve(&real_##name, #name)
    P(open), P(open64), P(openat), P(close), P(fcntl), P(fflush), P(read), P(write);
    P(chdir), P(dup2), P(dup3), P(execve), P(execvp), P(execvpe), P(execv);
#undef P
#endif
}

/* The execl family: the arguments gathered into an array (at most 4,096,
 * beyond which this floor gives up with E2BIG), then the v-form's wrapper,
 * as the shim does. */
#define ARGS_MAX 4096
#define GATHER(arg0, ap, argv)                                                           \
    const char *argv[ARGS_MAX];                                                          \
    int n_ = 0;                                                                          \
    argv[n_++] = arg0;                                                                   \
    while (argv[n_ - 1] != NULL && n_ < ARGS_MAX)                                        \
        argv[n_++] = va_arg(ap, const char *);                                           \
    if (argv[n_ - 1] != NULL) {                                                          \
        *__errno_location() = 7; /* E2BIG */                                             \
        return -1;                                                                       \
    }

extern long execv(long, long, long, long, long, long);
extern long execve(long, long, long, long, long, long);
extern long execvp(long, long, long, long, long, long);

/* execl and execlp: the v-form `vname` on the gathered arguments. */
#define EXEC_LIST(name, vname)                                                           \
    EXPORT int name(const char *file, const char *arg0, ...)                             \
    {                                                                                    \
        va_list ap;                                                                      \
        va_start(ap, arg0);                                                              \
        GATHER(arg0, ap, argv);                                                          \
        va_end(ap);                                                                      \
        return (int)vname((long)file, (long)argv, 0, 0, 0, 0);                           \
    }
EXEC_LIST(execl, execv)
EXEC_LIST(execlp, execvp)

#ifdef FLOOR_PRINTF
/* The printf family (a shim that traces stdio output exports it): a
 * variadic call may pass floating-point arguments in vector registers and
 * more than six on the stack, which the generic wrapper does not forward;
 * each is written out onto its v-form's wrapper, as the shim does. */
extern long vprintf(long, long, long, long, long, long);
extern long vfprintf(long, long, long, long, long, long);
extern long vdprintf(long, long, long, long, long, long);
extern long __vprintf_chk(long, long, long, long, long, long);
extern long __vfprintf_chk(long, long, long, long, long, long);
extern long __vdprintf_chk(long, long, long, long, long, long);
#define PRINTF_VIA(name, vname, params, args)                                            \
    EXPORT int name params                                                               \
    {                                                                                    \
        va_list ap;                                                                      \
        va_start(ap, fmt);                                                               \
        int r = (int)vname args;                                                         \
        va_end(ap);                                                                      \
        return r;                                                                        \
    }
PRINTF_VIA(printf, vprintf, (const char *fmt, ...), ((long)fmt, (long)ap, 0, 0, 0, 0))
PRINTF_VIA(fprintf, vfprintf, (void *f, const char *fmt, ...),
           ((long)f, (long)fmt, (long)ap, 0, 0, 0))
PRINTF_VIA(dprintf, vdprintf, (int fd, const char *fmt, ...),
           ((long)fd, (long)fmt, (long)ap, 0, 0, 0))
PRINTF_VIA(__printf_chk, __vprintf_chk, (int flag, const char *fmt, ...),
           ((long)flag, (long)fmt, (long)ap, 0, 0, 0))
PRINTF_VIA(__fprintf_chk, __vfprintf_chk, (void *f, int flag, const char *fmt, ...),
           ((long)f, (long)flag, (long)fmt, (long)ap, 0, 0))
PRINTF_VIA(__dprintf_chk, __vdprintf_chk, (int fd, int flag, const char *fmt, ...),
           ((long)fd, (long)flag, (long)fmt, (long)ap, 0, 0))
#endif

EXPORT int execle(const char *path, const char *arg0, ...)
{
    va_list ap;
    va_start(ap, arg0);
    GATHER(arg0, ap, argv);
    char **envp = va_arg(ap, char **);
    va_end(ap);
    return (int)execve((long)path, (long)argv, (long)envp, 0, 0, 0);
}
