/* A workload with exactly known numbers of libc file-system calls, to prove
 * that fsprof run counts every call once: threads, fork without exec, the
 * shared overflow slot (more threads than private slots), and errno.
 *
 * usage: known_calls DIR THREADS PER_THREAD CHILD_CALLS
 *   parent:  open 1, write 1, pread THREADS*PER_THREAD, fstat THREADS*PER_THREAD,
 *            stat 1 (fails: ENOENT), close 2 (one fails: EBADF), opendir 1,
 *            readdir = entries+1, closedir 1, unlink 1
 *   child (fork, no exec): pread CHILD_CALLS, fstat CHILD_CALLS
 * Prints the errno values it observed, so a run with and without the shim
 * can be compared byte for byte. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int fd;
static long per_thread;

static void *worker(void *arg)
{
    char buf[16];
    struct stat st;
    for (long i = 0; i < per_thread; i++) {
        if (pread(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf)
            abort();
        if (fstat(fd, &st) != 0)
            abort();
    }
    return arg;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s DIR THREADS PER_THREAD CHILD_CALLS\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[2]);
    per_thread = atol(argv[3]);
    long child_calls = atol(argv[4]);
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);

    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return 3;
    char block[4096];
    memset(block, 'x', sizeof block);
    if (write(fd, block, sizeof block) != (ssize_t)sizeof block)
        return 4;

    pthread_t *t = calloc((size_t)threads, sizeof *t);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);

    pid_t pid = fork();
    if (pid == 0) {
        char buf[16];
        struct stat st;
        for (long i = 0; i < child_calls; i++) {
            if (pread(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf || fstat(fd, &st) != 0)
                _exit(5);
        }
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);

    struct stat st;
    errno = 0;
    int r = stat("/nonexistent/fsprof/path", &st);
    printf("stat: %d errno=%s\n", r, strerrorname_np(errno));
    errno = 0;
    r = close(987654);
    printf("close: %d errno=%s\n", r, strerrorname_np(errno));
    close(fd);

    DIR *d = opendir(argv[1]);
    int entries = 0;
    errno = 4242; /* readdir must leave errno alone at the end of the directory */
    while (readdir(d))
        entries++;
    printf("readdir: %d entries, errno after end=%d\n", entries, errno);
    closedir(d);
    unlink(path);
    printf("child: %s %d\n", WIFEXITED(status) ? "exit" : "signal",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 0;
}
