/* Trace recording for `fsprof trace`: every intercepted call becomes a
 * record in this thread's chunk file (trace_abi.h). As in the rest of the
 * set-up code (util.h), nothing
 * here calls an interposed function: files are made with raw system calls,
 * so recording can run inside a constructor or a signal handler. A record
 * interrupted by a signal handler that makes a call of its own is kept and
 * the handler's call is dropped (and counted), never interleaved. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "pool.h"
#include "run.h"
#include "trace.h"
#include "util.h"

HIDDEN int g_trace;

static int g_tready;          /* this process image has its own files */
static uint64_t *g_tseq;      /* the control file's next_seq */
static uint64_t g_tproc_seq;
static int32_t g_tpid;        /* the process the chunk files are this image's for */
static uint32_t g_tpending_max = FSPROF_TCHUNK_PENDING_MAX;
static int g_twait_gave_up;   /* a wait for `fsprof trace` timed out: don't wait again */
/* This image's window in its arena block (trace_abi.h, FSPROF_TWIN_SIZE)
 * until a thread takes it for its first chunk; NULL: taken, or none. */
static char *g_twin;

static TLS struct fsprof_tchunk *t_tc; /* this thread's chunk, NULL = none yet */
static TLS uint64_t t_tc_cap;         /* bytes of records it can hold */
static TLS int t_tc_unforked;         /* it is MADV_DONTFORK: a child has no copy to unmap */
static TLS int t_tc_inwin;            /* it is the image's window: part of the control mapping */
static TLS uint32_t t_tc_next;        /* index of this thread's next chunk */
static TLS uint64_t t_tdropped;       /* records lost since the last chunk */
static TLS int t_tbusy;
/* The run directory's fd + 1 while the image's set-up lends it (0: none):
 * its first chunk is made there without opening it again. */
static TLS long t_tdirfd_lent;
/* The image's set-up is writing its PROC record: the pid is the one it
 * just read (g_tpid), so the first chunk need not ask again (one system
 * call fewer a process image). */
static TLS int t_tsetup;
/* When this thread last forked (ticks, taken in the parent just before
 * the fork): a forked child's PROC record is stamped with it, since the
 * child writes it only at its first call, and `compile` must copy the
 * parent's descriptors as they were at the fork, not as the parent has
 * changed them since. 0 in an image that has not forked. */
static TLS uint64_t t_tforked;

/* ---- argument shapes ------------------------------------------------------ */

/* One letter per argument of an op's base function:
 * f fd, d dirfd, p path, s other C string, F FILE* (kept as its fd),
 * D DIR* (kept as its fd), i integer, anything else a pointer whose value
 * is not kept (b buffer, v iovec, S struct stat, T struct statx, x other). */
static const char *const shapes[OP_COUNT] = {
    [OP_open] = "pii", [OP_openat] = "dpii", [OP_creat] = "pi", [OP_close] = "f",
    [OP_read] = "fbi", [OP_write] = "fbi", [OP_pread] = "fbii", [OP_pwrite] = "fbii",
    [OP_readv] = "fvi", [OP_writev] = "fvi", [OP_preadv] = "fvii", [OP_pwritev] = "fvii",
    [OP_preadv2] = "fviii", [OP_pwritev2] = "fviii", [OP_lseek] = "fii",
    [OP_stat] = "pS", [OP_lstat] = "pS", [OP_fstat] = "fS", [OP_fstatat] = "dpSi",
    [OP_statx] = "dpiiT", [OP_access] = "pi", [OP_faccessat] = "dpii",
    [OP_fsync] = "f", [OP_fdatasync] = "f", [OP_sync] = "", [OP_syncfs] = "f",
    [OP_sync_file_range] = "fiii", [OP_truncate] = "pi", [OP_ftruncate] = "fi",
    [OP_fallocate] = "fiii", [OP_posix_fallocate] = "fii", [OP_posix_fadvise] = "fiii",
    [OP_mkdir] = "pi", [OP_mkdirat] = "dpi", [OP_rmdir] = "p", [OP_unlink] = "p",
    [OP_unlinkat] = "dpi", [OP_rename] = "pp", [OP_renameat] = "dpdp",
    [OP_renameat2] = "dpdpi", [OP_link] = "pp", [OP_linkat] = "dpdpi", [OP_symlink] = "sp",
    [OP_symlinkat] = "sdp", [OP_readlink] = "pbi", [OP_readlinkat] = "dpbi",
    [OP_mknod] = "pii", [OP_mknodat] = "dpii", [OP_chmod] = "pi", [OP_fchmod] = "fi",
    [OP_fchmodat] = "dpii", [OP_chown] = "pii", [OP_fchown] = "fii", [OP_lchown] = "pii",
    [OP_fchownat] = "dpiii", [OP_utimensat] = "dpxi", [OP_futimens] = "fx", [OP_utime] = "px",
    [OP_utimes] = "px", [OP_futimes] = "fx", [OP_lutimes] = "px", [OP_chdir] = "p",
    [OP_fchdir] = "f", [OP_opendir] = "p", [OP_fdopendir] = "f", [OP_readdir] = "D",
    [OP_closedir] = "D", [OP_getdents64] = "fbi", [OP_mmap] = "iiiifi", [OP_msync] = "iii",
    [OP_munmap] = "ii", [OP_sendfile] = "ffxi", [OP_copy_file_range] = "fxfxii",
    [OP_getxattr] = "psbi", [OP_lgetxattr] = "psbi", [OP_fgetxattr] = "fsbi",
    [OP_setxattr] = "psbii", [OP_lsetxattr] = "psbii", [OP_fsetxattr] = "fsbii",
    [OP_listxattr] = "pbi", [OP_llistxattr] = "pbi", [OP_flistxattr] = "fbi",
    [OP_removexattr] = "ps", [OP_lremovexattr] = "ps", [OP_fremovexattr] = "fs",
    [OP_statfs] = "px", [OP_fstatfs] = "fx", [OP_statvfs] = "px", [OP_fstatvfs] = "fx",
    [OP_fcntl] = "fii", [OP_flock] = "fi", [OP_fopen] = "ps", [OP_freopen] = "psF",
    [OP_fdopen] = "fs", [OP_fclose] = "F", [OP_fread] = "biiF", [OP_fwrite] = "biiF",
    [OP_fgets] = "biF", [OP_fputs] = "bF", [OP_fflush] = "F", [OP_getline] = "xxF",
    [OP_getdelim] = "xxiF", [OP_fseek] = "Fii", [OP_ftell] = "F",
    /* The last argument of the output calls is the bytes they gave, which
     * the wrapper sets after the call (not an argument of the prototype). */
    [OP_fprintf] = "Fsi", [OP_dprintf] = "fsi", [OP_puts] = "bFi", [OP_fputc] = "iFi",
    /* Kept, not described: the numbers say which open file moved where
     * (a shell's child moves pipe ends it never otherwise uses). */
    [OP_dup2] = "iii",
};

/* How a wrapper's result reads (set in pre from the symbol's name). */
enum { RET_PLAIN, RET_ERRNUM, RET_READDIR_R };

static void first_uses(const struct fsprof_tpre *p, const char *sh);
static void stream_gap(FILE *f, int64_t fd);

/* String tests and lengths of the trace's own, not libc's: the shim binds
 * libc's functions lazily, and a first call in each process image (in a
 * shell's forked child too: the parent never made it) looked the symbol up
 * through every loaded object's tables, page faults included, ~8 of them
 * for a forked bash's first __fpending (measured). The trace's set-up and
 * its records used seven libc functions `fsprof run` never calls. */
static inline int starts_with(const char *s, long len, const char *prefix)
{
    long i = 0;
    for (; prefix[i]; i++)
        if (i >= len || s[i] != prefix[i])
            return 0;
    return 1;
}

static inline int same_str(const char *a, const char *b)
{
    for (; *a == *b; a++, b++)
        if (!*a)
            return 1;
    return 0;
}

static inline uint64_t str_len_max(const char *s, uint64_t max)
{
    uint64_t n = 0;
    while (n < max && s[n])
        n++;
    return n;
}

/* Whether a call only lets its descriptor go, using nothing of the file:
 * close and closedir, and fclose or fflush of a stream with no bytes
 * waiting to be written and none read ahead (whose flush would write, or
 * seek back). Such a call is no first use: describing the descriptor
 * (a readlinkat of /proc/self/fd/N, 7-24 us in a new process, measured)
 * cost a short process more than anything else the trace does, for the
 * descriptors it never used but closed at its exit (stderr), or flushed
 * empty before a redirection (a shell's child, of stdout). */
static int lets_go_only(int op, uint64_t a0)
{
    if (op == OP_close || op == OP_closedir)
        return 1;
    if (op != OP_fclose && op != OP_fflush)
        return 0;
    /* glibc's FILE fields (struct_FILE.h), as _fileno is read above;
     * what __fpending and __freading read, without their lookup. A wide
     * stream keeps its bytes elsewhere: a use. */
    const FILE *f = (const FILE *)(uintptr_t)a0;
    return f && f->_mode <= 0 && f->_IO_write_ptr == f->_IO_write_base &&
           f->_IO_read_ptr == f->_IO_read_end;
}

static int keeps_value(char c)
{
    return c == 'f' || c == 'd' || c == 'i' || c == 'F' || c == 'D';
}

HIDDEN void fsprof_trace_pre(struct fsprof_tpre *p, int op, const char *name, const uint64_t *a,
                             int n)
{
    p->op = op;
    p->nargs = 0;
    /* `__xstat(ver, ...)`-style aliases take a version first; the fortified
     * fgets/fread take the buffer's size second. */
    int skip = -1;
    if (name[0] == '_' && name[1] == '_') {
        if (strstr(name, "xstat"))
            skip = 0;
        else if (starts_with(name, 7, "__fgets") || starts_with(name, 7, "__fread"))
            skip = 1;
    }
    for (int i = 0; i < n && p->nargs < FSPROF_TREC_MAX_ARGS; i++)
        if (i != skip)
            p->a[p->nargs++] = a[i];
    const char *sh = op >= 0 && op < OP_COUNT && shapes[op] ? shapes[op] : "";
    p->stream = NULL;
    p->out = NULL;
    p->nout = 0;
    int64_t stream_fd = -1;
    for (int i = 0; sh[i] && i < p->nargs; i++) {
        if (sh[i] == 'F') {
            p->stream = (FILE *)(uintptr_t)p->a[i];
            p->a[i] = p->stream ? (uint64_t)(int64_t)p->stream->_fileno : (uint64_t)(int64_t)-1;
            stream_fd = (int64_t)p->a[i];
        }
        else if (sh[i] == 'D')
            p->a[i] = p->a[i] ? (uint64_t)(int64_t)dirfd((DIR *)(uintptr_t)p->a[i])
                              : (uint64_t)(int64_t)-1;
    }
    int flavor = RET_PLAIN;
    if (starts_with(name, 7, "posix_f"))
        flavor = RET_ERRNUM;
    else if (starts_with(name, 7, "readdir") && name[strlen(name) - 1] == 'r' &&
             name[strlen(name) - 2] == '_')
        flavor = RET_READDIR_R;
    /* Kept past the shape's arguments, which no reader looks at. */
    p->a[FSPROF_TREC_MAX_ARGS - 1] = (uint64_t)flavor;
    if (!lets_go_only(op, n > 0 ? a[0] : 0))
        first_uses(p, sh);
    if (p->stream)
        stream_gap(p->stream, stream_fd);
}

/* ---- XXH64 (seed 0), streaming: the digest of the bytes a call wrote ---- */

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

struct xxh {
    uint64_t v[4], total;
    unsigned char buf[32];
    uint32_t n;
};

static inline uint64_t rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t xround(uint64_t acc, uint64_t in)
{
    acc += in * P2;
    return rotl(acc, 31) * P1;
}

static void xxh_init(struct xxh *s)
{
    s->v[0] = P1 + P2;
    s->v[1] = P2;
    s->v[2] = 0;
    s->v[3] = -P1;
    s->total = 0;
    s->n = 0;
}

static void xxh_stripe(struct xxh *s, const unsigned char *p)
{
    for (int i = 0; i < 4; i++)
        s->v[i] = xround(s->v[i], rd64(p + 8 * i));
}

static void xxh_update(struct xxh *s, const unsigned char *p, uint64_t len)
{
    s->total += len;
    if (s->n) {
        uint32_t take = 32 - s->n;
        if (take > len)
            take = (uint32_t)len;
        memcpy(s->buf + s->n, p, take);
        s->n += take;
        p += take;
        len -= take;
        if (s->n < 32)
            return;
        xxh_stripe(s, s->buf);
        s->n = 0;
    }
    for (; len >= 32; p += 32, len -= 32)
        xxh_stripe(s, p);
    memcpy(s->buf, p, len);
    s->n = (uint32_t)len;
}

static uint64_t xxh_final(const struct xxh *s)
{
    uint64_t h;
    if (s->total >= 32) {
        h = rotl(s->v[0], 1) + rotl(s->v[1], 7) + rotl(s->v[2], 12) + rotl(s->v[3], 18);
        for (int i = 0; i < 4; i++) {
            h ^= xround(0, s->v[i]);
            h = h * P1 + P4;
        }
    } else {
        h = P5;
    }
    h += s->total;
    const unsigned char *p = s->buf;
    uint32_t len = s->n;
    for (; len >= 8; p += 8, len -= 8) {
        h ^= xround(0, rd64(p));
        h = rotl(h, 27) * P1 + P4;
    }
    if (len >= 4) {
        h ^= (uint64_t)rd32(p) * P1;
        h = rotl(h, 23) * P2 + P3;
        p += 4;
        len -= 4;
    }
    for (; len; p++, len--) {
        h ^= (uint64_t)*p * P5;
        h = rotl(h, 11) * P1;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

/* ---- chunk files ------------------------------------------------------------- */

/* Bytes of the largest directory entry getdents64 returns (a 255-byte
 * name): a listing that left this much of the buffer unused was whole. */
#define DIRENT_MAX 280

/* Chunk files in the run directory (`fsprof trace` deletes them once it
 * has their records); the free chunk files handed back (f0 .. f<SLOTS-1>)
 * are marked in *freed, so that only those there are asked for. `again`:
 * the directory was read before through `dirfd`. A listing that fits in
 * the buffer with room for one more entry is whole without the empty read
 * that would say so (one system call fewer per chunk; a wrong count only
 * bounds the chunks waiting a little later, or misses a free slot). */
static uint32_t count_chunks(long dirfd, uint32_t *freed, int again)
{
    char buf[2048];
    uint32_t n = 0;
    *freed = 0;
    if (again)
        syscall(SYS_lseek, dirfd, 0L, SEEK_SET);
    for (long got = sizeof buf; got + DIRENT_MAX > (long)sizeof buf;) {
        got = syscall(SYS_getdents64, dirfd, buf, sizeof buf);
        if (got <= 0)
            return n;
        for (long off = 0; off < got;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            off += d->d_reclen;
            const char *name = d->d_name;
            if (name[0] == 't' && name[1] >= '0' && name[1] <= '9')
                n++;
            else if (name[0] == 'f' && name[1] >= '0' && name[1] < '0' + FSPROF_TFREE_SLOTS &&
                     name[2] == 0)
                *freed |= 1u << (name[1] - '0');
        }
    }
    return n;
}

/* Waits while `fsprof trace` has more than g_tpending_max chunks to take
 * in, so that memory stays bounded however fast the program records (the
 * program waits; its results do not change). A harvester that has not
 * made room within FSPROF_TWAIT_MS (stopped, or stuck) is not waited for
 * again: the records that do not fit are dropped and counted, and the
 * program runs on. 1 if there is room. */
static int room_for_chunk(long dirfd, uint32_t *freed)
{
    for (long waited = 0; count_chunks(dirfd, freed, waited > 0) >= g_tpending_max; waited++) {
        if (g_twait_gave_up || waited >= FSPROF_TWAIT_MS) {
            g_twait_gave_up = 1;
            return 0;
        }
        struct timespec ms = {0, 1000000L};
        syscall(SYS_nanosleep, &ms, NULL);
    }
    g_twait_gave_up = 0;
    return 1;
}

/* A chunk file `fsprof trace` has emptied and handed back (f0, f1 ...),
 * renamed to `name`: its pages exist already, so filling it costs no page
 * zeroing. One of at least *size bytes, whose size it sets; -1 if there
 * is none. Only the slots in `freed` (as the directory listed them just
 * before) are tried: a rename that fails costs a path lookup. */
static long claim_free(long dirfd, const char *name, uint64_t *size, uint32_t freed)
{
    char f[3] = {'f', '0', 0};
    for (int k = 0; k < FSPROF_TFREE_SLOTS; k++) {
        if (!(freed & (1u << k)))
            continue;
        f[1] = (char)('0' + k);
        if (syscall(SYS_renameat, dirfd, f, dirfd, name) != 0)
            continue;
        long fd = syscall(SYS_openat, dirfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
        struct stat st;
        if (fd >= 0 && syscall(SYS_fstat, fd, &st) == 0 && S_ISREG(st.st_mode) &&
            st.st_nlink == 1 && (uint64_t)st.st_size >= *size &&
            (uint64_t)st.st_size <= FSPROF_TCHUNK_MAX) {
            *size = (uint64_t)st.st_size;
            return fd;
        }
        if (fd >= 0)
            syscall(SYS_close, fd);
        syscall(SYS_unlinkat, dirfd, name, 0);
    }
    return -1;
}

/* The size of this thread's next chunk for a record of `need` bytes: the
 * first is small (most processes are short and write a few KiB of
 * records, and a fresh chunk's pages are allocated and zeroed), each next
 * one twice the last, up to FSPROF_TCHUNK_SIZE; more only for a record
 * that needs it. */
static uint64_t next_chunk_size(uint64_t need)
{
    uint64_t size = FSPROF_TFIRST_SIZE;
    for (uint32_t k = 0; k < t_tc_next && size < FSPROF_TCHUNK_SIZE; k++)
        size *= 2;
    while (size < need + FSPROF_TCHUNK_HDR && size < FSPROF_TCHUNK_MAX)
        size *= 2;
    return size;
}

/* A chunk file of at least *size bytes named `name` in the run directory,
 * mapped, its size in *size (a free file claimed can be larger: its header
 * must say the file's size, or `fsprof trace` skips it as corrupt, and the
 * whole of it is unmapped when it is sealed); MAP_FAILED if there is none. */
static void *chunk_file(const char *name, uint64_t *size)
{
    /* Under the run directory as run.c verifies it (never by name
     * alone), with the chunk's pages reserved: a full tmpfs fails here,
     * not with SIGBUS on a later write. */
    long lent = t_tdirfd_lent - 1;
    long dirfd = lent >= 0 ? lent : fsprof_open_run_dir();
    if (dirfd < 0)
        return MAP_FAILED;
    uint32_t freed = 0;
    long fd = -1;
    int fresh = 0;
    void *m = MAP_FAILED;
    if (room_for_chunk(dirfd, &freed)) {
        fd = claim_free(dirfd, name, size, freed);
        fresh = fd < 0;
        if (fresh)
            fd = syscall(SYS_openat, dirfd, name,
                         O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    }
    if (fd >= 0) {
        if (!fresh || fsprof_reserve(fd, 0, *size) == 0)
            m = (void *)syscall(SYS_mmap, 0, (size_t)*size, PROT_READ | PROT_WRITE, MAP_SHARED,
                                fd, 0);
        syscall(SYS_close, fd);
        if (m == MAP_FAILED)
            syscall(SYS_unlinkat, dirfd, name, 0);
    }
    if (dirfd != lent)
        syscall(SYS_close, dirfd);
    return m;
}

/* A new chunk able to hold a record of `need` bytes: the image's window
 * if it is still free and large enough, else a chunk file. */
static int chunk_open(uint64_t need)
{
    /* A vfork child runs on its parent's thread-local state: a chunk it
     * made would be the parent thread's next one under the child's pid,
     * and `fsprof trace` would take it for done (and delete it) once the
     * child exec'd or exited, with the parent still writing into it. */
    int32_t pid = t_tsetup ? g_tpid : (int32_t)syscall(SYS_getpid);
    if (pid != g_tpid)
        return 0;
    uint64_t seq = __atomic_fetch_add(g_tseq, 1, __ATOMIC_RELAXED);
    uint64_t size = FSPROF_TWIN_SIZE;
    void *m = NULL;
    if (need + FSPROF_TCHUNK_HDR <= size && __atomic_load_n(&g_twin, __ATOMIC_RELAXED))
        m = __atomic_exchange_n(&g_twin, NULL, __ATOMIC_ACQ_REL);
    int inwin = m != NULL;
    if (!inwin) {
        size = next_chunk_size(need);
        char name[32];
        size_t n = fsprof_cat(name, 0, sizeof name, "t");
        fsprof_cat_u64(name, n, sizeof name, seq);
        m = chunk_file(name, &size);
        if (m == MAP_FAILED)
            return 0;
    }
    struct fsprof_tchunk *c = m;
    c->abi_version = FSPROF_TRACE_ABI_VERSION;
    c->hdr_size = FSPROF_TCHUNK_HDR;
    c->proc_seq = g_tproc_seq;
    c->pid = pid;
    c->tid = (int32_t)syscall(SYS_gettid);
    c->index = t_tc_next++;
    c->size = size;
    c->seq = seq;
    c->dropped = t_tdropped;
    /* A recycled file's or window's header was zeroed before it was
     * handed back; its records past `committed` are stale and never read. */
    c->committed = 0;
    c->sealed = 0;
    c->dropped_after = 0;
    /* Last: a reader that sees the magic sees the whole header (it reads
     * the magic first, with acquire). */
    __atomic_store_n(&c->magic, FSPROF_TCHUNK_MAGIC, __ATOMIC_RELEASE);
    t_tdropped = 0;
    t_tc = c;
    t_tc_cap = size - FSPROF_TCHUNK_HDR;
    t_tc_unforked = 0;
    t_tc_inwin = inwin;
    return 1;
}

/* Room for `len` bytes at the end of this thread's chunk, or NULL, the
 * record counted as dropped. A full chunk stays this thread's until the
 * next one is there: records lost meanwhile are counted in it. */
static unsigned char *reserve(uint64_t len)
{
    if (t_tc && t_tc->committed + len > t_tc_cap) {
        struct fsprof_tchunk *full = t_tc;
        uint64_t full_cap = t_tc_cap;
        int full_inwin = t_tc_inwin;
        if (!chunk_open(len)) {
            __atomic_store_n(&full->dropped_after, full->dropped_after + 1, __ATOMIC_RELEASE);
            return NULL;
        }
        __atomic_store_n(&full->sealed, 1, __ATOMIC_RELEASE);
        /* A window stays mapped: it is part of the control file's mapping. */
        if (!full_inwin)
            syscall(SYS_munmap, full, (size_t)(full_cap + FSPROF_TCHUNK_HDR));
    }
    if (!t_tc && !chunk_open(len)) {
        t_tdropped++;
        return NULL;
    }
    return (unsigned char *)t_tc + FSPROF_TCHUNK_HDR + t_tc->committed;
}

static void commit(uint64_t len)
{
    __atomic_store_n(&t_tc->committed, t_tc->committed + len, __ATOMIC_RELEASE);
}

/* ---- records ------------------------------------------------------------------ */

enum { SRC_BYTES, SRC_IOV, SRC_DIGEST_BYTES, SRC_DIGEST_IOV };

struct item {
    uint16_t tag, arg;
    int src;
    const void *p;
    uint64_t len; /* bytes of data (SRC_BYTES), or iovec count (SRC_IOV*) */
    uint64_t cap; /* for iovecs: bytes to take in all */
    uint64_t out; /* bytes the item holds */
};

#define MAX_ITEMS 8

static inline uint64_t pad8(uint64_t n)
{
    return (n + 7) & ~7ULL;
}

static void add_item(struct item *it, int *n, uint16_t tag, uint16_t arg, int src, const void *p,
                     uint64_t len, uint64_t cap)
{
    if (*n >= MAX_ITEMS)
        return;
    uint64_t out = src == SRC_BYTES ? len : src == SRC_IOV ? cap : 8;
    it[(*n)++] = (struct item){tag, arg, src, p, len, cap, out};
}

static unsigned char *put_item(unsigned char *w, const struct item *it)
{
    struct fsprof_titem h = {it->tag, it->arg, (uint32_t)it->out};
    memcpy(w, &h, sizeof h);
    w += sizeof h;
    if (it->src == SRC_BYTES) {
        memcpy(w, it->p, it->len);
    } else if (it->src == SRC_IOV) {
        const struct iovec *v = it->p;
        uint64_t left = it->cap;
        unsigned char *o = w;
        for (uint64_t i = 0; i < it->len && left; i++) {
            uint64_t k = v[i].iov_len < left ? v[i].iov_len : left;
            memcpy(o, v[i].iov_base, k);
            o += k;
            left -= k;
        }
    } else {
        struct xxh s;
        xxh_init(&s);
        if (it->src == SRC_DIGEST_BYTES) {
            xxh_update(&s, it->p, it->len);
        } else {
            const struct iovec *v = it->p;
            uint64_t left = it->cap;
            for (uint64_t i = 0; i < it->len && left; i++) {
                uint64_t k = v[i].iov_len < left ? v[i].iov_len : left;
                xxh_update(&s, v[i].iov_base, k);
                left -= k;
            }
        }
        uint64_t d = xxh_final(&s);
        memcpy(w, &d, 8);
    }
    uint64_t padded = pad8(it->out);
    /* Fewer than 8 bytes; memcpy, not memset, which `fsprof run` never
     * binds (see starts_with). */
    uint64_t zero = 0;
    memcpy(w + it->out, &zero, padded - it->out);
    return w + padded;
}

/* Writes one record; returns 0 if it was lost. */
static int emit(uint16_t kind, uint64_t t0, uint64_t t1, int64_t ret, int err, int failed,
                const uint64_t *args, int nargs, const struct item *it, int nitems)
{
    uint64_t len = sizeof(struct fsprof_trec) + 8 * (uint64_t)nargs;
    for (int i = 0; i < nitems; i++)
        len += sizeof(struct fsprof_titem) + pad8(it[i].out);
    if (len > UINT32_MAX) {
        t_tdropped++;
        return 0;
    }
    unsigned char *w = reserve(len);
    if (!w)
        return 0;
    struct fsprof_trec r = {(uint32_t)len, kind, (uint8_t)nargs, (uint8_t)(failed != 0), t0, t1,
                            ret, err, (uint32_t)nitems};
    memcpy(w, &r, sizeof r);
    unsigned char *o = w + sizeof r;
    memcpy(o, args, 8 * (size_t)nargs);
    o += 8 * (size_t)nargs;
    for (int i = 0; i < nitems; i++)
        o = put_item(o, &it[i]);
    commit(len);
    return 1;
}

static void add_data(struct item *it, int *n, int src_bytes, const void *p, uint64_t len,
                     uint64_t cap)
{
    if (g_trace == FSPROF_TDATA_FULL)
        add_item(it, n, FSPROF_TI_DATA, 0, src_bytes ? SRC_BYTES : SRC_IOV, p, len, cap);
    else if (g_trace == FSPROF_TDATA_DIGEST)
        add_item(it, n, FSPROF_TI_DIGEST, 0, src_bytes ? SRC_DIGEST_BYTES : SRC_DIGEST_IOV, p, len,
                 cap);
}

static void add_stat(struct item *it, int *n, uint64_t *scratch, int op, const void *p)
{
    if (!p)
        return;
    if (op == OP_statx) {
        const struct statx *s = p;
        scratch[0] = s->stx_size;
        scratch[1] = s->stx_mode;
    } else {
        const struct stat *s = p;
        scratch[0] = (uint64_t)s->st_size;
        scratch[1] = s->st_mode;
    }
    add_item(it, n, FSPROF_TI_STAT, 0, SRC_BYTES, scratch, 16, 0);
}

/* Strings, written data, stat results and returned buffers of a call. */
static int call_items(const struct fsprof_tpre *p, int64_t ret, int failed, int err,
                      struct item *it, uint64_t *scratch)
{
    int n = 0;
    const char *sh = shapes[p->op] ? shapes[p->op] : "";
    const uint64_t *a = p->a;
    /* A bad pointer the kernel refused must not crash the program here. */
    int pointers_ok = !(failed && err == EFAULT);
    for (int i = 0; sh[i] && i < p->nargs && pointers_ok; i++)
        if ((sh[i] == 'p' || sh[i] == 's') && a[i])
            add_item(&it[0], &n, FSPROF_TI_STR, (uint16_t)i, SRC_BYTES, (const void *)(uintptr_t)a[i],
                     str_len_max((const char *)(uintptr_t)a[i], FSPROF_TSTR_MAX), 0);
    if (failed || !pointers_ok)
        return n;
    const void *b1 = (const void *)(uintptr_t)a[1];
    switch (p->op) {
    case OP_write:
    case OP_pwrite:
        if (ret > 0)
            add_data(it, &n, 1, b1, (uint64_t)ret, 0);
        break;
    case OP_writev:
    case OP_pwritev:
    case OP_pwritev2:
        if (ret > 0)
            add_data(it, &n, 0, b1, a[2], (uint64_t)ret);
        break;
    /* Reads' bytes only with --data full: replay then recreates the
     * parts of pre-existing files the program read. */
    case OP_read:
    case OP_pread:
        if (ret > 0 && g_trace == FSPROF_TDATA_FULL)
            add_data(it, &n, 1, b1, (uint64_t)ret, 0);
        break;
    case OP_readv:
    case OP_preadv:
    case OP_preadv2:
        if (ret > 0 && g_trace == FSPROF_TDATA_FULL)
            add_data(it, &n, 0, b1, a[2], (uint64_t)ret);
        break;
    case OP_fread:
        if (ret > 0 && g_trace == FSPROF_TDATA_FULL)
            add_data(it, &n, 1, (const void *)(uintptr_t)a[0], (uint64_t)ret * a[1], 0);
        break;
    case OP_fwrite:
        if (ret > 0)
            add_data(it, &n, 1, (const void *)(uintptr_t)a[0], (uint64_t)ret * a[1], 0);
        break;
    case OP_fputs:
        if (a[0])
            add_data(it, &n, 1, (const void *)(uintptr_t)a[0], strlen((const char *)(uintptr_t)a[0]),
                     0);
        break;
    case OP_fprintf:
    case OP_dprintf:
    case OP_puts:
    case OP_fputc:
        if (p->out && p->nout)
            add_data(it, &n, 1, p->out, p->nout, 0);
        break;
    case OP_stat:
    case OP_lstat:
    case OP_fstat:
        add_stat(it, &n, scratch, p->op, b1);
        break;
    case OP_fstatat:
        add_stat(it, &n, scratch, p->op, (const void *)(uintptr_t)a[2]);
        break;
    case OP_statx:
        add_stat(it, &n, scratch, p->op, (const void *)(uintptr_t)a[4]);
        break;
    case OP_mmap: {
        /* The mapped file's size and type as the mapping was made: the
         * replay's initial state needs the file that large (a touch past
         * its end is SIGBUS), and a reader can tell which touches were
         * past it. A raw fstat: no wrapper, no record of its own. */
        struct stat st;
        if (syscall(SYS_fstat, (int)a[4], &st) == 0)
            add_stat(it, &n, scratch, OP_fstat, &st);
        break;
    }
    case OP_readlink:
        if (ret > 0)
            add_item(it, &n, FSPROF_TI_RESULT, 1, SRC_BYTES, b1, (uint64_t)ret, 0);
        break;
    case OP_readlinkat:
        if (ret > 0)
            add_item(it, &n, FSPROF_TI_RESULT, 2, SRC_BYTES, (const void *)(uintptr_t)a[2],
                     (uint64_t)ret, 0);
        break;
    }
    return n;
}

/* The result as the trace gives it: FILE* and DIR* as their fd, readdir
 * as 1 (an entry) or 0 (the end), fgets as the bytes it stored. */
static int64_t result(const struct fsprof_tpre *p, int64_t ret, int failed, int *err)
{
    int flavor = (int)p->a[FSPROF_TREC_MAX_ARGS - 1];
    if (flavor == RET_ERRNUM) {
        *err = failed ? (int)ret : 0;
        return failed ? -1 : 0;
    }
    if (flavor == RET_READDIR_R) {
        *err = failed ? (int)ret : 0;
        void **res = (void **)(uintptr_t)p->a[2];
        return failed ? -1 : (res && *res) ? 1 : 0;
    }
    void *ptr = (void *)(intptr_t)ret;
    switch (p->op) {
    case OP_fopen:
    case OP_freopen:
    case OP_fdopen:
        return ptr ? ((FILE *)ptr)->_fileno : -1;
    case OP_opendir:
    case OP_fdopendir:
        return ptr ? dirfd((DIR *)ptr) : -1;
    case OP_readdir:
        return failed ? -1 : ptr ? 1 : 0;
    case OP_fgets:
        return ptr ? (int64_t)strlen((const char *)ptr) : failed ? -1 : 0;
    }
    return ret;
}

/* What a call did to the image's record of descriptors: one it opened
 * needs no record of its own (its open is one), and a closed number may
 * next be made by a call the trace does not see. */
static void descriptors_made(const struct fsprof_tpre *p, int64_t r, int failed)
{
    switch (p->op) {
    case OP_open:
    case OP_openat:
    case OP_creat:
    case OP_opendir:
    case OP_fopen:
    case OP_freopen:
        if (!failed)
            fsprof_trace_fd_known((long)r, 1);
        break;
    case OP_fcntl:
        if (!failed && ((int)p->a[1] == F_DUPFD || (int)p->a[1] == F_DUPFD_CLOEXEC))
            fsprof_trace_fd_known((long)r, 1);
        break;
    case OP_close:
    case OP_fclose:
    case OP_closedir:
        fsprof_trace_fd_known((long)(int64_t)p->a[0], 0);
        break;
    }
}

/* ---- bytes put in a stream's buffer without a call ---------------------------- */

/* glibc's putc_unlocked and putchar_unlocked are macros in optimized code
 * (`wc`'s newline): they store into the stream's buffer and call a
 * function (__overflow, wrapped) only when it is full, so most of their
 * bytes pass through nothing interposed. Where each traced call left its
 * stream's buffer is kept here; at the stream's next traced call (and, for
 * stdout, at exit, before exit flushes it), the bytes past that point were
 * put there without a call, and are recorded as an `fputc` of them, timed
 * 0, just before it. A stream not in the table (at its first traced call,
 * or pushed out by STREAM_MARKS others since) counts its whole pending
 * buffer: only bytes put without a call, unless a traced call wrote there
 * since the last flush (then they are recorded twice). Shared by the
 * image's threads: two threads writing one stream at once may misplace a
 * mark (the bytes are then recorded twice, or not), never read outside
 * the stream's buffer. */
#define STREAM_MARKS 16
static struct {
    FILE *f;
    char *ptr;
} g_smarks[STREAM_MARKS];
static unsigned g_smark_next;

static int smark_find(const FILE *f)
{
    for (int i = 0; i < STREAM_MARKS; i++)
        if (g_smarks[i].f == f)
            return i;
    return -1;
}

/* After a traced call on stream `f`: where it left the buffer, or, after
 * fclose (`gone`: f is freed), nothing. */
static void stream_marked(FILE *f, int gone)
{
    int i = smark_find(f);
    if (gone) {
        if (i >= 0)
            g_smarks[i].f = NULL;
        return;
    }
    if (i < 0) {
        i = smark_find(NULL);
        if (i < 0)
            i = (int)(g_smark_next++ % STREAM_MARKS);
        g_smarks[i].f = f;
    }
    g_smarks[i].ptr = f->_IO_write_ptr;
}

/* Before a traced call on stream `f` (descriptor `fd`): records the bytes
 * put in its buffer without a call since the last traced one. A wide
 * stream keeps its bytes elsewhere: none. */
static void stream_gap(FILE *f, int64_t fd)
{
    char *base = f->_IO_write_base, *ptr = f->_IO_write_ptr;
    if (!g_tready || t_tbusy || f->_mode > 0 || !base || ptr <= base || ptr > f->_IO_buf_end)
        return;
    int i = smark_find(f);
    char *from = i >= 0 && g_smarks[i].ptr >= base && g_smarks[i].ptr <= ptr ? g_smarks[i].ptr
                                                                              : base;
    uint64_t n = (uint64_t)(ptr - from);
    if (n == 0)
        return;
    int saved = errno;
    t_tbusy = 1;
    uint64_t now = now_ticks();
    int64_t last = (unsigned char)ptr[-1];
    uint64_t args[3] = {(uint64_t)last, (uint64_t)fd, n};
    struct item it[1];
    int k = 0;
    add_data(it, &k, 1, from, n, 0);
    emit(OP_fputc, now, now, last, 0, 0, args, 3, it, k);
    if (i >= 0)
        g_smarks[i].ptr = ptr;
    t_tbusy = 0;
    errno = saved;
}

/* Takes this thread's recorder: 0 when it is not ready, or busy (a
 * signal handler's call inside the recording of another), which counts
 * as a dropped record. */
static int trace_enter(void)
{
    if (!g_tready || t_tbusy) {
        if (g_tready)
            t_tdropped++;
        return 0;
    }
    t_tbusy = 1;
    return 1;
}

HIDDEN void fsprof_trace_post(const struct fsprof_tpre *p, uint64_t t0, uint64_t t1, int64_t ret,
                              int failed)
{
    int saved = errno;
    if (!trace_enter())
        return;
    int err = failed ? saved : 0;
    int64_t r = result(p, ret, failed, &err);
    struct item it[MAX_ITEMS];
    uint64_t scratch[2];
    int n = call_items(p, ret, failed, err, it, scratch);
    uint64_t args[FSPROF_TREC_MAX_ARGS];
    const char *sh = shapes[p->op] ? shapes[p->op] : "";
    int nargs = 0;
    for (; nargs < p->nargs && sh[nargs]; nargs++)
        args[nargs] = keeps_value(sh[nargs]) ? p->a[nargs] : 0;
    emit((uint16_t)p->op, t0, t1, r, err, failed, args, nargs, it, n);
    descriptors_made(p, r, failed);
    if (p->stream)
        stream_marked(p->stream, p->op == OP_fclose);
    t_tbusy = 0;
    errno = saved;
}

HIDDEN void fsprof_trace_contents(const void *addr, uint64_t len, int superset)
{
    int saved = errno;
    if (!trace_enter())
        return;
    uint64_t now = now_ticks();
    uint64_t args[2] = {(uint64_t)(uintptr_t)addr, (uint64_t)(superset != 0)};
    struct item it[1];
    int n = 0;
    add_item(it, &n, FSPROF_TI_DATA, 0, SRC_BYTES, addr, len, 0);
    emit(FSPROF_TREC_MAPPED, now, now, 0, 0, 0, args, 2, it, n);
    t_tbusy = 0;
    errno = saved;
}

/* ---- process images --------------------------------------------------------- */

/* A cwd or a descriptor's path too long for the short buffers on the
 * stack or in thread-local storage (cwd_of_image, record_fd). */
static char g_tpath[FSPROF_TSTR_MAX] BIG_BSS;

/* A pipe's or a socket's position: none, and lseek says so (ESPIPE)
 * without being asked, whatever the file. */
static int cannot_seek(const char *target, long tl)
{
    return starts_with(target, tl, "pipe:[") || starts_with(target, tl, "socket:[");
}

/* Descriptors this image has a record of (it opened them, or recorded
 * them at their first use): g_tknown[fd] == g_tgen. A forked child is a
 * new image with its parent's memory: a new generation forgets them all at
 * once, without touching 64 KiB (an exec'd image starts with zeroes). */
HIDDEN uint8_t g_tknown[FSPROF_FD_CLASSES_MAX] BIG_BSS;
static uint8_t g_tgen = 1;
/* The marks of the numbers most images use (stdio, the first files) are
 * kept in .bss beside g_tgen, in the page every image's set-up writes
 * anyway: in g_tknown, the first look at a mark faulted in the zero page
 * and the first mark made copied it (two page faults a new image; in a
 * forked child, a copy of the parent's page). */
#define TKNOWN_LOW 64
static uint8_t g_tknown_low[TKNOWN_LOW];

static uint8_t *known_mark(long fd)
{
    return fd < TKNOWN_LOW ? &g_tknown_low[fd] : &g_tknown[fd];
}

HIDDEN void fsprof_trace_fd_known(long fd, int known)
{
    if (fd >= 0 && fd < FSPROF_FD_CLASSES_MAX)
        __atomic_store_n(known_mark(fd), known ? g_tgen : 0, __ATOMIC_RELAXED);
}

/* The path of a descriptor that is the inode /dev/null names (the
 * same device and inode, and that inode's only link): what
 * /proc/self/fd/N would say, without asking. A shell's `>/dev/null` is the
 * descriptor short processes most often inherit and use, and the first
 * lookup under /proc/<pid> in a new process makes its dentries and
 * inodes (7-18 us a `cat`, measured; two stats cost ~1 us). Any other
 * character device, a second null device made elsewhere (its own
 * inode), or a link to it is read from /proc. Its length, or -1; the
 * path itself is a constant (*target), copied nowhere. */
static long dev_null_path(long fd, const char **target)
{
    static const char null_path[] = "/dev/null";
    struct stat a, b;
    if (syscall(SYS_fstat, fd, &a) != 0 || !S_ISCHR(a.st_mode) || a.st_nlink != 1 ||
        syscall(SYS_newfstatat, AT_FDCWD, null_path, &b, AT_SYMLINK_NOFOLLOW) != 0 ||
        a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return -1;
    *target = null_path;
    return (long)sizeof null_path - 1;
}

/* A descriptor this image uses before it has a record of it (inherited,
 * or made by a call the trace does not see: dup2, pipe, socket): one
 * record of what it is just before that first use, its path (what
 * /proc/self/fd/N says), open flags and file position. Nothing for a
 * number that is not open (the call fails with EBADF). */
static void record_fd(long fd)
{
    long flags = syscall(SYS_fcntl, fd, F_GETFL);
    if (flags < 0)
        return;
    uint64_t now = now_ticks();
    /* A path that fits is read onto the stack, whose pages are there:
     * g_tpath's page cost each image that described a descriptor a page
     * fault (a new image's zero page made, a forked child's copied), ~2 us
     * of a `cat` whose stdout is /dev/null (perf, 300 cats). */
    char near[256];
    const char *target = NULL;
    long tl = dev_null_path(fd, &target);
    /* /dev/null's position is 0 whatever was done to it: its lseek sets
     * it to 0 and says so (drivers/char/mem.c, null_lseek). */
    int64_t pos = 0;
    if (tl < 0) {
        char name[32];
        fsprof_cat_u64(name, fsprof_cat(name, 0, sizeof name, "/proc/self/fd/"), sizeof name,
                       (uint64_t)fd);
        tl = syscall(SYS_readlinkat, AT_FDCWD, name, near, sizeof near);
        target = near;
        /* Filled: maybe cut; read whole into the long buffer. */
        if (tl >= (long)sizeof near) {
            tl = syscall(SYS_readlinkat, AT_FDCWD, name, g_tpath, sizeof g_tpath);
            target = g_tpath;
        }
        pos = cannot_seek(target, tl) ? -1 : syscall(SYS_lseek, fd, 0L, SEEK_CUR);
    }
    uint64_t args[3] = {(uint64_t)fd, (uint64_t)flags, (uint64_t)pos};
    struct item it[1];
    int n = 0;
    if (tl > 0)
        add_item(it, &n, FSPROF_TI_PATH, 0, SRC_BYTES, target, (uint64_t)tl, 0);
    emit(FSPROF_TREC_FD, now, now, 0, 0, 0, args, 3, it, n);
    fsprof_trace_fd_known(fd, 1);
}

/* Before a call: records each descriptor argument the image has no
 * record of yet. Not inside the recording of another call (a signal
 * handler's call): the next use records it. */
/* Descriptor `fd` about to be used: its record first, unless this image
 * has one (the caller holds neither the recorder nor a stale errno). */
static void first_use(int64_t fd)
{
    if (fd < 0 || fd >= FSPROF_FD_CLASSES_MAX ||
        __atomic_load_n(known_mark((long)fd), __ATOMIC_RELAXED) == g_tgen)
        return;
    int saved = errno;
    t_tbusy = 1;
    record_fd((long)fd);
    t_tbusy = 0;
    errno = saved;
}

static void first_uses(const struct fsprof_tpre *p, const char *sh)
{
    if (!g_tready || t_tbusy)
        return;
    for (int i = 0; sh[i] && i < p->nargs; i++)
        if (sh[i] == 'f' || sh[i] == 'F' || sh[i] == 'D' || sh[i] == 'd')
            first_use((int64_t)p->a[i]);
}

/* The PROC record's names: the counter file header's when they were not
 * cut there (they came without a system call, pool.c), else read again
 * with the trace's longer limits. */
static void proc_names(const struct fsprof_proc *proc, struct item *it, int *n)
{
    static char exe[FSPROF_TSTR_MAX] BIG_BSS, argv[4096] BIG_BSS;
    if (proc->exe_len > 0 && proc->exe_len < FSPROF_EXE_MAX - 1) {
        add_item(it, n, FSPROF_TI_EXE, 0, SRC_BYTES, proc->exe, proc->exe_len, 0);
    } else {
        long el = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", exe, sizeof exe);
        if (el > 0)
            add_item(it, n, FSPROF_TI_EXE, 0, SRC_BYTES, exe, (uint64_t)el, 0);
    }
    if (proc->cmdline_len < FSPROF_CMDLINE_MAX) {
        add_item(it, n, FSPROF_TI_ARGV, 0, SRC_BYTES, proc->cmdline, proc->cmdline_len, 0);
    } else {
        uint32_t al = fsprof_read_small_file("/proc/self/cmdline", argv, sizeof argv);
        add_item(it, n, FSPROF_TI_ARGV, 0, SRC_BYTES, argv, al, 0);
    }
}

/* The image's working directory into *at: a thread-local buffer, whose
 * page the loader (a new image) or the set-up (a forked child) wrote
 * already, when it fits (g_tpath's page cost each new image a page fault,
 * and each forked child a copy); else g_tpath. getcwd's length with the
 * NUL, or -1. errno is the caller's. */
static long cwd_of_image(char **at)
{
    static TLS char short_cwd[256];
    int saved = errno;
    long cl = syscall(SYS_getcwd, short_cwd, sizeof short_cwd);
    if (cl > 0)
        *at = short_cwd;
    else if (errno == ERANGE)
        cl = syscall(SYS_getcwd, *at, sizeof g_tpath);
    errno = saved;
    return cl;
}

/* Called in every process's set-up, traced or not: with the set-up code
 * (layout.h). */
HIDDEN FSPROF_COMMON_TEXT void fsprof_trace_process(uint64_t *seq_counter,
                                                    const struct fsprof_proc *proc, long dirfd)
{
    if (!g_trace) {
        const char *mode = getenv(FSPROF_TRACE_ENV);
        if (!mode) {
            if (dirfd >= 0)
                syscall(SYS_close, dirfd);
            return;
        }
        g_trace = same_str(mode, "full")     ? FSPROF_TDATA_FULL
                  : same_str(mode, "digest") ? FSPROF_TDATA_DIGEST
                                            : FSPROF_TDATA_NONE;
        const char *max = getenv(FSPROF_TPENDING_ENV);
        long v = max ? strtol(max, NULL, 10) : 0;
        if (v >= 2 && v <= 1 << 20)
            g_tpending_max = (uint32_t)v;
    }
    g_tseq = seq_counter;
    g_tproc_seq = proc->seq;
    g_tpid = proc->pid;
    g_twin = fsprof_pool_block_top(FSPROF_TWIN_SIZE);
    g_tready = 1;
    t_tbusy = 1;
    uint64_t now = now_ticks();
    uint64_t at = t_tforked && t_tforked < now ? t_tforked : now;
    t_tforked = 0;
    char *cwd = g_tpath;
    long cl = cwd_of_image(&cwd);
    struct item it[3];
    int n = 0;
    if (cl > 1)
        add_item(it, &n, FSPROF_TI_CWD, 0, SRC_BYTES, cwd, (uint64_t)cl - 1, 0);
    proc_names(proc, it, &n);
    uint64_t args[3] = {(uint64_t)(int64_t)proc->pid, (uint64_t)(int64_t)proc->ppid, proc->seq};
    /* Lent only for the PROC record's chunk, and closed before the image's
     * first call could take it for one of the program's descriptors. */
    t_tdirfd_lent = dirfd >= 0 ? dirfd + 1 : 0;
    t_tsetup = 1;
    emit(FSPROF_TREC_PROC, at, at, 0, 0, 0, args, 3, it, n);
    t_tsetup = 0;
    t_tdirfd_lent = 0;
    if (dirfd >= 0)
        syscall(SYS_close, dirfd);
    t_tbusy = 0;
}

/* Called in every forked child (layout.h). */
/* In the parent, before a fork: this thread's chunk is left out of the
 * children (MADV_DONTFORK, once per chunk), so that each child need not
 * unmap it (a shell's forked child made one munmap of 4-16 us, measured,
 * before its exec). errno is the caller's to keep. */
HIDDEN void fsprof_trace_before_fork(void)
{
    if (t_tc && !t_tc_unforked && !t_tc_inwin &&
        syscall(SYS_madvise, t_tc, (size_t)(t_tc_cap + FSPROF_TCHUNK_HDR), MADV_DONTFORK) == 0)
        t_tc_unforked = 1;
    if (g_trace)
        t_tforked = now_ticks();
}

HIDDEN FSPROF_COMMON_TEXT void fsprof_trace_after_fork(void)
{
    /* The mapping is the parent's chunk: drop it without sealing it. */
    if (t_tc && !t_tc_unforked && !t_tc_inwin)
        syscall(SYS_munmap, t_tc, (size_t)(t_tc_cap + FSPROF_TCHUNK_HDR));
    t_tc = NULL;
    t_tc_unforked = 0;
    t_tc_inwin = 0;
    g_twin = NULL;
    t_tc_next = 0;
    t_tdropped = 0;
    t_tbusy = 0;
    g_tready = 0;
    if (++g_tgen == 0) {
        memset(g_tknown, 0, sizeof g_tknown);
        memset(g_tknown_low, 0, sizeof g_tknown_low);
        g_tgen = 1;
    }
}

/* The page-fault programs, once the control file's word says how they
 * are: requested if no process has yet, and waited for, at most
 * FSPROF_FAULTS_WAIT_MS (a stuck or dead fsprof must not hang the
 * program). A process that stops waiting leaves FSPROF_FAULTS_STALLED, so
 * that the next do not wait, and is counted once per image: its faults
 * until the attach are not in the trace, which says so. Every byte of the
 * word is the traced processes' too: any value but ARMED and REQUESTED
 * ends the wait. */
static uint32_t faults_wait(uint32_t *w, uint32_t s)
{
    static int late;
    if (s == FSPROF_FAULTS_ARMED)
        __atomic_compare_exchange_n(w, &s, FSPROF_FAULTS_REQUESTED, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
    /* All of them: fsprof's thread waits on the word beside other
     * processes' waiters. */
    syscall(SYS_futex, w, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    struct timespec now, end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += FSPROF_FAULTS_WAIT_MS / 1000;
    end.tv_nsec += (long)(FSPROF_FAULTS_WAIT_MS % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    for (;;) {
        s = __atomic_load_n(w, __ATOMIC_ACQUIRE);
        if (s != FSPROF_FAULTS_ARMED && s != FSPROF_FAULTS_REQUESTED)
            return s;
        clock_gettime(CLOCK_MONOTONIC, &now);
        struct timespec rel = {end.tv_sec - now.tv_sec, end.tv_nsec - now.tv_nsec};
        if (rel.tv_nsec < 0) {
            rel.tv_sec--;
            rel.tv_nsec += 1000000000L;
        }
        if (rel.tv_sec < 0)
            break;
        /* Woken, timed out, interrupted by a signal or the word changed:
         * looked at again. */
        syscall(SYS_futex, w, FUTEX_WAIT, s, &rel, NULL, 0);
    }
    if (__atomic_compare_exchange_n(w, &s, FSPROF_FAULTS_STALLED, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        syscall(SYS_futex, w, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
        s = FSPROF_FAULTS_STALLED;
    }
    if (s == FSPROF_FAULTS_STALLED && !__atomic_exchange_n(&late, 1, __ATOMIC_RELAXED))
        __atomic_fetch_add(&g_ctl->faults_late, 1, __ATOMIC_RELAXED);
    return s;
}

/* Once per process image (a fork keeps the parent's, as the kernel's mark
 * does), once the page-fault programs are attached (faults_wait; the
 * mark is their start program's, which is not attached before):
 * faccessat(2) of FSPROF_TMAP_MARK, which fails with EFAULT and does
 * nothing else. Called before the mapping is made: none of its faults
 * comes before the programs are on. A process that went on without them
 * marks at its next file mapping, if they are on by then. Raw, errno
 * kept. Threads racing here mark twice, which is harmless. */
HIDDEN void fsprof_trace_mark_mapping(void)
{
    static int marked;
    if (__atomic_load_n(&marked, __ATOMIC_RELAXED))
        return;
    if (!g_ctl)
        return;
    int e = errno;
    uint32_t *w = &g_ctl->faults;
    uint32_t s = __atomic_load_n(w, __ATOMIC_ACQUIRE);
    if (s == FSPROF_FAULTS_ARMED || s == FSPROF_FAULTS_REQUESTED)
        s = faults_wait(w, s);
    if (s == FSPROF_FAULTS_ATTACHED)
        syscall(SYS_faccessat, AT_FDCWD, (const char *)FSPROF_TMAP_MARK, F_OK);
    /* NONE and FAILED: no programs to mark for. */
    if (s != FSPROF_FAULTS_STALLED)
        __atomic_store_n(&marked, 1, __ATOMIC_RELAXED);
    errno = e;
}

EXPORT void fsprof_shim_trace_abi(struct fsprof_trace_layout *out)
{
    out->chunk_hdr = sizeof(struct fsprof_tchunk);
    out->rec_hdr = sizeof(struct fsprof_trec);
    out->item_hdr = sizeof(struct fsprof_titem);
    out->off_committed = offsetof(struct fsprof_tchunk, committed);
    out->off_sealed = offsetof(struct fsprof_tchunk, sealed);
    out->off_dropped = offsetof(struct fsprof_tchunk, dropped);
    out->off_proc_seq = offsetof(struct fsprof_tchunk, proc_seq);
    out->off_rec_t0 = offsetof(struct fsprof_trec, t0);
    out->off_rec_ret = offsetof(struct fsprof_trec, ret);
    out->off_rec_err = offsetof(struct fsprof_trec, err);
    out->off_rec_nitems = offsetof(struct fsprof_trec, nitems);
    out->chunk_size = FSPROF_TCHUNK_SIZE;
    out->nops = OP_COUNT;
    out->off_dropped_after = offsetof(struct fsprof_tchunk, dropped_after);
    out->map_mark = (uint32_t)FSPROF_TMAP_MARK;
}

/* For the tests: the shim's XXH64 of `len` bytes, fed in pieces of `step`. */
EXPORT uint64_t fsprof_shim_xxh64(const unsigned char *p, uint64_t len, uint64_t step)
{
    struct xxh s;
    xxh_init(&s);
    for (uint64_t at = 0; at < len; at += step)
        xxh_update(&s, p + at, len - at < step ? len - at : step);
    return xxh_final(&s);
}

/* exit flushes stdout after the image's destructors: what putc_unlocked
 * left there since its last traced call is recorded now (with its
 * descriptor first, when nothing traced used it). stdout is never freed
 * (fclose leaves it without a buffer). */
__attribute__((destructor)) static void stream_gap_at_exit(void)
{
    if (!g_trace || !g_tready || t_tbusy || !stdout)
        return;
    FILE *f = stdout;
    if (!f->_IO_write_base || f->_IO_write_ptr <= f->_IO_write_base)
        return;
    first_use(f->_fileno);
    stream_gap(f, f->_fileno);
}
