/* The floor of fsprof run's design, for bench/startup.sh --floor: a static
 * C program that makes the system calls `fsprof run -q -- CMD` makes (read
 * off `strace fsprof run -q -- true`), with no Rust, no relocation of a
 * large binary and no user-space work between them. Against it, `fsprof
 * run` shows what fsprof's binary and its own CPU time add; against the
 * shim launcher (vlaunch.c), what the design's system calls cost.
 *
 * run_floor SHIM PROGRAM ARGS...: in order,
 *   - the installed shim checked (mkdir, open, fstat, fstatat, close);
 *   - the clock's two small files read (boot id, read twice here);
 *   - the run directory in /dev/shm (mkdir, statx) and its control file
 *     (create, a 12,896-byte write, a 128 MiB shared mapping, the file
 *     made longer by four 128 KiB blocks, sparse: the blocks the shim's
 *     processes write their counters to, offered before their pages are
 *     reserved; a process makes the pages it writes, shim/pool.c: since
 *     the eleventh session fsprof reserves none before the clone);
 *   - the command found on PATH (one statx per directory, as fsprof does);
 *   - pinned to this CPU, clone(CLONE_VM|CLONE_VFORK) whose child gives
 *     the mask back and execve's the command with the shim preloaded
 *     (inactive: this program writes no valid control header, so the shim
 *     does not join a run; that cost is the per-process part);
 *   - while it runs, the scan for stale run directories (/dev/shm read, kill(pid, 0) and
 *     statx for each run directory), a small file read (the kept
 *     self-cost), an unnamed file made in the current directory
 *     (O_TMPFILE, with its final mode); SIGCHLD awaited, the command
 *     reaped;
 *   - the run ended (a store into the mapping: the shim counted no
 *     counter file, so the run directory is not read), the count of lost
 *     processes read through the mapping (as fsprof does: no copy of the
 *     header), a ~900-byte profile written, linked under a free
 *     fsprof-floor-N.json name, the notice on stderr;
 *   - the run directory removed, the mapping and files closed (the
 *     blocks' pages freed).
 * Exit status: the command's, or 127/1 on a failure of its own. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char child_stack[64 * 1024] __attribute__((aligned(16)));
static const char *child_path;
static char **child_argv;
static char **child_env;
static cpu_set_t full_mask;
static pid_t parent_tid;

static int child(void *arg) {
    (void)arg;
    sched_setaffinity(parent_tid, sizeof full_mask, &full_mask);
    execve(child_path, child_argv, child_env);
    _exit(127);
}

static void read_small(const char *path) {
    char buf[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, buf, sizeof buf) < 0) buf[0] = 0;
        close(fd);
    }
}

static int find_on_path(const char *name, char *out) {
    const char *path = getenv("PATH");
    struct statx stx;
    if (strchr(name, '/')) return snprintf(out, PATH_MAX, "%s", name) > 0 ? 0 : -1;
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        const char *end = strchrnul(p, ':');
        snprintf(out, PATH_MAX, "%.*s/%s", (int)(end - p), p, name);
        if (statx(AT_FDCWD, out, 0, STATX_ALL, &stx) == 0 && S_ISREG(stx.stx_mode)) return 0;
        p = *end ? end + 1 : end;
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 3) return 127;
    const char *shim = argv[1];
    char dir[64], run[96], control[128], prog[PATH_MAX], preload[PATH_MAX + 16];
    struct stat st;
    struct statx stx;
    signal(SIGPIPE, SIG_IGN);
    sigset_t wanted, old;
    sigemptyset(&wanted);
    sigaddset(&wanted, SIGCHLD);
    sigprocmask(SIG_BLOCK, &wanted, &old);

    /* The installed shim checked. */
    snprintf(dir, sizeof dir, "/tmp/fsprof-%u", geteuid());
    mkdir(dir, 0711);
    int d = open(dir, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY);
    if (d >= 0) {
        fstat(d, &st);
        fstatat(d, strrchr(shim, '/') ? strrchr(shim, '/') + 1 : shim, &st, AT_SYMLINK_NOFOLLOW);
        close(d);
    }
    /* The clock's two small files. */
    read_small("/proc/sys/kernel/random/boot_id");
    read_small("/proc/sys/kernel/random/boot_id");

    /* The run directory and its control file, with the blocks. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(run, sizeof run, "/dev/shm/fsprof-floor-%d-%ld", getpid(), now.tv_nsec);
    if (mkdir(run, 0700) != 0 || statx(AT_FDCWD, run, AT_SYMLINK_NOFOLLOW, STATX_ALL, &stx) != 0) return 127;
    snprintf(control, sizeof control, "%s/control", run);
    int c = open(control, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    static char header[12896];
    memcpy(header, "FLOOR000", 8);
    if (c < 0 || write(c, header, sizeof header) != (ssize_t)sizeof header) return 127;
    size_t map_len = 134283264;
    void *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, c, 0);
    int arena = c;
    if (map == MAP_FAILED || ftruncate(arena, 65536 + 524288) != 0) return 127;

    /* The command found, its environment made. */
    if (find_on_path(argv[2], prog) != 0) return 127;
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", shim);
    int n = 0;
    while (environ[n]) n++;
    child_env = calloc(n + 2, sizeof *child_env);
    for (int i = 0; i < n; i++) child_env[i] = environ[i];
    child_env[n] = preload;
    child_path = prog;
    child_argv = argv + 2;

    /* Pinned for the clone; the child gives the mask back. */
    cpu_set_t one;
    sched_getaffinity(0, sizeof full_mask, &full_mask);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);
    parent_tid = (pid_t)syscall(SYS_gettid);
    sigset_t all, before;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &before);
    pid_t pid = clone(child, child_stack + sizeof child_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
    sigprocmask(SIG_SETMASK, &before, NULL);
    if (pid < 0) return 127;

    /* While the command runs: the stale-run scan, the self-cost file,
     * the unnamed profile file. */
    DIR *shm = opendir("/dev/shm");
    if (shm) {
        struct dirent *e;
        while ((e = readdir(shm))) {
            int other;
            if (sscanf(e->d_name, "fsprof-run-%d-", &other) == 1) {
                kill(other, 0);
                statx(dirfd(shm), e->d_name, AT_SYMLINK_NOFOLLOW, STATX_ALL, &stx);
                geteuid();
            }
        }
        closedir(shm);
    }
    read_small("/proc/sys/kernel/random/boot_id");
    int cwd = open(".", O_RDONLY | O_CLOEXEC | O_PATH | O_DIRECTORY);
    int out = openat(cwd, ".", O_WRONLY | O_CLOEXEC | O_TMPFILE, 0644);
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == 0) {
        sigwaitinfo(&wanted, NULL);
        waitpid(pid, &status, 0);
    }

    /* The run's end: counters read, profile written and linked. */
    __atomic_store_n((unsigned *)((char *)map + 48), 1, __ATOMIC_RELEASE);
    volatile unsigned long lost = __atomic_load_n((unsigned long *)((char *)map + 56), __ATOMIC_ACQUIRE);
    (void)lost;
    struct utsname u;
    uname(&u);
    char profile[1024];
    int len = snprintf(profile, sizeof profile, "{\n  \"format\": \"fsprof-floor\",\n  \"host\": \"%s\",\n  \"pad\": \"%0800d\"\n}\n", u.nodename, 0);
    if (out >= 0 && write(out, profile, len) == len) {
        char name[64];
        for (int i = 0; i < 100; i++) {
            snprintf(name, sizeof name, "fsprof-floor-%d-%d.json", getpid(), i);
            if (linkat(out, "", cwd, name, AT_EMPTY_PATH) == 0 || errno != EEXIST) break;
        }
        dprintf(2, "fsprof: profile written to %s\n", name);
    }
    close(cwd);
    close(out);
    unlink(control);
    rmdir(run);
    munmap(map, map_len);
    close(arena);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
