/* This process's counter file as a pool of chunks (pool.c). Above run.h
 * and util.h; the process set-up calls it. The hot path's slow paths
 * (record.h) are its other entry points. */
#ifndef FSPROF_POOL_H
#define FSPROF_POOL_H

#include <stdint.h>

#include "record.h"

/* This process's counter file header (start of its first chunk). */
extern HIDDEN struct fsprof_proc *g_proc;

/* Creates p<seq> under the run directory `dirfd` with its first chunk
 * reserved, mapped and its header filled; 0 or -errno. A file that cannot
 * be completed is removed. */
HIDDEN long fsprof_pool_create(long dirfd);
/* The same with arena block k (taken) as the first chunk: no file until
 * the pool grows past it. 0, -errno, or FSPROF_BLOCK_UNREADY: the block's
 * pages could not be made (it is left; a file is the way on). */
#define FSPROF_BLOCK_UNREADY 1
HIDDEN long fsprof_pool_create_in_block(long k);
/* argv as the shim's constructor received it, for the process's header
 * (else it is read from /proc/self/cmdline). */
HIDDEN void fsprof_pool_argv(int argc, char **argv);
/* At the constructor's end: argv and the stack are the program's from
 * here on; names no header took are copied now. */
HIDDEN void fsprof_pool_names_kept(void);
/* In the parent, before a fork: the names that went into this image's
 * header, copied for the child's own header (once). */
HIDDEN void fsprof_pool_before_fork(void);
/* After fork, in the child: the parent's chunks are not the child's. */
HIDDEN void fsprof_pool_forget(void);
/* A new slot record for the calling thread (the shared one when there
 * is no room); NULL while this thread is inside a slow path already. */
HIDDEN struct slot_rec *fsprof_pool_thread_slot(void);
/* For `fsprof trace`, before the first table is handed out: the last `n`
 * bytes of this image's arena block, counted in its `top_used` (so that
 * `fsprof run` zeroes them when it takes the block back), or NULL when the
 * pool is not in a block or has no such room. */
HIDDEN char *fsprof_pool_block_top(uint64_t n);

#endif
