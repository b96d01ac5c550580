/* The machine's speed while a benchmark runs: one thread pinned to each
 * online CPU times a fixed dependent chain (~1 us) three times every 500 us
 * and keeps the fastest, with the wall-clock time (CLOCK_REALTIME, to line up
 * with a profile's start_unix_ns). On SIGTERM or SIGINT it writes
 * "cpu unix_ns chain_ns" lines to the file named by its argument.
 *
 * Why: on the benchmarks' VM the whole machine runs 4-8x slower, both vCPUs
 * at once, for 20-90 ms at a time (docs/benchmarks/analysis.md). The fastest
 * of three chains is slow only when the CPU itself is, not when an interrupt
 * or another task takes it; a run that overlapped such a period is not a
 * fair sample of the program, and bench/compare_rates.py --watch-machine
 * says which runs did. Costs ~0.5% of each CPU.
 *
 * usage: machine_speed OUT */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAXCPU 64
#define N (1 << 21) /* samples per CPU: 17 minutes */

struct sample {
    uint64_t unix_ns;
    uint32_t chain_ns;
};
static struct sample *buf[MAXCPU];
static long n[MAXCPU];
static volatile sig_atomic_t stop;

static uint64_t ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A dependent chain of multiplies in a register: its time is the CPU's
 * speed. (A chain through a stack variable is not: store-to-load forwarding
 * on recent cores takes one of two paths, and the same loop ran 3x apart
 * between two builds and between moments of one.) */
static uint32_t chain(void)
{
    uint64_t x = 1;
    uint64_t t0 = ns(CLOCK_MONOTONIC);
    for (int i = 0; i < 400; i++) {
        x = x * 3 + 1;
        __asm__ volatile("" : "+r"(x));
    }
    uint32_t d = (uint32_t)(ns(CLOCK_MONOTONIC) - t0);
    __asm__ volatile("" ::"r"(x));
    return d;
}

static void *watch(void *arg)
{
    long cpu = (long)arg;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET((int)cpu, &s);
    if (pthread_setaffinity_np(pthread_self(), sizeof s, &s) != 0)
        return NULL;
    const struct timespec pause = {0, 500000};
    while (!stop && n[cpu] < N) {
        uint32_t m = chain(), b = chain(), c = chain();
        m = b < m ? b : m;
        m = c < m ? c : m;
        buf[cpu][n[cpu]++] = (struct sample){ns(CLOCK_REALTIME), m};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: machine_speed OUT\n");
        return 2;
    }
    FILE *out = fopen(argv[1], "w");
    if (out == NULL) {
        perror(argv[1]);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    ncpu = ncpu < 1 ? 1 : ncpu > MAXCPU ? MAXCPU : ncpu;
    pthread_t t[MAXCPU];
    for (long c = 0; c < ncpu; c++) {
        buf[c] = malloc(N * sizeof(struct sample));
        if (buf[c] == NULL || pthread_create(&t[c], NULL, watch, (void *)c) != 0) {
            fprintf(stderr, "machine_speed: cannot start a thread for cpu %ld\n", c);
            return 1;
        }
    }
    for (long c = 0; c < ncpu; c++)
        pthread_join(t[c], NULL);
    for (long c = 0; c < ncpu; c++)
        for (long i = 0; i < n[c]; i++)
            fprintf(out, "%ld %lu %u\n", c, (unsigned long)buf[c][i].unix_ns, buf[c][i].chain_ns);
    return fclose(out) == 0 ? 0 : 1;
}
