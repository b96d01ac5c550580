/* The real function behind a wrapper: what dlsym(RTLD_NEXT, name) would
 * return, looked up in the loaded objects' GNU hash tables directly.
 *
 * Why by hand: a short process's wrappers each ask for their real
 * function once, and dlsym's path around the lookup (its lock, its error
 * catching, the search for the caller's object) is most of that cost: a
 * fresh `cat` finds its eight real functions in 1.83 us this way, 3.95 us
 * with dlsym (bench/floor_parts.py --resolve-cost), and a forked child
 * that finds its own faults in less of the dynamic linker. No library
 * does this lookup; it is glibc's own (elf/dl-lookup.c, do_lookup_x and
 * check_match, for a dlsym: the default version, every symbol type and
 * binding that dlsym accepts).
 *
 * Only where its answer is certain to be dlsym's: the shim loaded at
 * start (preloaded), the objects after it in load order up to libc (any
 * later preload, the program's libraries), which the loader mapped at
 * start in the order it searches them; a plain function, global or weak,
 * at most one default version, in objects with a GNU hash table. Anything
 * else (an audit module, LD_DYNAMIC_WEAK, an IFUNC or unique symbol, a
 * name libc lacks at its default version, an object without a GNU hash
 * table) returns NULL and the caller asks dlsym, whose answer this never
 * replaces with another. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "nextsym.h"

/* Declared here, not from <stdlib.h> and <sys/auxv.h>: bench/shim_floor.c
 * includes this file and no header that declares a wrapped function. */
extern unsigned long getauxval(unsigned long type);
extern long syscall(long number, ...);
extern void abort(void);

enum { NS_ABSENT, NS_FOUND, NS_UNSURE };

/* The objects searched, from the one after the shim to libc; NULL when
 * the loader does not bind as this lookup assumes. Set at start, before
 * the program can change its environment or load anything. */
static const struct link_map *g_first, *g_libc;

FSPROF_COMMON_TEXT static int names_equal(const char *a, const char *b)
{
    while (*a != '\0' && *a == *b)
        a++, b++;
    return *a == *b;
}

/* Whether l is the C library, the last object this lookup searches. */
static int is_libc(const struct link_map *l)
{
    const char *base = l->l_name;
    if (base == NULL)
        return 0;
    for (const char *c = base; *c != '\0'; c++)
        if (*c == '/')
            base = c + 1;
    return names_equal(base, "libc.so.6");
}

__attribute__((constructor)) static void nextsym_init(void)
{
    /* An auditor sees (and may change) every dlsym binding; with
     * LD_DYNAMIC_WEAK a weak definition yields to a later global one. */
    if (fsprof_env("LD_AUDIT") != NULL || fsprof_env("LD_DYNAMIC_WEAK") != NULL)
        return;
    const struct link_map *l = _r_debug.r_map;
    if (l == NULL || l->l_ld == NULL)
        return;
    for (const ElfW(Dyn) *d = l->l_ld; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_AUDIT || d->d_tag == DT_DEPAUDIT)
            return;
    while (l != NULL && l->l_ld != _DYNAMIC)
        l = l->l_next;
    if (l == NULL)
        return; /* not in the first namespace's list: dlopen'ed elsewhere */
    const struct link_map *first = l->l_next;
    uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
    for (l = first; l != NULL; l = l->l_next) {
        if (vdso != 0 && l->l_addr == vdso)
            return; /* not where the loader puts it: unsure of the order */
        if (is_libc(l)) {
            g_first = first;
            g_libc = l;
            return;
        }
    }
}

/* A dynamic-section address: glibc has relocated them in place on x86-64;
 * an offset (below the load address) is taken as one. */
FSPROF_COMMON_TEXT static uintptr_t dyn_addr(const struct link_map *l, uintptr_t p)
{
    return p < l->l_addr ? p + l->l_addr : p;
}

/* Whether dlsym would take `s`, a symbol named as asked, in its object:
 * NS_FOUND, NS_ABSENT (it skips it), or NS_UNSURE. */
FSPROF_COMMON_TEXT static int usable(const ElfW(Sym) *s)
{
    int type = ELF64_ST_TYPE(s->st_info);
    if (s->st_value == 0 && s->st_shndx != SHN_ABS && type != STT_TLS)
        return NS_ABSENT; /* check_match: no value */
    if (type != STT_FUNC || s->st_shndx == SHN_UNDEF || s->st_shndx == SHN_ABS)
        return NS_UNSURE; /* IFUNC, data, TLS, a PLT address */
    int vis = ELF64_ST_VISIBILITY(s->st_other);
    int bind = ELF64_ST_BIND(s->st_info);
    if (vis == STV_HIDDEN || vis == STV_INTERNAL || (bind != STB_GLOBAL && bind != STB_WEAK))
        return NS_UNSURE;
    return NS_FOUND;
}

/* `name` (GNU hash h) in object l. */
FSPROF_COMMON_TEXT static int lookup_in(const struct link_map *l, const char *name, uint32_t h, void **out)
{
    const uint32_t *gh = NULL;
    const ElfW(Sym) *sym = NULL;
    const char *str = NULL;
    const ElfW(Half) *ver = NULL;
    if (l->l_ld == NULL)
        return NS_UNSURE;
    for (const ElfW(Dyn) *d = l->l_ld; d->d_tag != DT_NULL; d++) {
        uintptr_t p = dyn_addr(l, d->d_un.d_ptr);
        if (d->d_tag == DT_GNU_HASH)
            gh = (const uint32_t *)p;
        else if (d->d_tag == DT_SYMTAB)
            sym = (const ElfW(Sym) *)p;
        else if (d->d_tag == DT_STRTAB)
            str = (const char *)p;
        else if (d->d_tag == DT_VERSYM)
            ver = (const ElfW(Half) *)p;
    }
    if (gh == NULL || sym == NULL || str == NULL)
        return NS_UNSURE;
    uint32_t nbuckets = gh[0], symbias = gh[1], words = gh[2], shift = gh[3];
    if (nbuckets == 0 || words == 0 || (words & (words - 1)) != 0)
        return NS_UNSURE;
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gh + 4);
    const unsigned bits = 8 * sizeof(ElfW(Addr));
    ElfW(Addr) w = bloom[(h / bits) & (words - 1)];
    if (((w >> (h % bits)) & (w >> ((h >> shift) % bits)) & 1) == 0)
        return NS_ABSENT;
    const uint32_t *buckets = (const uint32_t *)(bloom + words);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t i = buckets[h % nbuckets];
    if (i == 0)
        return NS_ABSENT;
    if (i < symbias)
        return NS_UNSURE;
    /* dlsym takes the first unversioned match at once; a symbol of a
     * non-hidden version only if it is the object's one such match. */
    const ElfW(Sym) *versioned = NULL;
    for (;; i++) {
        uint32_t c = chain[i - symbias];
        if (((c ^ h) >> 1) == 0 && names_equal(str + sym[i].st_name, name)) {
            int u = usable(&sym[i]);
            if (u == NS_UNSURE)
                return NS_UNSURE;
            if (u == NS_FOUND) {
                if (ver == NULL || (ver[i] & 0x7fff) < 2) {
                    *out = (void *)(l->l_addr + sym[i].st_value);
                    return NS_FOUND;
                }
                if ((ver[i] & 0x8000) == 0) {
                    if (versioned != NULL)
                        return NS_UNSURE;
                    versioned = &sym[i];
                }
            }
        }
        if (c & 1)
            break;
    }
    if (versioned == NULL)
        return NS_ABSENT;
    *out = (void *)(l->l_addr + versioned->st_value);
    return NS_FOUND;
}

FSPROF_COMMON_TEXT __attribute__((visibility("hidden"))) void *fsprof_next_sym(const char *name)
{
    if (g_libc == NULL)
        return NULL;
    uint32_t h = 5381;
    for (const unsigned char *c = (const unsigned char *)name; *c != '\0'; c++)
        h = h * 33 + *c;
    for (const struct link_map *l = g_first;; l = l->l_next) {
        void *p = NULL;
        int r = lookup_in(l, name, h, &p);
        if (r == NS_FOUND)
            return p;
        if (r == NS_UNSURE || l == g_libc)
            return NULL;
    }
}

FSPROF_COMMON_TEXT __attribute__((visibility("hidden"), noinline)) void *fsprof_resolve(const char *name)
{
    void *p = fsprof_next_sym(name);
    if (p == NULL)
        p = dlsym(RTLD_NEXT, name);
    /* Symbols that only exist as old versioned compat symbols in current
     * glibc (`__xstat@GLIBC_2.2.5`) are invisible to dlsym; ask for them by
     * version. */
    static const char *const versions[] = {"GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
    for (unsigned i = 0; p == NULL && i < sizeof versions / sizeof *versions; i++)
        p = dlvsym(RTLD_NEXT, name, versions[i]);
    if (p == NULL) {
        /* Only reachable if the program calls a function no later library
         * defines, which the dynamic linker would already have refused. */
        static const char msg[] = "fsprof shim: cannot find the real libc function\n";
        (void)!syscall(1 /* SYS_write */, 2, msg, sizeof msg - 1);
        abort();
    }
    return p;
}
