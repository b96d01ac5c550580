/* The time a fresh process takes to find the real functions of the eight
 * wrappers a `cat` calls (bench/floor_parts.py --resolve-cost): preloaded
 * into a `cat`, its constructor finds them with the shim's own lookup
 * (RC_MODE=own, shim/nextsym.c) or with dlsym(RTLD_NEXT) (RC_MODE=dlsym),
 * cold, as a wrapper's first call does, and prints the TSC ticks taken. */
#define _GNU_SOURCE
#include "nextsym.c"

extern int dprintf(int fd, const char *fmt, ...);

static const char *const names[] = {"open",  "fstat", "posix_fadvise", "read",
                                    "write", "close", "fflush",        "fclose"};

/* After nextsym.c's constructor, which is defined before it. */
__attribute__((constructor)) static void resolve_cost(void)
{
    const char *mode = getenv("RC_MODE");
    if (mode == NULL)
        return;
    int own = mode[0] == 'o';
    uintptr_t seen = 0;
    uint64_t t0 = __builtin_ia32_rdtsc();
    for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
        seen ^= (uintptr_t)(own ? fsprof_next_sym(names[i]) : dlsym(RTLD_NEXT, names[i]));
    uint64_t t1 = __builtin_ia32_rdtsc();
    dprintf(2, "%llu %d\n", (unsigned long long)(t1 - t0), seen != 0);
}
