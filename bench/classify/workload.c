/* The workload of fsprof's labelled compare set (bench/classify.py and
 * crates/fsprof-cli/tests/report/classify.rs). Each iteration makes the same
 * calls; flags change exactly one thing:
 *
 *   --cold    evict DIR/data from the page cache first, so that every 16th
 *             pread (the one outside a small hot region) misses: only
 *             pread changes
 *   --delay   every 16th read (from a pipe: fsprof files it as pipe_read)
 *             waits 1 ms for its data: only pipe_read changes. Without it
 *             no read waits (the data is sent before it is read)
 *
 *   --no-sync leave out the fdatasync calls (both runs of a pair)
 *
 *   --fifo    run at SCHED_FIFO priority 1 (root), so that no other
 *             process preempts a call: on a loaded machine a call that
 *             was preempted lasts milliseconds, and a few of them in one
 *             run of a sub-microsecond op made a "new peak" that compare
 *             rightly flagged in pairs that changed nothing
 *
 *   --compete run as the competing process instead: 4 KiB pwrite +
 *             fdatasync of DIR/compete.PID in a loop until killed. Started
 *             unprofiled beside a profiled run, it changes fdatasync (and,
 *             through the CPU it takes, possibly more: the benchmark counts
 *             those as false positives).
 *
 * The delay pair is run with --no-sync: sleeping 1 ms at a time makes the
 * idle governor pick deeper C-states, which slows every device wait of the
 * process — fdatasync included. compare reports that correctly, but it is
 * a consequence of the change, not the change.
 *
 * Only 1 in 16 calls is changed, and each kind of call runs in its own
 * phase, because every call that blocks leaves the CPU idle and the calls
 * right after it run slower (cold caches, deeper C-states, lower clock).
 * Set-up I/O uses raw system calls so that it is the same, unprofiled, in
 * every mode.
 *
 * usage: workload DIR N [--cold] [--delay] [--no-sync] [--fifo] | workload DIR 0 --compete; DIR/data (16 MiB) must exist.
 * The pipe's writes and the writer's sleeps use raw system calls so that
 * they are not profiled. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int pipefd[2];
static long iterations;
static int delay;

/* One message per read; a group is GROUP messages, sent in one write (well
 * under PIPE_BUF, so it lands whole): the first read of a group finds the
 * whole group or nothing, and the other GROUP-1 reads always find data. */
#define MSG 64
#define GROUP 16

/* --delay: each group is sent 1 ms after the previous one, so the first
 * read of a group waits for it. */
static void *writer(void *arg)
{
    (void)arg;
    char msg[MSG * GROUP];
    memset(msg, 'x', sizeof msg);
    for (long i = 0; i < iterations; i += GROUP) {
        struct timespec ms = {0, 1000000};
        syscall(SYS_nanosleep, &ms, NULL);
        if (syscall(SYS_write, pipefd[1], msg, sizeof msg) != (long)sizeof msg)
            _exit(3);
    }
    return NULL;
}

/* Without --delay a thread is started all the same: once a process has had
 * a second thread, glibc takes its multi-threaded paths (cancellation
 * points, atomics) for good, which made every later pread 1.17x slower in
 * the delay runs only. */
static void *idle(void *arg)
{
    return arg;
}

/* 20 ms of busy waiting, unprofiled: lets the CPU's frequency and idle
 * state settle before the next phase. */
static void settle(void)
{
    struct timespec t0, t;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t0);
    do
        syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 20000000L);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: workload DIR N [--cold] [--delay] [--no-sync] [--fifo]\n");
        return 2;
    }
    const char *dir = argv[1];
    iterations = atol(argv[2]);
    int cold = 0, sync = 1, compete = 0, fifo = 0;
    for (int k = 3; k < argc; k++) {
        if (!strcmp(argv[k], "--cold"))
            cold = 1;
        else if (!strcmp(argv[k], "--delay"))
            delay = 1;
        else if (!strcmp(argv[k], "--no-sync"))
            sync = 0;
        else if (!strcmp(argv[k], "--compete"))
            compete = 1;
        else if (!strcmp(argv[k], "--fifo"))
            fifo = 1;
    }
    /* Before anything else, so that the set-up, the pauses and the pipe
     * writer (which inherits it) run at the same priority. */
    struct sched_param rt = {.sched_priority = 1};
    if (fifo && sched_setscheduler(0, SCHED_FIFO, &rt) != 0) {
        fprintf(stderr, "workload: --fifo: SCHED_FIFO refused: %s\n", strerror(errno));
        return 4;
    }
    char data[4096], small[4096], logf[4096];
    static char buf[4096];
    if (compete) {
        snprintf(logf, sizeof logf, "%s/compete.%d", dir, (int)getpid());
        int fd = open(logf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (long i = 0; fd >= 0; i++) {
            syscall(SYS_pwrite64, fd, buf, sizeof buf, i % 256 * 4096);
            syscall(SYS_fdatasync, fd);
        }
        return 1;
    }
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(small, sizeof small, "%s/small", dir);
    snprintf(logf, sizeof logf, "%s/log.%d", dir, (int)getpid());

    int dfd = open(data, O_RDONLY);
    int sfd = open(small, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int lfd = open(logf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (dfd < 0 || sfd < 0 || lfd < 0) {
        perror("workload: open");
        return 1;
    }
    close(sfd);
    struct stat st;
    fstat(dfd, &st);
    long pages = st.st_size / 4096;
    for (long p = 0; p < pages; p++)
        syscall(SYS_pread64, dfd, buf, sizeof buf, p * 4096);
    /* DONTNEED leaves dirty pages and pages under writeback in the cache
     * (and starts the writeback, which would then compete with the measured
     * phases): a data file written just before (as the test and the bench
     * do) would not be cold at all. */
    syscall(SYS_fdatasync, dfd);
    if (cold)
        syscall(SYS_fadvise64, dfd, 0, 0, POSIX_FADV_DONTNEED);
    syscall(SYS_fadvise64, dfd, 0, 0, POSIX_FADV_RANDOM);
    /* Warm the hot region again so that only the far preads can miss. */
    for (long p = 0; p < 16; p++)
        syscall(SYS_pread64, dfd, buf, sizeof buf, p * 4096);
    /* Hold the cached pages mapped, each touched: a machine-wide
     * `drop_caches` by another process (other tests do it) skips mapped
     * pages, where it made a run's far preads miss (a 70 us peak in a
     * pair that changed nothing). Under --cold only the hot region, the
     * rest must stay out of the cache. */
    long held = cold ? 16 : pages;
    volatile const char *map = (const char *)syscall(SYS_mmap, NULL, held * 4096, PROT_READ, MAP_SHARED, dfd, 0);
    if (map == MAP_FAILED)
        return 1;
    for (long p = 0; p < held; p++)
        (void)map[p * 4096];
    if (pipe(pipefd) != 0)
        return 1;

    /* One phase per kind of call, with a busy pause between phases: a
     * change that makes the CPU idle (a miss, a sleep) also slows the calls
     * that run right after it, through idle states and clock frequency, so
     * phases keep each change to the op it was made to. The first phase
     * gets its pause too: without it the stat phase began right after the
     * set-up's fdatasync and the previous run's end (a --delay run's end
     * sleeps 1 ms at a time), and in a CI run the plain runs' stat, each
     * started after a --delay run, came out 1.33x slower than the delay
     * runs' (p 4e-4) with nothing changed before the pipe phase. */
    settle();
    for (long i = 0; i < iterations; i++)
        stat(small, &st);
    settle();
    for (long i = 0; i < iterations; i++)
        close(open(small, O_RDONLY));
    settle();
    for (long i = 0; i < iterations; i++) {
        if (pwrite(lfd, buf, sizeof buf, i % 20 * 4096) != (long)sizeof buf)
            return 1;
        if (sync && i % 20 == 19)
            fdatasync(lfd);
    }
    settle();
    /* Without --delay the main thread sends each group itself (unprofiled)
     * just before reading it, so no read ever waits. (A writer thread racing
     * the reader made some reads wait and others not, in proportions that
     * changed from run to run with where the two threads ran: compare
     * rightly flagged pipe_read in pairs that changed nothing.) With
     * --delay the writer thread starts with this phase: started earlier,
     * its wake-ups landed in the stat and close phases. Both modes start
     * their thread here (see idle()). */
    pthread_t t;
    pthread_create(&t, NULL, delay ? writer : idle, NULL);
    for (long i = 0; i < iterations; i++) {
        char msg[MSG * GROUP];
        if (!delay && i % GROUP == 0) {
            memset(msg, 'x', sizeof msg);
            if (syscall(SYS_write, pipefd[1], msg, sizeof msg) != (long)sizeof msg)
                return 1;
        }
        if (read(pipefd[0], msg, MSG) != MSG)
            return 1;
    }
    settle();
    for (long i = 0; i < iterations; i++) {
        long page = i % 16 ? i % 16 : 16 + (i / 16 * 37) % (pages - 16);
        pread(dfd, buf, sizeof buf, page * 4096);
    }
    pthread_join(t, NULL);
    unlink(logf);
    return 0;
}
