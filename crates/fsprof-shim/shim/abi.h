/* Layout of the files the shim shares with `fsprof run`.
 * Mirrored in src/abi.rs; tests compare the two through fsprof_shim_abi(). */
#ifndef FSPROF_ABI_H
#define FSPROF_ABI_H

#include <stdint.h>

#define FSPROF_ABI_VERSION 2
#define FSPROF_CTL_MAGIC 0x314c544352505346ULL  /* "FSPRCTL1" */
#define FSPROF_PROC_MAGIC 0x3143525052505346ULL /* "FSPRPRC1" */
#define FSPROF_ENV "FSPROF_SHM"
#define FSPROF_CTL_NAME "control"
#define FSPROF_PROC_HDR_SIZE 4096
#define FSPROF_SLOT_HDR_SIZE 64
#define FSPROF_EXE_MAX 512
#define FSPROF_CMDLINE_MAX 2048

/* ns = ticks * tsc_mult >> FSPROF_TICK_SHIFT; a constant shift keeps the
 * conversion to one multiply on the hot path. */
#define FSPROF_TICK_SHIFT 32

/* Value correlation (data ops): per thread slot, after the op counters, one
 * table per (data op, value kind) of FSPROF_CORR_LAT x FSPROF_CORR_VAL
 * uint64_t cells, row-major by latency. Both axes are log2 at resolution 1:
 * cell index 0 holds the value 0, 1 the value 1, k >= 2 values in
 * (2^(k-2), 2^(k-1)]; the last index also holds everything larger.
 * Latencies in ns (up to 2^38 ns ~ 4.6 min), values in bytes (up to
 * 2^40 = 1 TiB). Kind 0: request size; kind 1: seek distance
 * |offset - end of the previous data call on the same fd| (only calls
 * whose distance is known). */
#define FSPROF_CORR_LAT 40
#define FSPROF_CORR_VAL 42
#define FSPROF_CORR_KINDS 2
#define FSPROF_CORR_CELLS (FSPROF_CORR_LAT * FSPROF_CORR_VAL)
/* The data ops, in table order (ops.def names). Append only. */
#define FSPROF_CORR_OPS_LIST                                                             \
    C(read) C(write) C(pread) C(pwrite) C(readv) C(writev) C(preadv) C(pwritev)          \
        C(preadv2) C(pwritev2) C(fread) C(fwrite)
#define FSPROF_CORR_MAX_OPS 16
/* After the value tables, each slot holds its thread's view of its fds
 * (struct fsprof_fd_state, FSPROF_FD_TRACK of them): private scratch of
 * the shim, ignored by readers. In the slot rather than in TLS because a
 * 16 KiB initial-exec TLS block would not fit when `fsprof run` dlopens
 * the shim for its self-test. */
#define FSPROF_FD_TRACK 1024
struct fsprof_fd_state {
    uint64_t pos1; /* file position + 1, 0 = unknown */
    uint64_t end1; /* end offset of the last data call + 1, 0 = unknown */
};

enum fsprof_clock { FSPROF_CLOCK_MONOTONIC = 0, FSPROF_CLOCK_TSC = 1 };

/* Written by `fsprof run` before the workload starts; read by every
 * process. Only next_seq changes afterwards. */
struct fsprof_control {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t resolution;  /* buckets per power of two */
    uint32_t nbuckets;    /* slots: bucket index -1 .. 64r-1 */
    uint32_t clock;       /* enum fsprof_clock */
    uint64_t tsc_mult;    /* ns = ticks * tsc_mult >> tsc_shift */
    uint32_t tsc_shift;   /* must be FSPROF_TICK_SHIFT */
    uint32_t max_slots;   /* per process, slot 0 included */
    uint64_t next_seq;    /* atomic: numbers the per-process files */
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

/* Header of a per-process file p<seq>; thread slots follow at hdr_size.
 * Slot s (FSPROF_SLOT_HDR_SIZE bytes of header, then nops counters of
 * ctr_size bytes, then at corr_off the value tables, then the fd states)
 * is at hdr_size + s * slot_size. Slot 0 is shared by the
 * threads that find no free slot and is updated with atomic adds. */
struct fsprof_proc {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t hdr_size;
    uint32_t nops;
    uint32_t nbuckets;
    uint32_t ctr_size;
    uint32_t max_slots;
    uint64_t slot_size;
    int32_t pid;
    int32_t ppid;
    uint64_t start_ns;    /* CLOCK_MONOTONIC */
    uint32_t slots_used;  /* atomic, starts at 1 (slot 0 reserved) */
    uint32_t ready;       /* 1 once the header is complete (release) */
    uint64_t seq;
    uint32_t exe_len;
    uint32_t cmdline_len; /* NUL-separated argv */
    uint32_t corr_ops;    /* data ops with value tables */
    uint32_t corr_lat;    /* FSPROF_CORR_LAT */
    uint32_t corr_val;    /* FSPROF_CORR_VAL */
    uint32_t corr_off;    /* offset of the value tables in a slot */
    char exe[FSPROF_EXE_MAX];
    char cmdline[FSPROF_CMDLINE_MAX];
};

struct fsprof_slot_hdr {
    uint32_t tid;
    uint32_t shared;
};

/* For the Rust side's layout test. */
struct fsprof_abi_layout {
    uint32_t control_size, ctr_size, proc_size;
    uint32_t off_proc_slots_used, off_proc_ready, off_proc_exe, off_proc_cmdline;
    uint32_t off_ctl_next_seq, off_ctl_thresholds, off_ctr_buckets;
    uint32_t nops;
    uint32_t off_proc_corr_ops, corr_ops, corr_lat, corr_val;
    uint32_t corr_op_index[FSPROF_CORR_MAX_OPS]; /* ops.def index of each data op */
    uint32_t abi_version, tick_shift, fd_track, fd_state_size, slot_hdr_size, proc_hdr_size;
    /* offsets of pre, post, errors, total_ns, min_ns, max_ns, zero, reserved */
    uint32_t off_ctr_fields[8];
};

struct fsprof_selftest {
    double per_call_ns;       /* bookkeeping added around one call */
    double min_recordable_ns; /* two back-to-back clock reads */
};

#endif
