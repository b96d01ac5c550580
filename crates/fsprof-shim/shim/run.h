/* The run this process belongs to: the run directory FSPROF_SHM names,
 * checked by its identity, and the run's control file, every field
 * validated. Above util.h; below the counter pool, tracing and the
 * process set-up, which call it (it calls none of them). */
#ifndef FSPROF_RUN_H
#define FSPROF_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"

/* The run directory, as FSPROF_SHM described it when the shim loaded: a
 * process looks it up by path only to check that what it finds is this
 * very directory (device, inode, owner, mode 0700), never trusting the
 * name alone. */
struct run_id {
    uint64_t dev, ino;
    /* The control file's inode (its device is the directory's). */
    uint64_t ctl_ino;
    uint32_t uid;
    int ok;
    /* NUL-terminated; in a short buffer beside these fields where it fits
     * (run.c). */
    const char *path;
    size_t path_len;
};
extern HIDDEN struct run_id g_run;
/* The run's control file, mapped; NULL until attached. */
extern HIDDEN struct fsprof_control *g_ctl;
extern HIDDEN uint32_t g_max_slots;
/* Blocks of the arena this process has mapped (0: none, use files). */
extern HIDDEN uint32_t g_arena_blocks;

/* Reads FSPROF_SHM into g_run, once. */
HIDDEN void fsprof_capture_env(void);
/* The run directory, opened by its path and accepted only if it is the
 * directory the environment names; -errno otherwise. */
HIDDEN long fsprof_open_run_dir(void);
/* The control header's page, mapped into this process by a write that
 * changes nothing: a read fault would map, around it, every page of the
 * control file the run has written (the offer ring's, the lost table's,
 * the thresholds'), each a cost again when the process unmaps them. */
HIDDEN void fsprof_ctl_touch(struct fsprof_control *c);
/* Maps the control file under the run directory and takes its
 * parameters; 0, or -errno (-EINVAL: not a valid control file). */
HIDDEN long fsprof_attach_control(long dirfd);
/* The same, the file opened by its whole path with no symbolic link
 * followed anywhere in it, without opening the directory; -errno where
 * that cannot be done (the caller then goes through the directory). */
HIDDEN long fsprof_attach_control_direct(void);
/* The next arena block on offer (its number), taken; -1 if there is none.
 * Its bytes are zero, reserved and mapped. */
HIDDEN long fsprof_take_block(void);
/* The first byte of arena block k. */
HIDDEN char *fsprof_block(long k);
/* Records, in the control file, a process this run does not profile.
 * `exe` names what it runs (NULL: this process's own executable). */
HIDDEN void fsprof_lost(uint32_t what, int err, uint32_t uid, const char *exe);
/* What a process takes from the control header: a private copy, read
 * field by field out of the shared page, so that the file cannot change a
 * value between its check and its use. Only these fields: the whole header
 * with its offer ring and lost records is 12 KiB, and copying it cost every
 * process three pages of stack and three of the file. */
struct ctl_params {
    uint64_t magic, tsc_mult;
    uint32_t abi_version, resolution, nbuckets, clock, tsc_shift;
    uint32_t max_slots, lost_max, block_size, max_blocks;
};
HIDDEN void fsprof_ctl_params(const volatile struct fsprof_control *c, struct ctl_params *p);
/* Whether a control header's parameters describe a run this shim can
 * record, given the file's size. */
HIDDEN int fsprof_control_valid(const struct ctl_params *h, uint64_t size);
/* Takes a valid control header's parameters for the hot path. */
HIDDEN void fsprof_apply_params(const struct ctl_params *c, const uint64_t *thresholds);

#endif
