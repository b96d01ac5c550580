/* Forks a child under a limit that leaves the shim no room to set up its
 * counters, and checks the child still works: the program must run the
 * same, profiled or not, and fsprof must say why the child was not.
 *
 * usage: squeezed_fork as|nofile
 *   as:     the child sets RLIMIT_AS to its address space + 32 KiB (no
 *           room to map) before its first call
 *   nofile: the parent sets RLIMIT_NOFILE to the descriptors open now (no
 *           descriptor left) and forks
 * The child reads /etc/hostname through a descriptor opened before the
 * limit and exits 0 if it got bytes; the parent exits with its status.
 * Until the limit is set the child uses raw system calls, so that the shim
 * sets up only under the limit. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static long vm_bytes(void)
{
    char buf[128];
    long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/statm", O_RDONLY);
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    syscall(SYS_close, fd);
    buf[n > 0 ? n : 0] = 0;
    return atol(buf) * 4096;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int fd = open("/etc/hostname", O_RDONLY);
    if (fd < 0)
        return 3;
    struct rlimit rl;
    int as = strcmp(argv[1], "as") == 0;
    if (!as) {
        rl.rlim_cur = rl.rlim_max = (rlim_t)fd + 1;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            return 4;
    }
    pid_t p = fork();
    if (p == 0) {
        char b[64];
        rl.rlim_cur = rl.rlim_max = (rlim_t)vm_bytes() + 32 * 1024;
        if (as && syscall(SYS_setrlimit, RLIMIT_AS, &rl) != 0)
            _exit(4);
        _exit(pread(fd, b, sizeof b, 0) > 0 ? 0 : 5);
    }
    int st;
    if (p < 0 || waitpid(p, &st, 0) != p)
        return 6;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
