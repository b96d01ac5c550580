/* Known file-system calls for the trace tests.
 *   basic            one of each kind of call, with known arguments
 *   threads N        two threads pwrite N times each to their own file, and a
 *                    forked child writes once
 *   spin N [kill]    N preads of 1 byte; then SIGKILL itself if asked
 *   phases P N MS    P rounds of N preads; after each, wait (up to MS ms) until
 *                    fsprof trace has moved this thread's finished chunks out
 *                    of the run directory ($FSPROF_SHM)
 *   stall N L wait|end  N preads with fsprof stopped (SIGSTOP) until L chunk
 *                    files wait, or until the preads are done */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void basic(void)
{
    char buf[16];
    struct stat st;
    mkdir("d", 0750);
    int fd = open("d/f", O_CREAT | O_WRONLY | O_TRUNC, 0640);
    if (write(fd, "hello trace", 11) != 11 || pwrite(fd, "XY", 2, 100) != 2)
        exit(3);
    close(fd);
    stat("d/f", &st);
    int dir = openat(AT_FDCWD, "d", O_RDONLY | O_DIRECTORY);
    int in = openat(dir, "f", O_RDONLY);
    if (pread(in, buf, 5, 0) != 5 || lseek(in, 0, SEEK_END) != 102)
        exit(4);
    close(in);
    close(dir);
    rename("d/f", "d/g");
    if (unlink("d/nope") != -1 || errno != ENOENT)
        exit(5);
    unlink("d/g");
    rmdir("d");
}

static int per_thread;

static void *writer(void *arg)
{
    char name[32];
    snprintf(name, sizeof name, "w%ld", (long)(intptr_t)arg);
    int fd = open(name, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    for (int i = 0; i < per_thread; i++)
        if (pwrite(fd, "abcd", 4, (off_t)i * 4) != 4)
            exit(6);
    close(fd);
    return NULL;
}

static void threads(int n)
{
    per_thread = n;
    pthread_t a, b;
    pthread_create(&a, NULL, writer, (void *)1);
    pthread_create(&b, NULL, writer, (void *)2);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pid_t c = fork();
    if (c == 0) {
        int fd = open("child", O_CREAT | O_WRONLY | O_TRUNC, 0600);
        if (write(fd, "kid", 3) != 3)
            _exit(7);
        close(fd);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        exit(8);
}

static void spin(int n)
{
    char c;
    int fd = open("spin", O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (write(fd, "x", 1) != 1)
        exit(9);
    for (int i = 0; i < n; i++)
        if (pread(fd, &c, 1, 0) != 1)
            exit(10);
}

/* Chunk files (t<seq>) in the run directory. */
static int chunk_files(void)
{
    /* FSPROF_SHM is <dev>:<ino>:<uid>:<ctl_ino>:<path> */
    const char *dir = getenv("FSPROF_SHM");
    for (int colons = 0; dir && colons < 4; dir++)
        colons += *dir == ':';
    DIR *d = dir ? opendir(dir) : NULL;
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] == 't';
    closedir(d);
    return n;
}

/* Stops fsprof (the parent) and makes N preads; a helper process resumes
 * fsprof once `limit` chunk files wait (`wait`), or once the preads are
 * done (`end`). */
static void stall(int n, int limit, int at_end)
{
    pid_t fsprof = getppid();
    int done[2];
    if (pipe(done) != 0)
        exit(11);
    pid_t helper = fork();
    if (helper == 0) {
        close(done[1]);
        char c;
        struct timespec ts = {0, 1000000L};
        if (at_end)
            (void)!read(done[0], &c, 1);
        else
            for (int i = 0; i < 20000 && chunk_files() < limit; i++)
                nanosleep(&ts, NULL);
        kill(fsprof, SIGCONT);
        _exit(0);
    }
    close(done[0]);
    kill(fsprof, SIGSTOP);
    spin(n);
    close(done[1]);
    int st;
    waitpid(helper, &st, 0);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "basic")) {
        basic();
    } else if (argc >= 3 && !strcmp(argv[1], "threads")) {
        threads(atoi(argv[2]));
    } else if (argc >= 3 && !strcmp(argv[1], "spin")) {
        spin(atoi(argv[2]));
        if (argc >= 4 && !strcmp(argv[3], "kill"))
            raise(SIGKILL);
    } else if (argc >= 5 && !strcmp(argv[1], "phases")) {
        struct timespec ts = {0, 10 * 1000000L};
        for (int p = 0; p < atoi(argv[2]); p++) {
            spin(atoi(argv[3]));
            for (long waited = 0; waited < atol(argv[4]) && chunk_files() > 1; waited += 10)
                nanosleep(&ts, NULL);
        }
    } else if (argc >= 5 && !strcmp(argv[1], "stall")) {
        stall(atoi(argv[2]), atoi(argv[3]), !strcmp(argv[4], "end"));
    } else {
        fprintf(stderr, "usage: trace_calls basic | threads N | spin N [kill] | phases P N MS | stall N L wait|end\n");
        return 2;
    }
    return 0;
}
