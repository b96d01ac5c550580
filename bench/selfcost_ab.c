/* What the shim adds per call, measured inside one process: blocks of calls
 * through the program's own symbols (the shim's wrappers when it is
 * preloaded) alternate with blocks of the same calls through libc's
 * functions found with dlsym on libc itself (never the shim). Both paths
 * are indirect calls, so without the shim the difference is zero; with it,
 * the difference of each adjacent pair of blocks is the shim's cost, free
 * of what differs between two processes (placement, frequency, the other
 * processes of a loaded machine at another moment).
 *
 * usage: selfcost_ab pread|fstat|printf BLOCKS CALLS_PER_BLOCK
 *        (printf: fprintf of a number and a newline to a stream on
 *        /dev/null, buffered as to a file)
 *        selfcost_ab files BLOCKS LISTFILE   (each block: open, fstat, read
 *                                            to the end, close every file named
 *                                            in LISTFILE, one per line)
 *        selfcost_ab scan BLOCKS LISTFILE    (files, and each buffer read is
 *                                            searched for a string, as grep does:
 *                                            the program's own work between calls)
 * prints: calls_per_block_through_each_path, then per pair the added ns per
 * call, one a line, in the order measured (the caller takes medians). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct path_fns {
    ssize_t (*pread)(int, void *, size_t, off_t);
    ssize_t (*read)(int, void *, size_t);
    int (*openat)(int, const char *, int, ...);
    int (*fstat)(int, struct stat *);
    int (*close)(int);
    int (*fprintf)(FILE *, const char *, ...);
};

/* This thread's CPU time: a block during which the machine's other work
 * preempted the program is charged only for what the program itself ran,
 * not for the wait. */
static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *libc_fn(void *libc, const char *name)
{
    void *p = dlsym(libc, name);
    if (!p) {
        fprintf(stderr, "selfcost_ab: libc has no %s\n", name);
        exit(3);
    }
    return p;
}

static int g_fstat, g_scan, g_printf;
static FILE *g_out;
static long g_found;
static char **g_files;
static long g_nfiles;
static char g_buf[98304]; /* grep's read size */

/* One block; returns the calls it made. */
static long block(const struct path_fns *f, int fd, long calls)
{
    if (g_files == NULL) {
        struct stat st;
        if (g_fstat)
            for (long i = 0; i < calls; i++)
                (void)f->fstat(fd, &st);
        else if (g_printf)
            for (long i = 0; i < calls; i++)
                (void)f->fprintf(g_out, "%ld\n", i);
        else
            for (long i = 0; i < calls; i++)
                (void)f->pread(fd, g_buf, 1, 0);
        return calls;
    }
    long n = 0;
    for (long i = 0; i < g_nfiles; i++) {
        int d = f->openat(AT_FDCWD, g_files[i], O_RDONLY | O_NOCTTY | O_CLOEXEC);
        n++;
        if (d < 0)
            continue;
        struct stat st;
        (void)f->fstat(d, &st);
        n++;
        ssize_t got;
        while ((got = f->read(d, g_buf, sizeof g_buf)) > 0) {
            n++;
            if (g_scan)
                g_found += memmem(g_buf, (size_t)got, "fsprof_bench_pattern", 20) != NULL;
        }
        n += 2; /* the read that returned 0, and close */
        f->close(d);
    }
    return n;
}

static void read_list(const char *path)
{
    FILE *l = fopen(path, "r");
    if (!l) {
        perror(path);
        exit(3);
    }
    char line[4096];
    long cap = 0;
    while (fgets(line, sizeof line, l)) {
        line[strcspn(line, "\n")] = 0;
        if (g_nfiles == cap) {
            cap = cap ? 2 * cap : 1024;
            g_files = realloc(g_files, cap * sizeof *g_files);
        }
        g_files[g_nfiles++] = strdup(line);
    }
    fclose(l);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr,
                "usage: selfcost_ab pread|fstat|printf BLOCKS CALLS | files|scan BLOCKS LISTFILE\n");
        return 2;
    }
    long blocks = atol(argv[2]), calls = 0;
    g_scan = strcmp(argv[1], "scan") == 0;
    if (g_scan || strcmp(argv[1], "files") == 0)
        read_list(argv[3]);
    else
        calls = atol(argv[3]);
    g_fstat = strcmp(argv[1], "fstat") == 0;
    g_printf = strcmp(argv[1], "printf") == 0;
    g_out = fopen("/dev/null", "w");
    if (!g_out)
        return 3;
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!libc) {
        fprintf(stderr, "selfcost_ab: %s\n", dlerror());
        return 3;
    }
    /* Through the program's symbols: the shim's wrappers when preloaded. */
    const struct path_fns via_symbols = {pread, read, openat, fstat, close, fprintf};
    const struct path_fns via_libc = {
        libc_fn(libc, "pread"), libc_fn(libc, "read"),   libc_fn(libc, "openat"),
        libc_fn(libc, "fstat"), libc_fn(libc, "close"),  libc_fn(libc, "fprintf"),
    };
    int fd = open("/etc/hostname", O_RDONLY);
    if (fd < 0)
        return 3;
    /* Warm-up: page cache, the shim's slot and counters, symbol look-ups. */
    for (int i = 0; i < 3; i++) {
        block(&via_symbols, fd, calls / 4 + 1);
        block(&via_libc, fd, calls / 4 + 1);
    }
    double *added = malloc(blocks * sizeof *added);
    long per_block = 0;
    for (long b = 0; b < blocks; b++) {
        /* ABBA order so that a drift within a pair cancels over two pairs. */
        const struct path_fns *first = b & 1 ? &via_libc : &via_symbols;
        const struct path_fns *second = b & 1 ? &via_symbols : &via_libc;
        double t0 = now_ns();
        long n = block(first, fd, calls);
        double t1 = now_ns();
        block(second, fd, calls);
        double t2 = now_ns();
        double sym = b & 1 ? t2 - t1 : t1 - t0, lib = b & 1 ? t1 - t0 : t2 - t1;
        added[b] = (sym - lib) / n;
        per_block = n;
    }
    printf("%ld\n", per_block);
    for (long b = 0; b < blocks; b++)
        printf("%.3f\n", added[b]);
    if (g_found < 0) /* keeps the search */
        return 5;
    return 0;
}
