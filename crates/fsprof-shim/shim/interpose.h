/* Finding the real libc function behind an interposed one. Shared by every
 * file that defines wrappers. */
#ifndef FSPROF_INTERPOSE_H
#define FSPROF_INTERPOSE_H

#include "nextsym.h"
#include "record.h"

static inline void *real_fn(void **slot, const char *name)
{
    void *p = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (UNLIKELY(p == NULL)) {
        p = fsprof_resolve(name);
        __atomic_store_n(slot, p, __ATOMIC_RELAXED);
    }
    return p;
}

#define REAL(name) ((__typeof__(real_##name))real_fn((void **)&real_##name, #name))

#endif
