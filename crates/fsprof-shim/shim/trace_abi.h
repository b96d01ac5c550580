/* Layout of the trace chunk files the shim writes for `fsprof trace`.
 * Mirrored in src/trace_abi.rs; a test compares the two through
 * fsprof_shim_trace_abi(). Native byte order: written and read on one host.
 *
 * Each traced thread appends records to a chunk file `t<seq>` in the run
 * directory, mapped MAP_SHARED: a record is complete once `committed` (a
 * release store) covers it, so a process killed by SIGKILL leaves every
 * complete record behind. A full chunk is sealed and the thread moves on to
 * a new one; `fsprof trace` compresses sealed chunks into the trace and
 * deletes them, which bounds the memory the run directory holds. */
#ifndef FSPROF_TRACE_ABI_H
#define FSPROF_TRACE_ABI_H

#include <stdint.h>

#define FSPROF_TRACE_ABI_VERSION 4
#define FSPROF_TCHUNK_MAGIC 0x3143524852505346ULL /* "FSPRHRC1" */
#define FSPROF_TRACE_ENV "FSPROF_TRACE"            /* "none", "digest" or "full" */
#define FSPROF_TCHUNK_SIZE (1u << 20)              /* a chunk's usual size */
#define FSPROF_TFIRST_SIZE (64u << 10)             /* a thread's first chunk file's */
/* A process image's first chunk (its set-up thread's) is the last
 * FSPROF_TWIN_SIZE bytes of the image's arena block (abi.h) when it has
 * one: no file to find, rename, open and map (the stream's set-up cost a
 * short process 35-60 us that way). `fsprof trace` reads it in place and
 * zeroes its magic once its records are in the trace; `fsprof run` does
 * not take the block back before that. 16 KiB: a short process writes
 * 1-3 KiB of records (its image, descriptors and calls), and a block has
 * room for its tables beside it (a `cat` uses ~80 of 128 KiB). */
#define FSPROF_TWIN_SIZE (16u << 10)
#define FSPROF_TCHUNK_MAX (1ULL << 40)             /* the largest (one huge record) */
/* A thread that needs a new chunk while this many wait for `fsprof trace`
 * waits (up to FSPROF_TWAIT_MS) for it to take them in; the environment
 * variable sets another limit (2 or more), for tests. */
#define FSPROF_TCHUNK_PENDING_MAX 64
#define FSPROF_TPENDING_ENV "FSPROF_TRACE_PENDING_MAX"
#define FSPROF_TWAIT_MS 2000
/* `fsprof trace` hands emptied chunk files back as f0 .. f<SLOTS-1>, header
 * zeroed; a thread renames one to its next t<seq> rather than make a file
 * whose pages must be allocated and zeroed. A shell loop starts ~10
 * images between two harvests (5 ms): of the 2,003 images of the loop of
 * 1,000 `cat` (SCHED_FIFO), ~1,030 made a fresh chunk (fallocate: 16 pages
 * allocated and zeroed) with 4 slots, 106-194 with 8, 27-84 with 10. At
 * most 10: the names are one digit. */
#define FSPROF_TFREE_SLOTS 10
#define FSPROF_TCHUNK_HDR 128
#define FSPROF_TREC_MAX_ARGS 8
#define FSPROF_TSTR_MAX 4096 /* strings (paths) are cut at this length */
/* Before its first file mapping, a traced process makes one system call
 * that reads this address (in the first page, never mapped): the kernel's
 * fault on it tells fsprof's page-fault programs that this process's
 * faults can be in a mapping the trace knows of (fsprof-kernel faults.rs,
 * MAPPING_MARK); until then they stay in the kernel. */
#define FSPROF_TMAP_MARK 0x5f0UL

enum fsprof_trace_data { FSPROF_TDATA_NONE = 1, FSPROF_TDATA_DIGEST = 2, FSPROF_TDATA_FULL = 3 };

struct fsprof_tchunk {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t hdr_size;    /* FSPROF_TCHUNK_HDR */
    uint64_t proc_seq;    /* the counter file p<seq> of the writing process */
    int32_t pid;
    int32_t tid;
    uint32_t index;       /* 0, 1, 2 ... per thread */
    uint32_t sealed;      /* 1: the thread moved on to its next chunk (release) */
    uint64_t committed;   /* bytes of complete records after the header (release) */
    uint64_t size;        /* bytes of the file */
    uint64_t dropped;     /* records this thread lost before this chunk */
    /* Records this thread lost once this chunk was full, while it found no
     * room for its next one (release; final once sealed). */
    uint64_t dropped_after;
    /* Numbers the chunk among the run's chunk files and windows (from the
     * control file's next_seq, as the file t<seq> is named): a thread's
     * chunks are read in this order. */
    uint64_t seq;
    uint64_t reserved[6];
};

/* Record kinds other than ops (ops are their ops.def index). */
#define FSPROF_TREC_PROC 0xF001 /* a process image starts: items CWD, EXE, ARGV */
#define FSPROF_TREC_FD 0xF002   /* an fd open at process start: args fd, flags, pos; item PATH */
/* The bytes of pages written through a shared file mapping, just before an
 * msync or munmap of them (--data full): args address, flags (1: every
 * present page, not only the dirty ones); item DATA. */
#define FSPROF_TREC_MAPPED 0xF003

/* One record, 8-byte aligned; `len` covers the header, args and items. */
struct fsprof_trec {
    uint32_t len;
    uint16_t kind;   /* ops.def index, or FSPROF_TREC_* */
    uint8_t nargs;   /* uint64_t args follow the header */
    uint8_t failed;  /* the call failed (by its own convention) */
    uint64_t t0;     /* clock ticks at entry (the run's clock) */
    uint64_t t1;     /* ... and at return */
    int64_t ret;     /* FILE* / DIR* results are given as their fd, -1 for NULL */
    int32_t err;     /* errno when failed, else 0 */
    uint32_t nitems; /* items follow the args */
};

/* An item: struct fsprof_titem then `len` bytes, padded to 8. */
struct fsprof_titem {
    uint16_t tag;
    uint16_t arg; /* index of the argument it belongs to, when it does */
    uint32_t len;
};

enum fsprof_titem_tag {
    FSPROF_TI_STR = 1,    /* the C string at argument `arg` (a path, a mode string, a name) */
    FSPROF_TI_DATA = 2,   /* the bytes written (--data full) */
    FSPROF_TI_DIGEST = 3, /* XXH64 (seed 0) of the bytes written: 8 bytes */
    FSPROF_TI_STAT = 4,   /* a stat-family result: uint64 size, uint32 mode, uint32 pad */
    FSPROF_TI_RESULT = 5, /* bytes the call returned in a buffer (readlink's target) */
    FSPROF_TI_CWD = 6,
    FSPROF_TI_EXE = 7,
    FSPROF_TI_ARGV = 8,   /* NUL-separated */
    FSPROF_TI_PATH = 9,   /* an fd's path (readlink of /proc/self/fd/N) */
    FSPROF_TI_CLOCK = 10, /* uint64 ticks, uint64 CLOCK_MONOTONIC ns: no longer written (no reader
                           * used it, and its clock read cost each new image a page fault) */
};

struct fsprof_trace_layout {
    uint32_t chunk_hdr, rec_hdr, item_hdr;
    uint32_t off_committed, off_sealed, off_dropped, off_proc_seq;
    uint32_t off_rec_t0, off_rec_ret, off_rec_err, off_rec_nitems;
    uint32_t chunk_size, nops;
    uint32_t off_dropped_after;
    uint32_t map_mark;
};

#endif
