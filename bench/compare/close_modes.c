/* Why `cat`'s close takes ~1 us in most runs and ~400 ns in a few
 * (docs/benchmarks/analysis.md, "the cause of read's single-run alarms").
 *
 * Does what `cat FILE...` does per file (open, fstat, fadvise, a 136 KiB
 * buffer, read to the end, write to /dev/null, free the buffer, close),
 * with the buffer taken two ways on alternate files: a static buffer, or
 * cat's own (glibc gives a 136 KiB malloc its own mmap, freed by munmap
 * just before the close). Prints, per run, the median close after each,
 * the median getppid (a null system call, the machine's speed), and where
 * the mmap'd buffer was.
 *
 * AT=HEX puts the mmap'd buffer at that address (MAP_FIXED_NOREPLACE),
 * ANCHOR=HEX keeps one page mapped there for the run: a buffer that shares
 * its page table with another mapping, or one alone in its 2 MiB, on
 * purpose rather than by ASLR.
 *
 * Build with `cc -O2 -o close_modes bench/compare/close_modes.c`; run it
 * 20 times on the headers of /usr/include and /usr/include/linux, as the
 * bench's `cat` reads them.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LEN 139264
#define MAX_FILES 4096

static char still[LEN] __attribute__((aligned(4096)));

static long long now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static long long median(long long *v, int n)
{
    qsort(v, n, sizeof *v, by_value);
    return n ? v[n / 2] : 0;
}

int main(int argc, char **argv)
{
    static long long after_static[MAX_FILES], after_munmap[MAX_FILES], null_call[MAX_FILES];
    int ns = 0, nm = 0, n = argc - 1 < MAX_FILES ? argc - 1 : MAX_FILES;
    const char *at = getenv("AT"), *anchor = getenv("ANCHOR");
    void *hint = at ? (void *)strtoul(at, NULL, 16) : NULL, *where = NULL;
    int fixed = at ? MAP_FIXED_NOREPLACE : 0;
    if (anchor) {
        char *p = mmap((void *)strtoul(anchor, NULL, 16), 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED)
            return perror("anchor"), 1;
        *p = 1;
    }
    int null = open("/dev/null", O_WRONLY);
    for (int i = 0; i < n; i++) {
        int mapped = i & 1;
        int fd = open(argv[i + 1], O_RDONLY);
        if (fd < 0)
            return perror(argv[i + 1]), 1;
        struct stat st;
        fstat(fd, &st);
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        char *b = still;
        if (mapped) {
            b = mmap(hint, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | fixed, -1, 0);
            if (b == MAP_FAILED)
                return perror("buffer"), 1;
            where = b;
        }
        for (ssize_t k; (k = read(fd, b, 131072)) > 0;)
            if (write(null, b, k) != k)
                return 1;
        if (mapped)
            munmap(b, LEN);
        long long t = now();
        close(fd);
        t = now() - t;
        if (mapped)
            after_munmap[nm++] = t;
        else
            after_static[ns++] = t;
        t = now();
        getppid();
        null_call[i] = now() - t;
    }
    unsigned long w = (unsigned long)where;
    printf("getppid %lld ns, close after a static buffer %lld ns, after munmap %lld ns; "
           "buffer at %#lx (%#lx into its 2 MiB%s)\n",
           median(null_call, n), median(after_static, ns), median(after_munmap, nm), w,
           w & 0x1fffff, (w & 0x1fffff) + LEN > 0x200000 ? ", across a 2 MiB boundary" : "");
    return 0;
}
