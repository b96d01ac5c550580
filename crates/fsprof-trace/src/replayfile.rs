//! The compiled, replayable trace (`fsprof compile`): Replayfs' three
//! parts, plus what a user-level replayer needs besides.
//!
//! - **commands**: per call, its traced start and duration, the replay
//!   thread, the op, its arguments with fds replaced by resource slots and
//!   paths and data by table indices, the expected result and errno, and the
//!   commands of other threads it must wait for (ordering constraints);
//! - **resource table**: fd / `DIR*` / `FILE*` slots, reused once free, so
//!   the replayer keeps a table of `slots` entries;
//! - **buffers**: written data and strings, de-duplicated by hash;
//! - **initial state**: files, directories and symlinks that must exist
//!   before the first command, with sizes and (where captured) contents.
//!
//! Layout: magic `fsprrpl\0`, u32 version, u32 header length, JSON header,
//! then sections (u32 tag, clen, rlen, count; a zstd frame) in the order
//! strings, buffers, initial, commands, end. The whole file is loaded:
//! commands are ~30 bytes each once varint-encoded.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use fsprof_core::output::OutputFile;
use serde::{Deserialize, Serialize};

use crate::codec::{put_bytes, put_i64, put_u64, Reader};
use crate::event::Op;
use crate::file::TraceError;

pub const MAGIC: &[u8; 8] = b"fsprrpl\0";
pub const FORMAT_NAME: &str = "fsprof-replay";
pub const FORMAT_VERSION: u32 = 1;

const TAG_STRINGS: u32 = 1;
const TAG_BUFFERS: u32 = 2;
const TAG_INITIAL: u32 = 3;
const TAG_COMMANDS: u32 = 4;
const TAG_END: u32 = 5;
const MAX_SECTION: u32 = 1 << 31;
/// Replay threads a file may ask for: each is a thread of the replayer.
pub const MAX_THREADS: u32 = 4096;
/// Resource slots (descriptors open at once, across the traced processes).
pub const MAX_SLOTS: u32 = 1 << 20;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayHeader {
    pub format: String,
    pub format_version: u32,
    pub fsprof_version: String,
    /// The trace's `source`, `command`, `host`, `start_time` and `data`.
    pub trace_source: String,
    #[serde(default)]
    pub trace_command: Vec<String>,
    #[serde(default)]
    pub trace_host: String,
    #[serde(default)]
    pub trace_start_time: String,
    pub trace_data: String,
    /// Traced time from the first to the last command's start, ns.
    pub duration_ns: u64,
    pub threads: u32,
    pub slots: u32,
    /// Per replay thread, the traced `[pid, tid]`s it replays, in order.
    pub thread_map: Vec<Vec<[i32; 2]>>,
    pub ops: Vec<String>,
    /// Calls of the trace not replayed, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Bytes of the trace's records before compression.
    pub raw_trace_bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitKind {
    Dir,
    /// `size` is exact when the trace showed it (a stat, a read that hit
    /// the end), else a minimum.
    File {
        size: u64,
        exact: bool,
    },
    Symlink {
        target: Vec<u8>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitEntry {
    /// Index into the string table: an absolute traced path.
    pub path: u32,
    pub kind: InitKind,
    /// Permission bits, when a stat showed them.
    pub mode: Option<u32>,
    /// Contents read by the trace: (offset, buffer).
    pub content: Vec<(u64, u32)>,
}

/// A command's flags.
pub const CMD_FIRST_ACCESS: u8 = 1;
/// Not checked against the trace (a result that depends on replay-local
/// facts, such as a directory listing's size).
pub const CMD_UNVERIFIED: u8 = 2;
/// Not a call of the trace: made by the compiler so that later calls find
/// their file (compile/reopen.rs); issued, but not timed nor profiled.
pub const CMD_SETUP: u8 = 4;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Command {
    pub t_ns: u64,
    pub dur_ns: u64,
    pub thread: u32,
    pub op: Op,
    pub slot: Option<u32>,
    pub slot2: Option<u32>,
    /// The slot the result (an fd, a DIR*, a FILE*) goes to.
    pub out: Option<u32>,
    pub path: Option<u32>,
    pub path2: Option<u32>,
    /// A string argument (symlink target, fopen mode), from the string table.
    pub name: Option<u32>,
    pub flags: i64,
    pub mode: u32,
    pub offset: i64,
    pub len: u64,
    pub whence: i32,
    pub arg: i64,
    pub buf: Option<u32>,
    pub ret: i64,
    pub errno: i32,
    pub cflags: u8,
    /// (replay thread, index in that thread's commands) that must have
    /// completed before this command starts.
    pub waits: Vec<(u32, u32)>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Compiled {
    pub header: ReplayHeader,
    pub strings: Vec<Vec<u8>>,
    pub buffers: Vec<Vec<u8>>,
    pub initial: Vec<InitEntry>,
    /// In traced start order.
    pub commands: Vec<Command>,
}

fn opt(out: &mut Vec<u8>, v: Option<u32>) {
    put_u64(out, v.map_or(0, |v| v as u64 + 1));
}

fn encode_command(out: &mut Vec<u8>, c: &Command, prev: &mut u64) {
    put_i64(out, c.t_ns as i64 - *prev as i64);
    *prev = c.t_ns;
    put_u64(out, c.dur_ns);
    put_u64(out, c.thread as u64);
    put_u64(out, c.op.0 as u64);
    opt(out, c.slot);
    opt(out, c.slot2);
    opt(out, c.out);
    opt(out, c.path);
    opt(out, c.path2);
    opt(out, c.name);
    put_i64(out, c.flags);
    put_u64(out, c.mode as u64);
    put_i64(out, c.offset);
    put_u64(out, c.len);
    put_i64(out, c.whence as i64);
    put_i64(out, c.arg);
    opt(out, c.buf);
    put_i64(out, c.ret);
    put_i64(out, c.errno as i64);
    out.push(c.cflags);
    put_u64(out, c.waits.len() as u64);
    for &(t, i) in &c.waits {
        put_u64(out, t as u64);
        put_u64(out, i as u64);
    }
}

fn decode_command(r: &mut Reader, prev: &mut u64) -> Result<Command, String> {
    let e = |x: crate::codec::DecodeError| x.0;
    let ropt = |r: &mut Reader| -> Result<Option<u32>, String> {
        let v = r.u64().map_err(e)?;
        match v {
            0 => Ok(None),
            v => u32::try_from(v - 1)
                .map(Some)
                .map_err(|_| "index out of range".to_string()),
        }
    };
    let t_ns = prev
        .checked_add_signed(r.i64().map_err(e)?)
        .ok_or("command time before the start")?;
    *prev = t_ns;
    let mut c = Command {
        t_ns,
        dur_ns: r.u64().map_err(e)?,
        thread: r.u32().map_err(e)?,
        op: Op(u16::try_from(r.u64().map_err(e)?).map_err(|_| "op out of range")?),
        slot: ropt(r)?,
        slot2: ropt(r)?,
        out: ropt(r)?,
        path: ropt(r)?,
        path2: ropt(r)?,
        name: ropt(r)?,
        flags: r.i64().map_err(e)?,
        mode: r.u32().map_err(e)?,
        offset: r.i64().map_err(e)?,
        len: r.u64().map_err(e)?,
        whence: r.i32().map_err(e)?,
        arg: r.i64().map_err(e)?,
        buf: ropt(r)?,
        ret: r.i64().map_err(e)?,
        errno: r.i32().map_err(e)?,
        cflags: r.u8().map_err(e)?,
        waits: Vec::new(),
    };
    let n = r.u64().map_err(e)?;
    if n > r.remaining() as u64 {
        return Err("more waits than bytes".into());
    }
    for _ in 0..n {
        c.waits.push((r.u32().map_err(e)?, r.u32().map_err(e)?));
    }
    Ok(c)
}

fn encode_initial(out: &mut Vec<u8>, i: &InitEntry) {
    put_u64(out, i.path as u64);
    match &i.kind {
        InitKind::Dir => out.push(0),
        InitKind::File { size, exact } => {
            out.push(if *exact { 2 } else { 1 });
            put_u64(out, *size);
        }
        InitKind::Symlink { target } => {
            out.push(3);
            put_bytes(out, target);
        }
    }
    put_u64(out, i.mode.map_or(0, |m| m as u64 + 1));
    put_u64(out, i.content.len() as u64);
    for &(off, b) in &i.content {
        put_u64(out, off);
        put_u64(out, b as u64);
    }
}

fn decode_initial(r: &mut Reader) -> Result<InitEntry, String> {
    let e = |x: crate::codec::DecodeError| x.0;
    let path = r.u32().map_err(e)?;
    let kind = match r.u8().map_err(e)? {
        0 => InitKind::Dir,
        k @ (1 | 2) => InitKind::File {
            size: r.u64().map_err(e)?,
            exact: k == 2,
        },
        3 => InitKind::Symlink {
            target: r.bytes().map_err(e)?,
        },
        k => return Err(format!("unknown initial-state kind {k}")),
    };
    let mode = match r.u64().map_err(e)? {
        0 => None,
        m => Some(u32::try_from(m - 1).map_err(|_| "mode out of range")?),
    };
    let n = r.u64().map_err(e)?;
    if n > r.remaining() as u64 {
        return Err("more content pieces than bytes".into());
    }
    let mut content = Vec::new();
    for _ in 0..n {
        content.push((r.u64().map_err(e)?, r.u32().map_err(e)?));
    }
    Ok(InitEntry {
        path,
        kind,
        mode,
        content,
    })
}

impl Compiled {
    /// Writes the file (refusing an existing one unless `overwrite`);
    /// returns its size.
    pub fn write(&self, path: &Path, overwrite: bool) -> Result<u64, TraceError> {
        let io = |e| TraceError::Io {
            path: path.into(),
            source: e,
        };
        // Never through a link, never over a device, FIFO or socket.
        let file = OutputFile::create_file(path, overwrite)
            .map_err(|e| crate::file::output_error(path, e))?;
        let mut out = BufWriter::new(file);
        let result = (|| -> std::io::Result<u64> {
            let json = serde_json::to_vec(&self.header).expect("header serializes");
            out.write_all(MAGIC)?;
            out.write_all(&FORMAT_VERSION.to_le_bytes())?;
            out.write_all(&(json.len() as u32).to_le_bytes())?;
            out.write_all(&json)?;
            let mut total = 16 + json.len() as u64;
            let mut section = |tag: u32, count: usize, raw: Vec<u8>| -> std::io::Result<()> {
                let z = zstd::bulk::Compressor::new(3).and_then(|mut c| {
                    c.include_checksum(true)?;
                    c.compress(&raw)
                })?;
                for v in [tag, z.len() as u32, raw.len() as u32, count as u32] {
                    out.write_all(&v.to_le_bytes())?;
                }
                out.write_all(&z)?;
                total += 16 + z.len() as u64;
                Ok(())
            };
            let mut raw = Vec::new();
            for s in &self.strings {
                put_bytes(&mut raw, s);
            }
            section(TAG_STRINGS, self.strings.len(), raw)?;
            let mut raw = Vec::new();
            for b in &self.buffers {
                put_bytes(&mut raw, b);
            }
            section(TAG_BUFFERS, self.buffers.len(), raw)?;
            let mut raw = Vec::new();
            for i in &self.initial {
                encode_initial(&mut raw, i);
            }
            section(TAG_INITIAL, self.initial.len(), raw)?;
            let mut raw = Vec::new();
            let mut prev = 0;
            for c in &self.commands {
                encode_command(&mut raw, c, &mut prev);
            }
            section(TAG_COMMANDS, self.commands.len(), raw)?;
            section(TAG_END, 0, Vec::new())?;
            out.flush()?;
            out.get_ref().as_file().sync_all()?;
            Ok(total)
        })();
        let n = result.map_err(io)?;
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.commit()
            .map_err(|e| crate::file::output_error(path, e))?;
        Ok(n)
    }

    /// Reads and checks a replay file: every index a command or an initial
    /// entry holds is checked against its table, so the replayer can trust
    /// them (a hostile file is refused here, not at replay).
    pub fn read(path: &Path) -> Result<Compiled, TraceError> {
        let p = PathBuf::from(path);
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| TraceError::Io {
                path: p.clone(),
                source: e,
            })?;
        let (header, mut at) = read_header(&p, &bytes)?;
        let mut c = Compiled {
            header,
            ..Default::default()
        };
        for want in [TAG_STRINGS, TAG_BUFFERS, TAG_INITIAL, TAG_COMMANDS, TAG_END] {
            at = c.read_section(&p, &bytes, at, want)?;
        }
        if c.header.ops != Op::names() {
            return Err(corrupt(
                &p,
                16,
                "compiled by an fsprof with other ops; compile the trace again".into(),
            ));
        }
        c.validate().map_err(|w| corrupt(&p, 0, w))?;
        Ok(c)
    }

    /// Decodes the section at `at`, which must be `want`, into its table;
    /// returns where the next section starts.
    fn read_section(
        &mut self,
        p: &Path,
        bytes: &[u8],
        at: usize,
        want: u32,
    ) -> Result<usize, TraceError> {
        if bytes.len() < at + 16 {
            return Err(truncated(p, &format!("section {want} is missing")));
        }
        let (tag, clen, rlen, count) = (
            word(bytes, at),
            word(bytes, at + 4),
            word(bytes, at + 8),
            word(bytes, at + 12),
        );
        if tag != want || rlen > MAX_SECTION {
            return Err(corrupt(
                p,
                at as u64,
                format!("expected section {want}, found {tag}"),
            ));
        }
        let start = at + 16;
        let end = start
            .checked_add(clen as usize)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| truncated(p, &format!("section {want} is cut short")))?;
        let mut raw = Vec::new();
        zstd::stream::read::Decoder::new(&bytes[start..end])
            .and_then(|d| d.take(rlen as u64 + 1).read_to_end(&mut raw))
            .map_err(|e| corrupt(p, at as u64, format!("section does not decompress: {e}")))?;
        if raw.len() != rlen as usize {
            return Err(corrupt(
                p,
                at as u64,
                "section decompresses to another length".into(),
            ));
        }
        let mut r = Reader::new(&raw);
        let bad = |what: String| corrupt(p, at as u64, what);
        let mut prev = 0;
        for _ in 0..count {
            match want {
                TAG_STRINGS => self.strings.push(r.bytes().map_err(|e| bad(e.0))?),
                TAG_BUFFERS => self.buffers.push(r.bytes().map_err(|e| bad(e.0))?),
                TAG_INITIAL => self.initial.push(decode_initial(&mut r).map_err(bad)?),
                TAG_COMMANDS => self
                    .commands
                    .push(decode_command(&mut r, &mut prev).map_err(bad)?),
                _ => return Err(bad("the end section holds records".into())),
            }
        }
        if !r.is_empty() {
            return Err(bad("section has bytes after its last record".into()));
        }
        Ok(end)
    }

    /// Every index in range, every wait on an earlier command of another
    /// thread (so replay cannot deadlock).
    pub fn validate(&self) -> Result<(), String> {
        let h = &self.header;
        // The replayer sizes tables and starts threads by these.
        if h.threads > MAX_THREADS {
            return Err(format!(
                "{} replay threads (at most {MAX_THREADS} are replayed)",
                h.threads
            ));
        }
        if h.slots > MAX_SLOTS {
            return Err(format!("{} resource slots (at most {MAX_SLOTS})", h.slots));
        }
        let nthreads = h.threads as usize;
        let mut per_thread = vec![0u32; nthreads];
        let ops = crate::event::Op::count();
        let s = self.strings.len();
        let in_range = |v: Option<u32>, n: usize| v.is_none_or(|v| (v as usize) < n);
        for (k, c) in self.commands.iter().enumerate() {
            let bad = |what: &str| Err(format!("command {k}: {what}"));
            if c.thread as usize >= nthreads {
                return bad("thread out of range");
            }
            if c.op.0 as usize >= ops {
                return bad("unknown op");
            }
            let slots = h.slots as usize;
            if !in_range(c.slot, slots) || !in_range(c.slot2, slots) || !in_range(c.out, slots) {
                return bad("slot out of range");
            }
            if !in_range(c.path, s) || !in_range(c.path2, s) || !in_range(c.name, s) {
                return bad("string out of range");
            }
            if !in_range(c.buf, self.buffers.len()) {
                return bad("buffer out of range");
            }
            for &(t, i) in &c.waits {
                if t as usize >= nthreads || t == c.thread || i >= per_thread[t as usize] {
                    return bad("waits for a command that does not come before it");
                }
            }
            per_thread[c.thread as usize] += 1;
        }
        for i in &self.initial {
            if i.path as usize >= s {
                return Err("initial state names a path out of range".into());
            }
            if i.content
                .iter()
                .any(|&(_, b)| b as usize >= self.buffers.len())
            {
                return Err("initial state names a buffer out of range".into());
            }
        }
        Ok(())
    }
}

fn corrupt(path: &Path, offset: u64, what: String) -> TraceError {
    TraceError::Corrupt {
        path: path.into(),
        offset,
        what,
    }
}

fn truncated(path: &Path, what: &str) -> TraceError {
    TraceError::Truncated {
        path: path.into(),
        what: what.into(),
    }
}

/// The little-endian u32 at `at` (the caller checked the length).
fn word(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// The magic, version and JSON header; returns the header and where the
/// sections start.
fn read_header(p: &Path, bytes: &[u8]) -> Result<(ReplayHeader, usize), TraceError> {
    if bytes.len() < 8 || &bytes[..8] != MAGIC {
        return Err(corrupt(
            p,
            0,
            "not a compiled replay file (run `fsprof compile TRACE -o REPLAY` first)".into(),
        ));
    }
    if bytes.len() < 16 {
        return Err(truncated(p, "the header is cut short"));
    }
    if word(bytes, 8) != FORMAT_VERSION {
        return Err(corrupt(
            p,
            8,
            format!(
                "replay format version {}, this fsprof reads {FORMAT_VERSION}",
                word(bytes, 8)
            ),
        ));
    }
    let hlen = word(bytes, 12) as usize;
    if bytes.len() - 16 < hlen {
        return Err(truncated(p, "the header is cut short"));
    }
    let header: ReplayHeader = serde_json::from_slice(&bytes[16..16 + hlen])
        .map_err(|e| corrupt(p, 16, format!("header is not valid JSON: {e}")))?;
    if header.format != FORMAT_NAME {
        return Err(corrupt(p, 16, "not a compiled replay file".into()));
    }
    Ok((header, 16 + hlen))
}
