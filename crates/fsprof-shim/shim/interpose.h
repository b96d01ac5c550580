/* Finding the real libc function behind an interposed one. Shared by every
 * file that defines wrappers. */
#ifndef FSPROF_INTERPOSE_H
#define FSPROF_INTERPOSE_H

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "record.h"

/* Symbols that only exist as old versioned compat symbols in current glibc
 * (`__xstat@GLIBC_2.2.5`) are invisible to dlsym; ask for them by version. */
static inline void *resolve(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    static const char *const versions[] = {"GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
    for (unsigned i = 0; !p && i < sizeof versions / sizeof *versions; i++)
        p = dlvsym(RTLD_NEXT, name, versions[i]);
    if (!p) {
        /* Only reachable if the program calls a function no later library
         * defines, which the dynamic linker would already have refused. */
        static const char msg[] = "fsprof shim: cannot find the real libc function\n";
        (void)!syscall(SYS_write, 2, msg, sizeof msg - 1);
        abort();
    }
    return p;
}

static inline void *real_fn(void **slot, const char *name)
{
    void *p = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (UNLIKELY(p == NULL)) {
        p = resolve(name);
        __atomic_store_n(slot, p, __ATOMIC_RELAXED);
    }
    return p;
}

#define REAL(name) ((__typeof__(real_##name))real_fn((void **)&real_##name, #name))

#endif
