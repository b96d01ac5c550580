/* Page faults a forked child takes to its first counted calls, under
 * whatever library LD_PRELOAD names (the shim in a run, bench/shim_floor.c,
 * nothing): each page of the library's .bss the child writes is one (a
 * copy of its parent's page). Three children, one line each.
 *
 *   cc -O2 -o /tmp/fork_faults bench/fork_faults.c
 *   fsprof run -q -o /dev/null -- /tmp/fork_faults
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static long minflt(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}

int main(void)
{
    struct stat st;
    int fd = open("/etc/hostname", O_RDONLY);
    fstat(fd, &st);
    close(fd);
    for (int i = 0; i < 3; i++) {
        pid_t p = fork();
        if (p == 0) {
            long a = minflt();
            fd = open("/etc/hostname", O_RDONLY);
            long b = minflt();
            char buf[64];
            if (read(fd, buf, sizeof buf) < 0)
                _exit(1);
            fstat(fd, &st);
            close(fd);
            long c = minflt();
            printf("child: faults at its first call %ld, its next three %ld\n", b - a, c - b);
            fflush(stdout);
            _exit(0);
        }
        waitpid(p, 0, 0);
    }
    return 0;
}
