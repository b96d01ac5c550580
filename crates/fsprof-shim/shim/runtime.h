/* What the shim's set-up files share (never the hot path): the run this
 * process belongs to, its control file, its counter file's pool. Nothing
 * here may call an interposed function: files are opened with raw system
 * calls and strings are built by hand (no stdio, no malloc), so the set-up
 * can run in a constructor, inside another library's constructor or in a
 * signal handler without recursing or taking a lock. */
#ifndef FSPROF_RUNTIME_H
#define FSPROF_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"

/* The run directory, as FSPROF_SHM described it when the shim loaded: a
 * process looks it up by path only to check that what it finds is this
 * very directory (device, inode, owner, mode 0700), never trusting the
 * name alone. */
struct run_id {
    uint64_t dev, ino;
    uint32_t uid;
    int ok;
    char path[4096];
};
extern HIDDEN struct run_id g_run;
/* The run's control file, mapped; NULL until attached. */
extern HIDDEN struct fsprof_control *g_ctl;
/* This process's counter file header (start of its first chunk). */
extern HIDDEN struct fsprof_proc *g_proc;
extern HIDDEN uint32_t g_max_slots;

/* runtime.c */
HIDDEN void fsprof_capture_env(void);
HIDDEN int fsprof_process_ready(void);
HIDDEN long fsprof_open_run_dir(void);
HIDDEN void fsprof_lost(uint32_t what, int err, uint32_t uid, const char *exe);
HIDDEN size_t fsprof_cat(char *dst, size_t at, size_t cap, const char *src);
HIDDEN size_t fsprof_cat_u64(char *dst, size_t at, size_t cap, uint64_t v);
/* Up to cap bytes of a small file (/proc/self/cmdline) by raw syscalls; 0 when it cannot be read. */
/* CLOCK_MONOTONIC in ns. */
HIDDEN uint64_t fsprof_mono_ns(void);
HIDDEN uint32_t fsprof_read_small_file(const char *path, char *buf, uint32_t cap);
HIDDEN int fsprof_control_valid(const struct fsprof_control *h, uint64_t size);
HIDDEN void fsprof_apply_params(const struct fsprof_control *c, const uint64_t *thresholds);

/* pool.c: the counter file as a pool of chunks reserved before use. */
HIDDEN int fsprof_pool_start(long fd, char *map, uint64_t len, uint64_t seq);
HIDDEN void fsprof_pool_forget(void);
HIDDEN long fsprof_reserve(long fd, uint64_t off, uint64_t len);

#endif
