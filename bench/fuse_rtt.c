/* Times N fstat() calls on one open file: through a FUSE mount whose
 * attributes are never cached, each is one GETATTR round trip to the
 * daemon. Prints the mean nanoseconds per call.
 *
 * Usage: fuse_rtt FILE N
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct stat st;
	struct timespec a, b;
	long n, k;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: %s FILE N\n", argv[0]);
		return 2;
	}
	n = atol(argv[2]);
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || n <= 0) {
		perror(argv[1]);
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (k = 0; k < n; k++) {
		if (fstat(fd, &st) != 0) {
			perror("fstat");
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}
