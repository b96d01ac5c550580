/* The shim's set-up helpers (util.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

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

HIDDEN void fsprof_copy(void *dst, const void *src, size_t n)
{
    char *d = dst;
    const char *s = src;
    for (size_t i = 0; i < n; i++) {
        d[i] = s[i];
        /* Opaque to the compiler, which would make the loop a memcpy call. */
        __asm__("" : "+r"(d));
    }
}

HIDDEN int fsprof_parse_u64(const char **s, uint64_t *out)
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

HIDDEN uint64_t fsprof_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

HIDDEN long fsprof_reserve(long fd, uint64_t off, uint64_t len)
{
    if (syscall(SYS_fallocate, fd, 0, (long)off, (long)len) == 0)
        return 0;
    if (errno != EOPNOTSUPP)
        return -errno;
    static const char zeros[4096];
    for (uint64_t at = off; at < off + len;) {
        uint64_t n = off + len - at < sizeof zeros ? off + len - at : sizeof zeros;
        long w = syscall(SYS_pwrite64, fd, zeros, n, (long)at);
        if (w <= 0)
            return w < 0 ? -errno : -ENOSPC;
        at += (uint64_t)w;
    }
    return 0;
}
