/* Process and thread set-up of the shim: attach to the run's control file,
 * create this process's counter file, hand out thread slots, reset after
 * fork. Nothing here may call an interposed function: files are opened with
 * raw system calls, strings are built by hand (no stdio, no malloc), so the
 * set-up can run in a constructor, inside another library's constructor or
 * in a signal handler without recursing or taking a lock. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "record.h"
#include "trace.h"

HIDDEN uint32_t g_res = 1, g_nbuckets, g_ctr_size;
HIDDEN int g_clock;
HIDDEN uint64_t g_mult;
HIDDEN const uint64_t *g_thr;

TLS char *t_slot;
TLS int t_shared;
TLS uint64_t *t_corr;
TLS struct fsprof_fd_state *t_fd;
static TLS int t_in_setup;

enum { ST_UNINIT, ST_BUSY, ST_READY, ST_OFF };
static int g_state = ST_UNINIT;
static int g_setup_tid;
static struct fsprof_control *g_ctl;
static size_t g_ctl_len;
static struct fsprof_proc *g_proc;
static size_t g_proc_len;
static uint64_t g_slot_size;

#define CORR_BYTES ((uint64_t)CORR_COUNT * FSPROF_CORR_KINDS * FSPROF_CORR_CELLS * 8)
#define FD_BYTES ((uint64_t)FSPROF_FD_TRACK * sizeof(struct fsprof_fd_state))
static int g_atfork_done;

static long sys_open(const char *path, int flags, int mode)
{
    return syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static int sys_gettid(void)
{
    return (int)syscall(SYS_gettid);
}

static size_t cat(char *dst, size_t at, size_t cap, const char *src)
{
    while (*src && at + 1 < cap)
        dst[at++] = *src++;
    dst[at] = 0;
    return at;
}

static size_t cat_u64(char *dst, size_t at, size_t cap, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n && at + 1 < cap)
        dst[at++] = tmp[--n];
    dst[at] = 0;
    return at;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void apply_params(const struct fsprof_control *c)
{
    g_res = c->resolution;
    g_nbuckets = c->nbuckets;
    g_clock = (int)c->clock;
    g_mult = c->tsc_mult;
    g_thr = c->thresholds;
    size_t raw = sizeof(struct fsprof_ctr) + (size_t)c->nbuckets * 8;
    g_ctr_size = (uint32_t)((raw + 63) & ~(size_t)63);
}

static int attach_control(void)
{
    const char *dir = getenv(FSPROF_ENV);
    if (!dir || !*dir)
        return 0;
    char path[4096];
    size_t n = cat(path, 0, sizeof path, dir);
    n = cat(path, n, sizeof path, "/" FSPROF_CTL_NAME);
    long fd = sys_open(path, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct stat st;
    void *m = MAP_FAILED;
    if (syscall(SYS_fstat, fd, &st) == 0 && (size_t)st.st_size >= sizeof(struct fsprof_control))
        m = (void *)syscall(SYS_mmap, 0, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    syscall(SYS_close, fd);
    if (m == MAP_FAILED)
        return 0;
    struct fsprof_control *c = m;
    if (c->magic != FSPROF_CTL_MAGIC || c->abi_version != FSPROF_ABI_VERSION ||
        c->nbuckets != 64 * c->resolution + 1 || c->tsc_shift != FSPROF_TICK_SHIFT ||
        (size_t)st.st_size < sizeof *c + (size_t)c->nbuckets * 8 || c->max_slots < 2) {
        syscall(SYS_munmap, m, (size_t)st.st_size);
        return 0;
    }
    g_ctl = c;
    g_ctl_len = (size_t)st.st_size;
    apply_params(c);
    return 1;
}

static uint32_t read_small_file(const char *path, char *buf, uint32_t cap)
{
    long fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    uint32_t len = 0;
    while (len < cap) {
        long r = syscall(SYS_read, fd, buf + len, cap - len);
        if (r <= 0)
            break;
        len += (uint32_t)r;
    }
    syscall(SYS_close, fd);
    return len;
}

static int create_process_file(void)
{
    const char *dir = getenv(FSPROF_ENV);
    uint64_t seq = __atomic_fetch_add(&g_ctl->next_seq, 1, __ATOMIC_RELAXED);
    char path[4096];
    size_t n = cat(path, 0, sizeof path, dir);
    n = cat(path, n, sizeof path, "/p");
    cat_u64(path, n, sizeof path, seq);
    long fd = sys_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return 0;
    uint64_t corr_off = FSPROF_SLOT_HDR_SIZE + (uint64_t)OP_COUNT * g_ctr_size;
    g_slot_size = corr_off + CORR_BYTES + FD_BYTES;
    size_t len = FSPROF_PROC_HDR_SIZE + (size_t)g_ctl->max_slots * g_slot_size;
    void *m = MAP_FAILED;
    /* The file is sparse: only the pages of counters actually used are ever
     * allocated. */
    if (syscall(SYS_ftruncate, fd, (long)len) == 0)
        m = (void *)syscall(SYS_mmap, 0, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    syscall(SYS_close, fd);
    if (m == MAP_FAILED)
        return 0;
    struct fsprof_proc *p = m;
    p->magic = FSPROF_PROC_MAGIC;
    p->abi_version = FSPROF_ABI_VERSION;
    p->hdr_size = FSPROF_PROC_HDR_SIZE;
    p->nops = OP_COUNT;
    p->nbuckets = g_nbuckets;
    p->ctr_size = g_ctr_size;
    p->max_slots = g_ctl->max_slots;
    p->slot_size = g_slot_size;
    p->corr_ops = CORR_COUNT;
    p->corr_lat = FSPROF_CORR_LAT;
    p->corr_val = FSPROF_CORR_VAL;
    p->corr_off = (uint32_t)corr_off;
    p->pid = (int32_t)syscall(SYS_getpid);
    p->ppid = (int32_t)syscall(SYS_getppid);
    p->start_ns = mono_ns();
    p->slots_used = 1;
    p->seq = seq;
    long e = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", p->exe, FSPROF_EXE_MAX - 1);
    p->exe_len = e > 0 ? (uint32_t)e : 0;
    p->cmdline_len = read_small_file("/proc/self/cmdline", p->cmdline, FSPROF_CMDLINE_MAX);
    struct fsprof_slot_hdr *s0 = (struct fsprof_slot_hdr *)((char *)m + FSPROF_PROC_HDR_SIZE);
    s0->shared = 1;
    g_proc = p;
    g_proc_len = len;
    __atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
    return 1;
}

static void after_fork_in_child(void)
{
    /* The child inherits the parent's mapping: writing to it would count the
     * child's calls as the parent's. Detach; the child gets its own file on
     * its first call. */
    if (g_proc)
        syscall(SYS_munmap, g_proc, g_proc_len);
    g_proc = NULL;
    t_slot = NULL;
    t_corr = NULL;
    t_fd = NULL;
    t_shared = 0;
    if (g_state == ST_READY || g_state == ST_BUSY)
        g_state = ST_UNINIT;
    fsprof_trace_after_fork();
}

static void setup_process(void)
{
    int ok = g_ctl || attach_control();
    ok = ok && create_process_file();
    if (ok)
        fsprof_trace_process(getenv(FSPROF_ENV), &g_ctl->next_seq, g_proc->seq);
    if (ok && !g_atfork_done) {
        g_atfork_done = 1;
        pthread_atfork(NULL, NULL, after_fork_in_child);
    }
    __atomic_store_n(&g_state, ok ? ST_READY : ST_OFF, __ATOMIC_RELEASE);
}

/* Returns whether this process records, setting it up on first use. */
static int process_ready(void)
{
    for (;;) {
        int st = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
        if (st == ST_READY)
            return 1;
        if (st == ST_OFF)
            return 0;
        if (st == ST_UNINIT) {
            int expect = ST_UNINIT;
            if (__atomic_compare_exchange_n(&g_state, &expect, ST_BUSY, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                g_setup_tid = sys_gettid();
                setup_process();
                continue;
            }
            continue;
        }
        /* Another thread is setting up. If it is this thread (a signal
         * handler interrupted the set-up), don't wait for ourselves. */
        if (g_setup_tid == sys_gettid())
            return 0;
        syscall(SYS_sched_yield);
    }
}

HIDDEN char *fsprof_slot_slow(void)
{
    if (__atomic_load_n(&g_state, __ATOMIC_RELAXED) == ST_OFF || t_in_setup)
        return NULL;
    int saved_errno = errno;
    t_in_setup = 1;
    char *ops = NULL;
    if (process_ready()) {
        uint32_t idx = __atomic_fetch_add(&g_proc->slots_used, 1, __ATOMIC_RELAXED);
        int shared = idx >= g_proc->max_slots;
        if (shared)
            idx = 0;
        char *slot = (char *)g_proc + FSPROF_PROC_HDR_SIZE + idx * g_slot_size;
        if (!shared)
            ((struct fsprof_slot_hdr *)slot)->tid = (uint32_t)sys_gettid();
        t_shared = shared;
        ops = slot + FSPROF_SLOT_HDR_SIZE;
        t_corr = (uint64_t *)(ops + (size_t)OP_COUNT * g_ctr_size);
        t_fd = (struct fsprof_fd_state *)((char *)t_corr + CORR_BYTES);
        t_slot = ops;
    }
    t_in_setup = 0;
    errno = saved_errno;
    return ops;
}

/* Every profiled process appears in the run, even one that makes no call. */
__attribute__((constructor)) static void fsprof_init(void)
{
    if (getenv(FSPROF_ENV))
        (void)process_ready();
}

/* ---- entry points for `fsprof run` itself (dlopen'ed, never preloaded) --- */

EXPORT void fsprof_shim_abi(struct fsprof_abi_layout *out)
{
    out->control_size = sizeof(struct fsprof_control);
    out->ctr_size = sizeof(struct fsprof_ctr);
    out->proc_size = sizeof(struct fsprof_proc);
    out->off_proc_slots_used = offsetof(struct fsprof_proc, slots_used);
    out->off_proc_ready = offsetof(struct fsprof_proc, ready);
    out->off_proc_exe = offsetof(struct fsprof_proc, exe);
    out->off_proc_cmdline = offsetof(struct fsprof_proc, cmdline);
    out->off_ctl_next_seq = offsetof(struct fsprof_control, next_seq);
    out->off_ctl_thresholds = offsetof(struct fsprof_control, thresholds);
    out->off_ctr_buckets = offsetof(struct fsprof_ctr, buckets);
    out->nops = OP_COUNT;
    out->off_proc_corr_ops = offsetof(struct fsprof_proc, corr_ops);
    out->corr_ops = CORR_COUNT;
    out->corr_lat = FSPROF_CORR_LAT;
    out->corr_val = FSPROF_CORR_VAL;
    uint32_t k = 0;
#define C(n) out->corr_op_index[k++] = OP_##n;
    FSPROF_CORR_OPS_LIST
#undef C
    (void)k;
    out->abi_version = FSPROF_ABI_VERSION;
    out->tick_shift = FSPROF_TICK_SHIFT;
    out->fd_track = FSPROF_FD_TRACK;
    out->fd_state_size = sizeof(struct fsprof_fd_state);
    out->slot_hdr_size = FSPROF_SLOT_HDR_SIZE;
    out->proc_hdr_size = FSPROF_PROC_HDR_SIZE;
    uint32_t *f = out->off_ctr_fields;
    f[0] = offsetof(struct fsprof_ctr, pre);
    f[1] = offsetof(struct fsprof_ctr, post);
    f[2] = offsetof(struct fsprof_ctr, errors);
    f[3] = offsetof(struct fsprof_ctr, total_ns);
    f[4] = offsetof(struct fsprof_ctr, min_ns);
    f[5] = offsetof(struct fsprof_ctr, max_ns);
    f[6] = offsetof(struct fsprof_ctr, zero);
    f[7] = offsetof(struct fsprof_ctr, reserved);
}

static __attribute__((noinline)) long fsprof_noop(long x)
{
    __asm__ volatile("" : "+r"(x));
    return x;
}

static double best_ns_per_iter(int timed, uint32_t iters)
{
    long (*volatile fn)(long) = fsprof_noop;
    double best = 1e300;
    for (int round = 0; round < 5; round++) {
        uint64_t a = mono_ns();
        for (uint32_t i = 0; i < iters; i++) {
            if (timed) {
                struct fsprof_ctr *c = call_begin(OP_read);
                uint64_t t0 = now_ticks();
                long r = fn((long)i);
                uint64_t t1 = now_ticks();
                call_end(c, t0, t1, r == -1);
            } else {
                (void)fn((long)i);
            }
        }
        double per = (double)(mono_ns() - a) / iters;
        if (per < best)
            best = per;
    }
    return best;
}

/* Measures this shim's own cost with the run's clock parameters: the time
 * the bookkeeping adds around a call, and the smallest latency it can see
 * (FSprof §4.2). Uses scratch counters, never the run's files. */
EXPORT int fsprof_shim_selftest(const struct fsprof_control *ctl, uint32_t iters,
                                struct fsprof_selftest *out)
{
    if (ctl->magic != FSPROF_CTL_MAGIC || ctl->abi_version != FSPROF_ABI_VERSION ||
        ctl->tsc_shift != FSPROF_TICK_SHIFT || iters == 0)
        return -1;
    apply_params(ctl);
    size_t len = (size_t)OP_COUNT * g_ctr_size + CORR_BYTES + FD_BYTES;
    char *scratch = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (scratch == MAP_FAILED)
        return -1;
    char *saved_slot = t_slot;
    uint64_t *saved_corr = t_corr;
    struct fsprof_fd_state *saved_fd = t_fd;
    int saved_shared = t_shared;
    t_slot = scratch;
    t_corr = (uint64_t *)(scratch + (size_t)OP_COUNT * g_ctr_size);
    t_fd = (struct fsprof_fd_state *)((char *)t_corr + CORR_BYTES);
    t_shared = 0;
    double bare = best_ns_per_iter(0, iters);
    double timed = best_ns_per_iter(1, iters);
    uint64_t min_pair = UINT64_MAX;
    for (uint32_t i = 0; i < iters; i++) {
        uint64_t t0 = now_ticks();
        uint64_t t1 = now_ticks();
        uint64_t ns = ticks_to_ns(t1 - t0);
        if (ns < min_pair)
            min_pair = ns;
    }
    t_slot = saved_slot;
    t_corr = saved_corr;
    t_fd = saved_fd;
    t_shared = saved_shared;
    munmap(scratch, len);
    out->per_call_ns = timed > bare ? timed - bare : 0.0;
    out->min_recordable_ns = (double)min_pair;
    return 0;
}

/* For the tests: the slot the hot path files a latency of `ns` > 0 in, with
 * the run's parameters, so it can be compared with fsprof-core's exact
 * bucket function at every resolution. */
EXPORT uint32_t fsprof_shim_bucket_slot(const struct fsprof_control *ctl, uint64_t ns)
{
    apply_params(ctl);
    return bucket_slot(ns);
}
