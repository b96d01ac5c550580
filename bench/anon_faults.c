/* Page faults of a process that fsprof does not trace: what an `fsprof
 * trace` running beside it costs every other process's faults
 * (bench/faults_beside.py). Touches every page of a fresh anonymous
 * mapping, ROUNDS times; prints the fastest round's ns per fault.
 *
 *   cc -O2 -o /tmp/anon_faults bench/anon_faults.c && /tmp/anon_faults [MiB] [rounds]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 16;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    size_t len = mib << 20, pages = len / 4096;
    double best = 1e30;
    for (int r = 0; r < rounds; r++) {
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 1;
        /* No transparent huge pages: one fault a 4 KiB page. */
        madvise(p, len, MADV_NOHUGEPAGE);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (size_t i = 0; i < pages; i++)
            p[i * 4096] = 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / pages;
        if (ns < best)
            best = ns;
        munmap(p, len);
    }
    printf("%.1f\n", best);
    return 0;
}
