/* The interposed libc entry points. Each one times the real function
 * (what dlsym(RTLD_NEXT) returns, nextsym.c) and files the latency under
 * its op (ops.def); LFS `64` variants, `__xstat`-style and fortified
 * `__*_chk` aliases and the `_unlocked` stdio variants fold into the op of
 * their base function.
 * Calls libc makes internally (fread's read, realpath's lstat) don't go
 * through these symbols and are not seen: that is the syscall layer's job.
 * Ops on a descriptor (fdops.def) are filed by what the descriptor is
 * (fdclass.c): calls on pipes, sockets and devices go to the op's non-file
 * twin, so that the file-system ops hold file-system time only. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>

#include "interpose.h"
#include "mapwrite.h"
#include "trace.h"

/* The one timing sequence of every wrapper. `call` (an expression of type
 * `type`) is filed in the counter `ctr`, timed, with `failed` an
 * expression over the result `r`; then `counted` runs (with `r`, `c_` and
 * the latency `ns_`), then `after` and `post`, then the own-cost sample
 * that `entry` (own_begin) opened is filed. Without a counter (nothing is
 * profiled) the call runs untimed and only `after` runs. */
#define TIMED_SEQ(entry, ctr, type, failed, call, counted, after, post)                  \
    do {                                                                                 \
        uint64_t e_ = (entry);                                                           \
        struct fsprof_ctr *c_ = (ctr);                                                   \
        if (UNLIKELY(c_ == NULL)) {                                                      \
            type r = call;                                                               \
            after;                                                                       \
            return r;                                                                    \
        }                                                                                \
        uint64_t t0_ = now_ticks();                                                      \
        type r = call;                                                                   \
        uint64_t t1_ = now_ticks();                                                      \
        int f_ = (failed);                                                               \
        uint64_t ns_ = call_end(c_, t0_, t1_, f_);                                       \
        (void)ns_;                                                                       \
        counted;                                                                         \
        after;                                                                           \
        post;                                                                            \
        own_end(e_, t0_, t1_);                                                           \
        return r;                                                                        \
    } while (0)

/* The path of a wrapper when tracing is on (fsprof trace): the same
 * sequence, with the call's arguments taken before it (FILE* and DIR*
 * are read while still alive) and its record written after it. The `n`
 * arguments at `a` are the trace's; `name` is the wrapper's symbol's.
 * Traced calls are not own-cost samples. */
#define TRACED_BODY(op, name, a, n, ctr, type, failed, call, counted, after)             \
    struct fsprof_ctr *trc_ = (ctr); /* first: an image's first call sets it up */       \
    struct fsprof_tpre pre_;                                                             \
    fsprof_trace_pre(&pre_, op, name, a, n);                                             \
    TIMED_SEQ(0, trc_, type, failed, call, counted, after,                               \
              fsprof_trace_post(&pre_, t0_, t1_, (int64_t)(intptr_t)r, f_))
/* The traced path of a wrapper whose arguments are `args` (a parenthesized
 * list): the counters-only path of `fsprof run` pays one predictable
 * branch for it. */
#define TRACED_CALL(op, name, args, ctr, type, failed, call, counted, after)             \
    if (UNLIKELY(g_trace)) {                                                             \
        uint64_t tra_[] = {TR_LIST args};                                                \
        TRACED_BODY(op, name, tra_, (int)(sizeof tra_ / sizeof *tra_), ctr, type, failed, \
                    call, counted, after);                                               \
    }
/* The same for wrapper `name`, which calls the real function with `args`. */
#define TRACED_SEQ(op, name, ctr, type, failed, args, counted, after)                    \
    TRACED_CALL(op, #name, args, ctr, type, failed, REAL(name) args, counted, after)

/* Wrapper `name` of op `op` whose counter is `ctr`: traced or timed, then
 * `counted` and `after` (TIMED_SEQ). */
#define WRAPPED(op, name, ctr, type, failed, args, counted, after)                       \
    TRACED_SEQ(op, name, ctr, type, failed, args, counted, after)                        \
    TIMED_SEQ(own_begin(), ctr, type, failed, REAL(name) args, counted, after, (void)0)

#define WRAP(op, type, name, params, args, failed)                                       \
    static type(*real_##name) params REAL_PLACE(name);                                   \
    WRAPPER(name) type name params                                                       \
    {                                                                                    \
        WRAPPED(OP_##op, name, call_begin(OP_##op), type, failed, args, (void)0, (void)0); \
    }

/* The counter of op `op` on descriptor `fdexpr`: the op's, or its non-file
 * twin's when the descriptor is not a file (`file_` says which). */
#define FD_CTR(op, fdexpr) call_begin_fd(OP_##op, FDOP_##op, (fdexpr), &file_)

#define WRAP_FD(op, type, name, params, args, failed, fdexpr)                            \
    WRAP_FD_THEN(op, type, name, params, args, failed, fdexpr, (void)0)

/* Like WRAP_FD, then `after` runs with the result `r` (profiled or not). */
#define WRAP_FD_THEN(op, type, name, params, args, failed, fdexpr, after)                \
    static type(*real_##name) params REAL_PLACE(name);                                   \
    WRAPPER(name) type name params                                                       \
    {                                                                                    \
        int file_ = 1;                                                                   \
        WRAPPED(OP_##op, name, FD_CTR(op, fdexpr), type, failed, args, (void)0, after);  \
    }

/* A data call (dataops.def): timed like WRAP_FD, then, on a file, its
 * request size and seek distance are filed (record_value). `fd`, `off`,
 * `size` and `done` are expressions over the parameters and the result
 * `r`. */
#define WRAP_DATA(op, type, name, params, args, failed, ...)                             \
    WRAP_DATA_(op, type, name, params, args, failed, __VA_ARGS__)
#define WRAP_DATA_(op, type, name, params, args, failed, fd, off, size, done)            \
    static type(*real_##name) params REAL_PLACE(name);                                   \
    WRAPPER(name) type name params                                                       \
    {                                                                                    \
        int file_ = 0;                                                                   \
        WRAPPED(OP_##op, name, FD_CTR(op, fd), type, failed, args,                       \
                if (LIKELY(file_)) record_value(CORR_##op, ns_, (fd), (off), (size), (done)), \
                (void)0);                                                                \
    }

/* Like WRAP, then `after` runs with the result `r` (profiled or not). */
#define WRAP_THEN(op, type, name, params, args, failed, after)                           \
    static type(*real_##name) params REAL_PLACE(name);                                   \
    WRAPPER(name) type name params                                                       \
    {                                                                                    \
        WRAPPED(OP_##op, name, call_begin(OP_##op), type, failed, args, (void)0, after); \
    }

/* Bytes an iovec asks for; only read after the call succeeded, when the
 * kernel has vouched for the array. */
static inline uint64_t iov_total(const struct iovec *v, int n)
{
    uint64_t t = 0;
    for (int i = 0; i < n; i++)
        t += v[i].iov_len;
    return t;
}

#define M1 (r == -1)
#define NONZERO (r != 0)
#define ISNULL (r == NULL)

/* ---- open / close ------------------------------------------------------- */

/* The mode argument exists only when the flags ask for a new file. */
#define MODE_ARG(flags)                                                                  \
    mode_t mode = 0;                                                                     \
    if ((flags) & (O_CREAT | __O_TMPFILE)) {                                             \
        va_list ap;                                                                      \
        va_start(ap, flags);                                                             \
        mode = (mode_t)va_arg(ap, int);                                                  \
        va_end(ap);                                                                      \
    }

/* Opens: the new descriptor is a file (fdclass.c). */
#define OPENED fsprof_fd_opened(r, path)
#define WRAP_OPEN(name)                                                                  \
    static int (*real_##name)(const char *, int, ...) REAL_PLACE(name);                  \
    WRAPPER(name) int name(const char *path, int flags, ...)                             \
    {                                                                                    \
        MODE_ARG(flags);                                                                 \
        WRAPPED(OP_open, name, call_begin(OP_open), int, M1, (path, flags, mode), (void)0, \
                if (r >= 0) OPENED);                                                     \
    }
WRAP_OPEN(open)
WRAP_OPEN(open64)

#define WRAP_OPENAT(name)                                                                \
    static int (*real_##name)(int, const char *, int, ...) REAL_PLACE(name);             \
    WRAPPER(name) int name(int dirfd, const char *path, int flags, ...)                  \
    {                                                                                    \
        MODE_ARG(flags);                                                                 \
        WRAPPED(OP_openat, name, call_begin(OP_openat), int, M1, (dirfd, path, flags, mode), \
                (void)0, if (r >= 0) OPENED);                                            \
    }
WRAP_OPENAT(openat)
WRAP_OPENAT(openat64)

WRAP_THEN(open, int, __open_2, (const char *path, int flags), (path, flags), M1,
          if (r >= 0) OPENED)
WRAP_THEN(open, int, __open64_2, (const char *path, int flags), (path, flags), M1,
          if (r >= 0) OPENED)
WRAP_THEN(openat, int, __openat_2, (int d, const char *path, int flags), (d, path, flags), M1,
          if (r >= 0) OPENED)
WRAP_THEN(openat, int, __openat64_2, (int d, const char *path, int flags), (d, path, flags), M1,
          if (r >= 0) OPENED)
WRAP_THEN(creat, int, creat, (const char *path, mode_t mode), (path, mode), M1,
          if (r >= 0) OPENED)
WRAP_THEN(creat, int, creat64, (const char *path, mode_t mode), (path, mode), M1,
          if (r >= 0) OPENED)

/* Filed by what the descriptor was; then it is forgotten (after the call
 * when tracing: a number reused meanwhile is only looked at again). */
static int (*real_close)(int) REAL_PLACE(close);
WRAPPER(close) int close(int fd)
{
    int file_ = 1;
    TRACED_SEQ(OP_close, close, FD_CTR(close, fd), int, M1, (fd), (void)0, fd_forget(fd))
    uint64_t e = own_begin();
    struct fsprof_ctr *c = FD_CTR(close, fd);
    fd_forget(fd);
    TIMED_SEQ(e, c, int, M1, REAL(close)(fd), (void)0, (void)0, (void)0);
}

/* ---- data ---------------------------------------------------------------- */

/* Data calls also file request size and seek distance (record_value):
 * `fd, offset or -1, bytes asked, bytes done (< 0: failed)`. */
#define AT_POS fd, -1, n, r
#define AT_OFF fd, (int64_t)o, n, r
#define V_AT_POS fd, -1, r >= 0 ? iov_total(v, n) : 0, r
#define V_AT_OFF fd, (int64_t)o, r >= 0 ? iov_total(v, n) : 0, r
WRAP_DATA(read, ssize_t, read, (int fd, void *b, size_t n), (fd, b, n), M1, AT_POS)
WRAP_DATA(read, ssize_t, __read_chk, (int fd, void *b, size_t n, size_t bl), (fd, b, n, bl), M1,
          AT_POS)
WRAP_DATA(write, ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n), M1, AT_POS)
WRAP_DATA(pread, ssize_t, pread, (int fd, void *b, size_t n, off_t o), (fd, b, n, o), M1, AT_OFF)
WRAP_DATA(pread, ssize_t, pread64, (int fd, void *b, size_t n, off64_t o), (fd, b, n, o), M1,
          AT_OFF)
WRAP_DATA(pread, ssize_t, __pread_chk, (int fd, void *b, size_t n, off_t o, size_t bl),
          (fd, b, n, o, bl), M1, AT_OFF)
WRAP_DATA(pread, ssize_t, __pread64_chk, (int fd, void *b, size_t n, off64_t o, size_t bl),
          (fd, b, n, o, bl), M1, AT_OFF)
WRAP_DATA(pwrite, ssize_t, pwrite, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o), M1,
          AT_OFF)
WRAP_DATA(pwrite, ssize_t, pwrite64, (int fd, const void *b, size_t n, off64_t o), (fd, b, n, o),
          M1, AT_OFF)
WRAP_DATA(readv, ssize_t, readv, (int fd, const struct iovec *v, int n), (fd, v, n), M1, V_AT_POS)
WRAP_DATA(writev, ssize_t, writev, (int fd, const struct iovec *v, int n), (fd, v, n), M1,
          V_AT_POS)
WRAP_DATA(preadv, ssize_t, preadv, (int fd, const struct iovec *v, int n, off_t o), (fd, v, n, o),
          M1, V_AT_OFF)
WRAP_DATA(preadv, ssize_t, preadv64, (int fd, const struct iovec *v, int n, off64_t o),
          (fd, v, n, o), M1, V_AT_OFF)
WRAP_DATA(pwritev, ssize_t, pwritev, (int fd, const struct iovec *v, int n, off_t o),
          (fd, v, n, o), M1, V_AT_OFF)
WRAP_DATA(pwritev, ssize_t, pwritev64, (int fd, const struct iovec *v, int n, off64_t o),
          (fd, v, n, o), M1, V_AT_OFF)
/* An offset of -1 means "at the file position" for the v2 calls, which is
 * what record_value takes -1 to mean. */
WRAP_DATA(preadv2, ssize_t, preadv2, (int fd, const struct iovec *v, int n, off_t o, int f),
          (fd, v, n, o, f), M1, V_AT_OFF)
WRAP_DATA(preadv2, ssize_t, preadv64v2, (int fd, const struct iovec *v, int n, off64_t o, int f),
          (fd, v, n, o, f), M1, V_AT_OFF)
WRAP_DATA(pwritev2, ssize_t, pwritev2, (int fd, const struct iovec *v, int n, off_t o, int f),
          (fd, v, n, o, f), M1, V_AT_OFF)
WRAP_DATA(pwritev2, ssize_t, pwritev64v2,
          (int fd, const struct iovec *v, int n, off64_t o, int f), (fd, v, n, o, f), M1,
          V_AT_OFF)
WRAP_FD_THEN(lseek, off_t, lseek, (int fd, off_t o, int w), (fd, o, w), M1, fd,
          if (r >= 0) fd_moved(fd, (int64_t)r))
WRAP_FD_THEN(lseek, off64_t, lseek64, (int fd, off64_t o, int w), (fd, o, w), M1, fd,
          if (r >= 0) fd_moved(fd, (int64_t)r))
WRAP(sendfile, ssize_t, sendfile, (int o, int i, off_t *off, size_t n), (o, i, off, n), M1)
WRAP(sendfile, ssize_t, sendfile64, (int o, int i, off64_t *off, size_t n), (o, i, off, n), M1)
WRAP(copy_file_range, ssize_t, copy_file_range,
     (int i, off64_t *io, int o, off64_t *oo, size_t n, unsigned f), (i, io, o, oo, n, f), M1)

/* ---- attributes ------------------------------------------------------------ */

WRAP(stat, int, stat, (const char *p, struct stat *s), (p, s), M1)
WRAP(stat, int, stat64, (const char *p, struct stat64 *s), (p, s), M1)
WRAP(stat, int, __xstat, (int v, const char *p, struct stat *s), (v, p, s), M1)
WRAP(stat, int, __xstat64, (int v, const char *p, struct stat64 *s), (v, p, s), M1)
WRAP(lstat, int, lstat, (const char *p, struct stat *s), (p, s), M1)
WRAP(lstat, int, lstat64, (const char *p, struct stat64 *s), (p, s), M1)
WRAP(lstat, int, __lxstat, (int v, const char *p, struct stat *s), (v, p, s), M1)
WRAP(lstat, int, __lxstat64, (int v, const char *p, struct stat64 *s), (v, p, s), M1)
WRAP_FD(fstat, int, fstat, (int fd, struct stat *s), (fd, s), M1, fd)
WRAP_FD(fstat, int, fstat64, (int fd, struct stat64 *s), (fd, s), M1, fd)
WRAP_FD(fstat, int, __fxstat, (int v, int fd, struct stat *s), (v, fd, s), M1, fd)
WRAP_FD(fstat, int, __fxstat64, (int v, int fd, struct stat64 *s), (v, fd, s), M1, fd)
WRAP(fstatat, int, fstatat, (int d, const char *p, struct stat *s, int f), (d, p, s, f), M1)
WRAP(fstatat, int, fstatat64, (int d, const char *p, struct stat64 *s, int f), (d, p, s, f), M1)
WRAP(fstatat, int, __fxstatat, (int v, int d, const char *p, struct stat *s, int f),
     (v, d, p, s, f), M1)
WRAP(fstatat, int, __fxstatat64, (int v, int d, const char *p, struct stat64 *s, int f),
     (v, d, p, s, f), M1)
WRAP(statx, int, statx, (int d, const char *p, int f, unsigned m, struct statx *s),
     (d, p, f, m, s), M1)
WRAP(access, int, access, (const char *p, int m), (p, m), M1)
WRAP(faccessat, int, faccessat, (int d, const char *p, int m, int f), (d, p, m, f), M1)
WRAP(statfs, int, statfs, (const char *p, struct statfs *s), (p, s), M1)
WRAP(statfs, int, statfs64, (const char *p, struct statfs64 *s), (p, s), M1)
WRAP_FD(fstatfs, int, fstatfs, (int fd, struct statfs *s), (fd, s), M1, fd)
WRAP_FD(fstatfs, int, fstatfs64, (int fd, struct statfs64 *s), (fd, s), M1, fd)
WRAP(statvfs, int, statvfs, (const char *p, struct statvfs *s), (p, s), M1)
WRAP(statvfs, int, statvfs64, (const char *p, struct statvfs64 *s), (p, s), M1)
WRAP_FD(fstatvfs, int, fstatvfs, (int fd, struct statvfs *s), (fd, s), M1, fd)
WRAP_FD(fstatvfs, int, fstatvfs64, (int fd, struct statvfs64 *s), (fd, s), M1, fd)

/* ---- durability and size ---------------------------------------------------- */

WRAP_FD(fsync, int, fsync, (int fd), (fd), M1, fd)
WRAP_FD(fdatasync, int, fdatasync, (int fd), (fd), M1, fd)
WRAP(syncfs, int, syncfs, (int fd), (fd), M1)
WRAP(sync_file_range, int, sync_file_range, (int fd, off64_t o, off64_t n, unsigned f),
     (fd, o, n, f), M1)
WRAP(truncate, int, truncate, (const char *p, off_t n), (p, n), M1)
WRAP(truncate, int, truncate64, (const char *p, off64_t n), (p, n), M1)
WRAP_FD(ftruncate, int, ftruncate, (int fd, off_t n), (fd, n), M1, fd)
WRAP_FD(ftruncate, int, ftruncate64, (int fd, off64_t n), (fd, n), M1, fd)
WRAP(fallocate, int, fallocate, (int fd, int m, off_t o, off_t n), (fd, m, o, n), M1)
WRAP(fallocate, int, fallocate64, (int fd, int m, off64_t o, off64_t n), (fd, m, o, n), M1)
/* These two return the error number instead of setting errno. */
WRAP(posix_fallocate, int, posix_fallocate, (int fd, off_t o, off_t n), (fd, o, n), NONZERO)
WRAP(posix_fallocate, int, posix_fallocate64, (int fd, off64_t o, off64_t n), (fd, o, n), NONZERO)
WRAP(posix_fadvise, int, posix_fadvise, (int fd, off_t o, off_t n, int a), (fd, o, n, a), NONZERO)
WRAP(posix_fadvise, int, posix_fadvise64, (int fd, off64_t o, off64_t n, int a), (fd, o, n, a),
     NONZERO)

static void (*real_sync)(void) REAL_PLACE(sync);
static inline __attribute__((always_inline)) int call_sync(void)
{
    REAL(sync)();
    return 0;
}

static int timed_sync(void)
{
    if (UNLIKELY(g_trace)) {
        TRACED_BODY(OP_sync, "sync", NULL, 0, call_begin(OP_sync), int, 0, call_sync(), (void)0,
                    (void)0);
    }
    TIMED_SEQ(own_begin(), call_begin(OP_sync), int, 0, call_sync(), (void)0, (void)0, (void)0);
}

WRAPPER(sync) void sync(void)
{
    (void)timed_sync();
}

/* ---- namespace ----------------------------------------------------------------- */

WRAP(mkdir, int, mkdir, (const char *p, mode_t m), (p, m), M1)
WRAP(mkdirat, int, mkdirat, (int d, const char *p, mode_t m), (d, p, m), M1)
WRAP(rmdir, int, rmdir, (const char *p), (p), M1)
WRAP(unlink, int, unlink, (const char *p), (p), M1)
WRAP(unlinkat, int, unlinkat, (int d, const char *p, int f), (d, p, f), M1)
WRAP(rename, int, rename, (const char *a, const char *b), (a, b), M1)
WRAP(renameat, int, renameat, (int da, const char *a, int db, const char *b), (da, a, db, b), M1)
WRAP(renameat2, int, renameat2, (int da, const char *a, int db, const char *b, unsigned f),
     (da, a, db, b, f), M1)
WRAP(link, int, link, (const char *a, const char *b), (a, b), M1)
WRAP(linkat, int, linkat, (int da, const char *a, int db, const char *b, int f),
     (da, a, db, b, f), M1)
WRAP(symlink, int, symlink, (const char *a, const char *b), (a, b), M1)
WRAP(symlinkat, int, symlinkat, (const char *a, int d, const char *b), (a, d, b), M1)
WRAP(readlink, ssize_t, readlink, (const char *p, char *b, size_t n), (p, b, n), M1)
WRAP(readlink, ssize_t, __readlink_chk, (const char *p, char *b, size_t n, size_t bl),
     (p, b, n, bl), M1)
WRAP(readlinkat, ssize_t, readlinkat, (int d, const char *p, char *b, size_t n), (d, p, b, n), M1)
WRAP(readlinkat, ssize_t, __readlinkat_chk, (int d, const char *p, char *b, size_t n, size_t bl),
     (d, p, b, n, bl), M1)
WRAP(mknod, int, mknod, (const char *p, mode_t m, dev_t d), (p, m, d), M1)
WRAP(mknodat, int, mknodat, (int fd, const char *p, mode_t m, dev_t d), (fd, p, m, d), M1)
WRAP(chmod, int, chmod, (const char *p, mode_t m), (p, m), M1)
WRAP(fchmod, int, fchmod, (int fd, mode_t m), (fd, m), M1)
WRAP(fchmodat, int, fchmodat, (int d, const char *p, mode_t m, int f), (d, p, m, f), M1)
WRAP(chown, int, chown, (const char *p, uid_t u, gid_t g), (p, u, g), M1)
WRAP(fchown, int, fchown, (int fd, uid_t u, gid_t g), (fd, u, g), M1)
WRAP(lchown, int, lchown, (const char *p, uid_t u, gid_t g), (p, u, g), M1)
WRAP(fchownat, int, fchownat, (int d, const char *p, uid_t u, gid_t g, int f), (d, p, u, g, f), M1)
WRAP(utimensat, int, utimensat, (int d, const char *p, const struct timespec t[2], int f),
     (d, p, t, f), M1)
WRAP(futimens, int, futimens, (int fd, const struct timespec t[2]), (fd, t), M1)
WRAP(utime, int, utime, (const char *p, const struct utimbuf *t), (p, t), M1)
WRAP(utimes, int, utimes, (const char *p, const struct timeval t[2]), (p, t), M1)
WRAP(futimes, int, futimes, (int fd, const struct timeval t[2]), (fd, t), M1)
WRAP(lutimes, int, lutimes, (const char *p, const struct timeval t[2]), (p, t), M1)
WRAP(chdir, int, chdir, (const char *p), (p), M1)
WRAP(fchdir, int, fchdir, (int fd), (fd), M1)

/* ---- extended attributes ----------------------------------------------------------- */

WRAP(getxattr, ssize_t, getxattr, (const char *p, const char *n, void *v, size_t s), (p, n, v, s),
     M1)
WRAP(lgetxattr, ssize_t, lgetxattr, (const char *p, const char *n, void *v, size_t s),
     (p, n, v, s), M1)
WRAP(fgetxattr, ssize_t, fgetxattr, (int fd, const char *n, void *v, size_t s), (fd, n, v, s), M1)
WRAP(setxattr, int, setxattr, (const char *p, const char *n, const void *v, size_t s, int f),
     (p, n, v, s, f), M1)
WRAP(lsetxattr, int, lsetxattr, (const char *p, const char *n, const void *v, size_t s, int f),
     (p, n, v, s, f), M1)
WRAP(fsetxattr, int, fsetxattr, (int fd, const char *n, const void *v, size_t s, int f),
     (fd, n, v, s, f), M1)
WRAP(listxattr, ssize_t, listxattr, (const char *p, char *l, size_t s), (p, l, s), M1)
WRAP(llistxattr, ssize_t, llistxattr, (const char *p, char *l, size_t s), (p, l, s), M1)
WRAP(flistxattr, ssize_t, flistxattr, (int fd, char *l, size_t s), (fd, l, s), M1)
WRAP(removexattr, int, removexattr, (const char *p, const char *n), (p, n), M1)
WRAP(lremovexattr, int, lremovexattr, (const char *p, const char *n), (p, n), M1)
WRAP(fremovexattr, int, fremovexattr, (int fd, const char *n), (fd, n), M1)

/* ---- directories ---------------------------------------------------------------------- */

WRAP(opendir, DIR *, opendir, (const char *p), (p), ISNULL)
WRAP(fdopendir, DIR *, fdopendir, (int fd), (fd), ISNULL)
WRAP(closedir, int, closedir, (DIR * d), (d), M1)
WRAP(getdents64, ssize_t, getdents64, (int fd, void *b, size_t n), (fd, b, n), M1)
/* readdir_r returns the error number. */
WRAP(readdir, int, readdir_r, (DIR * d, struct dirent *e, struct dirent **r_), (d, e, r_), NONZERO)
WRAP(readdir, int, readdir64_r, (DIR * d, struct dirent64 *e, struct dirent64 **r_), (d, e, r_),
     NONZERO)

/* readdir returns NULL both at the end and on error; only errno tells them
 * apart, so clear it around the call and put the caller's value back unless
 * the call failed (readdir must leave errno alone at the end). */
static inline __attribute__((always_inline)) void *readdir_call(void *(*fn)(DIR *), DIR *d,
                                                                int *failed)
{
    int saved = errno;
    errno = 0;
    void *r = fn(d);
    *failed = r == NULL && errno != 0;
    if (!*failed)
        errno = saved;
    return r;
}

#define WRAP_READDIR(name, ent)                                                          \
    static ent *(*real_##name)(DIR *) REAL_PLACE(name);                                  \
    WRAPPER(name) ent *name(DIR *d)                                                      \
    {                                                                                    \
        int failed_ = 0;                                                                 \
        TRACED_CALL(OP_readdir, #name, (d), call_begin(OP_readdir), ent *, failed_,      \
                    readdir_call((void *(*)(DIR *))REAL(name), d, &failed_), (void)0,    \
                    (void)0)                                                             \
        TIMED_SEQ(own_begin(), call_begin(OP_readdir), ent *, failed_,                   \
                  readdir_call((void *(*)(DIR *))REAL(name), d, &failed_), (void)0, (void)0, \
                  (void)0);                                                              \
    }
WRAP_READDIR(readdir, struct dirent)
WRAP_READDIR(readdir64, struct dirent64)

/* ---- memory mappings -------------------------------------------------------------------- */

/* munmap is timed only for mappings we saw mmap create from a file: most
 * munmap calls release malloc's anonymous memory. A small lock-free set of
 * start addresses remembers them; a partial unmap or a full set goes
 * unrecorded rather than costing a lock. */
#define MAPS 1024
#define MAP_GONE ((uintptr_t)1)
static uintptr_t file_maps[MAPS] BIG_BSS;

static unsigned map_hash(uintptr_t a)
{
    return (unsigned)((a >> 12) * 0x9E3779B1u) % MAPS;
}

static void map_remember(void *addr)
{
    uintptr_t a = (uintptr_t)addr;
    for (unsigned i = 0, h = map_hash(a); i < 16; i++, h = (h + 1) % MAPS) {
        uintptr_t cur = __atomic_load_n(&file_maps[h], __ATOMIC_RELAXED);
        if ((cur == 0 || cur == MAP_GONE) &&
            __atomic_compare_exchange_n(&file_maps[h], &cur, a, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return;
    }
}

static int map_forget(void *addr)
{
    uintptr_t a = (uintptr_t)addr;
    for (unsigned i = 0, h = map_hash(a); i < 16; i++, h = (h + 1) % MAPS) {
        uintptr_t cur = __atomic_load_n(&file_maps[h], __ATOMIC_RELAXED);
        if (cur == 0)
            return 0;
        if (cur == a)
            return __atomic_compare_exchange_n(&file_maps[h], &cur, MAP_GONE, 0, __ATOMIC_RELAXED,
                                               __ATOMIC_RELAXED);
    }
    return 0;
}

#define WRAP_MMAP(name, off_type)                                                        \
    static void *(*real_##name)(void *, size_t, int, int, int, off_type) REAL_PLACE(name); \
    WRAPPER(name) void *name(void *a, size_t n, int prot, int flags, int fd, off_type off) \
    {                                                                                    \
        if ((flags & MAP_ANONYMOUS) || fd < 0)                                           \
            return REAL(name)(a, n, prot, flags, fd, off);                               \
        if (UNLIKELY(g_trace))                                                           \
            fsprof_trace_mark_mapping();                                                 \
        int file_ = 1;                                                                   \
        WRAPPED(OP_mmap, name, FD_CTR(mmap, fd), void *, r == MAP_FAILED,                \
                (a, n, prot, flags, fd, off), if (r != MAP_FAILED) map_remember(r),      \
                if (UNLIKELY(g_trace) && r != MAP_FAILED)                                \
                    fsprof_mapwrite_remember(r, n, prot, flags));                        \
    }
WRAP_MMAP(mmap, off_t)
WRAP_MMAP(mmap64, off64_t)

static int (*real_munmap)(void *, size_t) REAL_PLACE(munmap);
WRAPPER(munmap) int munmap(void *a, size_t n)
{
    if (UNLIKELY(g_trace == FSPROF_TDATA_FULL))
        fsprof_mapwrite_unmap(a, n);
    if (!map_forget(a))
        return REAL(munmap)(a, n);
    WRAPPED(OP_munmap, munmap, call_begin(OP_munmap), int, M1, (a, n), (void)0, (void)0);
}

/* With --data full the bytes of the written pages are taken first. */
static int (*real_msync)(void *, size_t, int) REAL_PLACE(msync);
WRAPPER(msync) int msync(void *a, size_t n, int f)
{
    if (UNLIKELY(g_trace == FSPROF_TDATA_FULL))
        fsprof_mapwrite_sync(a, n);
    WRAPPED(OP_msync, msync, call_begin(OP_msync), int, M1, (a, n, f), (void)0, (void)0);
}

/* ---- locks and descriptors ------------------------------------------------------------------ */

/* F_DUPFD and F_DUPFD_CLOEXEC make a descriptor of the same class. */
#define DUPED(fd, cmd, r)                                                                \
    if ((r) >= 0 && ((cmd) == F_DUPFD || (cmd) == F_DUPFD_CLOEXEC))                      \
    fsprof_fd_dup((fd), (r))

/* fcntl's third argument is an int or a pointer depending on the command;
 * passing it on as a long is how libc itself forwards it. */
#define WRAP_FCNTL(name)                                                                 \
    static int (*real_##name)(int, int, ...) REAL_PLACE(name);                           \
    WRAPPER(name) int name(int fd, int cmd, ...)                                         \
    {                                                                                    \
        va_list ap;                                                                      \
        va_start(ap, cmd);                                                               \
        long arg = va_arg(ap, long);                                                     \
        va_end(ap);                                                                      \
        int file_ = 1;                                                                   \
        WRAPPED(OP_fcntl, name, FD_CTR(fcntl, fd), int, M1, (fd, cmd, arg), (void)0,     \
                DUPED(fd, cmd, r));                                                      \
    }
WRAP_FCNTL(fcntl)
WRAP_FCNTL(fcntl64)

/* dup2 and dup3 put an open file on a number, replacing what it held: a
 * trace records the move (`compile` gives the number the open file's
 * slot), and the number gets the file's class. The number's next use is
 * described all the same (fdclass.c, fd_new). dup3's flags are its third
 * argument; dup2 has none. */
#define DUP_MOVED(fd, to, r)                                                             \
    if ((r) >= 0 && (fd) != (to))                                                        \
    fsprof_fd_dup((fd), (r))
static int (*real_dup2)(int, int) REAL_PLACE(dup2);
WRAPPER(dup2) int dup2(int fd, int to)
{
    TRACED_CALL(OP_dup2, "dup2", (fd, to, 0), call_begin(OP_dup2), int, M1, REAL(dup2)(fd, to),
                (void)0, DUP_MOVED(fd, to, r))
    TIMED_SEQ(own_begin(), call_begin(OP_dup2), int, M1, REAL(dup2)(fd, to), (void)0,
              DUP_MOVED(fd, to, r), (void)0);
}
WRAP_THEN(dup2, int, dup3, (int fd, int to, int f), (fd, to, f), M1, DUP_MOVED(fd, to, r))
WRAP_FD(flock, int, flock, (int fd, int op), (fd, op), M1, fd)

/* ---- stdio ------------------------------------------------------------------------------------ */

/* A stream's descriptor; fflush(NULL) flushes every stream: no descriptor
 * (then: a file op). */
#define FD_OF(f) ((f)->_fileno)
static inline int fd_of_any(FILE *f)
{
    return f ? f->_fileno : -1;
}
#define STREAM_OPENED(path) if (r != NULL && (path) != NULL) fsprof_fd_opened(r->_fileno, (path))
WRAP_THEN(fopen, FILE *, fopen, (const char *p, const char *m), (p, m), ISNULL, STREAM_OPENED(p))
WRAP_THEN(fopen, FILE *, fopen64, (const char *p, const char *m), (p, m), ISNULL,
          STREAM_OPENED(p))
WRAP_THEN(freopen, FILE *, freopen, (const char *p, const char *m, FILE *f), (p, m, f), ISNULL,
          STREAM_OPENED(p))
WRAP_THEN(freopen, FILE *, freopen64, (const char *p, const char *m, FILE *f), (p, m, f), ISNULL,
          STREAM_OPENED(p))
WRAP_FD(fdopen, FILE *, fdopen, (int fd, const char *m), (fd, m), ISNULL, fd)
/* The stream's descriptor is forgotten with it. */
static int (*real_fclose)(FILE *) REAL_PLACE(fclose);
WRAPPER(fclose) int fclose(FILE *f)
{
    int fd = FD_OF(f), file_ = 1;
    TRACED_SEQ(OP_fclose, fclose, FD_CTR(fclose, fd), int, r == EOF, (f), (void)0, fd_forget(fd))
    uint64_t e = own_begin();
    struct fsprof_ctr *c = FD_CTR(fclose, fd);
    fd_forget(fd);
    TIMED_SEQ(e, c, int, r == EOF, REAL(fclose)(f), (void)0, (void)0, (void)0);
}
WRAP_FD(fflush, int, fflush, (FILE * f), (f), r == EOF, fd_of_any(f))
WRAP_FD(fflush, int, fflush_unlocked, (FILE * f), (f), r == EOF, fd_of_any(f))
/* A short count is an error only if the stream says so (else: end of file). */
#define SHORT_ERR (r < n && ferror_unlocked(f))
/* Streams file sizes and seek distances at the stream level, under the
 * stream's fd: bytes asked (s * n), bytes done (count * s). */
#define STREAM f->_fileno, -1, (uint64_t)s * n, (int64_t)(r * s)
WRAP_DATA(fread, size_t, fread, (void *p, size_t s, size_t n, FILE *f), (p, s, n, f), SHORT_ERR,
          STREAM)
WRAP_DATA(fread, size_t, fread_unlocked, (void *p, size_t s, size_t n, FILE *f), (p, s, n, f),
          SHORT_ERR, STREAM)
WRAP_DATA(fread, size_t, __fread_chk, (void *p, size_t pl, size_t s, size_t n, FILE *f),
          (p, pl, s, n, f), SHORT_ERR, STREAM)
WRAP_DATA(fread, size_t, __fread_unlocked_chk,
          (void *p, size_t pl, size_t s, size_t n, FILE *f), (p, pl, s, n, f), SHORT_ERR, STREAM)
WRAP_DATA(fwrite, size_t, fwrite, (const void *p, size_t s, size_t n, FILE *f), (p, s, n, f),
          r < n, STREAM)
WRAP_DATA(fwrite, size_t, fwrite_unlocked, (const void *p, size_t s, size_t n, FILE *f),
          (p, s, n, f), r < n, STREAM)
#define NULL_ERR (r == NULL && ferror_unlocked(f))
WRAP_FD(fgets, char *, fgets, (char *b, int n, FILE *f), (b, n, f), NULL_ERR, FD_OF(f))
WRAP_FD(fgets, char *, fgets_unlocked, (char *b, int n, FILE *f), (b, n, f), NULL_ERR, FD_OF(f))
WRAP_FD(fgets, char *, __fgets_chk, (char *b, size_t bl, int n, FILE *f), (b, bl, n, f), NULL_ERR, FD_OF(f))
WRAP_FD(fgets, char *, __fgets_unlocked_chk, (char *b, size_t bl, int n, FILE *f),
        (b, bl, n, f), NULL_ERR, FD_OF(f))
WRAP_FD(fputs, int, fputs, (const char *s, FILE *f), (s, f), r == EOF, FD_OF(f))
WRAP_FD(fputs, int, fputs_unlocked, (const char *s, FILE *f), (s, f), r == EOF, FD_OF(f))
#define M1_ERR (r == -1 && ferror_unlocked(f))
WRAP_FD(getline, ssize_t, getline, (char **l, size_t *n, FILE *f), (l, n, f), M1_ERR, FD_OF(f))
WRAP_FD(getdelim, ssize_t, getdelim, (char **l, size_t *n, int d, FILE *f), (l, n, d, f), M1_ERR, FD_OF(f))
WRAP_FD(getdelim, ssize_t, __getdelim, (char **l, size_t *n, int d, FILE *f), (l, n, d, f), M1_ERR, FD_OF(f))
/* A stream's position after fseek: known for SEEK_SET, moved for SEEK_CUR
 * (if it was known), unknown for SEEK_END. */
static inline void stream_moved(FILE *f, int64_t o, int w)
{
    int fd = f->_fileno;
    struct fsprof_fd_state *st = my_fd(fd);
    if (!st)
        return;
    uint64_t p1 = st->pos1;
    fd_moved(fd, w == SEEK_SET ? o : (w == SEEK_CUR && p1) ? (int64_t)(p1 - 1) + o : -1);
}
WRAP_FD_THEN(fseek, int, fseek, (FILE * f, long o, int w), (f, o, w), M1, FD_OF(f),
          if (r == 0) stream_moved(f, o, w))
WRAP_FD_THEN(fseek, int, fseeko, (FILE * f, off_t o, int w), (f, o, w), M1, FD_OF(f),
          if (r == 0) stream_moved(f, o, w))
WRAP_FD_THEN(fseek, int, fseeko64, (FILE * f, off64_t o, int w), (f, o, w), M1, FD_OF(f),
          if (r == 0) stream_moved(f, o, w))
WRAP_FD(ftell, long, ftell, (FILE * f), (f), M1, FD_OF(f))
WRAP_FD(ftell, off_t, ftello, (FILE * f), (f), M1, FD_OF(f))
WRAP_FD(ftell, off64_t, ftello64, (FILE * f), (f), M1, FD_OF(f))

/* ---- formatted and character output ---------------------------------------------------- */

/* printf's formatted text and putc's character exist only inside libc,
 * which writes them to the stream's buffer and flushes it with a write()
 * of its own that nothing can interpose. The calls are timed like fwrite
 * (their op's last argument is the bytes they gave); when tracing, the
 * wrapper hands the trace those bytes (pre_.out) for the record's data. */

/* Room for an output call's bytes: on the stack, or mapped for a long
 * one (the shim calls no malloc). */
struct outbuf {
    char *p;
    size_t mapped;
    char small[512];
};

static char *outbuf_get(struct outbuf *b, uint64_t n)
{
    b->p = b->small;
    if (n <= sizeof b->small)
        return b->p;
    void *m = (void *)syscall(SYS_mmap, 0, (size_t)n, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return b->p = NULL;
    b->mapped = (size_t)n;
    return b->p = m;
}

static void outbuf_put(struct outbuf *b)
{
    if (b->mapped)
        syscall(SYS_munmap, b->p, b->mapped);
}

/* An output call of op `op` as wrapper `name`, counted in `ctr`; the
 * trace keeps `trargs`, whose third is the bytes given. When tracing,
 * `before` runs just before the call, and `bytes` after it (with `r`) sets
 * them in pre_ (the record's size, pre_.out, pre_.nout) using ob_. */
#define OUT_SEQ(op, name, ctr, trargs, call, failed, before, bytes)                      \
    if (UNLIKELY(g_trace)) {                                                             \
        uint64_t tra_[] = {TR_LIST trargs};                                              \
        struct fsprof_ctr *trc_ = (ctr);                                                 \
        struct fsprof_tpre pre_;                                                         \
        struct outbuf ob_;                                                               \
        ob_.mapped = 0;                                                                  \
        fsprof_trace_pre(&pre_, op, name, tra_, (int)(sizeof tra_ / sizeof *tra_));      \
        before;                                                                          \
        TIMED_SEQ(0, trc_, int, failed, call, (void)0, (void)0, do {                     \
            bytes;                                                                       \
            fsprof_trace_post(&pre_, t0_, t1_, (int64_t)r, f_);                          \
            outbuf_put(&ob_);                                                            \
        } while (0));                                                                    \
    }                                                                                    \
    TIMED_SEQ(own_begin(), ctr, int, failed, call, (void)0, (void)0, (void)0)

/* The bytes a printf-family call gave (r of them): formatted again from a
 * copy of its arguments, with errno as the call saw it (`%m`); errno as
 * the call left it after. Not with `--data none`, which keeps no bytes. A
 * `%n` stores the same count a second time. */
static void printed(struct fsprof_tpre *p, struct outbuf *b, int r, const char *fmt, va_list ap,
                    int err_before)
{
    p->a[2] = r > 0 ? (uint64_t)r : 0;
    if (r <= 0 || g_trace == FSPROF_TDATA_NONE)
        return;
    int keep = errno;
    if (outbuf_get(b, (uint64_t)r + 1)) {
        errno = err_before;
        if (vsnprintf(b->p, (size_t)r + 1, fmt, ap) == r) {
            p->out = b->p;
            p->nout = (uint64_t)r;
        }
    }
    errno = keep;
}

static int (*real_vfprintf)(FILE *, const char *, va_list);
static int (*real___vfprintf_chk)(FILE *, int, const char *, va_list);
/* The printf family on stream `f`: vfprintf, or __vfprintf_chk with
 * `flag` >= 0 (each is what the wrapped function itself calls). */
static int stream_printf(const char *name, FILE *f, int flag, const char *fmt, va_list ap)
{
    int file_ = 1, fd = FD_OF(f);
    OUT_SEQ(OP_fprintf, name, FD_CTR(fprintf, fd), (f, fmt, 0),
            flag < 0 ? REAL(vfprintf)(f, fmt, ap) : REAL(__vfprintf_chk)(f, flag, fmt, ap), r < 0,
            va_list cp_; int err_ = errno; va_copy(cp_, ap),
            printed(&pre_, &ob_, r, fmt, cp_, err_); va_end(cp_));
}

#define VA_CALL(call, last)                                                              \
    va_list ap;                                                                          \
    va_start(ap, last);                                                                  \
    int r = call;                                                                        \
    va_end(ap);                                                                          \
    return r

WRAPPER(printf) int printf(const char *fmt, ...)
{
    VA_CALL(stream_printf("printf", stdout, -1, fmt, ap), fmt);
}
WRAPPER(fprintf) int fprintf(FILE *f, const char *fmt, ...)
{
    VA_CALL(stream_printf("fprintf", f, -1, fmt, ap), fmt);
}
WRAPPER(vprintf) int vprintf(const char *fmt, va_list ap)
{
    return stream_printf("vprintf", stdout, -1, fmt, ap);
}
WRAPPER(vfprintf) int vfprintf(FILE *f, const char *fmt, va_list ap)
{
    return stream_printf("vfprintf", f, -1, fmt, ap);
}
WRAPPER(__printf_chk) int __printf_chk(int flag, const char *fmt, ...)
{
    VA_CALL(stream_printf("__printf_chk", stdout, flag < 0 ? 0 : flag, fmt, ap), fmt);
}
WRAPPER(__fprintf_chk) int __fprintf_chk(FILE *f, int flag, const char *fmt, ...)
{
    VA_CALL(stream_printf("__fprintf_chk", f, flag < 0 ? 0 : flag, fmt, ap), fmt);
}
WRAPPER(__vprintf_chk) int __vprintf_chk(int flag, const char *fmt, va_list ap)
{
    return stream_printf("__vprintf_chk", stdout, flag < 0 ? 0 : flag, fmt, ap);
}
WRAPPER(__vfprintf_chk) int __vfprintf_chk(FILE *f, int flag, const char *fmt, va_list ap)
{
    return stream_printf("__vfprintf_chk", f, flag < 0 ? 0 : flag, fmt, ap);
}

static int (*real_vdprintf)(int, const char *, va_list) REAL_PLACE(vdprintf);
static int (*real___vdprintf_chk)(int, int, const char *, va_list) REAL_PLACE(__vdprintf_chk);
/* dprintf's family on descriptor `fd`, as stream_printf. */
static int fd_printf(const char *name, int fd, int flag, const char *fmt, va_list ap)
{
    int file_ = 1;
    OUT_SEQ(OP_dprintf, name, FD_CTR(dprintf, fd), (fd, fmt, 0),
            flag < 0 ? REAL(vdprintf)(fd, fmt, ap) : REAL(__vdprintf_chk)(fd, flag, fmt, ap),
            r < 0, va_list cp_; int err_ = errno; va_copy(cp_, ap),
            printed(&pre_, &ob_, r, fmt, cp_, err_); va_end(cp_));
}

WRAPPER(dprintf) int dprintf(int fd, const char *fmt, ...)
{
    VA_CALL(fd_printf("dprintf", fd, -1, fmt, ap), fmt);
}
WRAPPER(vdprintf) int vdprintf(int fd, const char *fmt, va_list ap)
{
    return fd_printf("vdprintf", fd, -1, fmt, ap);
}
WRAPPER(__dprintf_chk) int __dprintf_chk(int fd, int flag, const char *fmt, ...)
{
    VA_CALL(fd_printf("__dprintf_chk", fd, flag < 0 ? 0 : flag, fmt, ap), fmt);
}
WRAPPER(__vdprintf_chk) int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap)
{
    return fd_printf("__vdprintf_chk", fd, flag < 0 ? 0 : flag, fmt, ap);
}

/* puts gave stdout its string and a newline. */
static void put_line(struct fsprof_tpre *p, struct outbuf *b, int r, const char *s)
{
    if (r == EOF)
        return;
    size_t n = strlen(s) + 1;
    p->a[2] = n;
    if (g_trace == FSPROF_TDATA_NONE || !outbuf_get(b, n))
        return;
    memcpy(b->p, s, n - 1);
    b->p[n - 1] = '\n';
    p->out = b->p;
    p->nout = n;
}

static int (*real_puts)(const char *) REAL_PLACE(puts);
WRAPPER(puts) int puts(const char *s)
{
    FILE *f = stdout;
    int file_ = 1, fd = FD_OF(f);
    OUT_SEQ(OP_puts, "puts", FD_CTR(puts, fd), (s, f, 0), REAL(puts)(s), r == EOF, (void)0,
            put_line(&pre_, &ob_, r, s));
}

/* putc and its kin gave their stream one byte; __overflow is the call
 * glibc's putc_unlocked macro makes when the buffer is full (with EOF: a
 * flush, no byte). */
static inline void put_char(struct fsprof_tpre *p, struct outbuf *b, int r, int c)
{
    if (r == EOF || c == EOF)
        return;
    b->small[0] = (char)c;
    p->a[2] = 1;
    p->out = b->small;
    p->nout = 1;
}

#define WRAP_PUTC(name, params, args, c, f)                                              \
    static int(*real_##name) params REAL_PLACE(name);                                    \
    WRAPPER(name) int name params                                                        \
    {                                                                                    \
        FILE *f_of_ = (f);                                                               \
        int file_ = 1, fd_ = FD_OF(f_of_);                                               \
        OUT_SEQ(OP_fputc, #name, FD_CTR(fputc, fd_), ((c), f_of_, 0), REAL(name) args,   \
                r == EOF, (void)0, put_char(&pre_, &ob_, r, (c)));                       \
    }
WRAP_PUTC(fputc, (int c, FILE *f), (c, f), c, f)
WRAP_PUTC(fputc_unlocked, (int c, FILE *f), (c, f), c, f)
WRAP_PUTC(putc, (int c, FILE *f), (c, f), c, f)
WRAP_PUTC(_IO_putc, (int c, FILE *f), (c, f), c, f)
WRAP_PUTC(putc_unlocked, (int c, FILE *f), (c, f), c, f)
WRAP_PUTC(putchar, (int c), (c), c, stdout)
WRAP_PUTC(putchar_unlocked, (int c), (c), c, stdout)
WRAP_PUTC(__overflow, (FILE * f, int c), (f, c), c, f)

/* What a shell's child, xargs's or make's calls between fork and exec:
 * redirections, closing the other ends of pipes, flushing stdio (record.h,
 * g_before_first_fork). */
static void before_first_fork(void)
{
    (void)REAL(open);
    (void)REAL(open64);
    (void)REAL(openat);
    (void)REAL(close);
    (void)REAL(fcntl);
    (void)REAL(fflush);
    (void)REAL(read);
    (void)REAL(write);
    (void)REAL(chdir);
    (void)REAL(dup2);
    (void)REAL(dup3);
}

__attribute__((constructor)) static void set_fork_hook(void)
{
    g_before_first_fork[FSPROF_FORK_HOOK_WRAPPERS] = before_first_fork;
}
