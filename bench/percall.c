/* Tight loop of cached calls, timed from inside: the difference between a
 * run under `fsprof run` and a bare run is the cost the shim adds per call.
 * usage: percall pread|fstat N */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    long n = atol(argv[2]);
    int fd = open("/etc/hostname", O_RDONLY);
    if (fd < 0)
        return 3;
    char b[1];
    struct stat st;
    int use_pread = strcmp(argv[1], "pread") == 0;
    /* warm-up: page cache, TLB, the shim's slot and symbol resolution */
    for (long i = 0; i < 10000; i++)
        use_pread ? (void)pread(fd, b, 1, 0) : (void)fstat(fd, &st);
    double t0 = now();
    for (long i = 0; i < n; i++)
        use_pread ? (void)pread(fd, b, 1, 0) : (void)fstat(fd, &st);
    double t1 = now();
    printf("%.2f\n", (t1 - t0) / n);
    return 0;
}
