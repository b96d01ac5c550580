/* The Replayfs §4.4 micro-benchmark: two threads pread 1 KiB of a cached
 * file, N times each. Prints the calls per second of both together. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long n;
static int fd;

static void *loop(void *arg)
{
    char buf[1024];
    long base = (long)(intptr_t)arg;
    for (long i = 0; i < n; i++)
        if (pread(fd, buf, sizeof buf, ((base + i) % 1024) * 1024) != (ssize_t)sizeof buf)
            exit(3);
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: pread2 FILE N\n");
        return 2;
    }
    n = atol(argv[2]);
    fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 4;
    pthread_t a, b;
    double t0 = now();
    pthread_create(&a, NULL, loop, (void *)0);
    pthread_create(&b, NULL, loop, (void *)512);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    double t1 = now();
    printf("%.0f\n", 2.0 * n / (t1 - t0));
    return 0;
}
