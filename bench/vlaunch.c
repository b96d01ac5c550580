/* The floor of bench/startup.sh --floor and bench/startup_stages.py: the
 * least any tool that starts a command (with a preloaded library) does. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
/* launch [--preload SHIM] PROGRAM ARGS...: vfork + execve + waitpid. */
int main(int argc, char **argv) {
    int at = 1;
    if (argc > 3 && strcmp(argv[1], "--preload") == 0) {
        setenv("LD_PRELOAD", argv[2], 1);
        at = 3;
    }
    if (at >= argc) return 127;
    pid_t pid = vfork();
    if (pid == 0) {
        execve(argv[at], argv + at, environ);
        _exit(127);
    }
    int st;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
