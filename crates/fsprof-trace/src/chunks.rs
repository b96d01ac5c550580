//! Reading the chunk files the shim writes (`shim/trace_abi.h`) into
//! records. The files are shared with processes that may still write them,
//! or that wrote garbage: every length is checked, and a chunk that does not
//! parse is reported and skipped, never trusted.

use std::fs::File;
use std::io;
use std::path::Path;

use fsprof_shim::trace_abi::{self as t, ChunkHeader, ItemHeader, RecordHeader};
use fsprof_sys::mmap::SharedMap;

use crate::event::{Call, Data, FdInfo, Op, ProcessInfo, Record};

/// Converts the shim's clock ticks to CLOCK_MONOTONIC ns.
#[derive(Clone, Copy, Debug)]
pub struct TickClock {
    /// ns = ref_mono + (ticks - ref_ticks) * mult >> 32; for the monotonic
    /// clock ticks are ns (mult = 1 << 32, refs 0).
    pub mult: u64,
    pub ref_ticks: u64,
    pub ref_mono: u64,
}

impl TickClock {
    pub fn mono_ns(&self, ticks: u64) -> u64 {
        let d = ticks as i128 - self.ref_ticks as i128;
        let ns = (d * self.mult as i128) >> 32;
        (self.ref_mono as i128 + ns).max(0) as u64
    }
}

/// What a chunk file's header says.
#[derive(Clone, Copy, Debug)]
pub struct ChunkInfo {
    pub proc_seq: u64,
    pub pid: i32,
    pub tid: i32,
    pub index: u32,
    pub sealed: bool,
    pub dropped: u64,
}

/// The header and the complete records of a chunk file; `Ok(None)` if the
/// shim has not finished creating it.
pub fn read_chunk(path: &Path) -> io::Result<Option<(ChunkInfo, Vec<u8>)>> {
    let file = File::open(path)?;
    let len = file.metadata()?.len() as usize;
    if len < t::TCHUNK_HDR {
        return Ok(None);
    }
    // The shim writes the file concurrently: fields it updates after
    // creating it are read atomically.
    let m = SharedMap::new(&file, len)?;
    let base = m.as_ptr();
    // SAFETY: `len` >= the header size; the mapping is page aligned.
    let h: ChunkHeader = unsafe { std::ptr::read(base as *const ChunkHeader) };
    let committed = m.u64_acquire_at(std::mem::offset_of!(ChunkHeader, committed));
    let sealed = m.u32_at(std::mem::offset_of!(ChunkHeader, sealed));
    if h.magic != t::TCHUNK_MAGIC {
        return Ok(None);
    }
    let bad = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", path.display()),
        )
    };
    if h.abi_version != t::TRACE_ABI_VERSION || h.hdr_size as usize != t::TCHUNK_HDR {
        return Err(bad("not a trace chunk of this fsprof version"));
    }
    let cap = len - t::TCHUNK_HDR;
    if committed > cap as u64 || h.size != len as u64 {
        return Err(bad("chunk header disagrees with the file's size"));
    }
    // SAFETY: [HDR, HDR + committed) is inside the mapping (checked).
    let bytes =
        unsafe { std::slice::from_raw_parts(base.add(t::TCHUNK_HDR), committed as usize) }.to_vec();
    Ok(Some((
        ChunkInfo {
            proc_seq: h.proc_seq,
            pid: h.pid,
            tid: h.tid,
            index: h.index,
            sealed: sealed == 1,
            dropped: h.dropped,
        },
        bytes,
    )))
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_ne_bytes(b[..8].try_into().unwrap())
}

/// Per op (ops.def name), the role of each argument the shim keeps:
/// f fd, g second fd, d dirfd (fd), e second dirfd (fd2), p path, q
/// second path, s name, F flags, M mode, O offset, L length, W whence,
/// A other integer, `-` nothing. Mirrors `shapes` in shim/trace.c.
pub fn roles(op: &str) -> &'static str {
    match op {
        "open" => "pFM",
        "openat" => "dpFM",
        "creat" => "pM",
        "read" | "write" | "getdents64" => "f-L",
        "pread" | "pwrite" => "f-LO",
        "readv" | "writev" => "f--",
        "preadv" | "pwritev" => "f--O",
        "preadv2" | "pwritev2" => "f--OF",
        "lseek" | "fseek" => "fOW",
        "stat" | "lstat" | "statfs" | "statvfs" | "utime" | "utimes" | "lutimes" => "p-",
        "fstat" | "fstatfs" | "fstatvfs" | "futimens" | "futimes" => "f-",
        "fstatat" => "dp-F",
        "statx" => "dpF--",
        "access" | "chmod" | "mkdir" => "pM",
        "faccessat" | "fchmodat" => "dpMF",
        "close" | "fsync" | "fdatasync" | "syncfs" | "fchdir" | "fdopendir" | "readdir"
        | "closedir" | "fclose" | "fflush" | "ftell" => "f",
        "sync" => "",
        "sync_file_range" => "fOLF",
        "truncate" => "pL",
        "ftruncate" => "fL",
        "fallocate" => "fMOL",
        "posix_fallocate" => "fOL",
        "posix_fadvise" => "fOLF",
        "mkdirat" => "dpM",
        "rmdir" | "unlink" | "chdir" | "opendir" => "p",
        "unlinkat" => "dpF",
        "rename" | "link" => "pq",
        "renameat" => "dpeq",
        "renameat2" | "linkat" => "dpeqF",
        "symlink" => "sp",
        "symlinkat" => "sdp",
        "readlink" => "p-L",
        "readlinkat" => "dp-L",
        "mknod" => "pM-",
        "mknodat" => "dpM-",
        "fchmod" => "fM",
        "chown" | "lchown" => "p--",
        "fchown" => "f--",
        "fchownat" => "dp--F",
        "utimensat" => "dp-F",
        "mmap" => "-L-FfO",
        "msync" => "-LF",
        "munmap" => "-L",
        "sendfile" => "fg-L",
        "copy_file_range" => "f-g-LF",
        "getxattr" | "lgetxattr" => "ps-L",
        "fgetxattr" => "fs-L",
        "setxattr" | "lsetxattr" => "ps-LF",
        "fsetxattr" => "fs-LF",
        "listxattr" | "llistxattr" => "p-L",
        "flistxattr" => "f-L",
        "removexattr" | "lremovexattr" => "ps",
        "fremovexattr" => "fs",
        "fcntl" => "fFA",
        "flock" => "fF",
        "fopen" => "ps",
        "freopen" => "psf",
        "fdopen" => "fs",
        "fread" | "fwrite" => "-LAf",
        "fgets" => "-Lf",
        "fputs" => "-f",
        "getline" => "--f",
        "getdelim" => "--Af",
        _ => "",
    }
}

/// Parses the records of one chunk. FD records attach to the process
/// record before them in the same chunk (the shim writes them together at
/// the start of a process image's first chunk).
pub fn parse(info: &ChunkInfo, bytes: &[u8], clock: &TickClock) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let hsz = std::mem::size_of::<RecordHeader>();
    let isz = std::mem::size_of::<ItemHeader>();
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < hsz {
            return Err(format!("record at {at} is cut short"));
        }
        // SAFETY: at least a header's bytes; read unaligned (plain data).
        let h: RecordHeader = unsafe { std::ptr::read_unaligned(rest.as_ptr() as *const _) };
        let len = h.len as usize;
        if len < hsz || !len.is_multiple_of(8) || len > rest.len() || h.nargs as usize > 8 {
            return Err(format!("record at {at} has an impossible length"));
        }
        let rec = &rest[..len];
        let mut args = [0u64; 8];
        let mut p = hsz;
        for a in args.iter_mut().take(h.nargs as usize) {
            if p + 8 > len {
                return Err(format!("record at {at}: arguments overrun it"));
            }
            *a = le_u64(&rec[p..]);
            p += 8;
        }
        let mut items: Vec<(u16, u16, &[u8])> = Vec::new();
        for _ in 0..h.nitems {
            if p + isz > len {
                return Err(format!("record at {at}: items overrun it"));
            }
            // SAFETY: isz bytes are there (checked); plain data.
            let ih: ItemHeader = unsafe { std::ptr::read_unaligned(rec[p..].as_ptr() as *const _) };
            p += isz;
            let n = ih.len as usize;
            let padded = n.checked_add(7).ok_or("item length overflows")? & !7;
            if p + padded > len {
                return Err(format!("record at {at}: an item overruns it"));
            }
            items.push((ih.tag, ih.arg, &rec[p..p + n]));
            p += padded;
        }
        at += len;
        match h.kind {
            t::TREC_PROC => out.push(Record::Process(process(&h, &args, &items, clock))),
            t::TREC_FD => {
                if let Some(Record::Process(pr)) = out.last_mut() {
                    let path = items
                        .iter()
                        .find(|i| i.0 == t::TI_PATH)
                        .map(|i| i.2.to_vec())
                        .unwrap_or_default();
                    pr.fds.push(FdInfo {
                        fd: args[0] as i32,
                        path,
                        flags: args[1] as i64,
                        pos: args[2] as i64,
                    });
                }
            }
            k if (k as usize) < fsprof_shim::OPS.len() => {
                out.push(Record::Call(call(info, &h, &args, &items, clock)))
            }
            k => return Err(format!("record at {at}: unknown kind {k:#x}")),
        }
    }
    Ok(out)
}

fn process(
    h: &RecordHeader,
    args: &[u64; 8],
    items: &[(u16, u16, &[u8])],
    clock: &TickClock,
) -> ProcessInfo {
    let item = |tag| {
        items
            .iter()
            .find(|i| i.0 == tag)
            .map(|i| i.2.to_vec())
            .unwrap_or_default()
    };
    ProcessInfo {
        start_ns: clock.mono_ns(h.t0),
        pid: args[0] as i32,
        ppid: args[1] as i32,
        seq: args[2],
        exe: item(t::TI_EXE),
        argv: item(t::TI_ARGV)
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(<[u8]>::to_vec)
            .collect(),
        cwd: item(t::TI_CWD),
        fds: Vec::new(),
    }
}

fn call(
    info: &ChunkInfo,
    h: &RecordHeader,
    args: &[u64; 8],
    items: &[(u16, u16, &[u8])],
    clock: &TickClock,
) -> Call {
    let op = Op(h.kind);
    let mut c = Call {
        start_ns: clock.mono_ns(h.t0),
        end_ns: clock.mono_ns(h.t1.max(h.t0)),
        pid: info.pid,
        tid: info.tid,
        op,
        ret: h.ret,
        // A call that failed without setting errno (a short fread with the
        // stream's error flag up) is marked with errno -1.
        errno: if h.failed != 0 && h.err == 0 {
            -1
        } else {
            h.err
        },
        ..Default::default()
    };
    let roles = roles(op.name()).as_bytes();
    let string = |i: usize| {
        items
            .iter()
            .find(|it| it.0 == t::TI_STR && it.1 as usize == i)
            .map(|it| it.2.to_vec())
    };
    for (i, role) in roles.iter().enumerate().take(h.nargs as usize) {
        let v = args[i];
        match role {
            b'f' | b'd' => c.fd = Some(v as i32),
            b'g' | b'e' => c.fd2 = Some(v as i32),
            b'p' => c.path = string(i),
            b'q' => c.path2 = string(i),
            b's' => c.name = string(i),
            b'F' => c.flags = Some(v as i64),
            b'M' => c.mode = Some(v as u32),
            b'O' => c.offset = Some(v as i64),
            b'L' => c.len = Some(v),
            b'W' => c.whence = Some(v as i32),
            b'A' => c.arg = Some(v as i64),
            _ => {}
        }
    }
    if op.is("fread") || op.is("fwrite") {
        // size × count, as bytes asked for.
        c.len = c.len.zip(c.arg).map(|(s, n)| s.saturating_mul(n as u64));
        c.arg = None;
    }
    for &(tag, _, b) in items {
        match tag {
            t::TI_DATA => c.data = Data::Full(b.to_vec()),
            t::TI_DIGEST if b.len() == 8 => c.data = Data::Digest(le_u64(b)),
            t::TI_STAT if b.len() >= 12 => {
                c.size = Some(le_u64(b));
                c.st_mode = Some(u32::from_ne_bytes(b[8..12].try_into().unwrap()));
            }
            t::TI_RESULT => c.result = Some(b.to_vec()),
            _ => {}
        }
    }
    if op.is("fputs") {
        if let Data::Full(d) = &c.data {
            c.len = Some(d.len() as u64);
        }
    }
    c
}
