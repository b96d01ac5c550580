/* The baseline of bench/bench_harness.sh: N preads of the same cached
 * buffer with no timing at all, the least any harness can cost. Prints
 * ns per pread over the whole loop (two clock reads in total). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: bare_pread FILE SIZE N\n"); return 2; }
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) { perror("open"); return 2; }
  size_t size = strtoul(argv[2], 0, 10);
  long n = strtol(argv[3], 0, 10);
  char *buf = malloc(size);
  for (int i = 0; i < 1000; i++) pread(fd, buf, size, 0);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++)
    if (pread(fd, buf, size, 0) != (ssize_t)size) { perror("pread"); return 1; }
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.2f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
  return 0;
}
