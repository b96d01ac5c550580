/* A sequential scan of a file through a shared read-only mapping: one load
 * per 4 KiB page, the sum printed so the loads are not optimised away
 * (bench/trace_mmap.py). */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    struct stat st;
    int fd = argc > 1 ? open(argv[1], O_RDONLY) : -1;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0)
        return 1;
    const volatile unsigned char *p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return 2;
    unsigned long sum = 0;
    for (off_t at = 0; at < st.st_size; at += 4096)
        sum += p[at];
    printf("%lu\n", sum);
    return munmap((void *)p, st.st_size) || close(fd);
}
