/* Text, numbers, the clock and small files for the shim's set-up code,
 * written by hand and with raw system calls: no stdio, no malloc and no
 * interposed function, so that the set-up can run in a constructor,
 * inside another library's constructor or in a signal handler without
 * recursing or taking a lock. The bottom layer: it calls nothing of the
 * shim's. */
#ifndef FSPROF_UTIL_H
#define FSPROF_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"

/* Appends the string src (or the decimal v) to dst[at..cap), always
 * NUL-terminated; returns the new length. */
HIDDEN size_t fsprof_cat(char *dst, size_t at, size_t cap, const char *src);
HIDDEN size_t fsprof_cat_u64(char *dst, size_t at, size_t cap, uint64_t v);
/* n bytes from src to dst (not overlapping), with no call into libc: the
 * set-up's copies are a few dozen bytes, and memcpy would be one more
 * symbol for the loader to bind in every new image (~1 us). */
HIDDEN void fsprof_copy(void *dst, const void *src, size_t n);
/* Parses a decimal u64 at *s, advancing it; 0 on no digits or overflow. */
HIDDEN int fsprof_parse_u64(const char **s, uint64_t *out);
/* CLOCK_MONOTONIC in ns. */
HIDDEN uint64_t fsprof_mono_ns(void);
/* Up to cap bytes of a small file (/proc/self/cmdline); 0 when it cannot
 * be read. */
HIDDEN uint32_t fsprof_read_small_file(const char *path, char *buf, uint32_t cap);
/* Allocates [off, off+len) of a file: fallocate, or writing zeros where
 * the file system has no fallocate. 0 or -errno. A shared file's pages
 * are reserved before they are mapped: a full tmpfs then fails here, not
 * with SIGBUS when a page is first touched. */
HIDDEN long fsprof_reserve(long fd, uint64_t off, uint64_t len);

#endif
