//! Reading the chunk files the shim writes (`shim/trace_abi.h`) into
//! records. The files are shared with processes that may still write them,
//! or that wrote garbage: every length is checked, and a chunk that does not
//! parse is reported and skipped, never trusted.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::rc::Rc;

use fsprof_core::ops::libc::OPS;
use fsprof_core::ops::Role;
use fsprof_shim::trace_abi::{self as t, ChunkHeader, ItemHeader, RecordHeader};
use fsprof_sys::mmap::SharedMap;

use crate::codec::CallRef;
use crate::event::{Access, Data, Descriptor, FdInfo, Mapped, Op, ProcessInfo, Record};

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
    pub dropped: u64,
}

/// An open chunk and what its header said when it was opened: a chunk
/// file, or a process image's window in its arena block (`shim/trace_abi.h`,
/// FSPROF_TWIN_SIZE), read through the control file.
pub struct Chunk {
    file: Rc<File>,
    /// Where the chunk starts in `file`.
    base: u64,
    /// A mapping that holds the header already (a window's: the arena's)
    /// and the header's offset in it.
    mapped: Option<(Rc<SharedMap>, usize)>,
    /// The header, mapped while the chunk's thread may still write it (its
    /// words are then loaded atomically); `None` for a chunk read as it is,
    /// whose header words [`Chunk::settle`] reads with the file's bytes.
    header: Option<(Rc<SharedMap>, usize)>,
    /// The header's words as last read from the file.
    words: [u8; t::TCHUNK_HDR],
    cap: u64,
    pub info: ChunkInfo,
    /// Orders a thread's chunks (a file's name says it too).
    pub seq: u64,
}

const COMMITTED: usize = std::mem::offset_of!(ChunkHeader, committed);
const SEALED: usize = std::mem::offset_of!(ChunkHeader, sealed);
const DROPPED_AFTER: usize = std::mem::offset_of!(ChunkHeader, dropped_after);

impl Chunk {
    /// Bytes of complete records now (acquire: the records are there); as
    /// last read for a chunk that is not mapped.
    pub fn committed_now(&self) -> u64 {
        match &self.header {
            Some((m, at)) => m.u64_acquire_at(at + COMMITTED),
            None => le_u64(&self.words[COMMITTED..]),
        }
    }

    /// Records the thread lost after this chunk was full, while it found
    /// no room for its next one.
    pub fn dropped_after_now(&self) -> u64 {
        match &self.header {
            Some((m, at)) => m.u64_acquire_at(at + DROPPED_AFTER),
            None => le_u64(&self.words[DROPPED_AFTER..]),
        }
    }

    /// Whether the thread moved on to its next chunk; once it has, what
    /// [`Chunk::committed_now`] says next is final.
    pub fn sealed_now(&self) -> bool {
        let v = match &self.header {
            Some((m, at)) => m.u32_at(at + SEALED),
            None => u32::from_ne_bytes(self.words[SEALED..SEALED + 4].try_into().unwrap()),
        };
        v == 1
    }

    /// Maps the header, for a chunk whose thread may still write it: from
    /// now on its words are loaded atomically, never torn by a store the
    /// thread makes while they are read.
    pub fn watch(&mut self) -> io::Result<()> {
        if self.header.is_none() {
            self.header = match &self.mapped {
                Some(m) => Some(m.clone()),
                None => Some((Rc::new(SharedMap::new(&self.file, t::TCHUNK_HDR)?), 0)),
            };
        }
        Ok(())
    }

    /// Reads the header's words again, for a chunk that nothing writes any
    /// more (its thread or process image is gone, or it is sealed): what
    /// they say now is final. A copy, not a mapping of a file: mapping and
    /// unmapping a page for each of a build's thousands of short processes
    /// cost more than the records (an unmap also interrupts the other
    /// CPUs). A window is copied from the arena's mapping, which holds it
    /// already (no system call).
    pub fn settle(&mut self) -> io::Result<()> {
        self.header = None;
        match &self.mapped {
            Some((m, at)) => {
                m.copy_words(*at, &mut self.words);
                // What the counts just copied published is seen below.
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                Ok(())
            }
            None => self.file.read_exact_at(&mut self.words, self.base),
        }
    }

    /// Reads the complete records from byte `from` to `to` (a committed
    /// count) into `body` (a buffer kept between calls). Copied out, not
    /// parsed in place: the traced program can write the chunk while it is
    /// parsed. A file's are read, not mapped: a copy from the page cache
    /// costs no page faults. A window's are copied from the arena's
    /// mapping, whose pages fsprof has mapped already: a short process's
    /// records cost no system call (a read of the control file was one of
    /// three an image).
    pub fn read(&self, from: u64, to: u64, body: &mut Vec<u8>) -> io::Result<()> {
        if to > self.cap || from > to {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "chunk header disagrees with the file's size",
            ));
        }
        let at = t::TCHUNK_HDR as u64 + from;
        // Whole words: records are 8-byte aligned, so `from` (the end of
        // the last record handed on) is; a count that is not (written by
        // a hostile process) is copied up to its next word, within the
        // chunk, and cut back.
        let end = to.next_multiple_of(8);
        match &self.mapped {
            Some((m, base)) if from.is_multiple_of(8) && end <= self.cap => {
                body.resize((end - from) as usize, 0);
                m.copy_words(base + at as usize, body);
                body.truncate((to - from) as usize);
                Ok(())
            }
            _ => {
                body.resize((to - from) as usize, 0);
                self.file.read_exact_at(body, self.base + at)
            }
        }
    }

    /// Zeroes the header (through the descriptor the chunk was opened by,
    /// never by its name again; a window through the arena's mapping), so
    /// that the chunk is not taken for one with records until a thread has
    /// written a new header into it.
    pub fn clear_header(&self) -> io::Result<()> {
        match &self.mapped {
            Some((m, at)) => {
                m.zero(*at, t::TCHUNK_HDR);
                Ok(())
            }
            None => self.file.write_all_at(&[0u8; t::TCHUNK_HDR], self.base),
        }
    }
}

/// The header of a chunk file of `len` bytes, or `None` if the shim has
/// not stored its magic yet. The shim stores the magic last (release): once
/// it is there, so are the fields written before it, and they never change
/// (the counts after them do). A copy may read a string's words in any
/// order, though, so one that saw the magic but not yet the fields with it
/// (a recycled file's are zeros until then) is read again; a header that
/// stays inconsistent is corrupt, and returned for the caller to refuse.
fn read_header(
    mut copy: impl FnMut(&mut [u8; t::TCHUNK_HDR]) -> io::Result<()>,
    len: usize,
) -> io::Result<Option<([u8; t::TCHUNK_HDR], ChunkHeader)>> {
    let mut words = [0u8; t::TCHUNK_HDR];
    for _ in 0..3 {
        copy(&mut words)?;
        if le_u64(&words) != t::TCHUNK_MAGIC {
            return Ok(None);
        }
        // SAFETY: ChunkHeader is plain integers (any bytes are a value),
        // and `words` holds at least its size (asserted in trace_abi).
        let h: ChunkHeader =
            unsafe { std::ptr::read_unaligned(words.as_ptr() as *const ChunkHeader) };
        let whole = h.abi_version == t::TRACE_ABI_VERSION
            && h.hdr_size as usize == t::TCHUNK_HDR
            && h.size == len as u64
            && h.pid > 0
            && h.tid > 0;
        if whole {
            return Ok(Some((words, h)));
        }
        std::thread::yield_now();
    }
    // SAFETY: as above.
    let h = unsafe { std::ptr::read_unaligned(words.as_ptr() as *const ChunkHeader) };
    Ok(Some((words, h)))
}

/// A chunk file's header; `Ok(None)` if the shim has not finished
/// creating it. Opened for reading and writing (a chunk whose records are
/// in the trace is handed back with its header zeroed), never through a
/// link, never blocking on a FIFO put in its place, and only if it is a
/// regular file. The header is read, not mapped: [`Chunk::watch`] maps it
/// for a chunk that is still being written.
pub fn open_chunk(path: &Path) -> io::Result<Option<Chunk>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    let bad = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", path.display()),
        )
    };
    if !meta.file_type().is_file() {
        return Err(bad("not a regular file"));
    }
    let len = meta.len() as usize;
    if len < t::TCHUNK_HDR {
        return Ok(None);
    }
    let Some((words, h)) = read_header(|w| file.read_exact_at(w, 0), len)? else {
        return Ok(None);
    };
    let chunk = checked(Rc::new(file), 0, None, len, words, h).map_err(|e| bad(&e))?;
    Ok(Some(chunk))
}

/// The chunk in a process image's window, `len` bytes at `base` of the
/// control file `file`, which `map` maps whole; `Ok(None)` if it holds no
/// chunk (yet, or any more). A window's header says its size as a file's
/// does.
pub fn open_window(
    file: &Rc<File>,
    map: &Rc<SharedMap>,
    base: usize,
    len: usize,
) -> io::Result<Option<Chunk>> {
    // From the mapping, which holds the window already: no system call.
    let copy = |w: &mut [u8; t::TCHUNK_HDR]| {
        map.copy_words(base, w);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        Ok(())
    };
    let Some((words, h)) = read_header(copy, len)? else {
        return Ok(None);
    };
    let mapped = Some((map.clone(), base));
    let chunk = checked(file.clone(), base as u64, mapped, len, words, h).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the window at {base} of the control file: {e}"),
        )
    })?;
    Ok(Some(chunk))
}

/// A chunk of `len` bytes whose header is `h` (`words`), if the header
/// fits it.
fn checked(
    file: Rc<File>,
    base: u64,
    mapped: Option<(Rc<SharedMap>, usize)>,
    len: usize,
    words: [u8; t::TCHUNK_HDR],
    h: ChunkHeader,
) -> Result<Chunk, String> {
    if h.abi_version != t::TRACE_ABI_VERSION || h.hdr_size as usize != t::TCHUNK_HDR {
        return Err("not a trace chunk of this fsprof version".into());
    }
    // The committed count is not checked here: the thread may be storing
    // it while it is copied. `read` checks what is read against the size.
    if h.size != len as u64 {
        // Never from the shim (a claimed free file's header says its size,
        // as a new one's does): a chunk that is not the shim's.
        return Err(format!(
            "its header says {} bytes, and it has {len}",
            h.size
        ));
    }
    let info = ChunkInfo {
        proc_seq: h.proc_seq,
        pid: h.pid,
        tid: h.tid,
        dropped: h.dropped,
    };
    Ok(Chunk {
        file,
        base,
        mapped,
        header: None,
        words,
        cap: (len - t::TCHUNK_HDR) as u64,
        info,
        seq: h.seq,
    })
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_ne_bytes(b[..8].try_into().unwrap())
}

/// What the parser needs of an op, looked up once per op rather than by
/// name for every record.
struct OpShape {
    roles: [Option<Role>; 8],
    arity: usize,
    symlink: bool,
    fread_fwrite: bool,
    fputs: bool,
}

fn op_shapes() -> &'static [OpShape] {
    static SHAPES: std::sync::OnceLock<Vec<OpShape>> = std::sync::OnceLock::new();
    SHAPES.get_or_init(|| {
        OPS.iter()
            .map(|o| {
                let mut roles = [None; 8];
                for &(role, i) in o.args.0 {
                    if let Some(r) = roles.get_mut(i as usize) {
                        *r = Some(role);
                    }
                }
                OpShape {
                    roles,
                    arity: (o.arity as usize).min(8),
                    symlink: matches!(o.name, "symlink" | "symlinkat"),
                    fread_fwrite: matches!(o.name, "fread" | "fwrite"),
                    fputs: o.name == "fputs",
                }
            })
            .collect()
    })
}

/// The role of each argument of `op`'s libc prototype, by position, from
/// the one op vocabulary ([`fsprof_core::ops::libc`]); None for an
/// argument a trace does not keep (a buffer, an iovec, a stat struct). The
/// shim keeps the same arguments (`shapes` in shim/trace.c).
pub fn roles(op: Op) -> Vec<Option<Role>> {
    op_shapes()
        .get(op.0 as usize)
        .map(|s| s.roles[..s.arity].to_vec())
        .unwrap_or_default()
}

/// A record of a chunk as the parser hands it on: calls borrow the
/// chunk's bytes (encoded as they are, never copied into a [`Call`]).
pub enum Parsed<'a> {
    Process(ProcessInfo),
    Call(CallRef<'a>),
    /// The bytes of pages written through a shared mapping.
    Mapped(Mapped),
    /// A descriptor at its first use in the image.
    Descriptor(Descriptor),
}

impl Parsed<'_> {
    pub fn to_record(&self) -> Record {
        match self {
            Parsed::Process(p) => Record::Process(p.clone()),
            Parsed::Call(c) => Record::Call(c.to_call()),
            Parsed::Mapped(m) => Record::Mapped(m.clone()),
            Parsed::Descriptor(d) => Record::Descriptor(d.clone()),
        }
    }
}

/// Parses the records of (the rest of) one chunk, handing each to `emit`
/// as it goes. FD records are descriptors at their first use, handed on
/// as such; when `more` may still be written after `bytes` (the chunk's
/// thread goes on), a process record the bytes end with is held back
/// (until the record after it: parsing in pieces hands on what parsing
/// whole does). Returns how many bytes were
/// handed on (the rest is to be parsed again with what follows). On a
/// corrupt record the records before it have been handed on.
pub fn parse(
    info: &ChunkInfo,
    bytes: &[u8],
    more: bool,
    clock: &TickClock,
    mut emit: impl FnMut(Parsed<'_>) -> Result<(), String>,
) -> Result<usize, String> {
    let mut process: Option<(usize, ProcessInfo)> = None;
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
        if let Some((_, p)) = process.take() {
            emit(Parsed::Process(p))?;
        }
        match h.kind {
            t::TREC_PROC => process = Some((at, process_info(&h, &args, &items, clock))),
            t::TREC_FD => {
                let path = items
                    .iter()
                    .find(|i| i.0 == t::TI_PATH)
                    .map(|i| i.2.to_vec())
                    .unwrap_or_default();
                emit(Parsed::Descriptor(Descriptor {
                    start_ns: clock.mono_ns(h.t0),
                    pid: info.pid,
                    tid: info.tid,
                    fd: FdInfo {
                        fd: args[0] as i32,
                        path,
                        flags: args[1] as i64,
                        pos: args[2] as i64,
                    },
                }))?
            }
            t::TREC_MAPPED => emit(Parsed::Mapped(contents(info, &h, &args, &items, clock)))?,
            k if (k as usize) < fsprof_shim::OPS.len() => {
                emit(Parsed::Call(call(info, &h, &args, &items, clock)))?
            }
            k => return Err(format!("record at {at}: unknown kind {k:#x}")),
        }
        at += len;
    }
    match process {
        Some((start, _)) if more => Ok(start),
        Some((_, p)) => emit(Parsed::Process(p)).map(|()| at),
        None => Ok(at),
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

fn contents(
    info: &ChunkInfo,
    h: &RecordHeader,
    args: &[u64; 8],
    items: &[(u16, u16, &[u8])],
    clock: &TickClock,
) -> Mapped {
    let t = clock.mono_ns(h.t0);
    let bytes = items
        .iter()
        .find(|i| i.0 == t::TI_DATA)
        .map(|i| i.2.to_vec())
        .unwrap_or_default();
    Mapped {
        start_ns: t,
        end_ns: t,
        pid: info.pid,
        tid: info.tid,
        access: Access::Contents,
        superset: args[1] & 1 != 0,
        addr: args[0],
        data: Data::Full(bytes),
        ..Default::default()
    }
}

fn call<'a>(
    info: &ChunkInfo,
    h: &RecordHeader,
    args: &[u64; 8],
    items: &[(u16, u16, &'a [u8])],
    clock: &TickClock,
) -> CallRef<'a> {
    let op = Op(h.kind);
    let shape = &op_shapes()[op.0 as usize];
    let mut c = CallRef {
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
            .map(|it| it.2)
    };
    let kept = shape.arity.min(h.nargs as usize);
    for (i, role) in shape.roles[..kept].iter().enumerate() {
        let v = args[i];
        match role {
            Some(Role::Fd | Role::Stream | Role::DirStream | Role::DirFd) => c.fd = Some(v as i32),
            Some(Role::Fd2 | Role::DirFd2) => c.fd2 = Some(v as i32),
            Some(Role::Path) => c.path = string(i),
            // A symlink's target is a string the call stores, not a path
            // it resolves: the trace keeps it as the call's name.
            Some(Role::Path2) if shape.symlink => c.name = string(i),
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
    if shape.fread_fwrite {
        // size × count, as bytes asked for.
        c.len = c.len.zip(c.arg).map(|(s, n)| s.saturating_mul(n as u64));
        c.arg = None;
    }
    for &(tag, _, b) in items {
        match tag {
            t::TI_DATA => (c.data, c.digest) = (Some(b), None),
            t::TI_DIGEST if b.len() == 8 => (c.data, c.digest) = (None, Some(le_u64(b))),
            t::TI_STAT if b.len() >= 12 => {
                c.size = Some(le_u64(b));
                c.st_mode = Some(u32::from_ne_bytes(b[8..12].try_into().unwrap()));
            }
            t::TI_RESULT => c.result = Some(b),
            _ => {}
        }
    }
    if shape.fputs {
        if let Some(d) = c.data {
            c.len = Some(d.len() as u64);
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One shim record: header, args, items (tag, arg, bytes), padded.
    fn rec(kind: u16, t0: u64, args: &[u64], items: &[(u16, u16, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for a in args {
            body.extend_from_slice(&a.to_ne_bytes());
        }
        for (tag, arg, b) in items {
            let ih = ItemHeader {
                tag: *tag,
                arg: *arg,
                len: b.len() as u32,
            };
            // SAFETY: plain data, read as its bytes.
            body.extend_from_slice(unsafe {
                std::slice::from_raw_parts(&ih as *const _ as *const u8, std::mem::size_of_val(&ih))
            });
            body.extend_from_slice(b);
            body.resize(body.len().next_multiple_of(8), 0);
        }
        let h = RecordHeader {
            len: (std::mem::size_of::<RecordHeader>() + body.len()) as u32,
            kind,
            nargs: args.len() as u8,
            t0,
            t1: t0 + 5,
            nitems: items.len() as u32,
            ..Default::default()
        };
        // SAFETY: as above.
        let mut out = unsafe {
            std::slice::from_raw_parts(&h as *const _ as *const u8, std::mem::size_of_val(&h))
        }
        .to_vec();
        out.extend_from_slice(&body);
        out
    }

    fn all(bytes: &[u8], more: bool) -> (usize, Vec<Record>) {
        let info = ChunkInfo {
            proc_seq: 1,
            pid: 7,
            tid: 8,
            dropped: 0,
        };
        let clock = TickClock {
            mult: 1 << 32,
            ref_ticks: 0,
            ref_mono: 0,
        };
        let mut got = Vec::new();
        let n = parse(&info, bytes, more, &clock, |r| {
            got.push(r.to_record());
            Ok(())
        })
        .unwrap();
        (n, got)
    }

    proptest::proptest! {
        /// A chunk file is shared with the traced program, which may
        /// write anything into it: any bytes parse or fail, never panic,
        /// and a parse that succeeds hands on no more than it was given.
        #[test]
        fn any_chunk_bytes_parse_or_fail_cleanly(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            more in proptest::prelude::any::<bool>(),
        ) {
            let info = ChunkInfo { proc_seq: 1, pid: 7, tid: 8, dropped: 0 };
            let clock = TickClock { mult: 1 << 32, ref_ticks: 0, ref_mono: 0 };
            if let Ok(n) = parse(&info, &bytes, more, &clock, |_| Ok(())) {
                proptest::prop_assert!(n <= bytes.len());
            }
        }

        /// The same with well-formed record headers and random contents.
        #[test]
        fn records_with_random_contents_parse_or_fail_cleanly(
            kinds in proptest::collection::vec(0u16..140, 1..6),
            args in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..8),
            item in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            tag in 0u16..12,
        ) {
            let info = ChunkInfo { proc_seq: 1, pid: 7, tid: 8, dropped: 0 };
            let clock = TickClock { mult: 1 << 32, ref_ticks: 0, ref_mono: 0 };
            let bytes: Vec<u8> = kinds
                .iter()
                .flat_map(|&k| rec(k, 1, &args, &[(tag, 0, &item)]))
                .collect();
            let _ = parse(&info, &bytes, false, &clock, |r| {
                let _ = r.to_record();
                Ok(())
            });
        }
    }

    /// A whole header of a window of `len` bytes (pid 41, tid 42, seq 9).
    fn window_header(len: usize) -> ChunkHeader {
        ChunkHeader {
            magic: t::TCHUNK_MAGIC,
            abi_version: t::TRACE_ABI_VERSION,
            hdr_size: t::TCHUNK_HDR as u32,
            proc_seq: 3,
            pid: 41,
            tid: 42,
            size: len as u64,
            seq: 9,
            ..Default::default()
        }
    }

    fn header_bytes(h: &ChunkHeader) -> &[u8] {
        // SAFETY: a plain repr(C) struct of integers, read as bytes.
        unsafe { std::slice::from_raw_parts(h as *const _ as *const u8, std::mem::size_of_val(h)) }
    }

    /// A window lies in the control file, which every traced process of
    /// the run may write: a header that is not this version's, or that
    /// claims another size than the window's, is refused with an error
    /// (the capture skips it with a note and frees its block), a zeroed one
    /// holds no chunk, and a whole one is read at its place in the file.
    #[test]
    fn a_window_whose_header_lies_is_refused_and_a_whole_one_read() {
        let len = t::TWIN_SIZE;
        let f = tempfile::tempfile().unwrap();
        f.set_len(2 * len as u64).unwrap();
        let file = Rc::new(f);
        let map = Rc::new(SharedMap::new(&file, 2 * len).unwrap());
        let write = |h: ChunkHeader| file.write_all_at(header_bytes(&h), len as u64).unwrap();
        let whole = window_header(len);
        assert!(open_window(&file, &map, len, len).unwrap().is_none());
        for bad in [
            ChunkHeader {
                abi_version: t::TRACE_ABI_VERSION + 1,
                ..whole
            },
            ChunkHeader {
                size: 2 * len as u64,
                ..whole
            },
        ] {
            write(bad);
            let e = open_window(&file, &map, len, len).err().expect("refused");
            assert!(
                e.to_string().starts_with(&format!("the window at {len} ")),
                "{e}"
            );
        }
        write(whole);
        let c = open_window(&file, &map, len, len)
            .unwrap()
            .expect("a chunk");
        assert_eq!((c.info.pid, c.info.tid, c.seq), (41, 42, 9));
        assert_eq!(c.committed_now(), 0);
    }

    /// A window is read and let go through the arena's mapping alone, with
    /// no system call on the control file (three a short process's image
    /// cost fsprof before): here the chunk's file is a decoy of zeros, so a
    /// header, a settle or records read from it, or a header zeroed
    /// through it, would fail the test. A committed count off a word
    /// boundary (a hostile process's) is read up to it, not past.
    #[test]
    fn a_window_is_read_and_let_go_through_the_mapping_alone() {
        let len = t::TWIN_SIZE;
        let real = tempfile::tempfile().unwrap();
        real.set_len(2 * len as u64).unwrap();
        let decoy = tempfile::tempfile().unwrap();
        decoy.set_len(2 * len as u64).unwrap();
        let map = Rc::new(SharedMap::new_writable(&real, 2 * len).unwrap());
        let open = Op::named("openat").0;
        let call = rec(
            open,
            20,
            &[-100i64 as u64, 0, 0, 0],
            &[(t::TI_STR, 1, b"a/b")],
        );
        let records = [call.clone(), call.clone()].concat();
        real.write_all_at(&records, (len + t::TCHUNK_HDR) as u64)
            .unwrap();
        let h = ChunkHeader {
            committed: records.len() as u64,
            sealed: 1,
            ..window_header(len)
        };
        real.write_all_at(header_bytes(&h), len as u64).unwrap();
        let decoy = Rc::new(decoy);
        let mut c = open_window(&decoy, &map, len, len)
            .unwrap()
            .expect("the header, from the mapping");
        c.settle().unwrap();
        assert!(c.sealed_now());
        assert_eq!(c.committed_now(), records.len() as u64);
        let mut body = Vec::new();
        c.read(0, c.committed_now(), &mut body).unwrap();
        assert_eq!(body, records);
        let (n, got) = all(&body, false);
        assert_eq!((n, got.len()), (records.len(), 2));
        c.read(8, 13, &mut body).unwrap();
        assert_eq!(body, records[8..13]);
        c.clear_header().unwrap();
        let mut back = [0xffu8; t::TCHUNK_HDR];
        real.read_exact_at(&mut back, len as u64).unwrap();
        assert_eq!(back, [0u8; t::TCHUNK_HDR], "zeroed in the control file");
    }

    /// A capture reads a live chunk a few records at a time: a process
    /// record the bytes end with waits for the next record (and is parsed
    /// again with it), an FD record is a descriptor of its own, and reading a chunk in pieces at record
    /// boundaries hands on the same records as reading it whole.
    #[test]
    fn a_chunk_read_in_pieces_gives_the_records_it_gives_whole() {
        let open = Op::named("openat").0;
        let proc_ = rec(t::TREC_PROC, 10, &[7, 1, 1], &[(t::TI_CWD, 0, b"/w")]);
        let fd = rec(t::TREC_FD, 10, &[0, 2, 0], &[(t::TI_PATH, 0, b"/dev/null")]);
        let call = rec(
            open,
            20,
            &[-100i64 as u64, 0, 0, 0],
            &[(t::TI_STR, 1, b"a/b")],
        );
        let bytes = [proc_.clone(), fd.clone(), call.clone(), call.clone()].concat();
        let (n, whole) = all(&bytes, false);
        assert_eq!(n, bytes.len());
        assert_eq!(whole.len(), 4, "{whole:?}");
        let Record::Process(p) = &whole[0] else {
            panic!("{whole:?}")
        };
        assert!(p.fds.is_empty(), "{p:?}");
        let Record::Descriptor(d) = &whole[1] else {
            panic!("{whole:?}")
        };
        assert_eq!(
            (d.pid, d.tid, d.fd.fd, d.fd.path.as_slice(), d.fd.flags),
            (7, 8, 0, &b"/dev/null"[..], 2)
        );
        let Record::Call(c) = &whole[2] else {
            panic!("{whole:?}")
        };
        assert_eq!((c.path.as_deref(), c.fd), (Some(&b"a/b"[..]), Some(-100)));
        // The process record alone: held back while more may come.
        let upto = proc_.len() + fd.len();
        assert_eq!(all(&bytes[..proc_.len()], true), (0, vec![]));
        assert_eq!(all(&bytes[..proc_.len()], false).1, whole[..1]);
        assert_eq!(all(&bytes[..upto], true), (upto, whole[..2].to_vec()));
        // In pieces at every record boundary.
        for cut in [proc_.len(), upto, upto + call.len()] {
            let (n, mut first) = all(&bytes[..cut], true);
            let (m, rest) = all(&bytes[n..], false);
            assert_eq!(n + m, bytes.len());
            first.extend(rest);
            assert_eq!(first, whole, "cut at {cut}");
        }
    }

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
