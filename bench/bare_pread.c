/* The baselines of bench/bench_harness.sh: N preads of the same cached
 * buffer at offset 0, in one of three loops, on the main thread or on a
 * spawned one (fsprof bench pread reads on a spawned thread):
 *
 *   bare   no timing at all: the least any harness can cost (two clock
 *          reads around the whole loop);
 *   tsc    what a per-op timing loop must do at the least: one rdtsc per
 *          op and one store of the delta into an array allocated before
 *          the loop (the honest baseline for "what the harness adds");
 *   mono   the same with clock_gettime(CLOCK_MONOTONIC) (vDSO) per op.
 *
 * Prints ns per pread over the whole timed loop.
 *   bare_pread FILE SIZE N [bare|tsc|mono] [main|thread]            */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static int fd;
static size_t size;
static long n;
static const char *mode = "bare";
static double result_ns, result_cpu_ns, result_median_ns;

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return (a > b) - (a < b);
}
static int failed;

static uint64_t cpu(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t mono(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The timed loops, each its own function so that callgrind can count
 * exactly what one executes (--toggle-collect='timed_*'). */
__attribute__((noinline)) static int timed_bare(char *buf) {
  for (long i = 0; i < n; i++)
    if (pread(fd, buf, size, 0) != (ssize_t)size) return 0;
  return 1;
}

__attribute__((noinline)) static int timed_tsc(char *buf, uint64_t *ticks) {
  uint64_t prev = __rdtsc();
  for (long i = 0; i < n; i++) {
    if (pread(fd, buf, size, 0) != (ssize_t)size) return 0;
    uint64_t t = __rdtsc();
    ticks[i] = t - prev;
    prev = t;
  }
  return 1;
}

__attribute__((noinline)) static int timed_mono(char *buf, uint64_t *ticks) {
  uint64_t prev = mono();
  for (long i = 0; i < n; i++) {
    if (pread(fd, buf, size, 0) != (ssize_t)size) return 0;
    uint64_t t = mono();
    ticks[i] = t - prev;
    prev = t;
  }
  return 1;
}

static void *loop(void *arg) {
  (void)arg;
  char *buf = malloc(size);
  uint64_t *ticks = malloc(sizeof(uint64_t) * (size_t)n);
  if (!buf || !ticks) { failed = 1; return 0; }
  /* Fault the sample array in before timing, as fsprof's loop does. */
  memset(ticks, 0, sizeof(uint64_t) * (size_t)n);
  for (int i = 0; i < 1000; i++) pread(fd, buf, size, 0);
  uint64_t ca = cpu();
  uint64_t a = mono();
  int ok = !strcmp(mode, "bare") ? timed_bare(buf) : !strcmp(mode, "tsc") ? timed_tsc(buf, ticks) : timed_mono(buf, ticks);
  if (!ok) { failed = 1; return 0; }
  uint64_t b = mono();
  uint64_t cb = cpu();
  uint64_t sum = 0;
  for (long i = 0; i < n; i++) sum += ticks[i];
  /* Median of the per-op deltas in ns (ticks scaled by the loop's own
   * ticks-to-ns ratio); 0 for the bare loop, which has none. */
  if (strcmp(mode, "bare") && sum > 0) {
    qsort(ticks, (size_t)n, sizeof(uint64_t), cmp_u64);
    double m = n % 2 ? (double)ticks[n / 2] : ((double)ticks[n / 2 - 1] + (double)ticks[n / 2]) / 2;
    result_median_ns = m * (double)(b - a) / (double)sum;
  }
  result_ns = (double)(b - a) / (double)n;
  result_cpu_ns = (double)(cb - ca) / (double)n;
  free(ticks);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4 || argc > 6) {
    fprintf(stderr, "usage: bare_pread FILE SIZE N [bare|tsc|mono] [main|thread]\n");
    return 2;
  }
  fd = open(argv[1], O_RDONLY);
  if (fd < 0) { perror("open"); return 2; }
  size = strtoul(argv[2], 0, 10);
  n = strtol(argv[3], 0, 10);
  if (argc > 4) mode = argv[4];
  if (strcmp(mode, "bare") && strcmp(mode, "tsc") && strcmp(mode, "mono")) {
    fprintf(stderr, "bare_pread: unknown mode %s\n", mode);
    return 2;
  }
  if (argc > 5 && !strcmp(argv[5], "thread")) {
    pthread_t t;
    if (pthread_create(&t, 0, loop, 0)) { perror("pthread_create"); return 2; }
    pthread_join(t, 0);
  } else {
    loop(0);
  }
  if (failed) { perror("pread"); return 1; }
  printf("%.2f %.2f %.2f\n", result_ns, result_cpu_ns, result_median_ns);
  return 0;
}
