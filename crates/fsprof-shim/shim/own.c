/* The shim's own cost, timed on a sample of the calls it counts (abi.h,
 * struct fsprof_own). The figure a hot loop at start-up gives misses what
 * only a real call shows: the value tables of data calls, the counters'
 * cache lines that the program and the kernel evicted in between, the
 * machine's load. So a sampled call reads the clock at the wrapper's entry
 * and exit too, and the time outside the call's own interval is filed in
 * the thread's slot, without locks. Everything here is off the hot path:
 * the hot path pays one thread-local decrement and two predicted branches.
 *
 * The two extra reads wait for every earlier instruction to complete
 * (ordered_ticks): the exit read for the wrapper's own loads, the entry
 * read for the program's work before the call. The window so holds the
 * wrapper's work as if nothing overlapped it, which is meant to be at most
 * what the wrapper adds: a program with work of its own in flight around a
 * call (grep scanning the buffer a read filled) hides part of it and pays
 * less. bench/selfcost_bound.py checks the bound against the added time
 * measured without fsprof (unordered reads gave 0.9x of it in a tight loop
 * of cached preads: not a bound). */
#include "record.h"

/* t_own_left is in this thread's hot block (record.h). */
static TLS uint64_t t_own_rng;

/* The next gap: FSPROF_OWN_GAP_MIN + 0..SPAN-1, from a per-thread LCG
 * (Knuth's MMIX constants) seeded the same in every thread, so that a
 * deterministic program is sampled the same way in every run. */
static int32_t next_gap(void)
{
    t_own_rng = t_own_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return FSPROF_OWN_GAP_MIN + (int32_t)((t_own_rng >> 33) % FSPROF_OWN_GAP_SPAN);
}

/* The clock, read only after every earlier instruction has completed
 * (lfence; the vDSO's clock_gettime orders its own read the same way). */
static inline __attribute__((always_inline)) uint64_t ordered_ticks(void)
{
#if defined(__x86_64__)
    if (LIKELY(g_clock == FSPROF_CLOCK_TSC)) {
        __builtin_ia32_lfence();
        return __builtin_ia32_rdtsc();
    }
#endif
    return now_ticks();
}

HIDDEN uint64_t fsprof_own_fire(void)
{
    /* A thread's first call finds the countdown at 0 (now -1): it sets up
     * the thread's slot, a one-off cost, and is not sampled. */
    int fresh = t_own_left < 0;
    t_own_left = next_gap();
    if (fresh)
        return 0;
    uint64_t t = ordered_ticks();
    return t ? t : 1;
}

static void add_own(uint64_t *p, uint64_t v)
{
    if (LIKELY(!t_shared))
        add_private(p, v);
    else
        add_shared(p, v);
}

HIDDEN void fsprof_own_file(uint64_t entry, uint64_t t0, uint64_t t1)
{
    uint64_t exit = ordered_ticks();
    struct slot_rec *s = t_slot;
    if (s == NULL)
        return;
    struct fsprof_own *o = &s->sh->h.own;
    /* Clock reads out of order (a migration between CPUs whose counters
     * disagree) time nothing: counted with the windows left out. */
    if (exit < entry || t1 < t0 || exit - entry < t1 - t0) {
        add_own(&o->over, 1);
        return;
    }
    uint64_t ns = ticks_to_ns((exit - entry) - (t1 - t0));
    if (ns >= FSPROF_OWN_CUT_NS) {
        add_own(&o->over, 1);
        return;
    }
    add_own(&o->ns, ns);
    add_own(&o->sq_ns, ns * ns);
    /* Last, so that a reader never sees a sample without its cost. */
    __atomic_signal_fence(__ATOMIC_RELEASE);
    add_own(&o->samples, 1);
}
