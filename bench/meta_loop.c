/* The baseline of bench/metadata_slow_mode.sh: bonnie++'s sequential file
 * tests on the same layout as `fsprof bench metadata --dirs D
 * --files-per-dir F` (dNNNNN/fNNNNN under DIR, names resolved relative to
 * a descriptor on DIR), timed as a whole per phase with CLOCK_MONOTONIC:
 * no per-call clock, no Rust. Prints one line per round:
 *   stat_seq OPS/S unlink_seq OPS/S
 *   cc -O2 -o meta_loop bench/meta_loop.c
 *   ./meta_loop DIR DIRS FILES ROUNDS */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s DIR DIRS FILES ROUNDS\n", argv[0]);
    return 2;
  }
  int dirs = atoi(argv[2]), files = atoi(argv[3]), rounds = atoi(argv[4]);
  int at = open(argv[1], O_RDONLY | O_DIRECTORY);
  if (at < 0) { perror(argv[1]); return 1; }
  int n = dirs * files;
  char (*names)[32] = malloc(sizeof(*names) * n);
  for (int d = 0; d < dirs; d++)
    for (int f = 0; f < files; f++)
      snprintf(names[d * files + f], 32, "d%05d/f%05d", d, f);
  for (int r = 0; r < rounds; r++) {
    for (int d = 0; d < dirs; d++) {
      char dn[16];
      snprintf(dn, sizeof dn, "d%05d", d);
      if (mkdirat(at, dn, 0755) && r == 0) { perror(dn); return 1; }
    }
    for (int i = 0; i < n; i++) {
      int fd = openat(at, names[i], O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) { perror(names[i]); return 1; }
      close(fd);
    }
    struct stat st;
    double t0 = now();
    for (int i = 0; i < n; i++)
      if (fstatat(at, names[i], &st, 0)) { perror(names[i]); return 1; }
    double t1 = now();
    for (int i = 0; i < n; i++)
      if (unlinkat(at, names[i], 0)) { perror(names[i]); return 1; }
    double t2 = now();
    printf("stat_seq %.0f unlink_seq %.0f\n", n / (t1 - t0), n / (t2 - t1));
    fflush(stdout);
  }
  return 0;
}
