/* Two threads with a dependency through the file system: `maker` does
 * N stats of a missing file, then creates `dep` and writes 4 KiB; `user`
 * waits (on a condition variable, which the trace does not see) until
 * `dep` exists, then opens and reads it. Replayed as fast as possible
 * without the ordering constraint, `user`'s open would come first. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready;
static int n_stats;

static void *maker(void *arg)
{
    struct stat st;
    char buf[4096];
    memset(buf, 'm', sizeof buf);
    for (int i = 0; i < n_stats; i++)
        stat("missing", &st);
    int fd = open("dep", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
        exit(3);
    close(fd);
    pthread_mutex_lock(&mu);
    ready = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    return arg;
}

static void *user(void *arg)
{
    char buf[4096];
    struct stat st;
    /* A call before the wait: this thread's life overlaps maker's, so
     * replay gives it a thread of its own. */
    stat("missing-too", &st);
    pthread_mutex_lock(&mu);
    while (!ready)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    int fd = open("dep", O_RDONLY);
    if (fd < 0 || read(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
        exit(4);
    close(fd);
    return arg;
}

int main(int argc, char **argv)
{
    n_stats = argc > 1 ? atoi(argv[1]) : 2000;
    pthread_t a, b;
    pthread_create(&b, NULL, user, NULL);
    pthread_create(&a, NULL, maker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return 0;
}
