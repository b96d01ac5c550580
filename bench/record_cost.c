/* What the shim's bookkeeping costs per call, without system calls in the
 * way: a tight loop around a no-op "call", bare, with the timing and
 * filing every op gets (call_begin/call_end), and with the value filing a
 * data op adds (record_value: request size and seek distance). Compiled
 * together with the shim's runtime.c so the same inline code is measured.
 * Best of 7 rounds, ns per iteration.
 *
 *   cc -O2 -ftls-model=initial-exec -I crates/fsprof-shim/shim \
 *      bench/record_cost.c crates/fsprof-shim/shim/runtime.c -o /tmp/record_cost -ldl -lpthread
 *   /tmp/record_cost */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "record.h"

int fsprof_shim_selftest(const struct fsprof_control *ctl, uint32_t iters,
                         struct fsprof_selftest *out);

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static __attribute__((noinline)) long noop(long x)
{
    __asm__ volatile("" : "+r"(x));
    return x;
}

enum { BARE, TIMED, DATA };

static double per_iter(int mode, uint32_t iters)
{
    long (*volatile fn)(long) = noop;
    double best = 1e300;
    for (int round = 0; round < 7; round++) {
        uint64_t a = mono();
        for (uint32_t i = 0; i < iters; i++) {
            if (mode == BARE) {
                (void)fn((long)i);
                continue;
            }
            struct fsprof_ctr *c = call_begin(mode == DATA ? OP_pread : OP_fstat);
            uint64_t t0 = now_ticks();
            long r = fn(4096);
            uint64_t t1 = now_ticks();
            uint64_t ns = call_end(c, t0, t1, r == -1);
            if (mode == DATA)
                record_value(CORR_pread, ns, 3, (int64_t)(i & 255) << 12, 4096, r);
        }
        double per = (double)(mono() - a) / iters;
        if (per < best)
            best = per;
    }
    return best;
}

int main(void)
{
    /* The parameters `fsprof run` would hand over: resolution 1, TSC. */
    size_t ctl_len = sizeof(struct fsprof_control) + 65 * 8;
    struct fsprof_control *ctl = calloc(1, ctl_len);
    ctl->magic = FSPROF_CTL_MAGIC;
    ctl->abi_version = FSPROF_ABI_VERSION;
    ctl->resolution = 1;
    ctl->nbuckets = 65;
    ctl->clock = FSPROF_CLOCK_TSC;
    ctl->tsc_mult = 1ull << 31; /* any rate: the cost does not depend on it */
    ctl->tsc_shift = FSPROF_TICK_SHIFT;
    ctl->max_slots = 2;
    for (int j = 1; j < 65; j++)
        ctl->thresholds[j] = 1ull << (j - 1);
    struct fsprof_selftest st;
    if (fsprof_shim_selftest(ctl, 1000, &st) != 0) {
        fprintf(stderr, "self-test refused the parameters\n");
        return 1;
    }
    /* Private scratch counters laid out like a slot. */
    size_t len = (size_t)OP_COUNT * g_ctr_size + (size_t)CORR_COUNT * FSPROF_CORR_KINDS *
                                                     FSPROF_CORR_CELLS * 8 +
                 FSPROF_FD_TRACK * sizeof(struct fsprof_fd_state);
    char *scratch = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(scratch, 0, len);
    t_slot = scratch;
    t_corr = (uint64_t *)(scratch + (size_t)OP_COUNT * g_ctr_size);
    t_fd = (struct fsprof_fd_state *)((char *)t_corr +
                                      (size_t)CORR_COUNT * FSPROF_CORR_KINDS * FSPROF_CORR_CELLS * 8);
    uint32_t n = 5000000;
    double bare = per_iter(BARE, n), timed = per_iter(TIMED, n), data = per_iter(DATA, n);
    printf("bare %.2f ns, every op +%.2f ns, data op +%.2f ns (value filing alone +%.2f ns)\n",
           bare, timed - bare, data - bare, data - timed);
    return 0;
}
