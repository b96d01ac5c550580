/* Process set-up of the shim: find the run (FSPROF_SHM, read once when the
 * shim loads), check that its directory is still the one `fsprof run`
 * made, attach to its control file (every field validated), create this
 * process's counter file, and say which processes could not be profiled.
 *
 * A process may outlive its run, and everything under /dev/shm is a shared
 * name: the directory is opened with O_NOFOLLOW and accepted only if its
 * device, inode, owner and mode are the ones the environment recorded, and
 * every file in it is opened relative to that descriptor. A run that has
 * ended (its control file says so, or its directory is gone) is left
 * alone: the process runs unprofiled. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime.h"
#include "trace.h"

HIDDEN uint32_t g_res = 1, g_nbuckets, g_ctr_size;
HIDDEN int g_clock;
HIDDEN uint64_t g_mult;
HIDDEN const uint64_t *g_thr;
HIDDEN struct run_id g_run;
HIDDEN struct fsprof_control *g_ctl;
HIDDEN uint32_t g_max_slots;

/* The run's bucket thresholds, copied: nothing on the hot path reads the
 * shared file. */
static uint64_t g_thr_copy[FSPROF_MAX_NBUCKETS];

enum { ST_UNINIT, ST_BUSY, ST_READY, ST_OFF };
static int g_state = ST_UNINIT;
/* Off for good, in this process and its children: no run, a control file
 * that is not valid, a run that has ended. */
static int g_off_for_good;
static int g_setup_tid;
static int g_env_done;
static int g_atfork_done;

HIDDEN size_t fsprof_cat(char *dst, size_t at, size_t cap, const char *src)
{
    while (*src && at + 1 < cap)
        dst[at++] = *src++;
    dst[at] = 0;
    return at;
}

HIDDEN size_t fsprof_cat_u64(char *dst, size_t at, size_t cap, uint64_t v)
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

HIDDEN uint64_t fsprof_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Parses a decimal u64 at *s, advancing it; 0 on no digits or overflow. */
static int parse_u64(const char **s, uint64_t *out)
{
    const char *p = *s;
    uint64_t v = 0;
    if (*p < '0' || *p > '9')
        return 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    *s = p;
    *out = v;
    return 1;
}

/* Reads FSPROF_SHM once. Called from the constructor, before the program
 * can clear its environment; later lookups use the copy. */
HIDDEN void fsprof_capture_env(void)
{
    if (g_env_done)
        return;
    g_env_done = 1;
    const char *v = getenv(FSPROF_ENV);
    if (!v)
        return;
    uint64_t f[3];
    for (int k = 0; k < 3; k++) {
        if (!parse_u64(&v, &f[k]) || *v != ':')
            return;
        v++;
    }
    size_t n = 0;
    while (v[n] && n < sizeof g_run.path)
        n++;
    if (f[2] > UINT32_MAX || n == 0 || n >= sizeof g_run.path || v[0] != '/')
        return;
    memcpy(g_run.path, v, n + 1);
    g_run.dev = f[0];
    g_run.ino = f[1];
    g_run.uid = (uint32_t)f[2];
    g_run.ok = 1;
}

/* The run directory, opened by its path and accepted only if it is the
 * directory the environment names; -errno otherwise. */
HIDDEN long fsprof_open_run_dir(void)
{
    if (!g_run.ok)
        return -ENOENT;
    long fd = syscall(SYS_openat, AT_FDCWD, g_run.path,
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0 || !S_ISDIR(st.st_mode) ||
        (uint64_t)st.st_dev != g_run.dev || (uint64_t)st.st_ino != g_run.ino ||
        st.st_uid != g_run.uid || (st.st_mode & 07777) != 0700) {
        syscall(SYS_close, fd);
        return -EPERM;
    }
    return fd;
}

HIDDEN void fsprof_apply_params(const struct fsprof_control *c, const uint64_t *thresholds)
{
    g_res = c->resolution;
    g_nbuckets = c->nbuckets;
    g_clock = (int)c->clock;
    g_mult = c->tsc_mult;
    g_thr = thresholds;
    size_t raw = sizeof(struct fsprof_ctr) + (size_t)c->nbuckets * 8;
    g_ctr_size = (uint32_t)((raw + 63) & ~(size_t)63);
}

/* Whether a control header (a private copy) describes a run this shim can
 * record, given the file's size. Every field is checked before use; the
 * arithmetic cannot overflow once resolution is bounded. */
HIDDEN int fsprof_control_valid(const struct fsprof_control *h, uint64_t size)
{
    uint32_t r = h->resolution;
    if (h->magic != FSPROF_CTL_MAGIC || h->abi_version != FSPROF_ABI_VERSION)
        return 0;
    if (r == 0 || r > FSPROF_MAX_RESOLUTION || (r & (r - 1)) != 0)
        return 0;
    if (h->nbuckets != 64 * r + 1 || h->clock > FSPROF_CLOCK_TSC ||
        h->tsc_shift != FSPROF_TICK_SHIFT || h->tsc_mult == 0 || h->tsc_mult > (1ULL << 48))
        return 0;
    if (h->max_slots < 2 || h->max_slots > FSPROF_MAX_SLOTS || h->lost_max != FSPROF_LOST_MAX)
        return 0;
    return size >= sizeof *h + (uint64_t)h->nbuckets * 8;
}

/* Maps the control file found under the run directory. 0 on success, else
 * -errno (-EINVAL: not a valid control file). */
static long attach_control(long dirfd)
{
    long fd = syscall(SYS_openat, dirfd, FSPROF_CTL_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct stat st;
    const uint64_t max_size = sizeof(struct fsprof_control) + FSPROF_MAX_NBUCKETS * 8;
    void *m = MAP_FAILED;
    long err = -EINVAL;
    if (syscall(SYS_fstat, fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == g_run.uid &&
        (st.st_mode & 077) == 0 && st.st_size >= (off_t)sizeof(struct fsprof_control) &&
        (uint64_t)st.st_size <= max_size) {
        m = (void *)syscall(SYS_mmap, 0, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                            fd, 0);
        if (m == MAP_FAILED)
            err = -errno;
    }
    syscall(SYS_close, fd);
    if (m == MAP_FAILED)
        return err;
    /* Validate a copy, then use only the copy: the file cannot change the
     * parameters between the check and their use. */
    struct fsprof_control h;
    memcpy(&h, m, sizeof h);
    if (!fsprof_control_valid(&h, (uint64_t)st.st_size)) {
        syscall(SYS_munmap, m, (size_t)st.st_size);
        return -EINVAL;
    }
    memcpy(g_thr_copy, (char *)m + sizeof h, (size_t)h.nbuckets * 8);
    g_ctl = m;
    g_max_slots = h.max_slots;
    fsprof_apply_params(&h, g_thr_copy);
    return 0;
}

/* Records, in the control file, a process this run does not profile.
 * `exe` names what it runs (NULL: this process's own executable). */
HIDDEN void fsprof_lost(uint32_t what, int err, uint32_t uid, const char *exe)
{
    struct fsprof_control *c = g_ctl;
    if (c == NULL || __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != FSPROF_RUN_ACTIVE)
        return;
    uint64_t k = __atomic_fetch_add(&c->lost_count, 1, __ATOMIC_RELAXED);
    if (k >= FSPROF_LOST_MAX)
        return;
    struct fsprof_lost *l = &c->lost[k];
    l->pid = (int32_t)syscall(SYS_getpid);
    l->ppid = (int32_t)syscall(SYS_getppid);
    l->err = err;
    l->uid = uid;
    if (exe) {
        uint32_t n = 0;
        while (exe[n] && n < FSPROF_LOST_EXE)
            n++;
        memcpy(l->exe, exe, n);
        l->exe_len = n;
    } else {
        long e = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", l->exe, FSPROF_LOST_EXE);
        l->exe_len = e > 0 ? (uint32_t)e : 0;
    }
    __atomic_store_n(&l->what, what, __ATOMIC_RELEASE);
}

HIDDEN uint32_t fsprof_read_small_file(const char *path, char *buf, uint32_t cap)
{
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
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

static void fill_header(struct fsprof_proc *p, uint64_t seq)
{
    p->magic = FSPROF_PROC_MAGIC;
    p->abi_version = FSPROF_ABI_VERSION;
    p->hdr_size = FSPROF_PROC_HDR_SIZE;
    p->nops = OP_COUNT;
    p->nctr = NCTR;
    p->nfdops = FDOP_COUNT;
    p->nbuckets = g_nbuckets;
    p->ctr_size = g_ctr_size;
    p->max_slots = g_max_slots;
    p->corr_ops = CORR_COUNT;
    p->corr_lat = FSPROF_CORR_LAT;
    p->corr_val = FSPROF_CORR_VAL;
    p->slot_size = (uint32_t)offsetof(struct slot_rec, ctr);
    p->pid = (int32_t)syscall(SYS_getpid);
    p->ppid = (int32_t)syscall(SYS_getppid);
    p->start_ns = fsprof_mono_ns();
    p->seq = seq;
    long e = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", p->exe, FSPROF_EXE_MAX - 1);
    p->exe_len = e > 0 ? (uint32_t)e : 0;
    p->cmdline_len = fsprof_read_small_file("/proc/self/cmdline", p->cmdline, FSPROF_CMDLINE_MAX);
}

/* Creates p<seq> under the run directory with its first chunk reserved and
 * mapped; 0 or -errno. A file that cannot be completed is removed. */
static long create_process_file(long dirfd)
{
    uint64_t seq = __atomic_fetch_add(&g_ctl->next_seq, 1, __ATOMIC_RELAXED);
    char name[32];
    fsprof_cat_u64(name, fsprof_cat(name, 0, sizeof name, "p"), sizeof name, seq);
    long fd = syscall(SYS_openat, dirfd, name,
                      O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    long err = fsprof_reserve(fd, 0, FSPROF_FIRST_CHUNK);
    char *m = MAP_FAILED;
    if (err == 0) {
        m = (char *)syscall(SYS_mmap, 0, FSPROF_FIRST_CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED,
                            fd, 0);
        if (m == MAP_FAILED)
            err = -errno;
    }
    if (err == 0) {
        fill_header((struct fsprof_proc *)m, seq);
        err = fsprof_pool_start(fd, m, FSPROF_FIRST_CHUNK, seq);
    }
    syscall(SYS_close, fd);
    if (err != 0) {
        if (m != MAP_FAILED)
            syscall(SYS_munmap, m, FSPROF_FIRST_CHUNK);
        syscall(SYS_unlinkat, dirfd, name, 0);
    }
    return err;
}

static void after_fork_in_child(void)
{
    /* The child inherits the parent's mappings: writing to them would count
     * the child's calls as the parent's. Detach; the child gets its own
     * file on its first call. The control file stays mapped. */
    fsprof_pool_forget();
    t_slot = NULL;
    t_shared = 0;
    if (!g_off_for_good)
        g_state = ST_UNINIT;
    fsprof_trace_after_fork();
}

/* 1 if this process records; else 0, having said why when it matters. */
static int setup_process(void)
{
    /* Another library's constructor may call in before ours has run. */
    fsprof_capture_env();
    if (!g_atfork_done && g_run.ok) {
        g_atfork_done = 1;
        pthread_atfork(NULL, NULL, after_fork_in_child);
    }
    if (!g_run.ok) {
        g_off_for_good = 1;
        return 0;
    }
    uint32_t euid = (uint32_t)syscall(SYS_geteuid);
    long dirfd = -1;
    if (g_ctl == NULL) {
        dirfd = fsprof_open_run_dir();
        if (dirfd < 0 || attach_control(dirfd) != 0) {
            /* Nowhere to say why; `fsprof run` reports the exec'ing side. */
            if (dirfd >= 0)
                syscall(SYS_close, dirfd);
            g_off_for_good = 1;
            return 0;
        }
    }
    if (__atomic_load_n(&g_ctl->state, __ATOMIC_ACQUIRE) != FSPROF_RUN_ACTIVE) {
        if (dirfd >= 0)
            syscall(SYS_close, dirfd);
        g_off_for_good = 1;
        return 0;
    }
    if (euid != g_run.uid && euid != 0) {
        /* A child of a process that dropped its privileges: the run
         * directory is not this user's to write. */
        if (dirfd >= 0)
            syscall(SYS_close, dirfd);
        fsprof_lost(FSPROF_LOST_UID, EACCES, euid, NULL);
        return 0;
    }
    if (dirfd < 0)
        dirfd = fsprof_open_run_dir();
    long err = dirfd < 0 ? dirfd : 0;
    if (err == 0)
        err = create_process_file(dirfd);
    if (dirfd >= 0)
        syscall(SYS_close, dirfd);
    if (err == -ENOENT || err == -EPERM) {
        /* The run directory is gone (or is not the run's any more). */
        g_off_for_good = 1;
        return 0;
    }
    if (err != 0) {
        fsprof_lost(FSPROF_LOST_SETUP, (int)-err, euid, NULL);
        return 0;
    }
    fsprof_trace_process(g_run.path, &g_ctl->next_seq, g_proc->seq);
    return 1;
}

/* Returns whether this process records, setting it up on first use. */
HIDDEN int fsprof_process_ready(void)
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
                g_setup_tid = (int)syscall(SYS_gettid);
                int ok = setup_process();
                __atomic_store_n(&g_state, ok ? ST_READY : ST_OFF, __ATOMIC_RELEASE);
            }
            continue;
        }
        /* Another thread is setting up. If it is this thread (a signal
         * handler interrupted the set-up), don't wait for ourselves. */
        if (g_setup_tid == (int)syscall(SYS_gettid))
            return 0;
        syscall(SYS_sched_yield);
    }
}

/* Reads the environment before the program can change it, and makes every
 * profiled process appear in the run, even one that makes no call. */
__attribute__((constructor)) static void fsprof_init(void)
{
    fsprof_capture_env();
    if (g_run.ok) {
        int saved = errno;
        (void)fsprof_process_ready();
        errno = saved;
    }
}
