/* The calls whose wrappers bench/hotpath_icount.py counts instructions
 * of, N of each: pread of 1 byte, fstat, and openat + read to the end +
 * close of a small file (read runs twice per open: data, then 0).
 *
 * usage: hotpath_calls N */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    char b[64];
    struct stat st;
    int fd = open("/etc/hostname", O_RDONLY);
    if (fd < 0)
        return 3;
    for (long i = 0; i < n; i++)
        (void)pread(fd, b, 1, 0);
    for (long i = 0; i < n; i++)
        (void)fstat(fd, &st);
    for (long i = 0; i < n; i++) {
        int d = openat(AT_FDCWD, "/etc/hostname", O_RDONLY | O_CLOEXEC);
        while (read(d, b, sizeof b) > 0)
            ;
        close(d);
    }
    return 0;
}
