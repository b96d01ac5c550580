/* This process's counter file, p<seq> in the run directory: a header
 * (pid, executable, argv) and then a pool: thread slot records, counters, value tables
 * and fd states are carved from it the first time a thread needs them, so
 * a process maps and allocates only what it uses. The file grows in chunks
 * (128 KiB, then doubling up to 8 MiB), each reserved with fallocate before
 * it is mapped: a full tmpfs makes the reservation fail cleanly (the calls
 * that find no room are counted as dropped) instead of raising SIGBUS when
 * a counter page is first touched.
 *
 * Growing needs the file's descriptor, which the shim does not keep (the
 * program may close or reuse any descriptor number): the run directory is
 * opened and verified again and the file is accepted only if it is the one
 * this process created (device and inode). That happens once per chunk. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pool.h"
#include "run.h"
#include "util.h"

TLS struct fsprof_hot t_hot;
HIDDEN struct fsprof_proc *g_proc;

#define MAX_CHUNKS 48
struct chunk {
    char *addr;
    uint64_t off, len;
};
/* What every profiled process writes of this file's state: the first
 * chunk's entry and the first thread's slot record (most processes have
 * one thread). In .bss with the small variables, on the page of .bss the
 * loader has already written (it zeroes the rest of the file's last
 * page); on a page of .lbss of their own they cost every process a fault,
 * a page zero-filled in an exec'd image or copied in a forked child, 2-3
 * us (tests/link_layout.rs checks where they lie; layout.h's REAL_PLACE
 * makes their room). The later chunks' entries, written only as the pool
 * grows, are in .lbss. */
static struct chunk g_chunk0;
static struct slot_rec g_first_rec;
static struct chunk g_more_chunks[MAX_CHUNKS - 1] BIG_BSS;

/* Chunk k of the pool. */
static struct chunk *chunk(int k)
{
    return k == 0 ? &g_chunk0 : &g_more_chunks[k - 1];
}

/* The rest, in .lbss: the names of the process image (below, fill_names:
 * written at a process's first fork, not at start-up), the private slot
 * records of the other threads (slot record k at priv[k - 2]) and the one
 * threads share when private ones run out (slot 0, its `sh` NULL until
 * made). Not in thread-local storage: a library with this much
 * initial-exec TLS could not be dlopen'ed (fsprof's self-test does);
 * untouched pages cost nothing. g_nslots counts them here, whatever the
 * pool's header says. */
static struct {
    char exe[FSPROF_EXE_MAX];
    char cmd[FSPROF_CMDLINE_MAX];
    struct slot_rec shared;
    struct slot_rec priv[FSPROF_MAX_SLOTS - 2];
} g_start BIG_BSS;

/* The private part of slot record k, 1 <= k < FSPROF_MAX_SLOTS. */
static struct slot_rec *priv_rec(uint32_t k)
{
    return k == 1 ? &g_first_rec : &g_start.priv[k - 2];
}
static int g_nchunks;
static uint64_t g_used;  /* next free byte of the last chunk */
/* Bytes handed out from the end of the first chunk (tables), while it is
 * the only one: its free room is [g_used, FIRST_CHUNK - g_top_used). */
static uint64_t g_top_used;
static uint64_t g_seq;   /* names the file: p<seq> */
/* This image's pid, as its set-up read it (0 before). A forked child
 * keeps its parent's as its ppid: one system call fewer at its set-up,
 * and the parent it was forked from even if that has ended and the child
 * been handed to another by then (getppid would say that one). */
static int32_t g_pid, g_fork_parent;
static uint64_t g_fdev, g_fino;
static int g_in_block;   /* the first chunk is an arena block */
static int g_has_file;   /* p<seq> exists (always, when not in a block) */
static uint32_t g_nslots;
/* Taken only on the slow paths; a thread never waits for itself (a signal
 * handler that interrupts a slow path is turned away by t_in_slow). */
static int g_lock;
/* The pool could not grow: stop trying (each try costs system calls). */
static int g_full;
/* The first chunk is a block taken before `fsprof run` reserved its pages
 * (ControlHeader::blocks_ready): its pages are made as the pool hands them
 * out, [0, g_made_lo) from the bottom and the last g_made_hi bytes from
 * the top (see make_below). */
static int g_lazy;
static uint64_t g_made_lo, g_made_hi;
static TLS int t_in_slow;

/* Set once slot record 0, the shared one, has been used (its pointers are
 * set only then). */
static int g_shared_rec_used;

/* Slot record 0 made anew. It is used only when private ones run out, so
 * it is nearly always zero already: writing zeros over it would cost a
 * forked child a copy of its page, and even reading it first costs a new
 * process a fault (a read maps the zero page, the next write faults
 * again). */
static void clear_shared_rec(void)
{
    if (g_shared_rec_used) {
        memset(&g_start.shared, 0, sizeof g_start.shared);
        g_shared_rec_used = 0;
    }
}

static void lock(void)
{
    while (__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE))
        syscall(SYS_sched_yield);
}

static void unlock(void)
{
    __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE);
}

/* The end of the last chunk's free room. */
static uint64_t room_end(void)
{
    struct chunk *ch = chunk(g_nchunks - 1);
    return ch->off + ch->len - (g_nchunks == 1 ? g_top_used : 0);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Pages [from, to) of the first chunk (page-aligned) made in the file and
 * mapped writable, in one system call; 0 where the file system has no room
 * (or the kernel, before 5.14, cannot be asked). */
static int make_pages(uint64_t from, uint64_t to)
{
    int saved = errno;
    long rc = syscall(SYS_madvise, g_chunk0.addr + from, to - from, MADV_POPULATE_WRITE);
    errno = saved;
    return rc == 0;
}

/* Whether the first chunk's bytes below `end` may be written. In a block
 * taken before its pages were reserved (g_lazy), the pages up to `end` are
 * made first, in the file: a write to a page tmpfs does not have raises
 * SIGBUS when the file system is full, and the madvise fails instead (the
 * caller then counts the call as dropped). `fsprof run` used to reserve
 * the first block's 32 pages before it started the command (~34 us, and
 * ~16 us more to free them at its end) for a process that writes a few. */
static int make_below(uint64_t end)
{
    if (!g_lazy || g_nchunks != 1 || end <= g_made_lo)
        return 1;
    end = (end + 4095) & ~(uint64_t)4095;
    if (!make_pages(g_made_lo, end))
        return 0;
    g_made_lo = end;
    return 1;
}

/* The same for the first chunk's bytes from `start` to its end (the
 * tables handed out from the top). */
static int make_above(uint64_t start)
{
    uint64_t top = FSPROF_FIRST_CHUNK - g_made_hi;
    if (!g_lazy || g_nchunks != 1 || start >= top)
        return 1;
    start &= ~(uint64_t)4095;
    if (!make_pages(start, top))
        return 0;
    g_made_hi = FSPROF_FIRST_CHUNK - start;
    return 1;
}

static void *alloc_in_last(uint64_t n, uint32_t *off)
{
    struct chunk *ch = chunk(g_nchunks - 1);
    uint64_t at = (g_used + 63) & ~(uint64_t)63;
    if (at + n > room_end() || !make_below(at + n))
        return NULL;
    g_used = at + n;
    *off = (uint32_t)at;
    /* What `fsprof run` zeroes before it offers the block again. */
    if (g_in_block && g_nchunks == 1)
        __atomic_store_n(&g_proc->used, (uint32_t)g_used, __ATOMIC_RELAXED);
    return ch->addr + (at - ch->off);
}

/* p<seq> under the run directory as run.c verifies it, opened with
 * `flags` besides read-write (never followed through a link). */
static long open_counter_file(int flags)
{
    long dirfd = fsprof_open_run_dir();
    if (dirfd < 0)
        return dirfd;
    char name[32];
    fsprof_cat_u64(name, fsprof_cat(name, 0, sizeof name, "p"), sizeof name, g_seq);
    long fd = syscall(SYS_openat, dirfd, name, flags | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
    long err = fd < 0 ? -errno : 0;
    syscall(SYS_close, dirfd);
    return fd < 0 ? err : fd;
}

/* The counter file, reopened for growing: only if the run directory and
 * the file are still the ones this process created. */
static long reopen_counter_file(void)
{
    long fd = open_counter_file(0);
    if (fd < 0)
        return fd;
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_dev != g_fdev || (uint64_t)st.st_ino != g_fino) {
        syscall(SYS_close, fd);
        return -EPERM;
    }
    return fd;
}

/* p<seq> for the chunks after an arena block: made private, and said to
 * exist in the header before any offset into it is published. Its first
 * FSPROF_FIRST_CHUNK bytes stay a hole. */
static long create_later_file(void)
{
    long fd = open_counter_file(O_CREAT | O_EXCL);
    if (fd < 0)
        return fd;
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0) {
        long err = -errno;
        syscall(SYS_close, fd);
        return err;
    }
    g_fdev = (uint64_t)st.st_dev;
    g_fino = (uint64_t)st.st_ino;
    g_has_file = 1;
    __atomic_store_n(&g_proc->file, 1, __ATOMIC_RELEASE);
    return fd;
}

/* Adds a chunk of at least n bytes at the end of the pool. 0 or -errno. */
static long grow(uint64_t n)
{
    struct chunk *last = chunk(g_nchunks - 1);
    uint64_t end = last->off + last->len;
    uint64_t len = last->len * 2 > FSPROF_MAX_CHUNK ? FSPROF_MAX_CHUNK : last->len * 2;
    if (len < n)
        len = (n + 4095) & ~(uint64_t)4095;
    if (g_nchunks == MAX_CHUNKS || end + len > FSPROF_POOL_MAX)
        return -ENOSPC;
    long fd = g_has_file ? reopen_counter_file() : create_later_file();
    if (fd < 0)
        return fd;
    long err = fsprof_reserve(fd, end, len);
    char *m = MAP_FAILED;
    if (err == 0) {
        m = (char *)syscall(SYS_mmap, 0, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (long)end);
        if (m == MAP_FAILED)
            err = -errno;
    }
    syscall(SYS_close, fd);
    if (err != 0)
        return err;
    *chunk(g_nchunks++) = (struct chunk){m, end, len};
    g_used = end;
    return 0;
}

/* n bytes of zeros in the file (64-byte aligned); their offset in *off.
 * NULL when the pool cannot grow. Called with the lock held. */
static void *pool_alloc(uint64_t n, uint32_t *off)
{
    void *p = alloc_in_last(n, off);
    if (p || g_full)
        return p;
    long err = grow(n);
    if (err != 0) {
        g_full = 1;
        int expect = 0;
        __atomic_compare_exchange_n(&g_proc->dropped_err, &expect, (int32_t)-err, 0,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        return NULL;
    }
    return alloc_in_last(n, off);
}

/* n bytes of zeros for a table, `skew` bytes after a page boundary, from
 * the end of the first chunk while it is the only one, else as pool_alloc.
 * A table apart from the counters: a short process writes a row or two of
 * it, and its counters stay on the pages they share. */
static void *pool_alloc_table(uint64_t n, uint64_t skew, uint32_t *off)
{
    uint64_t len = (skew + n + 4095) & ~(uint64_t)4095;
    if (g_nchunks == 1 && !g_full) {
        uint64_t at = g_chunk0.len - g_top_used;
        if (at >= len && at - len >= g_used && make_above(at - len)) {
            g_top_used += len;
            /* What `fsprof run` zeroes before it offers the block again. */
            if (g_in_block)
                __atomic_store_n(&g_proc->top_used, (uint32_t)g_top_used, __ATOMIC_RELAXED);
            *off = (uint32_t)(at - len + skew);
            return g_chunk0.addr + (at - len + skew);
        }
    }
    return pool_alloc(n, off);
}

HIDDEN char *fsprof_pool_block_top(uint64_t n)
{
    if (!g_in_block || g_nchunks != 1 || g_top_used != 0 || g_used + n > FSPROF_FIRST_CHUNK ||
        !make_above(FSPROF_FIRST_CHUNK - n))
        return NULL;
    g_top_used = n;
    __atomic_store_n(&g_proc->top_used, (uint32_t)n, __ATOMIC_RELAXED);
    return g_chunk0.addr + FSPROF_FIRST_CHUNK - n;
}

/* Where a value table starts after a page boundary: its rows of calls of
 * 128 ns to 8 us (rows 9-14, where cached calls fall: a `cat`'s reads take
 * 0.2-4 us) then lie in one page. */
#define CORR_ROW_BYTES (FSPROF_CORR_KINDS * FSPROF_CORR_VAL * 8)
#define CORR_SKEW ((4096 - (9 * CORR_ROW_BYTES) % 4096) % 4096)
_Static_assert(6 * CORR_ROW_BYTES <= 4096, "six rows fit in a page");
_Static_assert(CORR_SKEW % 8 == 0, "tables stay word-aligned");

/* The slot directory, made and published at its first use. Found again
 * from its offset in the header, which this process alone writes (a
 * variable of its own would move every later one in .bss: fstat's
 * wrapper read +3 ns a call with one), but which is shared: only an
 * offset inside one of the pool's chunks is taken. */
static uint32_t *slot_dir(void)
{
    uint32_t off = __atomic_load_n(&g_proc->dir_off, __ATOMIC_RELAXED);
    uint64_t n = (uint64_t)g_max_slots * 4;
    if (off == 0) {
        uint32_t *d = pool_alloc(n, &off);
        if (d != NULL)
            __atomic_store_n(&g_proc->dir_off, off, __ATOMIC_RELEASE);
        return d;
    }
    for (int k = 0; k < g_nchunks; k++) {
        struct chunk *ch = chunk(k);
        if (off >= ch->off && off - ch->off <= ch->len - n && off % 4 == 0)
            return (uint32_t *)(ch->addr + (off - ch->off));
    }
    return NULL;
}

/* A new slot record k (1: the first thread's, in its reserved place on
 * the header's page; else published at entry k of the slot directory),
 * counted in nslots unless it is slot 0, the shared one; NULL if none. */
static struct slot_shared *new_slot(uint32_t k, int shared)
{
    uint32_t off = FSPROF_PROC_HDR_SIZE;
    uint32_t *dir = NULL;
    struct slot_shared *s = (struct slot_shared *)((char *)g_proc + off);
    if (k != 1 && ((dir = slot_dir()) == NULL || (s = pool_alloc(sizeof *s, &off)) == NULL))
        return NULL;
    s->h.shared = (uint32_t)shared;
    s->h.nctr = NCTR;
    s->h.ncorr = CORR_COUNT;
    if (dir != NULL)
        __atomic_store_n(&dir[k], off, __ATOMIC_RELEASE);
    if (k > 0)
        __atomic_store_n(&g_proc->nslots, k + 1, __ATOMIC_RELEASE);
    return s;
}

/* Takes over the first chunk of a new pool, its header filled in, then
 * marks the header ready. Slot 1's room is kept after the header; the
 * slot the threads share when private ones run out (slot 0) and the
 * directory are made only when needed: most processes have one thread. */
static int pool_start(char *map, uint64_t len, uint64_t seq)
{
    g_seq = seq;
    g_chunk0 = (struct chunk){map, 0, len};
    g_nchunks = 1;
    g_used = FSPROF_PROC_HDR_SIZE + sizeof(struct slot_shared);
    g_top_used = 0;
    g_full = 0;
    g_lazy = 0;
    g_proc = (struct fsprof_proc *)map;
    /* What `fsprof run` zeroes before it offers the block again: slot 1's
     * room, written before its slot is counted. */
    if (g_in_block)
        __atomic_store_n(&g_proc->used, (uint32_t)g_used, __ATOMIC_RELAXED);
    clear_shared_rec();
    g_nslots = 1;
    g_proc->nslots = 1;
    __atomic_store_n(&g_proc->ready, 1, __ATOMIC_RELEASE);
    return 0;
}

/* What names this process image: its executable and argv, copied into
 * each header. Known without a system call where it can be: argv as the
 * constructor received it (fsprof_pool_argv), the executable as execve
 * was given it (exec_name) and, in a forked child, the names of the image
 * it was forked from (the same program, inherited in g_start); else read
 * from /proc/self once.
 *
 * The constructor's names are lent, not copied: the set-up it runs writes
 * them from argv and the stack straight into the header, and a process
 * that never forks never writes g_start's names (a page of .lbss: a fault,
 * ~2 us in a new process). They are copied into g_start only when a later
 * header needs them as they were at exec, after the program may have
 * rewritten its argv: at the first fork, from the header they went into,
 * or at the constructor's end if no header took them. */
static uint32_t g_exe_len, g_cmd_len;
static int g_exe_known, g_cmd_known;
static int g_argc;
static char **g_argv;      /* lent: valid only until the constructor returns */
static const char *g_execfn; /* lent, as g_argv; g_exe_len bytes */
/* The header the lent names went into, and whether g_start has them yet
 * (0: not, 1: a forking thread is copying them, 2: it has). */
static const struct fsprof_proc *g_names_in;
static int g_names_kept;

static const char *base_name(const char *s)
{
    const char *b = s;
    for (; *s; s++)
        if (*s == '/')
            b = s + 1;
    return b;
}

/* The path execve was given (AT_EXECFN, on this process's own stack),
 * taken as the executable when it is absolute and argv[0] names the same
 * file: the image a shell or make started by its path. readlink of
 * /proc/self/exe costs a new process 5-10 us (the kernel makes the
 * process's /proc entries on first use), more than the rest of its
 * set-up's system calls together. A script (argv[0] is its interpreter),
 * a relative path or an argv[0] of the program's own choosing leaves it to
 * /proc. Unlike /proc, a symbolic link in the path is not followed:
 * /usr/bin/cc stays /usr/bin/cc. */
static void exec_name(const char *arg0)
{
    const char *fn = (const char *)getauxval(AT_EXECFN);
    if (fn == NULL || fn[0] != '/' || arg0 == NULL)
        return;
    const char *a = base_name(arg0), *b = base_name(fn);
    uint32_t n = 0;
    while (a[n] && a[n] == b[n])
        n++;
    if (a[n] != b[n] || n == 0)
        return;
    for (n = 0; fn[n]; n++)
        if (n == FSPROF_EXE_MAX - 1)
            return;
    g_execfn = fn;
    g_exe_len = n;
    g_exe_known = 1;
}

/* argv as /proc/self/cmdline has it (each argument NUL-terminated), at
 * most FSPROF_CMDLINE_MAX bytes into `out` (NULL: only counted); the
 * bytes. */
static uint32_t copy_argv(char *out)
{
    const uint32_t cap = FSPROF_CMDLINE_MAX;
    uint32_t n = 0;
    for (int i = 0; i < g_argc && g_argv[i] && n < cap; i++) {
        for (const char *c = g_argv[i]; *c && n < cap; c++, n++)
            if (out)
                out[n] = *c;
        if (n < cap) {
            if (out)
                out[n] = 0;
            n++;
        }
    }
    return n;
}

HIDDEN void fsprof_pool_argv(int argc, char **argv)
{
    if (argv == NULL || argc <= 0)
        return;
    g_argc = argc;
    g_argv = argv;
    g_cmd_len = copy_argv(NULL);
    g_cmd_known = 1;
    exec_name(argv[0]);
}

/* The lent names, into g_start (or `from`, a header they went into). */
static void keep_names(const struct fsprof_proc *from)
{
    if (from != NULL) {
        fsprof_copy(g_start.exe, from->exe, g_exe_len);
        fsprof_copy(g_start.cmd, from->cmdline, g_cmd_len);
        return;
    }
    if (g_execfn != NULL)
        fsprof_copy(g_start.exe, g_execfn, g_exe_len);
    if (g_argv != NULL)
        g_cmd_len = copy_argv(g_start.cmd);
}

HIDDEN void fsprof_pool_names_kept(void)
{
    if (g_names_in == NULL && (g_argv != NULL || g_execfn != NULL))
        keep_names(NULL);
    g_argv = NULL;
    g_execfn = NULL;
}

HIDDEN void fsprof_pool_before_fork(void)
{
    /* Read first: a store at every fork would cost the parent a fault on
     * that page each time. A second thread forking meanwhile waits: its
     * child must not inherit half the names. */
    if (g_names_in == NULL || __atomic_load_n(&g_names_kept, __ATOMIC_ACQUIRE) == 2)
        return;
    int expect = 0;
    if (__atomic_compare_exchange_n(&g_names_kept, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        keep_names(g_names_in);
        __atomic_store_n(&g_names_kept, 2, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&g_names_kept, __ATOMIC_ACQUIRE) != 2)
        syscall(SYS_sched_yield);
}

static void fill_names(struct fsprof_proc *p)
{
    if (!g_exe_known) {
        long e =
            syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", g_start.exe, FSPROF_EXE_MAX - 1);
        g_exe_len = e > 0 ? (uint32_t)e : 0;
        g_exe_known = 1;
    }
    if (!g_cmd_known) {
        g_cmd_len =
            fsprof_read_small_file("/proc/self/cmdline", g_start.cmd, FSPROF_CMDLINE_MAX);
        g_cmd_known = 1;
    }
    if (g_argv != NULL || g_execfn != NULL) {
        /* Lent (the constructor's set-up): straight into the header. */
        fsprof_copy(p->exe, g_execfn != NULL ? g_execfn : g_start.exe, g_exe_len);
        if (g_argv != NULL)
            g_cmd_len = copy_argv(p->cmdline);
        else
            fsprof_copy(p->cmdline, g_start.cmd, g_cmd_len);
        g_names_in = p;
    } else {
        fsprof_copy(p->exe, g_start.exe, g_exe_len);
        fsprof_copy(p->cmdline, g_start.cmd, g_cmd_len);
    }
    p->exe_len = g_exe_len;
    p->cmdline_len = g_cmd_len;
}

static void fill_header(struct fsprof_proc *p, uint64_t seq, int32_t pid)
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
    p->slot_size = (uint32_t)sizeof(struct slot_shared);
    p->pid = pid;
    p->ppid = g_fork_parent > 0 ? g_fork_parent : (int32_t)syscall(SYS_getppid);
    g_pid = pid;
    /* The calls' own clock: a tick read under the TSC; under
     * CLOCK_MONOTONIC the vDSO's, whose first read's page fault the
     * process's first timed call pays anyway. */
    p->start_ticks = now_ticks();
    p->seq = seq;
    fill_names(p);
}

HIDDEN long fsprof_pool_create(long dirfd)
{
    uint64_t seq = __atomic_fetch_add(&g_ctl->next_seq, 1, __ATOMIC_RELAXED);
    /* Before the file is there: `fsprof run` looks for files only if so. */
    __atomic_fetch_add(&g_ctl->files, 1, __ATOMIC_RELEASE);
    char name[32];
    fsprof_cat_u64(name, fsprof_cat(name, 0, sizeof name, "p"), sizeof name, seq);
    long fd = syscall(SYS_openat, dirfd, name,
                      O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    long err = fsprof_reserve(fd, 0, FSPROF_FIRST_CHUNK);
    char *m = MAP_FAILED;
    struct stat st;
    if (err == 0 && syscall(SYS_fstat, fd, &st) != 0)
        err = -errno;
    if (err == 0) {
        m = (char *)syscall(SYS_mmap, 0, FSPROF_FIRST_CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED,
                            fd, 0);
        if (m == MAP_FAILED)
            err = -errno;
    }
    if (err == 0) {
        g_fdev = (uint64_t)st.st_dev;
        g_fino = (uint64_t)st.st_ino;
        g_in_block = 0;
        g_has_file = 1;
        fill_header((struct fsprof_proc *)m, seq, (int32_t)syscall(SYS_getpid));
        ((struct fsprof_proc *)m)->file = 1;
        err = pool_start(m, FSPROF_FIRST_CHUNK, seq);
    }
    syscall(SYS_close, fd);
    if (err != 0) {
        if (m != MAP_FAILED)
            syscall(SYS_munmap, m, FSPROF_FIRST_CHUNK);
        syscall(SYS_unlinkat, dirfd, name, 0);
    }
    return err;
}

/* The pages of a block every process writes: its header, then its first
 * thread's slot record and counters. */
#define BLOCK_FIRST_PAGES (3 * 4096)

HIDDEN long fsprof_pool_create_in_block(long k)
{
    struct fsprof_proc *p = (struct fsprof_proc *)fsprof_block(k);
    int saved = errno;
    int lazy = (uint64_t)k >= __atomic_load_n(&g_ctl->blocks_ready, __ATOMIC_ACQUIRE);
    if (lazy) {
        /* Offered before `fsprof run` reserved its pages (it does so at
         * its first refill, off the start-up's path): the pages every
         * process writes made here, the others as the pool hands them out
         * (make_below), so that no write can fault on a page the file
         * system does not have. Making all 32 at once cost the command
         * ~58 us; a short one writes three or four. Where even these
         * cannot be made (a full file system, a kernel before 5.14) the
         * block is left, and a file tried. */
        long rc = syscall(SYS_madvise, p, BLOCK_FIRST_PAGES, MADV_POPULATE_WRITE);
        errno = saved;
        if (rc != 0)
            return FSPROF_BLOCK_UNREADY;
    }
    /* A reserved block's pages exist (`fsprof run` made them): they are
     * left to fault in as they are first written. Mapping them first with
     * one MADV_POPULATE_WRITE cost more than the faults it saves: three
     * pages 10.9 us against 6.3 in an exec'd process, 26.4 against 6.7 in
     * a forked child (bench/ctl_fault.c populate, thirteenth session),
     * and a process with few counters writes two. */
    /* Whose block it is, first: `fsprof run` can tell a block whose taker
     * died before its header was complete. */
    int32_t pid = (int32_t)syscall(SYS_getpid);
    __atomic_store_n(&p->pid, pid, __ATOMIC_RELAXED);
    uint64_t seq = __atomic_fetch_add(&g_ctl->next_seq, 1, __ATOMIC_RELAXED);
    g_in_block = 1;
    g_has_file = 0;
    fill_header(p, seq, pid);
    p->block = (uint32_t)k + 1;
    long err = pool_start((char *)p, FSPROF_FIRST_CHUNK, seq);
    g_lazy = lazy;
    g_made_lo = BLOCK_FIRST_PAGES;
    g_made_hi = 0;
    return err;
}

HIDDEN void fsprof_pool_forget(void)
{
    g_fork_parent = g_pid;
    g_pid = 0;
    /* An arena block is part of the control file's mapping, kept. */
    for (int k = g_in_block ? 1 : 0; k < g_nchunks; k++)
        syscall(SYS_munmap, chunk(k)->addr, chunk(k)->len);
    g_nchunks = 0;
    g_top_used = 0;
    g_in_block = 0;
    g_has_file = 0;
    g_proc = NULL;
    clear_shared_rec();
    g_nslots = 1;
    g_lock = 0;
    g_full = 0;
    g_lazy = 0;
    t_in_slow = 0;
}

static void count_dropped(void)
{
    if (g_proc)
        __atomic_fetch_add(&g_proc->dropped, 1, __ATOMIC_RELAXED);
}

HIDDEN struct slot_rec *fsprof_pool_thread_slot(void)
{
    if (t_in_slow)
        return NULL;
    t_in_slow = 1;
    lock();
    uint32_t k = g_nslots;
    struct slot_shared *sh = k > 0 && k < g_max_slots ? new_slot(k, 0) : NULL;
    struct slot_rec *s;
    if (sh != NULL) {
        s = priv_rec(k);
        g_nslots = k + 1;
        memset(s, 0, sizeof *s);
        s->sh = sh;
    } else {
        s = &g_start.shared;
        g_shared_rec_used = 1;
        if (s->sh == NULL)
            s->sh = new_slot(0, 1);
        if (s->sh == NULL)
            s = NULL;
    }
    t_shared = s == &g_start.shared;
    unlock();
    t_slot = s;
    t_in_slow = 0;
    return s;
}

/* Offset k of a slot record (abi.h: ctr_off[k], then corr_off[k - NCTR])
 * published: its bit first, so that an offset written is never outside
 * the bitmap, whatever moment the process dies at. Slot 0 is shared, so
 * the bit is set atomically; this is a slow path, once per counter. */
static void publish_off(struct slot_shared *sh, uint32_t k, uint32_t *at, uint32_t off)
{
    __atomic_fetch_or(&sh->h.used[k / 64], (uint64_t)1 << (k % 64), __ATOMIC_RELAXED);
    __atomic_store_n(at, off, __ATOMIC_RELEASE);
}

HIDDEN struct fsprof_ctr *fsprof_ctr_slow(struct slot_rec *s, uint32_t idx)
{
    if (t_in_slow) {
        count_dropped();
        return NULL;
    }
    int saved_errno = errno;
    t_in_slow = 1;
    lock();
    struct fsprof_ctr *c = s->ctr[idx];
    if (c == NULL) {
        uint32_t off;
        c = pool_alloc(g_ctr_size, &off);
        if (c) {
            publish_off(s->sh, idx, &s->sh->ctr_off[idx], off);
            __atomic_store_n(&s->ctr[idx], c, __ATOMIC_RELEASE);
        }
    }
    unlock();
    if (c == NULL)
        count_dropped();
    t_in_slow = 0;
    errno = saved_errno;
    return c;
}

HIDDEN uint64_t *fsprof_corr_slow(struct slot_rec *s, int cop)
{
    if (t_in_slow)
        return NULL;
    int saved_errno = errno;
    t_in_slow = 1;
    lock();
    uint64_t *t = s->corr[cop];
    if (t == NULL) {
        uint32_t off;
        t = pool_alloc_table((uint64_t)FSPROF_CORR_KINDS * FSPROF_CORR_CELLS * 8, CORR_SKEW, &off);
        if (t) {
            publish_off(s->sh, NCTR + (uint32_t)cop, &s->sh->corr_off[cop], off);
            __atomic_store_n(&s->corr[cop], t, __ATOMIC_RELEASE);
        }
    }
    unlock();
    t_in_slow = 0;
    errno = saved_errno;
    return t;
}

/* Room for this thread's state of fd (below FSPROF_FD_TRACK): the first
 * FSPROF_FD_FEW fds beside its counters (a short process uses a handful),
 * all of them, copied over, once it uses a higher one. */
HIDDEN struct fsprof_fd_state *fsprof_fd_slow(struct slot_rec *s, int fd)
{
    if (t_in_slow)
        return NULL;
    int saved_errno = errno;
    t_in_slow = 1;
    lock();
    uint32_t n = (unsigned)fd < FSPROF_FD_FEW ? FSPROF_FD_FEW : FSPROF_FD_TRACK;
    struct fsprof_fd_state *f = NULL;
    if (s->fd_n < n) {
        uint32_t off;
        uint64_t size = (uint64_t)n * sizeof *f;
        f = n == FSPROF_FD_FEW ? pool_alloc(size, &off) : pool_alloc_table(size, 0, &off);
        if (f) {
            if (s->fd_n)
                fsprof_copy(f, s->fd, s->fd_n * sizeof *f);
            /* The entries first, then their number: a signal handler on
             * this thread reads them in the other order. */
            __atomic_store_n(&s->fd, f, __ATOMIC_RELEASE);
            __atomic_store_n(&s->fd_n, n, __ATOMIC_RELEASE);
        }
    } else {
        f = s->fd;
    }
    unlock();
    t_in_slow = 0;
    errno = saved_errno;
    return f;
}
