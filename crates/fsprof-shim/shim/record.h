/* The hot path: timing one call and filing it in this thread's counters.
 * No locks, no allocation, no system call, errno untouched. */
#ifndef FSPROF_RECORD_H
#define FSPROF_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "abi.h"
#include "layout.h"

#define HIDDEN __attribute__((visibility("hidden")))
#define EXPORT __attribute__((visibility("default")))
/* An interposed libc function's definition (layout.h places it). */
#define WRAPPER(name) EXPORT WRAPPER_PLACE(name)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
/* Zero-initialised arrays of a KiB or more go after every small variable
 * (the linker places .lbss after .bss): the state each process touches at
 * start-up then shares a page or two instead of lying between them, and
 * every page of .bss touched is a fault or two (read, then written). */
#define BIG_BSS __attribute__((section(".lbss")))
/* Off the hot path: GCC moves the code that leads to it out of line. */
#define COLD __attribute__((cold))
/* initial-exec: a preloaded library gets static TLS, so each access is one
 * %fs-relative load instead of a __tls_get_addr call. */
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* The op lists ops.def (X), fdops.def (F) and dataops.def (C) are made at
 * build time (build.rs) from fsprof_core::ops::libc's OPS, FD_OPS and
 * DATA_OPS: one vocabulary, whose order is the counter files' ABI. */
#define X(n) OP_##n,
enum fsprof_op {
#include "ops.def"
    OP_COUNT
};
#undef X
/* The ops on a descriptor whose calls on non-files (pipe, socket, device,
 * other: abi.h, enum fsprof_fd_class) are counted apart, under non-file
 * twins (fdops.def), numbered among themselves. */
#define F(n) FDOP_##n,
enum fsprof_fdop {
#include "fdops.def"
    FDOP_COUNT
};
#undef F
/* Counter indices: the file ops, then FSPROF_NONFILE_CLASSES twins per fd op. */
#define NCTR (OP_COUNT + FDOP_COUNT * FSPROF_NONFILE_CLASSES)

#define C(n) CORR_##n,
enum fsprof_corr_op {
#include "dataops.def"
    CORR_COUNT
};
#undef C

/* A thread's slot record in the pool (abi.h): what readers see. */
struct slot_shared {
    struct fsprof_slot_hdr h;
    uint32_t ctr_off[NCTR];
    uint32_t corr_off[CORR_COUNT];
};
_Static_assert(NCTR + CORR_COUNT <= 64 * FSPROF_SLOT_USED_WORDS,
               "a bit of the slot's bitmap for every offset");
/* A process with one thread writes one page for its header and slot. */
_Static_assert(FSPROF_PROC_HDR_SIZE + sizeof(struct slot_shared) <= 4096,
               "slot 1 shares the header's page");

/* The shim's own pointers to a slot's counters, so that the hot path finds
 * a counter with one load. They live in this process's memory (pool.c),
 * never in the pool: pool memory is shared, and an arena block can be zeroed and handed
 * to another process while this one still runs (a process fsprof cannot
 * see alive, in another pid namespace, or a clone(2) child without fork
 * handlers). Then the worst is counts filed into another process's
 * counters, a damaged profile; a pointer read back from the pool could be
 * another address space's, and following it would crash the program. */
struct slot_rec {
    struct slot_shared *sh;
    struct fsprof_ctr *ctr[NCTR];
    uint64_t *corr[CORR_COUNT];
    struct fsprof_fd_state *fd;
    /* Entries of fd: 0, FSPROF_FD_FEW or FSPROF_FD_TRACK. */
    uint32_t fd_n;
};

/* Set once per process from the run's control file (run.c); read-only
 * afterwards. */
extern HIDDEN uint32_t g_res, g_nbuckets, g_ctr_size;
extern HIDDEN int g_clock;
extern HIDDEN uint64_t g_mult;
extern HIDDEN const uint64_t *g_thr;
/* The class of each descriptor (enum fsprof_fd_class), per process. */
extern HIDDEN uint8_t g_fdclass[FSPROF_FD_CLASSES_MAX];

/* What every timed call reads of its thread, in one thread-local block:
 * in a shared object each thread-local variable costs a load of its offset
 * from the GOT before the %fs-relative load, so one block needs one GOT
 * load for all three (measured: bench/hotpath_parts.c, docs/benchmarks.md). */
struct fsprof_hot {
    /* This thread's slot record, NULL until its first call. */
    struct slot_rec *slot;
    /* Set when the thread had to use the shared slot 0. */
    int32_t shared;
    /* Calls left before this thread's next own-cost sample (abi.h,
     * struct fsprof_own); 0 in a thread that has made no call yet. */
    int32_t own_left;
};
extern TLS struct fsprof_hot t_hot;
#define t_slot (t_hot.slot)
#define t_shared (t_hot.shared)
#define t_own_left (t_hot.own_left)

/* The slow paths: set up the process and this thread's slot (process.c);
 * make room for a counter, a value table, the fd states (pool.c). NULL when the call cannot be
 * counted (not profiled, or no room: then it is counted as dropped). */
HIDDEN COLD struct slot_rec *fsprof_slot_slow(void);
HIDDEN COLD struct fsprof_ctr *fsprof_ctr_slow(struct slot_rec *s, uint32_t idx);
HIDDEN COLD uint64_t *fsprof_corr_slow(struct slot_rec *s, int cop);
HIDDEN COLD struct fsprof_fd_state *fsprof_fd_slow(struct slot_rec *s, int fd);
/* The class of a descriptor the shim did not see created (fdclass.c). */
HIDDEN COLD uint32_t fsprof_fd_classify(int fd);
/* A descriptor made by open/openat/creat/fopen (path) or by F_DUPFD. */
HIDDEN void fsprof_fd_opened(int fd, const char *path);
HIDDEN void fsprof_fd_dup(int from, int to);
/* Before a process's first fork, process.c calls these: each finds the
 * real functions a forked child usually calls before it execs, in the
 * parent. The files of wrappers, which sit above process.c, set them from
 * their constructors: wrappers.c, exec.c. */
enum { FSPROF_FORK_HOOK_WRAPPERS, FSPROF_FORK_HOOK_EXEC, FSPROF_FORK_HOOKS };
extern HIDDEN void (*g_before_first_fork[FSPROF_FORK_HOOKS])(void);

static inline __attribute__((always_inline)) uint64_t now_ticks(void)
{
#if defined(__x86_64__)
    if (LIKELY(g_clock == FSPROF_CLOCK_TSC))
        return __builtin_ia32_rdtsc();
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline __attribute__((always_inline)) uint64_t ticks_to_ns(uint64_t d)
{
    return (uint64_t)(((unsigned __int128)d * g_mult) >> FSPROF_TICK_SHIFT);
}

/* A sampled call (pool.c): the countdown ran out. Returns the clock at
 * entry, or 0 when this call is not timed after all. */
HIDDEN COLD uint64_t fsprof_own_fire(void);
/* Files a sampled call's own cost: `entry` from own_begin, [t0, t1] the
 * call's own interval; reads the exit clock first. */
HIDDEN COLD void fsprof_own_file(uint64_t entry, uint64_t t0, uint64_t t1);

/* At a wrapper's entry: one decrement on every call, a clock read on a
 * sampled one. */
static inline __attribute__((always_inline)) uint64_t own_begin(void)
{
    if (LIKELY(--t_own_left > 0))
        return 0;
    return fsprof_own_fire();
}

/* At a wrapper's exit, after everything the shim does for the call. */
static inline __attribute__((always_inline)) void own_end(uint64_t entry, uint64_t t0, uint64_t t1)
{
    if (UNLIKELY(entry != 0))
        fsprof_own_file(entry, t0, t1);
}

/* Slot of the bucket (2^((j-1)/r), 2^(j/r)] holding ns >= 1: start at the
 * first bucket of ns's power of two, step through at most r sub-buckets.
 * The run is only accepted with r <= 16 with nbuckets = 64r + 1, so j stays in
 * range. */
static inline __attribute__((always_inline)) uint32_t bucket_slot(uint64_t ns)
{
    /* At one bucket per power of two (the default) the slot of (2^(j-1), 2^j]
     * is ceil(log2 ns): no table look-up. */
    if (LIKELY(g_res == 1))
        return ns == 1 ? 0 : 64 - (uint32_t)__builtin_clzll(ns - 1);
    uint32_t j = (uint32_t)(63 - __builtin_clzll(ns)) * g_res;
    while (j + 1 < g_nbuckets && ns > g_thr[j + 1])
        j++;
    return j;
}

/* A private slot has one writer, so a plain add suffices; on x86 a single
 * add-to-memory instruction also cannot be split by a signal handler that
 * records a call of its own on the same thread. */
static inline __attribute__((always_inline)) void add_private(uint64_t *p, uint64_t v)
{
#if defined(__x86_64__)
    __asm__ volatile("addq %1, %0" : "+m"(*p) : "er"(v));
#else
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

static inline __attribute__((always_inline)) void add_shared(uint64_t *p, uint64_t v)
{
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

/* This thread's slot, set up on its first call; NULL when the process is
 * not profiled. */
static inline __attribute__((always_inline)) struct slot_rec *my_slot(void)
{
    struct slot_rec *s = t_slot;
    if (UNLIKELY(s == NULL))
        s = fsprof_slot_slow();
    return s;
}

/* Counts a call of counter `idx` as entered; NULL when it is not counted. */
static inline __attribute__((always_inline)) struct fsprof_ctr *ctr_enter(struct slot_rec *s,
                                                                          uint32_t idx)
{
    struct fsprof_ctr *c = __atomic_load_n(&s->ctr[idx], __ATOMIC_ACQUIRE);
    if (UNLIKELY(c == NULL)) {
        c = fsprof_ctr_slow(s, idx);
        if (c == NULL)
            return NULL;
    }
    if (LIKELY(!t_shared))
        add_private(&c->pre, 1);
    else
        add_shared(&c->pre, 1);
    return c;
}

/* Counts the call as entered; NULL when this process is not profiled. */
static inline __attribute__((always_inline)) struct fsprof_ctr *call_begin(int op)
{
    struct slot_rec *s = my_slot();
    return s ? ctr_enter(s, (uint32_t)op) : NULL;
}

/* The class of descriptor `fd`. Descriptors beyond the table count as
 * files (the call is timed as a file-system op, as before classes). */
static inline __attribute__((always_inline)) uint32_t fd_class(int fd)
{
    if (UNLIKELY((unsigned)fd >= FSPROF_FD_CLASSES_MAX))
        return FSPROF_FD_FILE;
    uint32_t c = __atomic_load_n(&g_fdclass[fd], __ATOMIC_RELAXED);
    if (UNLIKELY(c == FSPROF_FD_UNKNOWN))
        c = fsprof_fd_classify(fd);
    return c;
}

static inline __attribute__((always_inline)) void fd_set_class(int fd, uint32_t c)
{
    if ((unsigned)fd < FSPROF_FD_CLASSES_MAX)
        __atomic_store_n(&g_fdclass[fd], (uint8_t)c, __ATOMIC_RELAXED);
}

/* The counter of op `op` (fd op number `fdop`) on a descriptor of class
 * `cls`: the op's own on a file, else its non-file twin of that class. */
static inline __attribute__((always_inline)) uint32_t fd_ctr_idx(int op, int fdop, uint32_t cls)
{
    return LIKELY(cls == FSPROF_FD_FILE)
               ? (uint32_t)op
               : OP_COUNT + (uint32_t)fdop * FSPROF_NONFILE_CLASSES + cls - 2;
}

/* Like call_begin for op `op` (fd op number `fdop`) on descriptor `fd`:
 * a call on a descriptor that is not a file goes to the op's non-file
 * twin of its class. *is_file tells which. */
static inline __attribute__((always_inline)) struct fsprof_ctr *
call_begin_fd(int op, int fdop, int fd, int *is_file)
{
    struct slot_rec *s = my_slot();
    if (s == NULL)
        return NULL;
    uint32_t cls = fd_class(fd);
    *is_file = cls == FSPROF_FD_FILE;
    return ctr_enter(s, fd_ctr_idx(op, fdop, cls));
}

static inline __attribute__((always_inline)) void record_private(struct fsprof_ctr *c, uint64_t ns,
                                                                 int failed)
{
    if (ns == 0) {
        add_private(&c->zero, 1);
    } else {
        add_private(&c->buckets[bucket_slot(ns)], 1);
        uint64_t mn = __atomic_load_n(&c->min_ns, __ATOMIC_RELAXED);
        if (mn == 0 || ns < mn)
            __atomic_store_n(&c->min_ns, ns, __ATOMIC_RELAXED);
        if (ns > __atomic_load_n(&c->max_ns, __ATOMIC_RELAXED))
            __atomic_store_n(&c->max_ns, ns, __ATOMIC_RELAXED);
    }
    add_private(&c->total_ns, ns);
    if (failed)
        add_private(&c->errors, 1);
    /* Last, so that a reader never sees more returned calls than filed ones. */
    __atomic_signal_fence(__ATOMIC_RELEASE);
    add_private(&c->post, 1);
}

/* Slot 0, shared by the threads that found no private slot. */
static __attribute__((noinline)) void record_shared(struct fsprof_ctr *c, uint64_t ns, int failed)
{
    if (ns == 0) {
        add_shared(&c->zero, 1);
    } else {
        add_shared(&c->buckets[bucket_slot(ns)], 1);
        uint64_t mn = __atomic_load_n(&c->min_ns, __ATOMIC_RELAXED);
        while ((mn == 0 || ns < mn) &&
               !__atomic_compare_exchange_n(&c->min_ns, &mn, ns, 1, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
            ;
        uint64_t mx = __atomic_load_n(&c->max_ns, __ATOMIC_RELAXED);
        while (ns > mx && !__atomic_compare_exchange_n(&c->max_ns, &mx, ns, 1, __ATOMIC_RELAXED,
                                                       __ATOMIC_RELAXED))
            ;
    }
    add_shared(&c->total_ns, ns);
    if (failed)
        add_shared(&c->errors, 1);
    __atomic_fetch_add(&c->post, 1, __ATOMIC_RELEASE);
}

/* Files the call; returns its latency in ns. */
static inline __attribute__((always_inline)) uint64_t call_end(struct fsprof_ctr *c, uint64_t t0,
                                                               uint64_t t1, int failed)
{
    uint64_t ns = t1 > t0 ? ticks_to_ns(t1 - t0) : 0;
    if (LIKELY(!t_shared))
        record_private(c, ns, failed);
    else
        record_shared(c, ns, failed);
    return ns;
}

/* Cell index of a latency or value on a value-table axis of n cells. */
static inline __attribute__((always_inline)) uint32_t corr_cell(uint64_t v, uint32_t n)
{
    uint32_t k = v <= 1 ? (uint32_t)v : 65 - (uint32_t)__builtin_clzll(v - 1);
    return k < n ? k : n - 1;
}

/* Files the request size and, when known, the seek distance of a data call
 * on a file that succeeded (`done` >= 0 bytes transferred; failed calls are
 * not filed, since e.g. an iovec of a failed call may not even be
 * readable), and advances this thread's view of the fd. `off` is the
 * explicit offset of a positional call, or -1 for calls at the file
 * position. */
static inline __attribute__((always_inline)) void record_value(int cop, uint64_t ns, int fd,
                                                               int64_t off, uint64_t size,
                                                               int64_t done)
{
    struct slot_rec *s = t_slot;
    if (UNLIKELY(done < 0 || s == NULL))
        return;
    uint64_t *t = __atomic_load_n(&s->corr[cop], __ATOMIC_ACQUIRE);
    if (UNLIKELY(t == NULL) && (t = fsprof_corr_slow(s, cop)) == NULL)
        return;
    uint32_t row = corr_cell(ns, FSPROF_CORR_LAT) * (FSPROF_CORR_KINDS * FSPROF_CORR_VAL);
    uint64_t *size_cell = &t[row + corr_cell(size, FSPROF_CORR_VAL)];
    if (LIKELY(!t_shared))
        add_private(size_cell, 1);
    else
        add_shared(size_cell, 1);
    /* The number before the table, as fsprof_fd_slow stores them the other
     * way round: a signal handler that grows the table between the two
     * loads leaves a larger table than the number says, never a smaller. */
    uint32_t nfd = __atomic_load_n(&s->fd_n, __ATOMIC_ACQUIRE);
    struct fsprof_fd_state *fds = __atomic_load_n(&s->fd, __ATOMIC_RELAXED);
    if (UNLIKELY((unsigned)fd >= nfd) &&
        ((unsigned)fd >= FSPROF_FD_TRACK || (fds = fsprof_fd_slow(s, fd)) == NULL))
        return;
    struct fsprof_fd_state *st = &fds[fd];
    /* A call at the file position with no position known yet (a fd this
     * thread has not used) starts this thread's view of it at 0: distances
     * are differences, so the base does not matter. */
    uint64_t at = off >= 0 ? (uint64_t)off : (st->pos1 ? st->pos1 - 1 : 0);
    if (st->end1 && (off >= 0 || st->pos1)) {
        uint64_t end = st->end1 - 1;
        uint64_t seek = at > end ? at - end : end - at;
        uint64_t *seek_cell = &t[row + FSPROF_CORR_VAL + corr_cell(seek, FSPROF_CORR_VAL)];
        if (LIKELY(!t_shared))
            add_private(seek_cell, 1);
        else
            add_shared(seek_cell, 1);
    }
    st->end1 = at + (uint64_t)done + 1;
    if (off < 0)
        st->pos1 = st->end1;
}

/* This thread's state of fd, if it has one yet. */
static inline __attribute__((always_inline)) struct fsprof_fd_state *my_fd(int fd)
{
    struct slot_rec *s = t_slot;
    if (s == NULL || (unsigned)fd >= __atomic_load_n(&s->fd_n, __ATOMIC_ACQUIRE))
        return NULL;
    return &__atomic_load_n(&s->fd, __ATOMIC_RELAXED)[fd];
}

/* The fd's position became `pos` (lseek, fseek), or unknown (-1). */
static inline __attribute__((always_inline)) void fd_moved(int fd, int64_t pos)
{
    struct fsprof_fd_state *st = my_fd(fd);
    if (st)
        st->pos1 = pos >= 0 ? (uint64_t)pos + 1 : 0;
}

/* The fd number is being closed: forget what this thread knew of it, and
 * what the descriptor was. */
static inline __attribute__((always_inline)) void fd_forget(int fd)
{
    struct fsprof_fd_state *st = my_fd(fd);
    if (st) {
        st->pos1 = 0;
        st->end1 = 0;
    }
    fd_set_class(fd, FSPROF_FD_UNKNOWN);
}

#endif
