//! Reading the chunk files the shim writes (`shim/trace_abi.h`) into
//! records. The files are shared with processes that may still write them,
//! or that wrote garbage: every length is checked, and a chunk that does not
//! parse is reported and skipped, never trusted.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use fsprof_core::ops::libc::OPS;
use fsprof_core::ops::Role;
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
    pub sealed: bool,
    pub dropped: u64,
}

/// An open chunk file and what its header said when it was opened.
pub struct Chunk {
    file: File,
    header: SharedMap,
    cap: u64,
    pub info: ChunkInfo,
    /// Bytes of complete records when the chunk was opened.
    pub committed: u64,
}

impl Chunk {
    /// Reads the complete records into `body` (a buffer kept between
    /// calls). How many are complete is read again now: call this once the
    /// chunk is done (sealed, or its thread gone), so that records
    /// committed since [`open_chunk`] (a thread's last ones before it
    /// exited) are not lost. Copied out, not parsed in place: the traced
    /// program can write the file while it is parsed. Read, not mapped: a
    /// copy from the page cache costs no page faults.
    pub fn body(&self, body: &mut Vec<u8>) -> io::Result<()> {
        let committed = self
            .header
            .u64_acquire_at(std::mem::offset_of!(ChunkHeader, committed));
        if committed > self.cap {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "chunk header disagrees with the file's size",
            ));
        }
        body.resize(committed as usize, 0);
        self.file.read_exact_at(body, t::TCHUNK_HDR as u64)
    }
}

/// A chunk file's header; `Ok(None)` if the shim has not finished
/// creating it.
pub fn open_chunk(path: &Path) -> io::Result<Option<Chunk>> {
    let file = File::open(path)?;
    let len = file.metadata()?.len() as usize;
    if len < t::TCHUNK_HDR {
        return Ok(None);
    }
    // The shim writes the file concurrently: fields it updates after
    // creating it are read atomically, from a mapping of the header alone.
    let m = SharedMap::new(&file, t::TCHUNK_HDR)?;
    // The shim stores the magic last (release): until it is there the
    // header is being written, and the chunk is not ready (a harvest that
    // took it for corrupt would delete a chunk about to be filled).
    if m.u64_acquire_at(std::mem::offset_of!(ChunkHeader, magic)) != t::TCHUNK_MAGIC {
        return Ok(None);
    }
    let base = m.as_ptr();
    // SAFETY: the mapping holds the header; it is page aligned.
    let h: ChunkHeader = unsafe { std::ptr::read(base as *const ChunkHeader) };
    let committed = m.u64_acquire_at(std::mem::offset_of!(ChunkHeader, committed));
    let sealed = m.u32_at(std::mem::offset_of!(ChunkHeader, sealed));
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
    let info = ChunkInfo {
        proc_seq: h.proc_seq,
        pid: h.pid,
        tid: h.tid,
        sealed: sealed == 1,
        dropped: h.dropped,
    };
    Ok(Some(Chunk {
        file,
        header: m,
        cap: cap as u64,
        info,
        committed,
    }))
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_ne_bytes(b[..8].try_into().unwrap())
}

/// The role of each argument of `op`'s libc prototype, by position, from
/// the one op vocabulary ([`fsprof_core::ops::libc`]); None for an
/// argument a trace does not keep (a buffer, an iovec, a stat struct). The
/// shim keeps the same arguments (`shapes` in shim/trace.c).
pub fn roles(op: Op) -> Vec<Option<Role>> {
    let Some(o) = OPS.get(op.0 as usize) else {
        return Vec::new();
    };
    let mut out = vec![None; o.arity as usize];
    for &(role, i) in o.args.0 {
        if let Some(r) = out.get_mut(i as usize) {
            *r = Some(role);
        }
    }
    out
}

/// Parses the records of one chunk, handing each to `emit` as it goes
/// (a chunk's records are never all in memory at once). FD records attach
/// to the process record before them in the same chunk (the shim writes
/// them together at the start of a process image's first chunk), which is
/// handed on once they are complete. On a corrupt record the records
/// before it have been handed on.
pub fn parse(
    info: &ChunkInfo,
    bytes: &[u8],
    clock: &TickClock,
    mut emit: impl FnMut(Record) -> Result<(), String>,
) -> Result<(), String> {
    let mut process: Option<ProcessInfo> = None;
    let mut items: Vec<(u16, u16, &[u8])> = Vec::new();
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
        items.clear();
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
        if h.kind != t::TREC_FD {
            if let Some(p) = process.take() {
                emit(Record::Process(p))?;
            }
        }
        match h.kind {
            t::TREC_PROC => process = Some(process_info(&h, &args, &items, clock)),
            t::TREC_FD => {
                if let Some(pr) = process.as_mut() {
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
                emit(Record::Call(call(info, &h, &args, &items, clock)))?
            }
            k => return Err(format!("record at {at}: unknown kind {k:#x}")),
        }
    }
    match process {
        Some(p) => emit(Record::Process(p)),
        None => Ok(()),
    }
}

fn process_info(
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
    let string = |i: usize| {
        items
            .iter()
            .find(|it| it.0 == t::TI_STR && it.1 as usize == i)
            .map(|it| it.2.to_vec())
    };
    let symlink = op.is("symlink") || op.is("symlinkat");
    for (i, role) in roles(op).into_iter().enumerate().take(h.nargs as usize) {
        let v = args[i];
        match role {
            Some(Role::Fd | Role::Stream | Role::DirStream | Role::DirFd) => c.fd = Some(v as i32),
            Some(Role::Fd2 | Role::DirFd2) => c.fd2 = Some(v as i32),
            Some(Role::Path) => c.path = string(i),
            // A symlink's target is a string the call stores, not a path
            // it resolves: the trace keeps it as the call's name.
            Some(Role::Path2) if symlink => c.name = string(i),
            Some(Role::Path2) => c.path2 = string(i),
            Some(Role::Name) => c.name = string(i),
            Some(Role::Flags) => c.flags = Some(v as i64),
            Some(Role::Mode) => c.mode = Some(v as u32),
            Some(Role::Offset) => c.offset = Some(v as i64),
            Some(Role::Size | Role::ItemSize) => c.len = Some(v),
            Some(Role::Whence) => c.whence = Some(v as i32),
            Some(Role::Int | Role::Items) => c.arg = Some(v as i64),
            Some(Role::OffsetPtr | Role::Iov | Role::IovCount) | None => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The shim's `shapes` table (shim/trace.c), op name → one letter per
    /// argument: what the C side actually records.
    fn shim_shapes() -> Vec<(String, String)> {
        let src = include_str!("../../fsprof-shim/shim/trace.c");
        let table = &src[src.find("shapes[OP_COUNT]").expect("the shapes table")..];
        let table = &table[table.find('{').expect("its start")..table.find("};").expect("its end")];
        table
            .split("[OP_")
            .skip(1)
            .map(|e| {
                let name = &e[..e.find(']').unwrap()];
                let q = &e[e.find('"').unwrap() + 1..];
                (name.to_string(), q[..q.find('"').unwrap()].to_string())
            })
            .collect()
    }

    #[test]
    fn the_op_vocabulary_agrees_with_what_the_shim_records() {
        let shapes = shim_shapes();
        assert_eq!(shapes.len(), OPS.len(), "every op has a shape");
        for (name, shape) in shapes {
            let op = Op::from_name(&name).unwrap_or_else(|| panic!("{name}"));
            let roles = roles(op);
            assert_eq!(roles.len(), shape.len(), "{name}: arity vs {shape:?}");
            for (role, kept) in roles.iter().zip(shape.bytes()) {
                let ok = match role {
                    None => true,
                    Some(Role::Path | Role::Path2 | Role::Name) => matches!(kept, b'p' | b's'),
                    Some(Role::OffsetPtr | Role::Iov | Role::IovCount) => true,
                    // A value the shim keeps: an fd (streams and DIR*s as
                    // theirs) or an integer.
                    Some(_) => matches!(kept, b'f' | b'd' | b'i' | b'F' | b'D'),
                };
                assert!(ok, "{name}: {role:?} on {shape:?}");
            }
        }
    }
}
