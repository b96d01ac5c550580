"""Loaded BPF programs' run time and runs as the kernel accounts them
(kernel.bpf_stats_enabled), read through bpf(2) on x86_64: program ids,
fds and info (run_time_ns at offset 192, run_cnt at 200). Shared by the
bench scripts that cost fsprof's kernel programs. Python has no bpf(2)
binding and bpftool's JSON would add a package; the three commands are
a few lines of ctypes."""
import ctypes
import os
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_NR_BPF, _GET_NEXT_ID, _GET_FD_BY_ID, _GET_INFO = 321, 11, 13, 15


def _bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    return _libc.syscall(_NR_BPF, cmd, buf, 128), buf


def programs(prefix):
    """name without `prefix` -> (run_time_ns, run_cnt), summed over the
    loaded programs whose name starts with `prefix`. The kernel cuts names
    at 15 bytes, so e.g. block_rq_issue and block_rq_complete of one fsprof
    become one `block_rq_` row: their sums."""
    out, pid = {}, 0
    while True:
        r, buf = _bpf(_GET_NEXT_ID, struct.pack("<I", pid))
        if r < 0:
            return out
        pid = struct.unpack_from("<I", buf.raw, 4)[0]
        fd, _ = _bpf(_GET_FD_BY_ID, struct.pack("<I", pid))
        if fd < 0:
            continue
        info = ctypes.create_string_buffer(256)
        r, _ = _bpf(_GET_INFO, struct.pack("<IIQ", fd, 256, ctypes.addressof(info)))
        os.close(fd)
        name = info.raw[64:80].split(b"\0")[0].decode()
        if r == 0 and name.startswith(prefix):
            t, c = struct.unpack_from("<QQ", info.raw, 192)
            t0, c0 = out.get(name[len(prefix):], (0, 0))
            out[name[len(prefix):]] = (t0 + t, c0 + c)
