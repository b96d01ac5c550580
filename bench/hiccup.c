/* The time this machine takes away from a thread that never gives up its
 * CPU (jHiccup's and cyclictest's idea, on the CPU rather than on a timer):
 * spins for D ns reading CLOCK_MONOTONIC (the vDSO, ~20-40 ns a read) and
 * prints every gap between two reads of at least G ns, one a line:
 *   offset_ns gap_ns
 * (offset from the start to the gap's start), then a last line
 *   reads total_ns
 * A gap is time the thread did not run: an interrupt, a preemption by
 * another task, or the hypervisor running something else on this vCPU
 * (stolen time). A replay thread meets the same gaps while it spins to a
 * command's time or runs the replayer's own code; bench/trace_replay.py
 * plays the traced schedule against them (the machine's floor under the
 * replay's issue-time error). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    long long d = atoll(argv[1]), g = atoll(argv[2]);
    if (d < 1 || g < 1)
        return 2;
    /* Recorded in memory touched before the start (no page fault inside
     * the measurement), printed after it. */
    size_t cap = 1 << 20;
    long long *at = calloc(cap, sizeof *at), *len = calloc(cap, sizeof *len);
    if (!at || !len)
        return 3;
    for (size_t i = 0; i < cap; i += 512)
        at[i] = len[i] = 0;
    size_t n = 0;
    long long reads = 0;
    long long start = ns(), prev = start, end = start + d;
    while (prev < end) {
        long long t = ns();
        reads++;
        if (t - prev >= g && n < cap) {
            at[n] = prev - start;
            len[n++] = t - prev;
        }
        prev = t;
    }
    for (size_t i = 0; i < n; i++)
        printf("%lld %lld\n", at[i], len[i]);
    printf("%lld %lld\n", reads, prev - start);
    return 0;
}
