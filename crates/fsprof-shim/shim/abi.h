/* Layout of the files the shim shares with `fsprof run`.
 * Mirrored in src/abi.rs; tests compare the two through fsprof_shim_abi(). */
#ifndef FSPROF_ABI_H
#define FSPROF_ABI_H

#include <stddef.h>
#include <stdint.h>

#define FSPROF_ABI_VERSION 13
#define FSPROF_CTL_MAGIC 0x314c544352505346ULL  /* "FSPRCTL1" */
#define FSPROF_PROC_MAGIC 0x3143525052505346ULL /* "FSPRPRC1" */
/* FSPROF_SHM=<dev>:<ino>:<uid>:<ctl_ino>:<path>: the run directory and the
 * identity it must still have when a process opens it (device, inode,
 * owner; mode 0700), and the inode of the control file in it (same
 * device), which a process checks on the file it opens. Read once, when
 * the shim loads. */
#define FSPROF_ENV "FSPROF_SHM"
#define FSPROF_CTL_NAME "control"
#define FSPROF_EXE_MAX 512
#define FSPROF_CMDLINE_MAX 2048

/* ns = ticks * tsc_mult >> FSPROF_TICK_SHIFT; a constant shift keeps the
 * conversion to one multiply on the hot path. */
#define FSPROF_TICK_SHIFT 32
/* Buckets per power of two: 1, 2, 4, 8 or 16. */
#define FSPROF_MAX_RESOLUTION 16
#define FSPROF_MAX_NBUCKETS (64 * FSPROF_MAX_RESOLUTION + 1)

/* Value correlation (data ops): one table per data op of FSPROF_CORR_LAT
 * rows by latency, each row the FSPROF_CORR_VAL uint64_t cells of kind 0
 * then those of kind 1: cell (kind, lat, val) is at
 * (lat * FSPROF_CORR_KINDS + kind) * FSPROF_CORR_VAL + val. A call files
 * both of its values in one row, so that a short process, whose calls fall
 * in a few rows, writes one page of the table, not one per kind.
 * Both axes are log2 at resolution 1: cell index 0 holds the value 0, 1 the
 * value 1, k >= 2 values in (2^(k-2), 2^(k-1)]; the last index also holds
 * everything larger. Latencies in ns (up to 2^38 ns ~ 4.6 min), values in
 * bytes (up to 2^40 = 1 TiB). Kind 0: request size; kind 1: seek distance
 * |offset - end of the previous data call on the same fd| (only calls
 * whose distance is known). */
#define FSPROF_CORR_LAT 40
#define FSPROF_CORR_VAL 42
#define FSPROF_CORR_KINDS 2
#define FSPROF_CORR_CELLS (FSPROF_CORR_LAT * FSPROF_CORR_VAL)
/* The data ops, in table order, are dataops.def's C(name) list, made at
 * build time from fsprof_core::ops::libc::DATA_OPS. */
#define FSPROF_CORR_MAX_OPS 16
/* Each thread's view of its fds below FSPROF_FD_TRACK (the shim's private
 * scratch, in the counter file, ignored by readers): those below
 * FSPROF_FD_FEW first, beside the counters, and all of them only once the
 * thread uses a higher one. */
#define FSPROF_FD_TRACK 1024
#define FSPROF_FD_FEW 64
struct fsprof_fd_state {
    uint64_t pos1; /* file position + 1, 0 = unknown */
    uint64_t end1; /* end offset of the last data call + 1, 0 = unknown */
};

/* What a descriptor is, decided when it is created (open -> file, pipe ->
 * pipe, ...) or, for one the shim did not see created, by one fstat. Calls
 * on descriptors that are not files are counted apart from the file
 * system's: op k of ops.def marked F() has, after the OP_COUNT file ops,
 * one counter per non-file class at OP_COUNT + fdop(k) * 4 + class - 2. */
enum fsprof_fd_class {
    FSPROF_FD_UNKNOWN = 0,
    FSPROF_FD_FILE = 1,   /* regular file, directory, block device */
    FSPROF_FD_PIPE = 2,   /* pipe or FIFO */
    FSPROF_FD_SOCKET = 3,
    FSPROF_FD_DEVICE = 4, /* character device: terminal, /dev/null ... */
    FSPROF_FD_OTHER = 5,  /* eventfd, epoll, io_uring, timerfd ... */
};
#define FSPROF_NONFILE_CLASSES 4
/* Descriptors whose class is remembered (one byte each, per process). */
#define FSPROF_FD_CLASSES_MAX 65536

/* The control file's `faults` word. NONE: no page faults are followed
 * (`fsprof run`, or a trace without the privileges). ARMED: the programs
 * are loaded, or being loaded, and not attached; a process about to map a
 * file requests them (REQUESTED) and waits for ATTACHED or FAILED, for at
 * most FSPROF_FAULTS_WAIT_MS; one that stops waiting leaves STALLED, so
 * that the next do not wait (fsprof attaches all the same). */
enum fsprof_faults {
    FSPROF_FAULTS_NONE = 0,
    FSPROF_FAULTS_ARMED = 1,
    FSPROF_FAULTS_REQUESTED = 2,
    FSPROF_FAULTS_ATTACHED = 3,
    FSPROF_FAULTS_FAILED = 4,
    FSPROF_FAULTS_STALLED = 5,
};
#define FSPROF_FAULTS_WAIT_MS 250

enum fsprof_clock { FSPROF_CLOCK_MONOTONIC = 0, FSPROF_CLOCK_TSC = 1 };
enum fsprof_run_state { FSPROF_RUN_ACTIVE = 0, FSPROF_RUN_ENDED = 1 };

/* A process the run could not profile, recorded by the process itself (or
 * by the one that exec'd it) in the control file. */
enum fsprof_lost_what {
    FSPROF_LOST_SETUP = 1, /* its counters could not be set up: err says why */
    FSPROF_LOST_UID = 2,   /* it runs as another user (uid), who cannot open the run */
    FSPROF_LOST_EXEC = 3,  /* it exec'd exe as another user (uid): not preloaded */
};
#define FSPROF_LOST_MAX 64
#define FSPROF_LOST_EXE 104
struct fsprof_lost {
    int32_t pid;
    int32_t ppid;
    uint32_t what; /* enum fsprof_lost_what; 0 = entry not written yet */
    int32_t err;   /* errno of the failed step (FSPROF_LOST_SETUP) */
    uint32_t uid;
    uint32_t exe_len;
    char exe[FSPROF_LOST_EXE];
};

/* The arena: blocks of the control file, after FSPROF_ARENA_OFF, each the
 * first chunk of one process image's pool. `fsprof run` reserves them
 * (fallocate), offers them through the ring and takes back, zeroed, those
 * of ended processes; a process takes the next one offered (one atomic
 * compare-and-swap: no file to create, reserve, map or remove, and a
 * forked child, which has the control file mapped already, makes no
 * system call for it). Without one on offer a process makes a file of its
 * own, p<seq>, as it does for the chunks its pool grows by. */
#define FSPROF_ARENA_OFF (64 * 1024)
#define FSPROF_RING 1024
#define FSPROF_MAX_BLOCKS 1024

/* Written by `fsprof run` before the workload starts; read by every
 * process. Afterwards next_seq, state, the ring and the lost table
 * change. */
struct fsprof_control {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t resolution;  /* buckets per power of two */
    uint32_t nbuckets;    /* slots: bucket index -1 .. 64r-1 */
    uint32_t clock;       /* enum fsprof_clock */
    uint64_t tsc_mult;    /* ns = ticks * tsc_mult >> tsc_shift */
    uint32_t tsc_shift;   /* must be FSPROF_TICK_SHIFT */
    uint32_t max_slots;   /* thread slots per process, slot 0 included */
    uint64_t next_seq;    /* atomic: numbers the per-process files */
    uint32_t state;       /* enum fsprof_run_state, set by `fsprof run` */
    uint32_t lost_max;    /* FSPROF_LOST_MAX */
    uint64_t lost_count;  /* atomic: processes lost (may exceed lost_max) */
    uint32_t block_size;  /* FSPROF_FIRST_CHUNK: each arena block */
    uint32_t max_blocks;  /* blocks the arena may hold, FSPROF_MAX_BLOCKS at most */
    uint64_t ring_head;   /* atomic: offers taken by processes */
    uint64_t ring_tail;   /* offers made, written by `fsprof run` (release) */
    /* Blocks [0, blocks_ready) have their pages (`fsprof run` reserved
     * them, release). The first blocks are offered before, and made ready
     * just after, the command starts: a process that takes one not ready
     * yet makes its pages itself. */
    uint32_t blocks_ready;
    /* atomic: counter files (p<seq>) processes made, counted before each
     * is: the run's end reads the run directory only if there were any. */
    uint32_t files;
    /* The offers' low water, so that `fsprof run` sleeps until the ring
     * runs low rather than waking on a timer: a process whose take leaves
     * exactly `wake_at` offers (0: none does) adds 1 to `wake` and wakes
     * its futex waiters. Beside ring_head, in the line and page the take
     * touches anyway (at the header's end, a process's read of wake_at
     * faulted in three more pages of the control file). Written by
     * `fsprof run` (wake_at) and by any process (wake): fsprof trusts
     * neither. */
    uint32_t wake;
    uint32_t wake_at;
    uint32_t ring[FSPROF_RING]; /* offer i is block ring[i % FSPROF_RING] */
    struct fsprof_lost lost[FSPROF_LOST_MAX];
    /* `fsprof trace`'s page-fault programs, a futex word
     * (enum fsprof_faults): attached when a traced process first maps a
     * file, which waits for them (trace.c, fsprof_trace_mark_mapping). */
    uint32_t faults;
    /* atomic: process images that stopped waiting for them */
    uint32_t faults_late;
    uint64_t thresholds[]; /* nbuckets: floor(2^((j-1)/r)) */
};

/* One per operation per thread slot. Fields are written by one thread only
 * (slot 0: by many, atomically) and read concurrently by `fsprof run`. */
struct fsprof_ctr {
    uint64_t pre;      /* calls entered */
    uint64_t post;     /* calls returned, written last */
    uint64_t errors;
    uint64_t total_ns;
    uint64_t min_ns;   /* 0 = none yet (0 ns calls count in zero) */
    uint64_t max_ns;
    uint64_t zero;     /* calls that took 0 ns at clock resolution */
    uint64_t reserved;
    uint64_t buckets[]; /* nbuckets */
};

/* A process image's pool only grows, in chunks reserved with fallocate
 * before use (so that touching a counter never needs a page tmpfs may not
 * have): the header, then the first thread's slot record (slot 1, at
 * FSPROF_PROC_HDR_SIZE, on the header's page: most processes have one
 * thread, and a page of its own cost each a fault), then the other slot
 * records, the slot directory (`dir_off`), counters and value tables in
 * the order they were first needed. In the first chunk the small records (slot records, counters)
 * are handed out from its start up (`used`) and the tables (value tables,
 * the fd states) from its end down (`top_used`), so that a short process's
 * counters share a few pages instead of lying between its tables. Every offset is from the start of the pool. Its first chunk,
 * [0, FSPROF_FIRST_CHUNK), is an arena block (`block`) or the start of the
 * file p<seq>; later chunks are in p<seq> at their pool offset (below
 * them, a file made for later chunks only is a hole). Every byte below
 * the file's size is allocated but that hole. */
#define FSPROF_PROC_HDR_SIZE 2688
#define FSPROF_MAX_SLOTS 256
#define FSPROF_FIRST_CHUNK (128 * 1024)
#define FSPROF_MAX_CHUNK (8 * 1024 * 1024)
#define FSPROF_POOL_MAX 0xF0000000u /* offsets are u32 */
struct fsprof_proc {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t hdr_size;    /* FSPROF_PROC_HDR_SIZE */
    uint32_t nops;        /* OP_COUNT: file ops */
    uint32_t nctr;        /* counter indices: file ops + non-file twins */
    uint32_t nfdops;      /* ops with non-file twins */
    uint32_t nbuckets;
    uint32_t ctr_size;    /* bytes of one struct fsprof_ctr with its buckets */
    uint32_t max_slots;   /* entries of the slot directory */
    int32_t pid;
    int32_t ppid;
    /* The run's clock when the image set up: TSC ticks when the control
     * file's clock is the TSC (fsprof converts them with its rate, refined
     * over the run), else CLOCK_MONOTONIC ns. A tick is a few cycles to
     * read; CLOCK_MONOTONIC cost a new process a system call (~1.2 us on
     * this VM: the vDSO's first read costs a page fault instead). */
    uint64_t start_ticks;
    uint64_t seq;
    uint32_t nslots;      /* atomic: 1 + the last private slot published (release) */
    uint32_t ready;       /* 1 once the header is complete (release) */
    uint64_t dropped;     /* atomic: calls not counted (no room for counters) */
    int32_t dropped_err;  /* errno of the first failure to make room */
    uint32_t exe_len;
    uint32_t cmdline_len; /* NUL-separated argv */
    uint32_t corr_ops;    /* data ops with value tables */
    uint32_t corr_lat;    /* FSPROF_CORR_LAT */
    uint32_t corr_val;    /* FSPROF_CORR_VAL */
    uint32_t slot_size;   /* bytes of the readers' part of a slot record */
    uint32_t block;       /* 1 + the arena block of the first chunk; 0: in p<seq> */
    uint32_t file;        /* 1 once p<seq> exists (before any offset into it is published) */
    uint32_t used;        /* atomic: bytes of the first chunk handed out so far from its start */
    uint32_t top_used;    /* atomic: bytes of the first chunk handed out from its end */
    /* The slot directory: max_slots uint32_t, entry k the offset of slot
     * record k (0 until written; entry 1 unused: slot 1 is at
     * FSPROF_PROC_HDR_SIZE). Made when a process first needs a slot other
     * than slot 1, and published (release) before any entry is; 0 until
     * then. Slot records 0..nslots-1 exist, slot 1's once nslots >= 2. */
    uint32_t dir_off;
    char exe[FSPROF_EXE_MAX];
    char cmdline[FSPROF_CMDLINE_MAX];
};

/* The shim's own cost, timed inside a sample of the calls it counts: about
 * one call in FSPROF_OWN_EVERY (the gap between two sampled calls of a
 * thread is FSPROF_OWN_GAP_MIN + a pseudo-random 0..FSPROF_OWN_GAP_SPAN-1,
 * so that no periodic pattern of calls is sampled on one op only). A
 * sampled call reads the clock at the wrapper's entry and exit as well:
 * its own cost is (exit - entry) - (the call's own interval). Costs of
 * FSPROF_OWN_CUT_NS or more are not per-call bookkeeping but an interrupt,
 * a preemption or a one-off set-up (a thread's first counters) inside the
 * window: they are counted in `over`, not summed. */
#define FSPROF_OWN_GAP_MIN 48
#define FSPROF_OWN_GAP_SPAN 32
#define FSPROF_OWN_CUT_NS 16384
struct fsprof_own {
    uint64_t samples; /* sampled calls summed below */
    uint64_t ns;      /* sum of their own cost, ns */
    uint64_t sq_ns;   /* sum of squares, ns^2 (for the spread) */
    uint64_t over;    /* sampled calls at or above FSPROF_OWN_CUT_NS, or with
                         clock reads out of order */
};

/* A thread slot record: this header, then uint32_t ctr_off[nctr] and
 * uint32_t corr_off[corr_ops] (file offsets of the thread's counters and
 * value tables, 0 until first used; written with release); the shim
 * keeps its own pointers to them in its private memory. The record at entry 0 of the slot directory, made when
 * the first thread finds no free slot (0 until then), is shared by those
 * and is updated with atomic adds.
 *
 * `used` says which offsets are set: bit k (word k / 64, bit k % 64) for
 * ctr_off[k], bit nctr + c for corr_off[c]. The bit is set before the
 * offset is written, so every offset that is not 0 has its bit: a reader
 * reads (and `fsprof run` zeroes, before it offers a block again) the
 * bitmap and the few offsets it names, not all ~900 of them (3.7 KiB, 58
 * cache lines, for the handful of counters a short process uses). */
#define FSPROF_SLOT_USED_WORDS 16
struct fsprof_slot_hdr {
    /* 0. It held the thread's id, which nothing read: a `gettid` in every
     * process's set-up and every new thread's. */
    uint32_t tid;
    uint32_t shared;
    uint32_t nctr;
    uint32_t ncorr;
    struct fsprof_own own;
    uint64_t used[FSPROF_SLOT_USED_WORDS];
};

/* For the Rust side's layout test. */
struct fsprof_abi_layout {
    uint32_t control_size, ctr_size, proc_size, lost_size;
    uint32_t off_ctl_next_seq, off_ctl_state, off_ctl_lost_count, off_ctl_lost;
    uint32_t off_ctl_thresholds, off_ctr_buckets;
    uint32_t off_proc_nslots, off_proc_ready, off_proc_dropped, off_proc_exe, off_proc_cmdline;
    uint32_t off_proc_corr_ops, off_proc_slot_size;
    uint32_t nops, nctr, nfdops;
    uint32_t corr_ops, corr_lat, corr_val;
    uint32_t corr_op_index[FSPROF_CORR_MAX_OPS]; /* ops.def index of each data op */
    uint32_t abi_version, tick_shift, fd_track, fd_state_size, slot_hdr_size, proc_hdr_size;
    /* offsets of pre, post, errors, total_ns, min_ns, max_ns, zero, reserved */
    uint32_t off_ctr_fields[8];
    /* the own-cost sample: where it is in a slot header, and its rules */
    uint32_t off_slot_own, own_gap_min, own_gap_span, own_cut_ns;
    uint32_t off_slot_used, slot_used_words;
    /* the arena */
    uint32_t off_ctl_block_size, off_ctl_ring_head, off_ctl_ring_tail, off_ctl_ring;
    uint32_t off_ctl_blocks_ready, off_ctl_files;
    uint32_t off_proc_block, off_proc_file, off_proc_used;
    uint32_t arena_off, ring, max_blocks;
    uint32_t off_ctl_faults, off_ctl_faults_late, faults_wait_ms;
};

_Static_assert(sizeof(struct fsprof_control) + FSPROF_MAX_NBUCKETS * 8 <= FSPROF_ARENA_OFF,
               "the control block fits before the arena");
/* The layout test compares the offsets of `files` and `ring`: the low
 * water's words, checked here to lie between them (as src/abi.rs checks
 * too), need no code of their own in fsprof_shim_abi(), whose growth moves
 * the hot wrappers after it within their cache lines
 * (tests/link_layout.rs). */
_Static_assert(offsetof(struct fsprof_control, files) + 4 == offsetof(struct fsprof_control, wake) &&
                   offsetof(struct fsprof_control, wake) + 4 == offsetof(struct fsprof_control, wake_at) &&
                   offsetof(struct fsprof_control, wake_at) + 4 == offsetof(struct fsprof_control, ring),
               "wake and wake_at lie between files and ring");
_Static_assert(sizeof(struct fsprof_proc) <= FSPROF_PROC_HDR_SIZE, "the header fits before the slots");
_Static_assert(FSPROF_PROC_HDR_SIZE % 64 == 0, "slot 1 starts a cache line");

struct fsprof_selftest {
    double per_call_ns;       /* bookkeeping added around one call */
    double min_recordable_ns; /* two back-to-back clock reads */
    double outside_ns;        /* a wrapper's part outside a sampled window (own.c) */
};

#endif
