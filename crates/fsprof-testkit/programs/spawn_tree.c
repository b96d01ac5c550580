/* A tree of short processes (tests of exact counts, `fsprof run` and
 * `fsprof trace`): each of argv[1] iterations forks a process that makes
 * one call (access), forks a child that makes one call too, then execs a
 * leaf (argv[1] = "leaf") that makes three stats and reaps that child:
 * three process images an iteration, one of which lives for a single call,
 * forks, then execs. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "leaf") == 0) {
        struct stat st;
        for (int i = 0; i < 3; i++)
            stat("/", &st);
        while (wait(NULL) > 0)
            ;
        return 0;
    }
    int n = atoi(argv[1]);
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) {
            access("/", F_OK);
            if (fork() == 0) {
                access("/", F_OK);
                _exit(0);
            }
            execl(argv[0], argv[0], "leaf", (char *)NULL);
            _exit(127);
        }
        int st;
        if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 1;
    }
    return 0;
}
