//! Reading a trace file (`docs/trace-format.md`) record by record, in time
//! order. A file holds one stream per traced thread, each stream's blocks
//! in its own time order: opening the file reads the block headers only
//! (and the end block), then [`TraceReader`] merges the streams by time,
//! holding the decoded records of one block per stream under way, so a
//! long trace reads in bounded memory. Paths the file does not give
//! resolved (a capture stores them as the program gave them) are resolved
//! here ([`crate::resolve`]), in the merged order the kernel saw them in.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::codec::{self, Reader};
use crate::event::Record;
use crate::file::{
    TraceError, TraceHeader, TraceSummary, BLOCK_HDR, FORMAT_NAME, FORMAT_VERSION, MAGIC,
    MAX_BLOCK_RAW, MAX_BLOCK_RECORDS, MAX_JSON, OLDEST_READ, TAG_END, TAG_RECORDS,
};
use crate::resolve::Resolver;

/// Where a block of records is, and what its header says.
#[derive(Clone, Copy, Debug)]
struct BlockRef {
    /// Offset of the block's header.
    at: u64,
    clen: u32,
    rlen: u32,
    count: u32,
    first_ns: u64,
}

/// A stream with a block loaded.
struct Active {
    blocks: VecDeque<BlockRef>,
    records: VecDeque<Record>,
}

/// Reads a trace record by record, in time order.
pub struct TraceReader {
    path: PathBuf,
    file: File,
    pub header: TraceHeader,
    summary: TraceSummary,
    /// Streams not yet started, the one starting latest first.
    waiting: Vec<VecDeque<BlockRef>>,
    active: Vec<Active>,
    /// (next record's start, index into `active`).
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    resolver: Resolver,
    /// Bytes of decompressed blocks read so far.
    pub raw_bytes: u64,
}

impl TraceReader {
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let io = |e| TraceError::Io {
            path: path.into(),
            source: e,
        };
        let file = File::open(path).map_err(io)?;
        let size = file.metadata().map_err(io)?.len();
        let mut head = [0u8; 16];
        let n = read_at_most(&file, &mut head, 0).map_err(io)?;
        if n < 8 || &head[..8] != MAGIC {
            return Err(TraceError::NotATrace { path: path.into() });
        }
        if n < 16 {
            return Err(truncated(path, "the header is cut short".into()));
        }
        let version = u32::from_le_bytes(head[8..12].try_into().unwrap());
        if !(OLDEST_READ..=FORMAT_VERSION).contains(&version) {
            return Err(TraceError::Version {
                path: path.into(),
                found: version,
            });
        }
        let hlen = u32::from_le_bytes(head[12..16].try_into().unwrap());
        if hlen > MAX_JSON {
            return Err(corrupt(path, 8, "header length is implausible"));
        }
        let json = read_block_bytes(&file, path, 16, hlen, size, "the header is cut short")?;
        let header: TraceHeader = serde_json::from_slice(&json)
            .map_err(|e| corrupt(path, 16, &format!("header is not valid JSON: {e}")))?;
        if header.format != FORMAT_NAME {
            return Err(TraceError::NotATrace { path: path.into() });
        }
        if header.ops.len() > u16::MAX as usize {
            return Err(corrupt(path, 16, "op table is implausibly long"));
        }
        let (streams, summary) = scan(&file, path, 16 + hlen as u64, size)?;
        let mut waiting: Vec<VecDeque<BlockRef>> = streams.into_values().collect();
        // Latest first, so that pop() gives the earliest stream; ties by
        // file position, so that the order never depends on hashing.
        waiting.sort_by_key(|q| Reverse((q[0].first_ns, q[0].at)));
        Ok(TraceReader {
            path: path.into(),
            file,
            header,
            summary,
            waiting,
            active: Vec::new(),
            heap: BinaryHeap::new(),
            resolver: Resolver::default(),
            raw_bytes: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The end block.
    pub fn summary(&self) -> Option<&TraceSummary> {
        Some(&self.summary)
    }

    /// Decompresses and decodes one block; checks that it holds exactly
    /// its count of records and starts when its header says.
    fn load(&mut self, b: &BlockRef) -> Result<VecDeque<Record>, TraceError> {
        let mut z = vec![0u8; b.clen as usize];
        self.file
            .read_exact_at(&mut z, b.at + BLOCK_HDR as u64)
            .map_err(|e| TraceError::Io {
                path: self.path.clone(),
                source: e,
            })?;
        // Streamed, so that a header claiming a huge length costs nothing
        // until the frame actually holds that much.
        let mut raw = Vec::new();
        zstd::stream::read::Decoder::new(&z[..])
            .and_then(|d| d.take(b.rlen as u64 + 1).read_to_end(&mut raw))
            .map_err(|e| self.corrupt(b.at, &format!("block does not decompress: {e}")))?;
        if raw.len() != b.rlen as usize {
            return Err(self.corrupt(b.at, "block decompresses to another length"));
        }
        self.raw_bytes += raw.len() as u64;
        let mut r = Reader::new(&raw);
        let mut prev = 0;
        let mut out = VecDeque::with_capacity(b.count as usize);
        for _ in 0..b.count {
            let rec = codec::decode(&mut r, &mut prev, self.header.ops.len())
                .map_err(|e| self.corrupt(b.at, &format!("in this block: {e}")))?;
            out.push_back(rec);
        }
        if !r.is_empty() {
            return Err(self.corrupt(b.at, "block has bytes after its last record"));
        }
        if out.front().map(Record::start_ns) != Some(b.first_ns) {
            return Err(self.corrupt(b.at, "block's first record is not when its header says"));
        }
        Ok(out)
    }

    /// The next record by start time, from the stream that has it.
    fn next_merged(&mut self) -> Result<Option<Record>, TraceError> {
        loop {
            let next_active = self.heap.peek().map(|r| r.0 .0);
            let next_waiting = self.waiting.last().map(|q| q[0].first_ns);
            let activate = match (next_active, next_waiting) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(a), Some(w)) => w <= a,
            };
            if !activate {
                break;
            }
            let mut blocks = self.waiting.pop().expect("a waiting stream");
            let first = blocks.pop_front().expect("streams have blocks");
            let records = self.load(&first)?;
            let k = self.active.len();
            if let Some(t) = records.front().map(Record::start_ns) {
                self.heap.push(Reverse((t, k)));
            }
            self.active.push(Active { blocks, records });
        }
        let Some(Reverse((_, k))) = self.heap.pop() else {
            return Ok(None);
        };
        let rec = self.active[k]
            .records
            .pop_front()
            .expect("heap entries have a record");
        if self.active[k].records.is_empty() {
            self.active[k].records = match self.active[k].blocks.pop_front() {
                Some(b) => self.load(&b)?,
                // Done: give back the block's memory.
                None => VecDeque::new(),
            };
        }
        if let Some(t) = self.active[k].records.front().map(Record::start_ns) {
            self.heap.push(Reverse((t, k)));
        }
        Ok(Some(rec))
    }

    /// The next record; `None` after the last.
    pub fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        let Some(rec) = self.next_merged()? else {
            return Ok(None);
        };
        let origin = self.summary.origin_ns;
        let mut rec = self.map_op(rec)?;
        match &mut rec {
            Record::Call(c) => {
                c.start_ns = c.start_ns.saturating_sub(origin);
                c.end_ns = c.end_ns.saturating_sub(origin);
                self.resolver.call(c);
            }
            Record::Process(p) => {
                p.start_ns = p.start_ns.saturating_sub(origin);
                self.resolver.process(p);
            }
            Record::Mapped(m) => {
                m.start_ns = m.start_ns.saturating_sub(origin);
                m.end_ns = m.end_ns.saturating_sub(origin);
                self.resolver.mapped(m);
            }
            Record::Descriptor(d) => {
                d.start_ns = d.start_ns.saturating_sub(origin);
                self.resolver.descriptor(d);
            }
        }
        Ok(Some(rec))
    }

    fn corrupt(&self, offset: u64, what: &str) -> TraceError {
        corrupt(&self.path, offset, what)
    }

    /// Records name ops by the file's table; map them to this fsprof's.
    fn map_op(&self, rec: Record) -> Result<Record, TraceError> {
        match rec {
            Record::Call(mut c) => {
                let name = &self.header.ops[c.op.0 as usize];
                c.op = crate::event::Op::from_name(name)
                    .ok_or_else(|| self.corrupt(0, &format!("unknown op {name:?}")))?;
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

/// Reads the block headers from `at` to the end block: each stream's
/// blocks in file order, and the summary.
fn scan(
    file: &File,
    path: &Path,
    mut at: u64,
    size: u64,
) -> Result<(HashMap<u32, VecDeque<BlockRef>>, TraceSummary), TraceError> {
    let mut streams: HashMap<u32, VecDeque<BlockRef>> = HashMap::new();
    loop {
        let mut hdr = [0u8; BLOCK_HDR];
        let n = read_at_most(file, &mut hdr, at).map_err(|e| TraceError::Io {
            path: path.into(),
            source: e,
        })?;
        if n == 0 {
            return Err(truncated(path, "it has no end block".into()));
        }
        if n < BLOCK_HDR {
            return Err(truncated(
                path,
                format!("the block at byte {at} is cut short"),
            ));
        }
        let word = |i: usize| u32::from_le_bytes(hdr[4 * i..4 * i + 4].try_into().unwrap());
        let (tag, clen, rlen, count, stream) = (word(0), word(1), word(2), word(3), word(4));
        let first_ns = u64::from_le_bytes(hdr[24..].try_into().unwrap());
        match tag {
            TAG_END => {
                if clen > MAX_JSON || rlen != clen || count != 0 {
                    return Err(corrupt(path, at, "end block header is implausible"));
                }
                let what = format!("the end block at byte {at} is cut short");
                let json = read_block_bytes(file, path, at + BLOCK_HDR as u64, clen, size, &what)?;
                let summary = serde_json::from_slice(&json)
                    .map_err(|e| corrupt(path, at, &format!("end block is not valid JSON: {e}")))?;
                let end = at + (BLOCK_HDR + json.len()) as u64;
                if end != size {
                    return Err(corrupt(path, end, "bytes after the end block"));
                }
                return Ok((streams, summary));
            }
            TAG_RECORDS => {
                // Every record takes at least 4 bytes: a count beyond that
                // is corrupt, and so is one no writer makes (each would
                // be held decoded).
                if rlen > MAX_BLOCK_RAW
                    || count == 0
                    || count > MAX_BLOCK_RECORDS
                    || count as u64 * 4 > rlen as u64
                {
                    return Err(corrupt(path, at, "block header is implausible"));
                }
                let end = at + (BLOCK_HDR as u64) + clen as u64;
                if end > size {
                    return Err(truncated(
                        path,
                        format!("the block at byte {at} is cut short"),
                    ));
                }
                streams.entry(stream).or_default().push_back(BlockRef {
                    at,
                    clen,
                    rlen,
                    count,
                    first_ns,
                });
                at = end;
            }
            t => return Err(corrupt(path, at, &format!("unknown block kind {t}"))),
        }
    }
}

/// `len` bytes at `at`, or a truncation error saying `what`.
fn read_block_bytes(
    file: &File,
    path: &Path,
    at: u64,
    len: u32,
    size: u64,
    what: &str,
) -> Result<Vec<u8>, TraceError> {
    if at + len as u64 > size {
        return Err(truncated(path, what.into()));
    }
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, at)
        .map_err(|e| TraceError::Io {
            path: path.into(),
            source: e,
        })?;
    Ok(buf)
}

fn read_at_most(file: &File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], at + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn corrupt(path: &Path, offset: u64, what: &str) -> TraceError {
    TraceError::Corrupt {
        path: path.into(),
        offset,
        what: what.into(),
    }
}

fn truncated(path: &Path, what: String) -> TraceError {
    TraceError::Truncated {
        path: path.into(),
        what,
    }
}
