/* The metadata workload of bench/mount_bench.py: create, stat and unlink
 * N files in DIR; prints the elapsed seconds. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s DIR N\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[2]);
    char path[4096];
    struct timespec a, b;
    struct stat st;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/f%d", argv[1], i);
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (fd < 0 || close(fd) != 0) { perror(path); return 1; }
    }
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/f%d", argv[1], i);
        if (stat(path, &st) != 0) { perror(path); return 1; }
    }
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/f%d", argv[1], i);
        if (unlink(path) != 0) { perror(path); return 1; }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.6f\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
    return 0;
}
