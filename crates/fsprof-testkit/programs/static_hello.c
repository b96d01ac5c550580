/* Statically linked: the dynamic loader never runs, so LD_PRELOAD can't
 * apply. fsprof run must say so instead of printing an empty report. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    int fd = open("/etc/hostname", O_RDONLY);
    char buf[64];
    if (fd >= 0) {
        (void)!read(fd, buf, sizeof buf);
        close(fd);
    }
    puts("static hello");
    return 0;
}
