/* What a process's first write to the run's control file costs it, in a
 * forked child, timed in the child (2 x N children, means in us):
 *
 *   region  a write fault on a shared tmpfs page in a 2 MiB region with no
 *           page table yet (as the control page of the 128 MiB mapping
 *           is, in every process), against one in a region whose table the
 *           child has (beside an anonymous page its parent wrote: fork
 *           copies that table), against none
 *   mgtime  two write faults on the file after an fstat of it, after a
 *           statx asking for no time, after a getpid (multigrain
 *           timestamps: an fstat marks the ctime as seen, and the file's
 *           next change then takes a fine-grained time)
 *   populate  writes to PAGES pages of the file that exist (as a reserved
 *           arena block's do), the page table there: a write fault each,
 *           against one MADV_POPULATE_WRITE of them first (as the shim
 *           made every block's first pages; now only a block's whose
 *           pages `fsprof run` has not made yet), against none
 *
 *   cc -O2 -o /tmp/ctl_fault bench/ctl_fault.c && /tmp/ctl_fault region 3000
 *   /tmp/ctl_fault populate 3000 3
 *
 * docs/benchmarks/history.md, twelfth session, runproc12 (region, mgtime);
 * thirteenth, runproc13 (populate). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void touch(char *p)
{
    __atomic_fetch_add((long *)p, 0, __ATOMIC_RELAXED);
}

/* Runs the three variants in a child each, n times; a child's
 * time in 0.1 us steps comes back as its exit status. Means in m[]. */
static void means_us(int n, int (*child)(int v), double m[3])
{
    m[0] = m[1] = m[2] = 0;
    /* The order turns each round: a child's faults change the file's
     * times for the next child. */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            int v = (i + k) % 3;
            pid_t p = fork();
            if (p == 0)
                _exit(child(v));
            int st;
            waitpid(p, &st, 0);
            m[v] += WEXITSTATUS(st) / 10.0 / n;
        }
}

static int fd;
static char *in_fresh, *beside_anon, *file_map;

static int status_of(double ns)
{
    int d = (int)(ns / 100);
    return d > 255 ? 255 : d;
}

static int region_child(int v)
{
    double a = now_ns();
    if (v == 0)
        touch(in_fresh);
    else if (v == 1)
        touch(beside_anon);
    return status_of(now_ns() - a);
}

static int mgtime_child(int v)
{
    struct stat st;
    struct statx sx;
    if (v == 0)
        fstat(fd, &st);
    else if (v == 1)
        statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_MODE | STATX_UID | STATX_INO | STATX_SIZE, &sx);
    else
        syscall(SYS_getpid); /* a system call too, on no file */
    double a = now_ns();
    touch(file_map);
    touch(file_map + 4096);
    return status_of(now_ns() - a);
}

static int g_pages;

static int populate_child(int v)
{
    double a = now_ns();
    if (v == 1)
        madvise(beside_anon, (size_t)g_pages * 4096, MADV_POPULATE_WRITE);
    if (v != 2)
        for (int k = 0; k < g_pages; k++)
            touch(beside_anon + k * 4096);
    return status_of(now_ns() - a);
}

int main(int argc, char **argv)
{
    int populate = argc == 4 && strcmp(argv[1], "populate") == 0;
    if (!populate && (argc != 3 || (strcmp(argv[1], "region") && strcmp(argv[1], "mgtime")))) {
        fprintf(stderr, "usage: ctl_fault region|mgtime N | populate N PAGES\n");
        return 2;
    }
    int n = atoi(argv[2]);
    g_pages = populate ? atoi(argv[3]) : 0;
    if (populate && (g_pages < 1 || g_pages > 64)) {
        fprintf(stderr, "ctl_fault: PAGES from 1 to 64\n");
        return 2;
    }
    double m[3];
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/ctl_fault-%d", (int)getpid());
    fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || ftruncate(fd, 4 << 20) != 0) {
        perror(path);
        return 1;
    }
    unlink(path);
    now_ns();
    if (populate) {
        /* The file's pages made (a parent's read maps none of them in a
         * child), beside an anonymous page the parent wrote: the child
         * has the page table, as a process has for its block. */
        char *base = mmap(0, 8 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        char *r = (char *)(((unsigned long)base + (2 << 20) - 1) & ~((2UL << 20) - 1));
        char *anon = mmap(r, 4096, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        anon[0] = 1;
        if (fallocate(fd, 0, 0, 1 << 20) != 0) {
            perror("fallocate");
            return 1;
        }
        beside_anon = mmap(r + 65536, 1 << 20, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_SHARED, fd, 0);
        means_us(n, populate_child, m);
        printf("%d pages written: a write fault each %.2f us, one madvise(MADV_POPULATE_WRITE) first %.2f, none %.2f\n",
               g_pages, m[0], m[1], m[2]);
    } else if (argv[1][0] == 'r') {
        /* Two 2 MiB regions: an anonymous page and a file page in the
         * first, a file page alone in the second. */
        char *base = mmap(0, 8 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        char *r = (char *)(((unsigned long)base + (2 << 20) - 1) & ~((2UL << 20) - 1));
        char *anon = mmap(r, 4096, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        anon[0] = 1;
        beside_anon = mmap(r + 65536, 1 << 20, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_SHARED, fd, 0);
        in_fresh = mmap(r + (2 << 20) + 65536, 1 << 20, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_SHARED, fd, 1 << 20);
        touch(beside_anon);
        touch(in_fresh);
        means_us(n, region_child, m);
        printf("a write fault: in a region with no page table %.2f us, beside the parent's anonymous page %.2f, none %.2f\n",
               m[0], m[1], m[2]);
    } else {
        file_map = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        touch(file_map);
        touch(file_map + 4096);
        means_us(n, mgtime_child, m);
        printf("two write faults: after an fstat %.2f us, after a statx asking for no time %.2f, after a getpid %.2f\n",
               m[0], m[1], m[2]);
    }
    return 0;
}
