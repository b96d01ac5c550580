/* Finding the run (FSPROF_SHM, read once when the shim loads), checking
 * that its directory is still the one `fsprof run` made, attaching to its
 * control file, and saying there which processes could not be profiled.
 *
 * A process may outlive its run, and everything under /dev/shm is a shared
 * name: the directory is opened with O_NOFOLLOW and accepted only if its
 * device, inode, owner and mode are the ones the environment recorded, and
 * every file in it is opened relative to that descriptor. Nothing here may
 * call an interposed function (util.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nextsym.h"
#include "run.h"
#include "util.h"

/* The hot path's parameters (record.h), set once per process. */
HIDDEN uint32_t g_res = 1, g_nbuckets, g_ctr_size;
HIDDEN int g_clock;
HIDDEN uint64_t g_mult;
HIDDEN const uint64_t *g_thr;

/* Written by every profiled process at start-up, so in .bss, not .lbss:
 * the loader has already written .bss's first page (it zeroes the end of
 * the file's last page), and a run directory's path (/dev/shm/fsprof-run-
 * ...) fits in the short buffer. A page of .lbss would be one more fault
 * in every process, ~2 us. A longer path goes to the long buffer. */
HIDDEN struct run_id g_run;
static char g_path_short[128];
static char g_path_long[4096] BIG_BSS;
HIDDEN struct fsprof_control *g_ctl;
HIDDEN uint32_t g_max_slots;
HIDDEN uint32_t g_arena_blocks;

/* The run's bucket thresholds, copied: nothing on the hot path reads the
 * shared file. */
static uint64_t g_thr_copy[FSPROF_MAX_NBUCKETS] BIG_BSS;
static int g_env_done;

/* Called from the constructor, before the program can clear its
 * environment; later lookups use the copy. */
HIDDEN void fsprof_capture_env(void)
{
    if (g_env_done)
        return;
    g_env_done = 1;
    const char *v = fsprof_env(FSPROF_ENV);
    if (!v)
        return;
    uint64_t f[4];
    for (int k = 0; k < 4; k++) {
        if (!fsprof_parse_u64(&v, &f[k]) || *v != ':')
            return;
        v++;
    }
    size_t n = 0;
    while (v[n] && n < sizeof g_path_long)
        n++;
    if (f[2] > UINT32_MAX || n == 0 || n >= sizeof g_path_long || v[0] != '/')
        return;
    char *path = n < sizeof g_path_short ? g_path_short : g_path_long;
    fsprof_copy(path, v, n + 1);
    g_run.path = path;
    g_run.path_len = n;
    g_run.dev = f[0];
    g_run.ino = f[1];
    g_run.uid = (uint32_t)f[2];
    g_run.ctl_ino = f[3];
    g_run.ok = 1;
}

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

HIDDEN void fsprof_ctl_touch(struct fsprof_control *c)
{
    __atomic_fetch_add(&c->next_seq, 0, __ATOMIC_RELAXED);
}

HIDDEN void fsprof_ctl_params(const volatile struct fsprof_control *c, struct ctl_params *p)
{
    p->magic = c->magic;
    p->tsc_mult = c->tsc_mult;
    p->abi_version = c->abi_version;
    p->resolution = c->resolution;
    p->nbuckets = c->nbuckets;
    p->clock = c->clock;
    p->tsc_shift = c->tsc_shift;
    p->max_slots = c->max_slots;
    p->lost_max = c->lost_max;
    p->block_size = c->block_size;
    p->max_blocks = c->max_blocks;
}

HIDDEN void fsprof_apply_params(const struct ctl_params *c, const uint64_t *thresholds)
{
    g_res = c->resolution;
    g_nbuckets = c->nbuckets;
    g_clock = (int)c->clock;
    g_mult = c->tsc_mult;
    g_thr = thresholds;
    size_t raw = sizeof(struct fsprof_ctr) + (size_t)c->nbuckets * 8;
    g_ctr_size = (uint32_t)((raw + 63) & ~(size_t)63);
}

/* Every field is checked before use; the arithmetic cannot overflow once
 * resolution is bounded. */
HIDDEN int fsprof_control_valid(const struct ctl_params *h, uint64_t size)
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
    if (h->block_size != FSPROF_FIRST_CHUNK || h->max_blocks > FSPROF_MAX_BLOCKS)
        return 0;
    return size >= sizeof(struct fsprof_control) + (uint64_t)h->nbuckets * 8;
}

/* The control file and the whole arena after it, mapped at once (blocks
 * beyond the file's end are never touched: a process takes only blocks
 * `fsprof run` has reserved). The arena's room is address space only
 * (128 MiB of it, no memory), but a program under an address-space limit
 * (ulimit -v) counts on all of its own: there, and where the mapping
 * fails, only the control block is mapped and the process uses files. */
static void *map_control(long fd, uint64_t size, uint32_t *blocks)
{
    const uint64_t full = FSPROF_ARENA_OFF + (uint64_t)FSPROF_MAX_BLOCKS * FSPROF_FIRST_CHUNK;
    struct rlimit rl;
    void *m = MAP_FAILED;
    *blocks = 0;
    if (syscall(SYS_prlimit64, 0, RLIMIT_AS, NULL, &rl) == 0 && rl.rlim_cur == RLIM_INFINITY) {
        m = (void *)syscall(SYS_mmap, 0, (size_t)full, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED)
            *blocks = FSPROF_MAX_BLOCKS;
    }
    if (m == MAP_FAILED)
        m = (void *)syscall(SYS_mmap, 0, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return m;
}

/* What attach_control_fd checks of the control file. */
struct ctl_stat {
    uint64_t dev, ino, size;
    uint32_t mode, uid;
};

/* st_dev of a device's numbers, as glibc's makedev makes it: written out,
 * since <sys/sysmacros.h>'s makedev is a call into libc here
 * (-D__NO_INLINE__), a symbol more for every process's loader to bind. */
static uint64_t dev_of(uint32_t major, uint32_t minor)
{
    return ((uint64_t)(major & 0xfffff000u) << 32) | ((uint64_t)(major & 0xfffu) << 8) |
           ((uint64_t)(minor & 0xffffff00u) << 12) | (minor & 0xffu);
}

#define CTL_STATX_MASK (STATX_TYPE | STATX_MODE | STATX_UID | STATX_INO | STATX_SIZE)

/* The control file's identity and size from a statx that asks for no
 * time. An fstat (or a statx asking for a time) marks the file's ctime as
 * seen, and the kernel (multigrain timestamps, Linux 6.13) then gives the
 * file's next change a fine-grained time: the next process's first write
 * to the control page or its block updated the file's times anew, where
 * within a clock tick it leaves them (bench/ctl_fault.c mgtime: two
 * write faults after an fstat 5.1-5.3 us, after a getpid 4.6-4.7, after
 * this statx 3.3-3.4). Where statx is refused or answers short (a seccomp
 * filter, a kernel before 4.11): fstat. 0, or -1. */
static int ctl_stat(long fd, struct ctl_stat *c)
{
    struct statx sx;
    if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, CTL_STATX_MASK, &sx) == 0 &&
        (sx.stx_mask & CTL_STATX_MASK) == CTL_STATX_MASK) {
        c->dev = dev_of(sx.stx_dev_major, sx.stx_dev_minor);
        c->ino = sx.stx_ino;
        c->size = sx.stx_size;
        c->mode = sx.stx_mode;
        c->uid = sx.stx_uid;
        return 0;
    }
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0)
        return -1;
    c->dev = (uint64_t)st.st_dev;
    c->ino = (uint64_t)st.st_ino;
    c->size = st.st_size < 0 ? UINT64_MAX : (uint64_t)st.st_size;
    c->mode = st.st_mode;
    c->uid = st.st_uid;
    return 0;
}

/* Maps the control file open at fd (closed here) and takes its
 * parameters. The file must be the one `fsprof run` made: its device and
 * inode, owner and mode; whichever way it was opened, that is what makes it
 * the run's. */
static long attach_control_fd(long fd)
{
    struct ctl_stat st;
    const uint64_t max_size = FSPROF_ARENA_OFF + (uint64_t)FSPROF_MAX_BLOCKS * FSPROF_FIRST_CHUNK;
    void *m = MAP_FAILED;
    long err = -EINVAL;
    uint32_t blocks = 0;
    if (ctl_stat(fd, &st) == 0 && S_ISREG(st.mode) && st.dev == g_run.dev &&
        st.ino == g_run.ctl_ino && st.uid == g_run.uid && (st.mode & 077) == 0 &&
        st.size >= sizeof(struct fsprof_control) && st.size <= max_size) {
        m = map_control(fd, st.size, &blocks);
        if (m == MAP_FAILED)
            err = -errno;
    }
    syscall(SYS_close, fd);
    if (m == MAP_FAILED)
        return err;
    /* Validate a copy, then use only the copy: the file cannot change the
     * parameters between the check and their use. */
    struct ctl_params h;
    fsprof_ctl_touch(m);
    fsprof_ctl_params(m, &h);
    uint64_t ctl_size = st.size < FSPROF_ARENA_OFF ? st.size : FSPROF_ARENA_OFF;
    if (!fsprof_control_valid(&h, ctl_size)) {
        syscall(SYS_munmap, m, blocks ? max_size : st.size);
        return -EINVAL;
    }
    /* At one bucket per power of two the hot path computes the bucket
     * (bucket_slot): the thresholds, a page of the file and one of this
     * process's memory, are not needed. */
    if (h.resolution > 1) {
        const uint64_t *thr = (const uint64_t *)((char *)m + sizeof(struct fsprof_control));
        for (uint32_t j = 0; j < h.nbuckets; j++) {
            g_thr_copy[j] = thr[j];
            /* Not a memcpy call (fsprof_copy says why). */
            __asm__("" : "+r"(thr));
        }
    }
    g_ctl = m;
    g_max_slots = h.max_slots;
    g_arena_blocks = blocks < h.max_blocks ? blocks : h.max_blocks;
    fsprof_apply_params(&h, g_thr_copy);
    return 0;
}

HIDDEN long fsprof_attach_control(long dirfd)
{
    long fd = syscall(SYS_openat, dirfd, FSPROF_CTL_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    return attach_control_fd(fd);
}

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
/* struct open_how and RESOLVE_* of <linux/openat2.h>, which older
 * headers lack. */
struct open_how_v0 {
    uint64_t flags, mode, resolve;
};
#define RESOLVE_NO_MAGICLINKS_V0 0x02
#define RESOLVE_NO_SYMLINKS_V0 0x04

/* Three system calls fewer than through the directory (its open, fstat
 * and close), in every exec'd process: the file's own identity, checked as
 * it is checked when opened through the directory, is what says it is the
 * run's. The directory's check kept a process from following a symbolic
 * link to someone else's directory before it opened anything there; here
 * no link is followed in any part of the path (openat2, Linux 5.6), and
 * the file opened is only looked at, not written, before its identity is
 * checked. A path with a link in it (a /dev/shm that is a link), a kernel
 * without openat2 or a path too long for the buffer: -errno, and the
 * caller goes through the directory. */
HIDDEN long fsprof_attach_control_direct(void)
{
    if (!g_run.ok)
        return -ENOENT;
    char path[192];
    size_t n = g_run.path_len, c = sizeof FSPROF_CTL_NAME;
    if (n + 1 + c > sizeof path)
        return -ENAMETOOLONG;
    fsprof_copy(path, g_run.path, n);
    path[n] = '/';
    fsprof_copy(path + n + 1, FSPROF_CTL_NAME, c);
    struct open_how_v0 how = {
        .flags = O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
        .mode = 0,
        .resolve = RESOLVE_NO_SYMLINKS_V0 | RESOLVE_NO_MAGICLINKS_V0,
    };
    long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    if (fd < 0)
        return -errno;
    return attach_control_fd(fd);
}

/* `fsprof run` sleeps until the ring runs low (or a long timer), not on a
 * 10 ms tick: the take that leaves exactly `wake_at` offers wakes it, one
 * system call in the one process of a refill's offers that crosses the
 * mark (as the ring drains one take at a time, one take sees it). The
 * words are every process's to write: fsprof only wakes early or late. */
static void low_water(struct fsprof_control *c, uint64_t left)
{
    uint32_t at = __atomic_load_n(&c->wake_at, __ATOMIC_RELAXED);
    if (at == 0 || left != at)
        return;
    /* Bumped first: a waiter that read the word before is not put to sleep
     * by a wake it would miss. */
    __atomic_fetch_add(&c->wake, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &c->wake, FUTEX_WAKE, 1, NULL, NULL, 0);
}

HIDDEN long fsprof_take_block(void)
{
    struct fsprof_control *c = g_ctl;
    if (c == NULL || g_arena_blocks == 0)
        return -1;
    uint64_t h = __atomic_load_n(&c->ring_head, __ATOMIC_ACQUIRE);
    for (;;) {
        uint64_t t = __atomic_load_n(&c->ring_tail, __ATOMIC_ACQUIRE);
        if (h >= t || t - h > FSPROF_RING)
            return -1;
        /* Read before the claim: once head passes h, `fsprof run` may
         * reuse the entry for a later offer. */
        uint32_t k = __atomic_load_n(&c->ring[h % FSPROF_RING], __ATOMIC_RELAXED);
        if (__atomic_compare_exchange_n(&c->ring_head, &h, h + 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            low_water(c, t - h - 1);
            return k < g_arena_blocks ? (long)k : -1;
        }
    }
}

HIDDEN char *fsprof_block(long k)
{
    return (char *)g_ctl + FSPROF_ARENA_OFF + (size_t)k * FSPROF_FIRST_CHUNK;
}

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
        fsprof_copy(l->exe, exe, n);
        l->exe_len = n;
    } else {
        long e = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", l->exe, FSPROF_LOST_EXE);
        l->exe_len = e > 0 ? (uint32_t)e : 0;
    }
    __atomic_store_n(&l->what, what, __ATOMIC_RELEASE);
}
