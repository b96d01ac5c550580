/* The shim's self-test in a process of its own, for an fsprof that cannot
 * load the shim into itself (a static musl build has no dlopen): loads the
 * shim given as argv[1] as LoadedShim::load does (RTLD_NOW|RTLD_LOCAL, so
 * nothing is interposed), reads the control block from stdin, runs
 * fsprof_shim_selftest with argv[2] iterations and writes its SelfTest
 * (three doubles, native layout) to stdout. Exit 0 only with the result
 * written; otherwise one line on stderr. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct selftest {
	double per_call_ns, min_recordable_ns, outside_ns;
};

typedef int (*selftest_fn)(const unsigned char *, size_t, unsigned, struct selftest *);

/* A control block is 12 KB; anything near this is not one. */
#define MAX_CONTROL (1 << 20)

static int fail(const char *what, const char *why)
{
	fprintf(stderr, "%s%s%s\n", what, why ? ": " : "", why ? why : "");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return fail("usage: selftest SHIM ITERATIONS < CONTROL", NULL);
	char *end;
	unsigned long iterations = strtoul(argv[2], &end, 10);
	if (*end || iterations == 0 || iterations > 1000000)
		return fail("bad iteration count", argv[2]);
	/* The shim reads the block as 64-bit words. */
	static unsigned long long block[MAX_CONTROL / 8];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(0, (char *)block + len, sizeof block - len);
		if (n == 0)
			break;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail("cannot read the control block", strerror(errno));
		len += (size_t)n;
		if (len == sizeof block)
			return fail("control block too large", NULL);
	}
	void *shim = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!shim)
		return fail("cannot load the preload shim", dlerror());
	selftest_fn f = (selftest_fn)dlsym(shim, "fsprof_shim_selftest");
	if (!f)
		return fail("the preload shim lacks fsprof_shim_selftest", NULL);
	struct selftest out;
	memset(&out, 0, sizeof out);
	if (f((const unsigned char *)block, len, (unsigned)iterations, &out) != 0)
		return fail("the preload shim rejected the self-test parameters", NULL);
	if (write(1, &out, sizeof out) != (ssize_t)sizeof out)
		return fail("cannot write the result", strerror(errno));
	return 0;
}
