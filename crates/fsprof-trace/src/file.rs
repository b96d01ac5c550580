//! The trace file: a magic, a JSON header, zstd-compressed blocks of
//! records in time order, and an end block. Written to a temporary name
//! and renamed into place, so a trace file that exists is complete; a file
//! without its end block was cut short and is refused with that reason.
//! Layout in `docs/trace-format.md`.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::codec::{self, Reader};
use crate::event::Record;

pub const MAGIC: &[u8; 8] = b"fsprtrc\0";
pub const FORMAT_NAME: &str = "fsprof-trace";
pub const FORMAT_VERSION: u32 = 1;

const TAG_RECORDS: u32 = 1;
const TAG_END: u32 = 2;
/// A block is flushed once its records take this many bytes.
const BLOCK_RAW: usize = 256 << 10;
/// Headers and end blocks larger than this are corrupt.
const MAX_JSON: u32 = 16 << 20;
/// Decompressed blocks larger than this are refused.
const MAX_BLOCK_RAW: u32 = 1 << 31;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    pub format: String,
    pub format_version: u32,
    pub fsprof_version: String,
    /// How the trace was made: `shim` (`fsprof trace`), `strace`, `fio-iolog`.
    pub source: String,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub kernel: String,
    #[serde(default)]
    pub start_time: String,
    #[serde(default)]
    pub start_unix_ns: u64,
    /// `tsc`, `monotonic`, or `imported`.
    #[serde(default)]
    pub clock: String,
    /// What was kept of written data: `none`, `digest` or `full`.
    pub data: String,
    /// Op names; records refer to them by index.
    pub ops: Vec<String>,
    #[serde(default)]
    pub notes: Vec<String>,
}

impl TraceHeader {
    pub fn new(source: &str, data: &str) -> Self {
        TraceHeader {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION,
            fsprof_version: env!("CARGO_PKG_VERSION").into(),
            source: source.into(),
            data: data.into(),
            ops: fsprof_core::ops::libc::OPS
                .iter()
                .map(|o| o.name.to_string())
                .collect(),
            ..Default::default()
        }
    }
}

/// The end block.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceSummary {
    pub records: u64,
    pub calls: u64,
    pub processes: u64,
    /// Calls the capture lost (a full run directory, a signal handler's
    /// call inside a call being recorded).
    #[serde(default)]
    pub dropped: u64,
    pub duration_ns: u64,
    /// Captures: the most bytes of records that waited in the run
    /// directory at one time (the memory the capture held there).
    #[serde(default)]
    pub pending_peak_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: not an fsprof trace (no trace magic at its start)")]
    NotATrace { path: PathBuf },
    #[error("{path}: trace format version {found}, this fsprof reads version {FORMAT_VERSION}")]
    Version { path: PathBuf, found: u32 },
    #[error("{path}: corrupt trace at byte {offset}: {what}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("{path}: truncated trace: {what} (was the capture killed?)")]
    Truncated { path: PathBuf, what: String },
    #[error("{path} already exists; use --force to replace it")]
    Exists { path: PathBuf },
}

/// Writes a trace, block by block.
pub struct TraceWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: BufWriter<File>,
    block: Vec<u8>,
    block_count: u32,
    prev_start: u64,
    summary: TraceSummary,
    bytes_raw: u64,
    bytes_file: u64,
}

impl TraceWriter {
    /// Starts `path` (written as a temporary file beside it until
    /// [`TraceWriter::finish`]); refuses an existing file unless `overwrite`.
    pub fn create(path: &Path, header: &TraceHeader, overwrite: bool) -> Result<Self, TraceError> {
        if !overwrite && path.exists() {
            return Err(TraceError::Exists { path: path.into() });
        }
        let tmp = temp_beside(path);
        let io = |e| TraceError::Io {
            path: path.into(),
            source: e,
        };
        // Never rename over a device, FIFO or socket (`-o /dev/null`).
        fsprof_core::output::ensure_renamable(path).map_err(io)?;
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io)?;
        let mut out = BufWriter::new(file);
        let json = serde_json::to_vec(header).expect("a trace header serializes");
        out.write_all(MAGIC).map_err(io)?;
        out.write_all(&FORMAT_VERSION.to_le_bytes()).map_err(io)?;
        out.write_all(&(json.len() as u32).to_le_bytes())
            .map_err(io)?;
        out.write_all(&json).map_err(io)?;
        Ok(TraceWriter {
            path: path.into(),
            tmp,
            out,
            block: Vec::with_capacity(BLOCK_RAW + 4096),
            block_count: 0,
            prev_start: 0,
            summary: TraceSummary::default(),
            bytes_raw: 0,
            bytes_file: (16 + json.len()) as u64,
        })
    }

    pub fn push(&mut self, r: &Record) -> Result<(), TraceError> {
        codec::encode(&mut self.block, r, &mut self.prev_start);
        self.block_count += 1;
        self.summary.records += 1;
        match r {
            Record::Call(_) => self.summary.calls += 1,
            Record::Process(_) => self.summary.processes += 1,
        }
        if self.block.len() >= BLOCK_RAW {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> Result<(), TraceError> {
        if self.block_count == 0 {
            return Ok(());
        }
        let io = |e| TraceError::Io {
            path: self.path.clone(),
            source: e,
        };
        let mut enc = zstd::bulk::Compressor::new(3).map_err(io)?;
        enc.include_checksum(true).map_err(io)?;
        let z = enc.compress(&self.block).map_err(io)?;
        let mut hdr = Vec::with_capacity(16);
        for v in [
            TAG_RECORDS,
            z.len() as u32,
            self.block.len() as u32,
            self.block_count,
        ] {
            hdr.extend_from_slice(&v.to_le_bytes());
        }
        self.out.write_all(&hdr).map_err(io)?;
        self.out.write_all(&z).map_err(io)?;
        self.bytes_raw += self.block.len() as u64;
        self.bytes_file += (16 + z.len()) as u64;
        self.block.clear();
        self.block_count = 0;
        self.prev_start = 0;
        Ok(())
    }

    /// Bytes of encoded records so far (before compression).
    pub fn raw_bytes(&self) -> u64 {
        self.bytes_raw + self.block.len() as u64
    }

    /// Records [`TraceSummary::pending_peak_bytes`].
    pub fn set_pending_peak(&mut self, bytes: u64) {
        self.summary.pending_peak_bytes = bytes;
    }

    /// Writes the end block and puts the file in place; returns the summary
    /// and the file's size.
    pub fn finish(
        mut self,
        dropped: u64,
        duration_ns: u64,
    ) -> Result<(TraceSummary, u64), TraceError> {
        self.flush_block()?;
        self.summary.dropped = dropped;
        self.summary.duration_ns = duration_ns;
        let json = serde_json::to_vec(&self.summary).expect("a summary serializes");
        let io = |e| TraceError::Io {
            path: self.path.clone(),
            source: e,
        };
        for v in [TAG_END, json.len() as u32, json.len() as u32, 0] {
            self.out.write_all(&v.to_le_bytes()).map_err(io)?;
        }
        self.out.write_all(&json).map_err(io)?;
        self.out.flush().map_err(io)?;
        self.out.get_ref().sync_all().map_err(io)?;
        fsprof_core::output::ensure_renamable(&self.path).map_err(io)?;
        std::fs::rename(&self.tmp, &self.path).map_err(io)?;
        Ok((
            self.summary.clone(),
            self.bytes_file + 16 + json.len() as u64,
        ))
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        // Not finished (an error on the way): leave nothing half-written.
        let _ = std::fs::remove_file(&self.tmp);
    }
}

fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace".into());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Reads a trace record by record.
pub struct TraceReader {
    path: PathBuf,
    input: BufReader<File>,
    offset: u64,
    pub header: TraceHeader,
    block: Vec<u8>,
    pos: usize,
    left_in_block: u32,
    prev_start: u64,
    summary: Option<TraceSummary>,
    /// Bytes of decompressed blocks read so far.
    pub raw_bytes: u64,
}

impl TraceReader {
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let file = File::open(path).map_err(|e| TraceError::Io {
            path: path.into(),
            source: e,
        })?;
        let mut input = BufReader::with_capacity(1 << 16, file);
        let mut head = [0u8; 16];
        let n = read_full(&mut input, &mut head).map_err(|e| TraceError::Io {
            path: path.into(),
            source: e,
        })?;
        if n < 8 || &head[..8] != MAGIC {
            return Err(TraceError::NotATrace { path: path.into() });
        }
        if n < 16 {
            return Err(TraceError::Truncated {
                path: path.into(),
                what: "the header is cut short".into(),
            });
        }
        let version = u32::from_le_bytes(head[8..12].try_into().unwrap());
        if version != FORMAT_VERSION {
            return Err(TraceError::Version {
                path: path.into(),
                found: version,
            });
        }
        let hlen = u32::from_le_bytes(head[12..16].try_into().unwrap());
        let mut me = TraceReader {
            path: path.into(),
            input,
            offset: 16,
            header: TraceHeader::default(),
            block: Vec::new(),
            pos: 0,
            left_in_block: 0,
            prev_start: 0,
            summary: None,
            raw_bytes: 0,
        };
        if hlen > MAX_JSON {
            return Err(me.corrupt(8, "header length is implausible"));
        }
        let json = me.read_exact_or_truncated(hlen as usize, "the header is cut short")?;
        me.header = serde_json::from_slice(&json)
            .map_err(|e| me.corrupt(16, &format!("header is not valid JSON: {e}")))?;
        if me.header.format != FORMAT_NAME {
            return Err(TraceError::NotATrace { path: path.into() });
        }
        if me.header.ops.len() > u16::MAX as usize {
            return Err(me.corrupt(16, "op table is implausibly long"));
        }
        Ok(me)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The end block, once every record has been read.
    pub fn summary(&self) -> Option<&TraceSummary> {
        self.summary.as_ref()
    }

    fn corrupt(&self, offset: u64, what: &str) -> TraceError {
        TraceError::Corrupt {
            path: self.path.clone(),
            offset,
            what: what.into(),
        }
    }

    fn read_exact_or_truncated(&mut self, n: usize, what: &str) -> Result<Vec<u8>, TraceError> {
        let mut buf = Vec::new();
        let got = (&mut self.input)
            .take(n as u64)
            .read_to_end(&mut buf)
            .map_err(|e| TraceError::Io {
                path: self.path.clone(),
                source: e,
            })?;
        if got < n {
            return Err(TraceError::Truncated {
                path: self.path.clone(),
                what: what.into(),
            });
        }
        self.offset += n as u64;
        Ok(buf)
    }

    /// Loads the next block; false at the end block.
    fn next_block(&mut self) -> Result<bool, TraceError> {
        let at = self.offset;
        let mut hdr = [0u8; 16];
        let n = read_full(&mut self.input, &mut hdr).map_err(|e| TraceError::Io {
            path: self.path.clone(),
            source: e,
        })?;
        if n == 0 {
            return Err(TraceError::Truncated {
                path: self.path.clone(),
                what: "it has no end block".into(),
            });
        }
        if n < 16 {
            return Err(TraceError::Truncated {
                path: self.path.clone(),
                what: format!("the block at byte {at} is cut short"),
            });
        }
        self.offset += 16;
        let word = |i: usize| u32::from_le_bytes(hdr[4 * i..4 * i + 4].try_into().unwrap());
        let (tag, clen, rlen, count) = (word(0), word(1), word(2), word(3));
        match tag {
            TAG_END => {
                if clen > MAX_JSON {
                    return Err(self.corrupt(at, "end block length is implausible"));
                }
                let json = self.read_exact_or_truncated(
                    clen as usize,
                    &format!("the end block at byte {at} is cut short"),
                )?;
                let s = serde_json::from_slice(&json)
                    .map_err(|e| self.corrupt(at, &format!("end block is not valid JSON: {e}")))?;
                self.summary = Some(s);
                Ok(false)
            }
            TAG_RECORDS => {
                if rlen > MAX_BLOCK_RAW || count == 0 {
                    return Err(self.corrupt(at, "block header is implausible"));
                }
                let z = self.read_exact_or_truncated(
                    clen as usize,
                    &format!("the block at byte {at} is cut short"),
                )?;
                let mut raw = Vec::new();
                zstd::stream::read::Decoder::new(&z[..])
                    .and_then(|d| d.take(rlen as u64 + 1).read_to_end(&mut raw))
                    .map_err(|e| self.corrupt(at, &format!("block does not decompress: {e}")))?;
                if raw.len() != rlen as usize {
                    return Err(self.corrupt(at, "block decompresses to another length"));
                }
                self.raw_bytes += raw.len() as u64;
                self.block = raw;
                self.pos = 0;
                self.left_in_block = count;
                self.prev_start = 0;
                Ok(true)
            }
            t => Err(self.corrupt(at, &format!("unknown block kind {t}"))),
        }
    }

    /// The next record; `None` after the end block.
    pub fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        while self.left_in_block == 0 {
            if self.summary.is_some() || !self.next_block()? {
                return Ok(None);
            }
        }
        let mut r = Reader::new(&self.block[self.pos..]);
        let before = self.block.len() - self.pos;
        let rec = codec::decode(&mut r, &mut self.prev_start, self.header.ops.len())
            .map_err(|e| self.corrupt(self.offset, &format!("in the block before: {e}")))?;
        let used = before - r.remaining();
        self.pos += used;
        self.left_in_block -= 1;
        if self.left_in_block == 0 && self.pos != self.block.len() {
            return Err(self.corrupt(self.offset, "block has bytes after its last record"));
        }
        Ok(Some(self.map_op(rec)?))
    }

    /// Records name ops by the file's table; map them to this fsprof's.
    fn map_op(&self, rec: Record) -> Result<Record, TraceError> {
        match rec {
            Record::Call(mut c) => {
                let name = &self.header.ops[c.op.0 as usize];
                c.op = crate::event::Op::from_name(name)
                    .ok_or_else(|| self.corrupt(self.offset, &format!("unknown op {name:?}")))?;
                Ok(Record::Call(c))
            }
            p => Ok(p),
        }
    }
}

impl Iterator for TraceReader {
    type Item = Result<Record, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
