/* Process set-up of the shim, the top of its C core: when the shim loads
 * (and again in a forked child), find the run (run.c), create this
 * process's counter file (pool.c) and start its trace (trace.c); say
 * which processes could not be profiled. It calls down into those files
 * and nothing calls back up but the hot path's first call of a thread
 * (fsprof_slot_slow). A run that has ended (its control file says so, or
 * its directory is gone) is left alone: the process runs unprofiled.
 * Nothing here may call an interposed function (util.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pool.h"
#include "run.h"
#include "trace.h"

enum { ST_UNINIT, ST_BUSY, ST_READY, ST_OFF };
static int g_state = ST_UNINIT;
/* Off for good, in this process and its children: no run, a control file
 * that is not valid, a run that has ended. */
static int g_off_for_good;
/* Set on the thread setting up, while it does: a signal handler that
 * interrupts the set-up must not wait for it. A flag of the thread's own,
 * not its pthread_self: that is a libc function more for the loader to
 * bind in every new image (~1 us: docs/benchmarks/history.md, shim15). */
static TLS int t_setting_up;
static int g_atfork_done;

HIDDEN void (*g_before_first_fork[FSPROF_FORK_HOOKS])(void);

/* In the parent, before a fork: found here, once, those functions are
 * found in every later child too; found in each child, every child pays
 * for the look-up and the page faults of the dynamic linker's symbol
 * tables again (a forked child maps no file page its parent had). */
static void before_fork_in_parent(void)
{
    int saved = errno;
    for (int k = 0; k < FSPROF_FORK_HOOKS; k++) {
        /* Read first: a store at every fork would cost the parent a fault
         * on that page each time (the last fork left it copy-on-write). */
        if (__atomic_load_n(&g_before_first_fork[k], __ATOMIC_ACQUIRE) == NULL)
            continue;
        void (*f)(void) = __atomic_exchange_n(&g_before_first_fork[k], NULL, __ATOMIC_ACQ_REL);
        if (f != NULL)
            f();
    }
    fsprof_pool_before_fork();
    fsprof_trace_before_fork();
    errno = saved;
}

static void after_fork_in_child(void)
{
    /* The child inherits the parent's mappings: writing to them would count
     * the child's calls as the parent's. Detach; the child gets its own
     * file on its first call. The control file stays mapped. */
    fsprof_pool_forget();
    t_slot = NULL;
    t_shared = 0;
    if (!g_off_for_good)
        g_state = ST_UNINIT;
    fsprof_trace_after_fork();
}

/* pthread_atfork is a stub from libc_nonshared.a, which the linker puts
 * at the far end of the shim's text: a page fault of its own in every
 * process. glibc's entry point behind it is called directly where there
 * is one, with this library's handle as the stub passes it (a dlclose of
 * the shim then drops the handlers). */
extern void *__dso_handle;
extern int __register_atfork(void (*)(void), void (*)(void), void (*)(void), void *)
    __attribute__((weak));

static void register_fork_handlers(void)
{
    if (__register_atfork != NULL)
        __register_atfork(before_fork_in_parent, NULL, after_fork_in_child, __dso_handle);
    else
        pthread_atfork(before_fork_in_parent, NULL, after_fork_in_child);
}

/* Off for good: 0, after closing dirfd if it is open. */
static int off_for_good(long dirfd)
{
    if (dirfd >= 0)
        syscall(SYS_close, dirfd);
    g_off_for_good = 1;
    return 0;
}

/* 1 if this process records; else 0, having said why when it matters. */
static int setup_process(void)
{
    /* Another library's constructor may call in before ours has run. */
    fsprof_capture_env();
    if (!g_atfork_done && g_run.ok) {
        g_atfork_done = 1;
        register_fork_handlers();
    }
    if (!g_run.ok)
        return off_for_good(-1);
    uint32_t euid;
    long dirfd = -1;
    if (g_ctl == NULL) {
        /* A new image: its effective uid as execve set it, from the
         * auxiliary vector (a system call fewer). Only another library's
         * constructor could have changed it since, and the open below is
         * checked against the process's credentials as they are now. */
        euid = (uint32_t)getauxval(AT_EUID);
        /* The directory is opened only where the file cannot be opened
         * without it, or where a counter file must be made in it (below);
         * a trace opens it where it needs it. */
        if (fsprof_attach_control_direct() != 0) {
            dirfd = fsprof_open_run_dir();
            /* Nowhere to say why; `fsprof run` reports the exec'ing side. */
            if (dirfd < 0 || fsprof_attach_control(dirfd) != 0)
                return off_for_good(dirfd);
        }
    } else {
        /* A forked child: its parent may have changed its uid since it
         * started. The parent's pages of the file are not mapped here. */
        euid = (uint32_t)syscall(SYS_geteuid);
        fsprof_ctl_touch(g_ctl);
    }
    if (__atomic_load_n(&g_ctl->state, __ATOMIC_ACQUIRE) != FSPROF_RUN_ACTIVE)
        return off_for_good(dirfd);
    if (euid != g_run.uid && euid != 0) {
        /* A child of a process that dropped its privileges: the run
         * directory is not this user's to write. */
        if (dirfd >= 0)
            syscall(SYS_close, dirfd);
        fsprof_lost(FSPROF_LOST_UID, EACCES, euid, NULL);
        return 0;
    }
    long err = FSPROF_BLOCK_UNREADY, block = fsprof_take_block();
    if (block >= 0)
        err = fsprof_pool_create_in_block(block);
    if (err == FSPROF_BLOCK_UNREADY) {
        if (dirfd < 0)
            dirfd = fsprof_open_run_dir();
        err = dirfd < 0 ? dirfd : fsprof_pool_create(dirfd);
    }
    /* The run directory is gone (or is not the run's any more). */
    if (err == -ENOENT || err == -EPERM)
        return off_for_good(dirfd);
    if (err != 0) {
        if (dirfd >= 0)
            syscall(SYS_close, dirfd);
        fsprof_lost(FSPROF_LOST_SETUP, (int)-err, euid, NULL);
        return 0;
    }
    /* The trace's first chunk is made in the directory if it is still
     * open here, rather than opening and checking it again; the trace
     * closes it. */
    fsprof_trace_process(&g_ctl->next_seq, g_proc, dirfd);
    return 1;
}

/* Returns whether this process records, setting it up on first use. */
static int process_ready(void)
{
    for (;;) {
        int st = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
        if (st == ST_READY)
            return 1;
        if (st == ST_OFF)
            return 0;
        if (st == ST_UNINIT) {
            int expect = ST_UNINIT;
            if (__atomic_compare_exchange_n(&g_state, &expect, ST_BUSY, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                t_setting_up = 1;
                int ok = setup_process();
                t_setting_up = 0;
                __atomic_store_n(&g_state, ok ? ST_READY : ST_OFF, __ATOMIC_RELEASE);
            }
            continue;
        }
        /* Another thread is setting up. If it is this thread (a signal
         * handler interrupted the set-up), don't wait for ourselves. */
        if (t_setting_up)
            return 0;
        syscall(SYS_sched_yield);
    }
}

/* A thread's first counted call: the process set up if it is not yet,
 * then the thread's slot. */
HIDDEN struct slot_rec *fsprof_slot_slow(void)
{
    int saved_errno = errno;
    struct slot_rec *s = process_ready() ? fsprof_pool_thread_slot() : NULL;
    errno = saved_errno;
    return s;
}

/* Reads the environment before the program can change it, and makes every
 * profiled process appear in the run, even one that makes no call. glibc
 * passes a shared object's constructors the program's argc and argv. */
__attribute__((constructor)) static void fsprof_init(int argc, char **argv)
{
    fsprof_capture_env();
    if (g_run.ok) {
        fsprof_pool_argv(argc, argv);
        int saved = errno;
        (void)process_ready();
        fsprof_pool_names_kept();
        errno = saved;
    }
}
