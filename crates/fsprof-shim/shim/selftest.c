/* Entry points for `fsprof run` itself (the shim dlopen'ed, never
 * preloaded): the layout it was compiled with, its own cost per call, and
 * the bucket its hot path picks for a latency. */
#define _GNU_SOURCE
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "run.h"
#include "util.h"
#include "trace.h"

EXPORT void fsprof_shim_abi(struct fsprof_abi_layout *out)
{
    memset(out, 0, sizeof *out);
    out->control_size = sizeof(struct fsprof_control);
    out->ctr_size = sizeof(struct fsprof_ctr);
    out->proc_size = sizeof(struct fsprof_proc);
    out->lost_size = sizeof(struct fsprof_lost);
    out->off_ctl_next_seq = offsetof(struct fsprof_control, next_seq);
    out->off_ctl_state = offsetof(struct fsprof_control, state);
    out->off_ctl_lost_count = offsetof(struct fsprof_control, lost_count);
    out->off_ctl_lost = offsetof(struct fsprof_control, lost);
    out->off_ctl_thresholds = offsetof(struct fsprof_control, thresholds);
    out->off_ctr_buckets = offsetof(struct fsprof_ctr, buckets);
    out->off_proc_nslots = offsetof(struct fsprof_proc, nslots);
    out->off_proc_ready = offsetof(struct fsprof_proc, ready);
    out->off_proc_dropped = offsetof(struct fsprof_proc, dropped);
    out->off_proc_exe = offsetof(struct fsprof_proc, exe);
    out->off_proc_cmdline = offsetof(struct fsprof_proc, cmdline);
    out->off_proc_corr_ops = offsetof(struct fsprof_proc, corr_ops);
    out->off_proc_slot_size = offsetof(struct fsprof_proc, slot_size);
    out->nops = OP_COUNT;
    out->nctr = NCTR;
    out->nfdops = FDOP_COUNT;
    out->corr_ops = CORR_COUNT;
    out->corr_lat = FSPROF_CORR_LAT;
    out->corr_val = FSPROF_CORR_VAL;
    uint32_t k = 0;
#define C(n) out->corr_op_index[k++] = OP_##n;
#include "dataops.def"
#undef C
    (void)k;
    out->abi_version = FSPROF_ABI_VERSION;
    out->tick_shift = FSPROF_TICK_SHIFT;
    out->fd_track = FSPROF_FD_TRACK;
    out->fd_state_size = sizeof(struct fsprof_fd_state);
    out->slot_hdr_size = sizeof(struct fsprof_slot_hdr);
    out->proc_hdr_size = FSPROF_PROC_HDR_SIZE;
    uint32_t *f = out->off_ctr_fields;
    f[0] = offsetof(struct fsprof_ctr, pre);
    f[1] = offsetof(struct fsprof_ctr, post);
    f[2] = offsetof(struct fsprof_ctr, errors);
    f[3] = offsetof(struct fsprof_ctr, total_ns);
    f[4] = offsetof(struct fsprof_ctr, min_ns);
    f[5] = offsetof(struct fsprof_ctr, max_ns);
    f[6] = offsetof(struct fsprof_ctr, zero);
    f[7] = offsetof(struct fsprof_ctr, reserved);
    out->off_slot_own = offsetof(struct fsprof_slot_hdr, own);
    out->own_gap_min = FSPROF_OWN_GAP_MIN;
    out->own_gap_span = FSPROF_OWN_GAP_SPAN;
    out->own_cut_ns = FSPROF_OWN_CUT_NS;
    out->off_slot_used = offsetof(struct fsprof_slot_hdr, used);
    out->slot_used_words = FSPROF_SLOT_USED_WORDS;
    out->off_ctl_block_size = offsetof(struct fsprof_control, block_size);
    out->off_ctl_ring_head = offsetof(struct fsprof_control, ring_head);
    out->off_ctl_ring_tail = offsetof(struct fsprof_control, ring_tail);
    out->off_ctl_ring = offsetof(struct fsprof_control, ring);
    out->off_ctl_blocks_ready = offsetof(struct fsprof_control, blocks_ready);
    out->off_ctl_files = offsetof(struct fsprof_control, files);
    out->off_proc_block = offsetof(struct fsprof_proc, block);
    out->off_proc_file = offsetof(struct fsprof_proc, file);
    out->off_proc_used = offsetof(struct fsprof_proc, used);
    out->arena_off = FSPROF_ARENA_OFF;
    out->ring = FSPROF_RING;
    out->max_blocks = FSPROF_MAX_BLOCKS;
    out->off_ctl_faults = offsetof(struct fsprof_control, faults);
    out->off_ctl_faults_late = offsetof(struct fsprof_control, faults_late);
    out->faults_wait_ms = FSPROF_FAULTS_WAIT_MS;
}

static __attribute__((noinline)) long fsprof_noop(long x)
{
    __asm__ volatile("" : "+r"(x));
    return x;
}

/* The shape of a wrapper outside the window a sampled call times (own.c):
 * the registers a wrapper saves, the tracing test, the own-cost countdown
 * (and, one call in FSPROF_OWN_EVERY, the sample's clock reads) and one
 * more call level on the way to libc. */
static __attribute__((noinline)) long wrapper_shape(long (*fn)(long), long x)
{
    if (UNLIKELY(__atomic_load_n(&g_trace, __ATOMIC_RELAXED)))
        x++;
    uint64_t e = own_begin();
    __asm__ volatile("" : "+r"(x) : : "rbx", "rbp", "r12", "r13", "r14", "r15");
    long r = fn(x);
    own_end(e, 0, 0);
    __asm__ volatile("" : "+r"(r));
    return r;
}

enum loop_kind { LOOP_BARE, LOOP_TIMED, LOOP_SHAPE };

static double best_ns_per_iter(enum loop_kind kind, long (*callee)(long), uint32_t iters)
{
    long (*volatile fn)(long) = callee;
    double best = 1e300;
    for (int round = 0; round < 5; round++) {
        uint64_t a = fsprof_mono_ns();
        for (uint32_t i = 0; i < iters; i++) {
            if (kind == LOOP_SHAPE) {
                (void)wrapper_shape(fn, (long)i);
            } else if (kind == LOOP_TIMED) {
                int file;
                struct fsprof_ctr *c = call_begin_fd(OP_read, FDOP_read, 0, &file);
                uint64_t t0 = now_ticks();
                long r = fn((long)i);
                uint64_t t1 = now_ticks();
                call_end(c, t0, t1, r == -1);
            } else {
                (void)fn((long)i);
            }
        }
        double per = (double)(fsprof_mono_ns() - a) / iters;
        if (per < best)
            best = per;
    }
    return best;
}

static uint64_t g_selftest_thr[FSPROF_MAX_NBUCKETS] BIG_BSS;

/* Takes the parameters of a control block of `len` bytes, if valid. */
static int use_control(const struct fsprof_control *ctl, size_t len)
{
    if (len < sizeof *ctl)
        return 0;
    struct ctl_params p;
    fsprof_ctl_params(ctl, &p);
    if (!fsprof_control_valid(&p, len))
        return 0;
    memcpy(g_selftest_thr, ctl->thresholds, (size_t)p.nbuckets * 8);
    fsprof_apply_params(&p, g_selftest_thr);
    return 1;
}

/* Measures this shim's own cost with the run's clock parameters: the time
 * the bookkeeping adds around a call on a file descriptor, and the
 * smallest latency it can see (FSprof §4.2). Uses scratch counters, never
 * the run's files. */
EXPORT int fsprof_shim_selftest(const struct fsprof_control *ctl, size_t len, uint32_t iters,
                                struct fsprof_selftest *out)
{
    if (iters == 0 || !use_control(ctl, len))
        return -1;
    size_t slot_len = (sizeof(struct slot_rec) + sizeof(struct slot_shared) + 63) & ~(size_t)63;
    size_t len_all = slot_len + g_ctr_size;
    /* Raw system calls: mmap and munmap are the shim's own wrappers. */
    char *scratch = (char *)syscall(SYS_mmap, 0, len_all, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (scratch == MAP_FAILED)
        return -1;
    struct slot_rec *s = (struct slot_rec *)scratch;
    s->sh = (struct slot_shared *)(scratch + sizeof *s);
    s->ctr[OP_read] = (struct fsprof_ctr *)(scratch + slot_len);
    /* fd 0 as a file, so that the timed path is the file path. */
    uint8_t saved_class = g_fdclass[0];
    g_fdclass[0] = FSPROF_FD_FILE;
    struct slot_rec *saved_slot = t_slot;
    int saved_shared = t_shared;
    t_slot = s;
    t_shared = 0;
    int32_t saved_left = t_own_left;
    double bare = best_ns_per_iter(LOOP_BARE, fsprof_noop, iters);
    double timed = best_ns_per_iter(LOOP_TIMED, fsprof_noop, iters);
    /* Around a no-op rather than a system call: a system call's own
     * variation (tens of ns under load) would swamp a difference of a few. */
    double shape = best_ns_per_iter(LOOP_SHAPE, fsprof_noop, iters);
    t_own_left = saved_left;
    uint64_t min_pair = UINT64_MAX;
    for (uint32_t i = 0; i < iters; i++) {
        uint64_t t0 = now_ticks();
        uint64_t t1 = now_ticks();
        uint64_t ns = ticks_to_ns(t1 - t0);
        if (ns < min_pair)
            min_pair = ns;
    }
    t_slot = saved_slot;
    t_shared = saved_shared;
    g_fdclass[0] = saved_class;
    syscall(SYS_munmap, scratch, len_all);
    out->per_call_ns = timed > bare ? timed - bare : 0.0;
    out->outside_ns = shape > bare ? shape - bare : 0.0;
    out->min_recordable_ns = (double)min_pair;
    return 0;
}

/* For the tests: the slot the hot path files a latency of `ns` > 0 in, with
 * the run's parameters, so it can be compared with fsprof-core's exact
 * bucket function at every resolution. UINT32_MAX for a control block the
 * shim would refuse. */
EXPORT uint32_t fsprof_shim_bucket_slot(const struct fsprof_control *ctl, size_t len, uint64_t ns)
{
    if (!use_control(ctl, len))
        return UINT32_MAX;
    return bucket_slot(ns);
}

/* For the tests: the latency in ns the hot path files for a call of `d`
 * ticks, with the run's parameters, so it can be compared with the exact
 * product. -1 for a control block the shim would refuse. */
EXPORT int fsprof_shim_ticks_to_ns(const struct fsprof_control *ctl, size_t len, uint64_t d,
                                   uint64_t *ns)
{
    if (!use_control(ctl, len))
        return -1;
    *ns = ticks_to_ns(d);
    return 0;
}

/* For the tests: the cell a value table files `v` in, on an axis of n. */
EXPORT uint32_t fsprof_shim_corr_cell(uint64_t v, uint32_t n)
{
    return corr_cell(v, n);
}
