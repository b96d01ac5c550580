/* Recording every intercepted call for `fsprof trace` (trace.c). The
 * wrappers take a separate, traced path only when tracing is on, so the
 * counters-only path of `fsprof run` gains one predictable branch. */
#ifndef FSPROF_TRACE_H
#define FSPROF_TRACE_H

#include <stdio.h>

#include "record.h"
#include "trace_abi.h"

/* 0 = off; else enum fsprof_trace_data. Set once per process image. */
extern HIDDEN int g_trace;

/* The arguments of a call in progress, taken before the call so that
 * FILE* and DIR* arguments are read while they are still alive. */
struct fsprof_tpre {
    int op;
    int nargs;
    uint64_t a[FSPROF_TREC_MAX_ARGS];
    /* The stream a stdio call names (its buffer is looked at after the
     * call: stream_marks in trace.c), or NULL. */
    FILE *stream;
    /* The bytes an output call without a buffer argument gave its stream
     * or descriptor (printf's formatted text, putc's character), set by
     * the wrapper after the call; NULL: none. */
    const void *out;
    uint64_t nout;
};

HIDDEN COLD void fsprof_trace_pre(struct fsprof_tpre *p, int op, const char *name, const uint64_t *a,
                             int n);
/* Appends the record of a returned call; keeps errno. */
HIDDEN void fsprof_trace_post(const struct fsprof_tpre *p, uint64_t t0, uint64_t t1, int64_t ret,
                              int failed);
/* From process.c: this process image has its counter file, whose header
 * is `proc` (its seq, executable and argv); `seq_counter` numbers new
 * files. `dirfd`: the run directory, open and checked
 * (fsprof_open_run_dir), or -1; closed here, before anything looks at the
 * image's descriptors. */
HIDDEN void fsprof_trace_process(uint64_t *seq_counter, const struct fsprof_proc *proc,
                                 long dirfd);
/* The image has a record of descriptor `fd` (it opened it), or has none
 * any more (a call it does not trace made the number anew). */
HIDDEN void fsprof_trace_fd_known(long fd, int known);
HIDDEN void fsprof_trace_before_fork(void);
HIDDEN void fsprof_trace_after_fork(void);
/* Before a file mapping is made: lets the mapping's page faults out of the
 * kernel (trace_abi.h, FSPROF_TMAP_MARK). Keeps errno. */
HIDDEN void fsprof_trace_mark_mapping(void);
/* Appends the bytes [addr, addr+len) of pages written through a shared
 * mapping (FSPROF_TREC_MAPPED); `superset`: every present page, not only
 * the dirty ones. Keeps errno. */
HIDDEN void fsprof_trace_contents(const void *addr, uint64_t len, int superset);

/* Arguments as uint64_t, whatever their type (integers, pointers). */
#define TR_U(x) ((uint64_t)(uintptr_t)(x))
#define TR_NARG(...) TR_NARG_(__VA_ARGS__, 6, 5, 4, 3, 2, 1, 0)
#define TR_NARG_(_1, _2, _3, _4, _5, _6, n, ...) n
#define TR_CAT(a, b) TR_CAT_(a, b)
#define TR_CAT_(a, b) a##b
#define TR_L1(a) TR_U(a)
#define TR_L2(a, b) TR_U(a), TR_U(b)
#define TR_L3(a, b, c) TR_U(a), TR_U(b), TR_U(c)
#define TR_L4(a, b, c, d) TR_U(a), TR_U(b), TR_U(c), TR_U(d)
#define TR_L5(a, b, c, d, e) TR_U(a), TR_U(b), TR_U(c), TR_U(d), TR_U(e)
#define TR_L6(a, b, c, d, e, f) TR_U(a), TR_U(b), TR_U(c), TR_U(d), TR_U(e), TR_U(f)
#define TR_LIST(...) TR_CAT(TR_L, TR_NARG(__VA_ARGS__))(__VA_ARGS__)

#endif
