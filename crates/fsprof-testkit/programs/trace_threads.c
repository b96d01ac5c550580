/* Two threads with a dependency through the file system: `maker` does
 * N stats of a missing file, then creates `dep` and writes 4 KiB; `user`
 * waits (on a condition variable, which the trace does not see) until
 * `dep` exists, then opens and reads it. Replayed as fast as possible
 * without the ordering constraint, `user`'s open would come first.
 *
 * The two threads' traced lives overlap whatever the scheduler does:
 * `user` makes a traced call, then lets `maker` start (a handshake the
 * trace does not see), and makes its last calls only after `maker`'s
 * create. So the compiler never folds them onto one replay thread. */
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
static int user_started;
static int ready;
static int n_stats;

static void wait_for(int *flag)
{
    pthread_mutex_lock(&mu);
    while (!*flag)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void raise_flag(int *flag)
{
    pthread_mutex_lock(&mu);
    *flag = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void *maker(void *arg)
{
    struct stat st;
    char buf[4096];
    memset(buf, 'm', sizeof buf);
    wait_for(&user_started);
    for (int i = 0; i < n_stats; i++)
        stat("missing", &st);
    int fd = open("dep", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
        exit(3);
    close(fd);
    raise_flag(&ready);
    return arg;
}

static void *user(void *arg)
{
    char buf[4096];
    struct stat st;
    stat("missing-too", &st);
    raise_flag(&user_started);
    wait_for(&ready);
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
