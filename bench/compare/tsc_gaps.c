/* Whether a slowed CPU lost its time in gaps or ran uniformly slower
 * (docs/benchmarks/analysis.md, procs' readdir mode).
 *
 * Pinned to one CPU, it reads the TSC back to back for SECONDS and keeps a
 * log2 histogram of the deltas, per 50 us window. Windows with under a
 * third of the usual reads are "slow"; it prints the summed histograms of
 * the usual and the slow windows. Time taken from the program by an
 * interrupt, by preemption or by an exit to the hypervisor (steal) shows
 * as deltas of half a microsecond or more (gaps); a CPU that runs slower
 * shows as every delta longer: the mean read outside gaps, per class, says
 * which.
 *
 * usage: tsc_gaps CPU SECONDS */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#define WIN 105000ull /* ticks: 50 us at 2.1 GHz */
#define USUAL_MIN 900 /* reads in a window; ~2,700 usual (38 ticks each) */
#define BINS 24
#define GAP 1024 /* ticks: ~0.5 us; a delta this long lost time to something */

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: tsc_gaps CPU SECONDS\n");
        return 2;
    }
    int cpu = atoi(argv[1]);
    double secs = atof(argv[2]);
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) {
        perror("sched_setaffinity");
        return 1;
    }
    static uint64_t slow[BINS], usual[BINS];
    /* Per class: ticks and reads outside gaps (deltas under GAP). */
    uint64_t clean_t[2] = {0}, clean_n[2] = {0}, wt = 0, wn = 0;
    uint64_t h[BINS] = {0};
    uint64_t t0 = __rdtsc(), end = t0 + (uint64_t)(secs * 2.1e9), ws = t0, prev = t0;
    uint64_t reads = 0, nslow = 0, nusual = 0;
    for (;;) {
        uint64_t now = __rdtsc(), d = now - prev;
        prev = now;
        int b = d ? 63 - __builtin_clzll(d) : 0;
        h[b < BINS ? b : BINS - 1]++;
        reads++;
        if (d < GAP) {
            wt += d;
            wn++;
        }
        if (now - ws >= WIN) {
            int is_slow = reads < USUAL_MIN;
            uint64_t *dst = is_slow ? slow : usual;
            *(is_slow ? &nslow : &nusual) += 1;
            clean_t[is_slow] += wt;
            clean_n[is_slow] += wn;
            wt = wn = 0;
            for (int i = 0; i < BINS; i++)
                dst[i] += h[i];
            memset(h, 0, sizeof h);
            reads = 0;
            ws = now;
            if (now > end)
                break;
        }
    }
    printf("cpu %d: %lu usual windows, %lu slow; a read outside gaps took %.1f ticks in usual "
           "windows, %.1f in slow ones\n",
           cpu, (unsigned long)nusual, (unsigned long)nslow,
           clean_n[0] ? (double)clean_t[0] / clean_n[0] : 0.0,
           clean_n[1] ? (double)clean_t[1] / clean_n[1] : 0.0);
    for (int i = 3; i < BINS; i++)
        if (slow[i] || usual[i])
            printf("  delta %7lu-%7lu ticks: usual %10lu  slow %10lu\n", 1ul << i,
                   (2ul << i) - 1, (unsigned long)usual[i], (unsigned long)slow[i]);
    return 0;
}
