/* Counts the SIGINTs it receives, one byte per delivery written from the
 * handler itself (a shell's trap would merge deliveries that arrive before
 * it runs). argv[1]: the count file; argv[2]: written once the handler is
 * in place; exits when argv[3] exists; argv[4] "own-group" leaves the
 * terminal's foreground process group first, so that only signals sent to
 * it directly reach it. Reads /etc/hostname first, so the profile has a
 * call in it. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int counter = -1;

static void on_int(int sig) {
    (void)sig;
    (void)!write(counter, "I", 1);
}

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    if (strcmp(argv[4], "own-group") == 0 && setpgid(0, 0) != 0) return 3;
    counter = open(argv[1], O_WRONLY | O_CREAT | O_APPEND, 0644);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_int;
    sigaction(SIGINT, &sa, NULL);
    char buf[256];
    int h = open("/etc/hostname", O_RDONLY);
    if (h >= 0) { (void)!read(h, buf, sizeof buf); close(h); }
    int r = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    (void)!write(r, "go", 2);
    close(r);
    struct timespec ts = {0, 20 * 1000 * 1000};
    while (access(argv[3], F_OK) != 0) nanosleep(&ts, NULL);
    return 0;
}
