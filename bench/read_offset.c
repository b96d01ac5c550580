/* How a read's cost depends on where its buffer starts within a page:
 * every regular file under DIR read whole the way tar reads (10,240
 * bytes a call, from its start) into a buffer OFFSET bytes past a page
 * boundary, the offsets taking turns file by file, PASSES times. Prints
 * per offset the read calls' ticks (min, median, p90) and their mean log2
 * against the first offset's (powers of two, as the replay's fidelity
 * table measures). The replayer's read buffer starts on a page
 * (crates/fsprof-replay exec.rs, PageBuf) because of what this shows.
 *   cc -O2 -o read_offset bench/read_offset.c -lm
 *   ./read_offset /usr/include/linux 3 0 16 32 2064 4080 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <x86intrin.h>

#define MAXFILES 8192
#define MAXOFF 16

static char *names[MAXFILES];
static int nfiles;

static void walk(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)) && nfiles < MAXFILES) {
        if (e->d_name[0] == '.')
            continue;
        char *p;
        if (asprintf(&p, "%s/%s", dir, e->d_name) < 0)
            break;
        if (e->d_type == DT_DIR) {
            walk(p);
            free(p);
        } else if (e->d_type == DT_REG) {
            names[nfiles++] = p;
        } else {
            free(p);
        }
    }
    closedir(d);
}

static int cmp(const void *a, const void *b)
{
    unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc - 3 > MAXOFF)
        return 2;
    walk(argv[1]);
    int passes = atoi(argv[2]), noff = argc - 3;
    long off[MAXOFF];
    for (int i = 0; i < noff; i++) {
        off[i] = atol(argv[3 + i]);
        if (off[i] < 0 || off[i] > 8192)
            return 2;
    }
    if (!nfiles || passes < 1)
        return 2;
    /* Written once: its pages are in before the first read. */
    char *mem = aligned_alloc(4096, 8192 + 16384);
    if (!mem)
        return 3;
    memset(mem, 1, 8192 + 16384);
    size_t cap = (size_t)nfiles * passes * 64;
    unsigned long *t[MAXOFF];
    size_t k[MAXOFF] = {0};
    double lsum[MAXOFF] = {0};
    for (int i = 0; i < noff; i++)
        if (!(t[i] = malloc(cap * sizeof *t[i])))
            return 3;
    for (int p = 0; p < passes; p++)
        for (int f = 0; f < nfiles; f++)
            for (int j = 0; j < noff; j++) {
                int o = (j + f + p) % noff;
                int fd = open(names[f], O_RDONLY);
                if (fd < 0)
                    continue;
                for (;;) {
                    unsigned long a = __rdtsc();
                    long r = read(fd, mem + off[o], 10240);
                    unsigned long z = __rdtsc();
                    if (r <= 0 || k[o] == cap)
                        break;
                    t[o][k[o]++] = z - a;
                    lsum[o] += log2((double)(z - a));
                }
                close(fd);
            }
    for (int o = 0; o < noff; o++) {
        if (!k[o])
            continue;
        qsort(t[o], k[o], sizeof *t[o], cmp);
        printf("offset %5ld: %zu reads, ticks min %lu median %lu p90 %lu, mean log2 %+.3f against offset %ld\n", off[o], k[o],
               t[o][0], t[o][k[o] / 2], t[o][k[o] * 9 / 10], lsum[o] / k[o] - lsum[0] / k[0], off[0]);
    }
    return 0;
}
