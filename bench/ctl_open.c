/* What an exec'd process's set-up pays to open the run's control file,
 * both ways the shim can (run.c): through the run directory (openat with
 * O_DIRECTORY, fstat, openat of "control" in it, fstat, close both), and
 * by the file's whole path with openat2 (no symbolic link followed), fstat,
 * close. Timed warm in a loop: a lower bound of what a new process pays.
 * Interleaved rounds, medians.
 *
 *   cc -O2 -o /tmp/ctl_open bench/ctl_open.c
 *   fsprof run -q -o /dev/null -- sh -c 'exec /tmp/ctl_open "${FSPROF_SHM#*:*:*:*:}"'
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { N = 2000, R = 41 };

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: ctl_open RUN_DIRECTORY\n");
        return 2;
    }
    const char *dir = argv[1];
    char path[4200];
    snprintf(path, sizeof path, "%s/control", dir);
    double a[R], b[R], d[R];
    struct stat st;
    for (int r = 0; r < R; r++) {
        double t0 = now_ns();
        for (int i = 0; i < N; i++) {
            long dfd = syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
            syscall(SYS_fstat, dfd, &st);
            long f = syscall(SYS_openat, dfd, "control", O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
            syscall(SYS_fstat, f, &st);
            syscall(SYS_close, f);
            syscall(SYS_close, dfd);
        }
        double t1 = now_ns();
        for (int i = 0; i < N; i++) {
            struct open_how h = {.flags = O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                                 .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
            long f = syscall(SYS_openat2, AT_FDCWD, path, &h, sizeof h);
            if (f < 0) {
                perror("openat2");
                return 1;
            }
            syscall(SYS_fstat, f, &st);
            syscall(SYS_close, f);
        }
        double t2 = now_ns();
        a[r] = (t1 - t0) / N;
        b[r] = (t2 - t1) / N;
        d[r] = a[r] - b[r];
    }
    qsort(a, R, sizeof a[0], cmp);
    qsort(b, R, sizeof b[0], cmp);
    qsort(d, R, sizeof d[0], cmp);
    printf("through the directory %.0f ns, openat2 of the path %.0f ns: %.0f ns fewer "
           "[quartiles of the rounds %.0f, %.0f] (medians of %d rounds of %d)\n",
           a[R / 2], b[R / 2], d[R / 2], d[R / 4], d[3 * R / 4], R, N);
    return 0;
}
