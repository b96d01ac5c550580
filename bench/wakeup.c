/* How late a replay thread's sleeps end on this machine: N absolute
 * clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) sleeps of D ns each, with
 * the timer slack a paced replay thread sets (1 ns), as the replayer
 * sleeps before its pre-spin. Prints the lateness quantiles in ns (median,
 * p90, p99, p99.9, max) and the CPU time each sleep costs the thread (the
 * syscall, the timer and the wake-up), in ns:
 *   median p90 p99 p999 max cpu_per_sleep
 * The pre-spin margin (crates/fsprof-replay engine::SPIN_NS) must cover
 * the lateness a replay meets; what it costs is spinning through it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

static long long ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int n = atoi(argv[1]);
    long long d = atoll(argv[2]);
    if (n < 1 || d < 1)
        return 2;
    long long *late = malloc(sizeof *late * n);
    if (!late)
        return 3;
    prctl(PR_SET_TIMERSLACK, 1UL);
    long long cpu0 = ns(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < n; i++) {
        long long due = ns(CLOCK_MONOTONIC) + d;
        struct timespec ts = {due / 1000000000LL, due % 1000000000LL};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        late[i] = ns(CLOCK_MONOTONIC) - due;
    }
    long long cpu = ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    qsort(late, n, sizeof *late, cmp);
    printf("%lld %lld %lld %lld %lld %lld\n", late[n / 2], late[n * 9 / 10], late[n * 99 / 100],
           late[n * 999 / 1000], late[n - 1], cpu / n);
    return 0;
}
