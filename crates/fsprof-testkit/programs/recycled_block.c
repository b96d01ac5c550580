/* A process whose counters fsprof recycles while it still runs.
 *
 *   recycled_block OUT       Q, forked, makes a call (its counters take an
 *                            arena block), clones a child C with a raw
 *                            clone(2) (no fork handlers: C keeps Q's
 *                            counters) and exits; once Q is reaped its
 *                            block is zeroed and offered again, and a new
 *                            image (`leaf`) takes it and makes the calls C
 *                            makes next. C writes "ok" to OUT if it lives.
 *   recycled_block leaf      three stats, then stays a while.
 *
 * Run with FSPROF_TEST_ARENA_BLOCKS=2: this process's block and one more,
 * so that the leaf can only take Q's. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void three_stats(void)
{
    struct stat st;
    for (int i = 0; i < 3; i++)
        stat("/", &st);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (strcmp(argv[1], "leaf") == 0) {
        three_stats();
        pause_ms(1500);
        return 0;
    }
    pid_t q = fork();
    if (q == 0) {
        three_stats();
        long c = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
        if (c == 0) {
            pause_ms(1000); /* Q reaped, its block given to the leaf */
            three_stats();
            int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0 && write(fd, "ok", 2) == 2)
                close(fd);
            _exit(0);
        }
        _exit(c > 0 ? 0 : 1);
    }
    int st;
    if (q < 0 || waitpid(q, &st, 0) != q || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return 1;
    pause_ms(300); /* more than fsprof's harvest period */
    pid_t g = fork();
    if (g == 0) {
        execl(argv[0], argv[0], "leaf", (char *)NULL);
        _exit(127);
    }
    if (g < 0 || waitpid(g, &st, 0) != g)
        return 1;
    for (int i = 0; i < 40 && access(argv[1], F_OK) != 0; i++)
        pause_ms(50);
    return 0;
}
