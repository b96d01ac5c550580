/* Processes and threads for the tests of the followed process tree
 * (`fsprof kernel` and `fsprof trace` with a small map of followed
 * processes). A unit of work is three truncate calls that fail (ENOENT)
 * and one load through a private mapping of argv[3] (one page fault).
 *
 *   followed_tree seq N FILE      N children one after another, each
 *                                 working, exiting and reaped before the next
 *   followed_tree wide N FILE     N children alive at once, released to
 *                                 work together once all are forked
 *   followed_tree threads N FILE  N threads alive at once, then 3 children
 *                                 one after another; then the main thread
 *                                 exits (pthread_exit) and the threads work
 *                                 once it is gone
 *
 * With a fifth argument, it first waits for a byte on its standard input.
 * Each unit of work prints "PID TID ADDRESS" (the page it loaded from).
 * Exits 0 when every child exited 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *file;
static int gate[2];

static void work(void)
{
    for (int i = 0; i < 3; i++)
        if (truncate("/nonexistent-fsprof-followed/x", 0) == 0)
            _exit(3);
    int fd = open(file, O_RDONLY);
    if (fd < 0)
        _exit(4);
    volatile char *p = mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        _exit(5);
    if (p[7] != 'f')
        _exit(6);
    dprintf(1, "%d %d %p\n", (int)getpid(), (int)gettid(), (void *)p);
    munmap((void *)p, 4096);
    close(fd);
}

/* Blocks until the gate's write end is closed everywhere. */
static void wait_gate(void)
{
    char c;
    while (read(gate[0], &c, 1) > 0)
        ;
}

static int reap(pid_t p)
{
    int st;
    return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* A child that works and exits 0, reaped: whether it did. */
static int one_child(void)
{
    pid_t p = fork();
    if (p == 0) {
        work();
        _exit(0);
    }
    return reap(p);
}

/* Whether the main thread has exited (a zombie while threads run on). */
static int main_gone(void)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)getpid());
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 1;
    buf[n] = 0;
    char *s = strrchr(buf, ')');
    return s && (s[2] == 'Z' || s[2] == 'X');
}

static void *thread(void *arg)
{
    (void)arg;
    wait_gate();
    while (!main_gone())
        usleep(1000);
    work();
    return NULL;
}

int main(int argc, char **argv)
{
    char c;
    if (argc < 4 || argc > 5 || pipe(gate) != 0 || (argc == 5 && read(0, &c, 1) != 1))
        return 2;
    int n = atoi(argv[2]);
    file = argv[3];
    if (strcmp(argv[1], "seq") == 0) {
        for (int i = 0; i < n; i++)
            if (!one_child())
                return 1;
        return 0;
    }
    if (strcmp(argv[1], "wide") == 0) {
        pid_t *kids = calloc(n, sizeof *kids);
        for (int i = 0; i < n; i++) {
            kids[i] = fork();
            if (kids[i] == 0) {
                close(gate[1]);
                wait_gate();
                work();
                _exit(0);
            }
        }
        close(gate[1]);
        for (int i = 0; i < n; i++)
            if (!reap(kids[i]))
                return 1;
        return 0;
    }
    if (strcmp(argv[1], "threads") == 0) {
        for (int i = 0; i < n; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, thread, NULL) != 0)
                return 1;
        }
        for (int i = 0; i < 3; i++)
            if (!one_child())
                return 1;
        close(gate[1]);
        pthread_exit(NULL);
    }
    return 2;
}
