#!/usr/bin/env python3
"""Does discover's read-ahead method start read-ahead of its own?
   bench/readahead_marker.py DIR
On DIR (a disk-backed file system), a 32 MiB file; per initial size, three
times: evict it, read the initial size from offset 0 through one
descriptor, wait 100 ms, then read 1 byte at each page backwards over what
is cached through a second descriptor with POSIX_FADV_RANDOM (the pattern
of crates/fsprof-discover/src/methods/readahead.rs). Prints the pages
cached (cachestat) after the initial read, right after the backward reads
and 200 ms later: growth is read-ahead the backward reads started."""
import ctypes, os, struct, sys, time

libc = ctypes.CDLL(None, use_errno=True)
SYS_CACHESTAT = 451


def cached(path):
    fd = os.open(path, os.O_RDONLY)
    rng, st = ctypes.create_string_buffer(16), ctypes.create_string_buffer(40)
    if libc.syscall(SYS_CACHESTAT, fd, rng, st, 0) != 0:
        sys.exit(f"cachestat: {os.strerror(ctypes.get_errno())}")
    os.close(fd)
    return struct.unpack_from("QQQQQ", st)[0]


path = os.path.join(sys.argv[1], ".readahead-marker")
with open(path, "wb") as f:
    f.write(b"r" * (32 << 20))
    os.fsync(f.fileno())
try:
    for init in (12 << 10, 48 << 10, 192 << 10, 768 << 10):
        out = []
        for _ in range(3):
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.pread(fd, init, 0)
            time.sleep(0.1)
            a = cached(path)
            b = os.open(path, os.O_RDONLY)
            os.posix_fadvise(b, 0, 0, os.POSIX_FADV_RANDOM)
            for off in range(a * 4096 - 4096, max(init - 16384, 0) - 1, -4096):
                os.pread(b, 1, off)
            c = cached(path)
            time.sleep(0.2)
            out.append((a, c, cached(path)))
            os.close(b)
            os.close(fd)
        print(f"initial {init >> 10:4} KiB: pages cached after it, after the backward reads, 200 ms later: {out}")
finally:
    os.unlink(path)
