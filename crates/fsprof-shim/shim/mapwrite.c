/* The bytes of pages a traced program wrote through shared file mappings
 * (`fsprof trace --data full`). A store is no call: the trace learns that
 * it happened from the page fault (fsprof follows faults with eBPF, as
 * root), and its bytes here, just before the msync or munmap that hands
 * them to the file, and at exit for mappings still there.
 *
 * Which pages were written: those present in this process's page tables
 * (/proc/self/pagemap) whose page the kernel holds dirty (/proc/kpageflags,
 * readable by root only; the page frame numbers in pagemap too). Without
 * them every present page's bytes are taken: a superset (pages only read
 * are included), and the record says so. Only MAP_SHARED mappings with
 * PROT_WRITE are followed, in a small fixed table; a table that is full,
 * or busy in a signal handler, leaves a mapping out. As everywhere in the
 * set-up code, only raw system calls (util.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mapwrite.h"
#include "trace.h"

#define WMAPS 64
#define PAGE 4096ULL
/* Pages per record (256 KiB): a record fits a usual chunk. */
#define RUN_MAX 64
/* pagemap entries read at once. */
#define PM_BATCH 512
#define PM_PRESENT (1ULL << 63)
#define PM_PFN ((1ULL << 55) - 1)
#define KPF_DIRTY (1ULL << 4)

/* In .lbss, off the page of .bss every process writes (pool.c's first
 * slot record needs the room): a process writes it only when it maps a
 * file shared and writable under a full trace; reading it (at a full
 * trace's exit) maps the zero page. */
static struct {
    uintptr_t addr; /* 0: free */
    uint64_t len;
} g_wmaps[WMAPS] BIG_BSS;
static int g_wlock;

/* The table's lock, never waited for long: a signal handler that maps or
 * syncs while its thread holds it would wait for ever, so 0 after a few
 * tries and the caller goes without. */
static int lock_table(void)
{
    for (int i = 0; i < 64; i++) {
        if (!__atomic_exchange_n(&g_wlock, 1, __ATOMIC_ACQUIRE))
            return 1;
        syscall(SYS_sched_yield);
    }
    return 0;
}

static void unlock_table(void)
{
    __atomic_store_n(&g_wlock, 0, __ATOMIC_RELEASE);
}

HIDDEN void fsprof_mapwrite_remember(void *addr, size_t len, int prot, int flags)
{
    if (g_trace != FSPROF_TDATA_FULL || !(prot & PROT_WRITE) || (flags & MAP_TYPE) == MAP_PRIVATE ||
        len == 0 || !lock_table())
        return;
    for (int i = 0; i < WMAPS; i++)
        if (g_wmaps[i].addr == 0) {
            g_wmaps[i].addr = (uintptr_t)addr;
            g_wmaps[i].len = (len + PAGE - 1) & ~(PAGE - 1);
            break;
        }
    unlock_table();
}

/* Records the written pages of [lo, hi) (page aligned), in runs. */
static void record_range(uintptr_t lo, uintptr_t hi, long pm, long kf)
{
    uint64_t ent[PM_BATCH];
    uintptr_t run = 0;
    uint64_t run_pages = 0;
    int superset = kf < 0;
    for (uintptr_t at = lo; at < hi;) {
        uint64_t n = (hi - at) / PAGE;
        if (n > PM_BATCH)
            n = PM_BATCH;
        long got = syscall(SYS_pread64, pm, ent, n * 8, (long)(at / PAGE * 8));
        if (got <= 0)
            break;
        n = (uint64_t)got / 8;
        for (uint64_t i = 0; i < n; i++, at += PAGE) {
            int take = (ent[i] & PM_PRESENT) != 0;
            uint64_t pfn = ent[i] & PM_PFN;
            if (take && !superset) {
                uint64_t fl = 0;
                if (pfn == 0 || syscall(SYS_pread64, kf, &fl, 8, (long)(pfn * 8)) != 8)
                    superset = 1;
                else
                    take = (fl & KPF_DIRTY) != 0;
            }
            if (take && run_pages && run + run_pages * PAGE == at && run_pages < RUN_MAX) {
                run_pages++;
                continue;
            }
            if (run_pages)
                fsprof_trace_contents((const void *)run, run_pages * PAGE, superset);
            run = at;
            run_pages = take;
        }
    }
    if (run_pages)
        fsprof_trace_contents((const void *)run, run_pages * PAGE, superset);
}

/* The written pages of followed mappings within [addr, addr+len); with
 * `forget`, the range is not followed any more. */
static void contents(void *addr, size_t len, int forget)
{
    uintptr_t lo = (uintptr_t)addr & ~(PAGE - 1);
    uintptr_t hi = (uintptr_t)addr + len;
    if (hi < lo || !lock_table())
        return;
    int saved = errno;
    long pm = -1, kf = -1;
    for (int i = 0; i < WMAPS; i++) {
        uintptr_t s = g_wmaps[i].addr, e = s + g_wmaps[i].len;
        if (s == 0 || e <= lo || s >= hi)
            continue;
        if (pm < 0) {
            pm = syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC, 0);
            kf = syscall(SYS_openat, AT_FDCWD, "/proc/kpageflags", O_RDONLY | O_CLOEXEC, 0);
        }
        if (pm >= 0)
            record_range(s > lo ? s : lo, e < hi ? e : (hi + PAGE - 1) & ~(PAGE - 1), pm, kf);
        if (!forget)
            continue;
        /* What munmap leaves of it: one piece is kept (a hole in the
         * middle drops the part after it). */
        uintptr_t after = (hi + PAGE - 1) & ~(PAGE - 1);
        if (s < lo) {
            g_wmaps[i].len = lo - s;
        } else if (e > after) {
            g_wmaps[i].addr = after;
            g_wmaps[i].len = e - after;
        } else {
            g_wmaps[i].addr = 0;
        }
    }
    if (pm >= 0)
        syscall(SYS_close, pm);
    if (kf >= 0)
        syscall(SYS_close, kf);
    errno = saved;
    unlock_table();
}

HIDDEN void fsprof_mapwrite_sync(void *addr, size_t len)
{
    contents(addr, len, 0);
}

HIDDEN void fsprof_mapwrite_unmap(void *addr, size_t len)
{
    contents(addr, len, 1);
}

/* At exit, mappings still there: their stores reach the file all the same. */
__attribute__((destructor)) static void fsprof_mapwrite_at_exit(void)
{
    if (g_trace == FSPROF_TDATA_FULL)
        contents(NULL, ~(size_t)0, 0);
}
