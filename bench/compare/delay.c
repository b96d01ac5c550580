/* A slowdown injected into one libc call, for bench/compare_rates.py.
 *
 * Preloaded after fsprof's shim (`LD_PRELOAD=delay.so fsprof run ...`:
 * fsprof puts its shim first), so the shim's wrapper reaches this one
 * through RTLD_NEXT and times the call with the delay inside it.
 *
 * FSPROF_DELAY_OP=NAME names the call (as fsprof names it), FSPROF_DELAY_FACTOR=F (default 2)
 * how much longer it takes: each call is made, timed, and followed by a
 * spin until F times its own duration has passed. Every other wrapped call
 * (and every call when FSPROF_DELAY_OP is unset: the baseline runs preload
 * this library too, so that the two sides differ by the delay alone)
 * passes straight through.
 *
 * The wrappers take and pass six integer arguments: on x86-64 and aarch64
 * every wrapped call's arguments are integers or pointers in registers, so
 * extra ones are ignored, and the result comes back in the same register
 * whatever its width.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef long (*fn6)(long, long, long, long, long, long);

static double k = 2.0;

__attribute__((constructor(101))) static void read_factor(void) {
    const char *f = getenv("FSPROF_DELAY_FACTOR");
    if (f)
        k = atof(f);
}

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int chosen(const char *name) {
    const char *op = getenv("FSPROF_DELAY_OP");
    return op && strcmp(op, name) == 0;
}

/* `name` filed under fsprof's op `op` (the LFS `64` variants and the
 * `__xstat` kin fold into their base call, as the shim files them). The
 * real function and whether to delay are settled before main (see
 * `settle`), so that a process making one call (a short-lived `head`)
 * pays no dlsym inside it, with or without a delay. */
#define WRAP_AS(op, name)                                                      \
    static fn6 real_##name;                                                    \
    static int on_##name;                                                      \
    __attribute__((constructor)) static void settle_##name(void) {             \
        real_##name = (fn6)dlsym(RTLD_NEXT, #name);                            \
        on_##name = chosen(#op);                                               \
    }                                                                          \
    long name(long a, long b, long c, long d, long e, long f) {                \
        if (!real_##name)                                                      \
            settle_##name();                                                   \
        if (!on_##name)                                                        \
            return real_##name(a, b, c, d, e, f);                              \
        long long t0 = now_ns();                                               \
        long r = real_##name(a, b, c, d, e, f);                                \
        long long end = t0 + (long long)((now_ns() - t0) * k);                 \
        while (now_ns() < end)                                                 \
            ;                                                                  \
        return r;                                                              \
    }

#define WRAP(name) WRAP_AS(name, name)
#define WRAP64(name) WRAP_AS(name, name) WRAP_AS(name, name##64)

WRAP64(open)
WRAP64(openat)
WRAP(close)
WRAP(read)
WRAP(write)
WRAP64(fstat)
WRAP_AS(fstat, __fxstat)
WRAP_AS(fstat, __fxstat64)
WRAP64(stat)
WRAP_AS(stat, __xstat)
WRAP_AS(stat, __xstat64)
WRAP64(lstat)
WRAP_AS(lstat, __lxstat)
WRAP_AS(lstat, __lxstat64)
WRAP64(fstatat)
WRAP_AS(fstatat, __fxstatat)
WRAP_AS(fstatat, __fxstatat64)
WRAP(statx)
WRAP64(posix_fadvise)
WRAP64(readdir)
WRAP(opendir)
WRAP(fdopendir)
WRAP(closedir)
WRAP64(lseek)
WRAP64(fcntl)
WRAP(access)
WRAP(faccessat)
WRAP(readlink)
WRAP(getxattr)
WRAP(lgetxattr)
WRAP(fgetxattr)
WRAP64(pread)
