/* The real function behind a wrapper (nextsym.c). */
#ifndef FSPROF_NEXTSYM_H
#define FSPROF_NEXTSYM_H

/* What dlsym(RTLD_NEXT, name) returns when called from the shim, or NULL
 * when this lookup cannot be sure of it: the caller then asks dlsym. */
__attribute__((visibility("hidden"))) void *fsprof_next_sym(const char *name);

extern char **environ;

/* getenv(name), read from `environ` here: getenv would be one more libc
 * symbol for the loader to bind in every new image (~1 us), and every
 * process asks before the program can change its environment. Inlined
 * where it is asked (a constructor each), so that no function of its own
 * lies among the wrappers (shim/layout.ld). */
static inline __attribute__((always_inline)) const char *fsprof_env(const char *name)
{
    char **e = environ;
    if (e == 0)
        return 0;
    for (; *e != 0; e++) {
        const char *a = name, *b = *e;
        while (*a != '\0' && *a == *b)
            a++, b++;
        if (*a == '\0' && *b == '=')
            return b + 1;
    }
    return 0;
}

/* The real function `name`: fsprof_next_sym's, else dlsym's, else an old
 * compat version's; aborts the process when there is none, which the
 * dynamic linker would have refused to start. One function out of line,
 * not a copy at each of the wrappers' 400 call sites (32 KiB of text). */
__attribute__((visibility("hidden"), noinline)) void *fsprof_resolve(const char *name);

#endif
