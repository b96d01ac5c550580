/* What each descriptor is: a file, or a pipe, socket, device or other
 * kernel object whose reads and writes are not file-system I/O (a `read`
 * that waits on a pipe for a producer says nothing about the file system).
 *
 * The class is set when the descriptor is created through a call the shim
 * sees (open -> file, pipe -> pipe, socket -> socket, dup -> the class of
 * the original), forgotten when it is closed, and otherwise found with one
 * fstat the first time a call uses it (inherited descriptors such as a
 * piped stdin, or ones libc opened internally). One byte per descriptor,
 * per process: no system call on the hot path. Classifying from the
 * program's own first fstat instead (one system call fewer for `cat`'s
 * stdout) made every fstat's wrapper 15 ns slower: tried and reverted in
 * the eleventh session (docs/benchmarks/history.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "interpose.h"
#include "trace.h"

HIDDEN uint8_t g_fdclass[FSPROF_FD_CLASSES_MAX] BIG_BSS;

static uint32_t class_of_mode(uint32_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
    case S_IFDIR:
    case S_IFBLK:
    case S_IFLNK:
        return FSPROF_FD_FILE;
    case S_IFIFO:
        return FSPROF_FD_PIPE;
    case S_IFSOCK:
        return FSPROF_FD_SOCKET;
    case S_IFCHR:
        return FSPROF_FD_DEVICE;
    default:
        return FSPROF_FD_OTHER; /* anonymous inodes: eventfd, epoll, io_uring ... */
    }
}

HIDDEN uint32_t fsprof_fd_classify(int fd)
{
    int saved_errno = errno;
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0) {
        /* Not open: the call will fail; nothing to remember. */
        errno = saved_errno;
        return FSPROF_FD_FILE;
    }
    uint32_t c = class_of_mode(st.st_mode);
    /* Only if still unknown: a close and a new open on another thread may
     * have given the number a class of its own meanwhile. */
    uint8_t expect = FSPROF_FD_UNKNOWN;
    __atomic_compare_exchange_n(&g_fdclass[fd], &expect, (uint8_t)c, 0, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
    errno = saved_errno;
    return c;
}

static uint32_t known_class(int fd)
{
    if ((unsigned)fd >= FSPROF_FD_CLASSES_MAX)
        return FSPROF_FD_UNKNOWN;
    return __atomic_load_n(&g_fdclass[fd], __ATOMIC_RELAXED);
}

/* A new descriptor number replaces whatever the number was before. */
static void fd_new(int fd, uint32_t c)
{
    if (fd < 0)
        return;
    fd_forget(fd);
    fd_set_class(fd, c);
    /* dup2, pipe, socket ... are not traced: a trace records such a number
     * at its first use, as it does an inherited one. */
    if (UNLIKELY(g_trace))
        fsprof_trace_fd_known(fd, 0);
}

/* Creators the shim does not time (they are not file-system operations):
 * forwarded unchanged, the new descriptors classified. */
#define CREATOR(type, name, params, args, cls)                                           \
    static type(*real_##name) params REAL_PLACE(name);                                   \
    WRAPPER(name) type name params                                                       \
    {                                                                                    \
        type r = REAL(name) args;                                                        \
        fd_new((int)r, cls);                                                             \
        return r;                                                                        \
    }

CREATOR(int, socket, (int d, int t, int p), (d, t, p), FSPROF_FD_SOCKET)
CREATOR(int, accept, (int s, struct sockaddr *a, socklen_t *l), (s, a, l), FSPROF_FD_SOCKET)
CREATOR(int, accept4, (int s, struct sockaddr *a, socklen_t *l, int f), (s, a, l, f),
        FSPROF_FD_SOCKET)
CREATOR(int, eventfd, (unsigned v, int f), (v, f), FSPROF_FD_OTHER)
CREATOR(int, epoll_create, (int n), (n), FSPROF_FD_OTHER)
CREATOR(int, epoll_create1, (int f), (f), FSPROF_FD_OTHER)
CREATOR(int, timerfd_create, (int c, int f), (c, f), FSPROF_FD_OTHER)
CREATOR(int, inotify_init, (void), (), FSPROF_FD_OTHER)
CREATOR(int, inotify_init1, (int f), (f), FSPROF_FD_OTHER)
CREATOR(int, memfd_create, (const char *n, unsigned f), (n, f), FSPROF_FD_FILE)

/* signalfd may reuse an existing descriptor (fd != -1). */
CREATOR(int, signalfd, (int fd, const sigset_t *m, int f), (fd, m, f), FSPROF_FD_OTHER)

#define PAIR_CREATOR(name, params, args, fds, cls)                                       \
    static int(*real_##name) params REAL_PLACE(name);                                    \
    WRAPPER(name) int name params                                                        \
    {                                                                                    \
        int r = REAL(name) args;                                                         \
        if (r == 0) {                                                                    \
            fd_new(fds[0], cls);                                                         \
            fd_new(fds[1], cls);                                                         \
        }                                                                                \
        return r;                                                                        \
    }
PAIR_CREATOR(pipe, (int p[2]), (p), p, FSPROF_FD_PIPE)
PAIR_CREATOR(pipe2, (int p[2], int f), (p, f), p, FSPROF_FD_PIPE)
PAIR_CREATOR(socketpair, (int d, int t, int pr, int sv[2]), (d, t, pr, sv), sv, FSPROF_FD_SOCKET)

static int (*real_dup)(int) REAL_PLACE(dup);
WRAPPER(dup) int dup(int fd)
{
    uint32_t c = known_class(fd);
    int r = REAL(dup)(fd);
    fd_new(r, c);
    return r;
}

/* fcntl's F_DUPFD and F_DUPFD_CLOEXEC, dup2 and dup3 (called by their
 * wrappers). */
HIDDEN void fsprof_fd_dup(int from, int to)
{
    fd_new(to, known_class(from));
}

/* open, openat, creat, fopen: a file, except under /dev/, where a name
 * usually means a device (/dev/null, /dev/tty) and one fstat on first use
 * tells. */
HIDDEN void fsprof_fd_opened(int fd, const char *path)
{
    int dev = path && path[0] == '/' && path[1] == 'd' && path[2] == 'e' && path[3] == 'v' &&
              path[4] == '/';
    /* /dev/null, the target of every `>/dev/null`, is the null device. */
    int null = dev && path[5] == 'n' && path[6] == 'u' && path[7] == 'l' && path[8] == 'l' &&
               path[9] == 0;
    fd_new(fd, null ? FSPROF_FD_DEVICE : dev ? FSPROF_FD_UNKNOWN : FSPROF_FD_FILE);
}
