/* Runs a command and prints the CPU time (user + system, ns) of that
 * process alone, from wait4: under `fsprof run -- cputime CMD`, CMD's time
 * with the shim and without fsprof's own (which `fsprof run`'s rusage of
 * the whole tree would add).
 * usage: cputime CMD [ARG...] */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: cputime CMD [ARG...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0)
        return 3;
    if (pid == 0) {
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid)
        return 3;
    long long ns = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                   (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
    printf("%lld\n", ns);
    return WIFEXITED(status) && WEXITSTATUS(status) <= 1 ? 0 : 4;
}
