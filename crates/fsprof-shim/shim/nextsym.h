/* The real function behind a wrapper (nextsym.c). */
#ifndef FSPROF_NEXTSYM_H
#define FSPROF_NEXTSYM_H

/* What dlsym(RTLD_NEXT, name) returns when called from the shim, or NULL
 * when this lookup cannot be sure of it: the caller then asks dlsym. */
__attribute__((visibility("hidden"))) void *fsprof_next_sym(const char *name);

/* The real function `name`: fsprof_next_sym's, else dlsym's, else an old
 * compat version's; aborts the process when there is none, which the
 * dynamic linker would have refused to start. One function out of line,
 * not a copy at each of the wrappers' 400 call sites (32 KiB of text). */
__attribute__((visibility("hidden"), noinline)) void *fsprof_resolve(const char *name);

#endif
