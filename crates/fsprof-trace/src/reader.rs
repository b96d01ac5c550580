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
    TraceError, TraceHeader, TraceSummary, BLOCK_HDR, FORMAT_NAME, FORMAT_VERSION, GROUPS_SINCE,
    MAGIC, MAX_BLOCK_RAW, MAX_BLOCK_RECORDS, MAX_GROUP_PARTS, MAX_GROUP_RAW, MAX_JSON, OLDEST_READ,
    PART_HDR, TAG_END, TAG_GROUP, TAG_RECORDS,
};
use crate::resolve::Resolver;

/// Where a block of records is, and what its header says: a block of its
/// own, or a part of a group (its records at `offset` of the group's).
#[derive(Clone, Copy, Debug)]
struct BlockRef {
    /// Offset of the block's (or its group's) header.
    at: u64,
    clen: u32,
    rlen: u32,
    count: u32,
    first_ns: u64,
    part: Option<PartRef>,
}

/// Where a part's records are in its group.
#[derive(Clone, Copy, Debug)]
struct PartRef {
    /// Its place in the group's directory (orders parts of one group).
    index: u32,
    offset: u32,
    /// Bytes of the group's records, and where its frame is.
    group_rlen: u32,
    frame_at: u64,
    frame_len: u32,
}

/// Groups decompressed lately, by offset: the parts of a group are mostly
/// short processes' streams, which start at about the same time, so that
/// the reader needs a group's records several times in a row.
const GROUPS_KEPT: usize = 4;

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
    /// The records of the groups read last (offset, bytes), newest last.
    groups: VecDeque<(u64, std::rc::Rc<Vec<u8>>)>,
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
        let groups = version >= GROUPS_SINCE;
        let (streams, summary) = scan(&file, path, 16 + hlen as u64, size, groups)?;
        let mut waiting: Vec<VecDeque<BlockRef>> = streams.into_values().collect();
        // Latest first, so that pop() gives the earliest stream; ties by
        // file position, so that the order never depends on hashing.
        waiting.sort_by_key(|q| {
            let part = q[0].part.map_or(0, |p| p.index);
            Reverse((q[0].first_ns, q[0].at, part))
        });
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
            groups: VecDeque::new(),
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
        let (group, raw);
        let bytes: &[u8] = match b.part {
            None => {
                raw = self.decompress(b.at, b.at + BLOCK_HDR as u64, b.clen, b.rlen)?;
                self.raw_bytes += raw.len() as u64;
                &raw
            }
            Some(p) => {
                group = self.group(b.at, p)?;
                &group[p.offset as usize..(p.offset + b.rlen) as usize]
            }
        };
        let mut r = Reader::new(bytes);
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

    /// The `rlen` bytes of records the zstd frame of `clen` bytes at
    /// `frame_at` holds (of the block at `at`).
    fn decompress(
        &self,
        at: u64,
        frame_at: u64,
        clen: u32,
        rlen: u32,
    ) -> Result<Vec<u8>, TraceError> {
        let mut z = vec![0u8; clen as usize];
        self.file
            .read_exact_at(&mut z, frame_at)
            .map_err(|e| TraceError::Io {
                path: self.path.clone(),
                source: e,
            })?;
        // Streamed, so that a header claiming a huge length costs nothing
        // until the frame actually holds that much.
        let mut raw = Vec::new();
        zstd::stream::read::Decoder::new(&z[..])
            .and_then(|d| d.take(rlen as u64 + 1).read_to_end(&mut raw))
            .map_err(|e| self.corrupt(at, &format!("block does not decompress: {e}")))?;
        if raw.len() != rlen as usize {
            return Err(self.corrupt(at, "block decompresses to another length"));
        }
        Ok(raw)
    }

    /// The records of the group at `at` (of which `p` is a part).
    fn group(&mut self, at: u64, p: PartRef) -> Result<std::rc::Rc<Vec<u8>>, TraceError> {
        if let Some((_, g)) = self.groups.iter().find(|(a, _)| *a == at) {
            return Ok(g.clone());
        }
        let raw = self.decompress(at, p.frame_at, p.frame_len, p.group_rlen)?;
        let raw = std::rc::Rc::new(raw);
        self.raw_bytes += raw.len() as u64;
        if self.groups.len() == GROUPS_KEPT {
            self.groups.pop_front();
        }
        self.groups.push_back((at, raw.clone()));
        Ok(raw)
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

/// Reads the block headers (and groups' directories) from `at` to the end
/// block: each stream's blocks in file order, and the summary. `groups`:
/// the file's version has them.
fn scan(
    file: &File,
    path: &Path,
    mut at: u64,
    size: u64,
    groups: bool,
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
                    part: None,
                });
                at = end;
            }
            TAG_GROUP if groups => {
                if stream != 0 {
                    return Err(corrupt(path, at, "group header is implausible"));
                }
                let header = Header {
                    at,
                    clen,
                    rlen,
                    count,
                };
                for part in group_parts(file, path, header, size)? {
                    streams.entry(part.0).or_default().push_back(part.1);
                }
                at += (BLOCK_HDR as u64) + clen as u64;
            }
            t => return Err(corrupt(path, at, &format!("unknown block kind {t}"))),
        }
    }
}

/// What a block header says of a group at `at`.
struct Header {
    at: u64,
    clen: u32,
    rlen: u32,
    count: u32,
}

/// The parts of the group `h` says (its stream, and where its records
/// are), in directory order, once the header and directory are checked.
fn group_parts(
    file: &File,
    path: &Path,
    h: Header,
    size: u64,
) -> Result<Vec<(u32, BlockRef)>, TraceError> {
    let Header {
        at,
        clen,
        rlen,
        count,
    } = h;
    if rlen > MAX_GROUP_RAW
        || count == 0
        || count > MAX_GROUP_PARTS
        || count as u64 * PART_HDR as u64 >= clen as u64
    {
        return Err(corrupt(path, at, "group header is implausible"));
    }
    if at + (BLOCK_HDR as u64) + clen as u64 > size {
        return Err(truncated(
            path,
            format!("the block at byte {at} is cut short"),
        ));
    }
    let dir_at = at + BLOCK_HDR as u64;
    let what = format!("the group at byte {at} is cut short");
    let dir_len = count * PART_HDR as u32;
    let dir = read_block_bytes(file, path, dir_at, dir_len, size, &what)?;
    let mut parts = Vec::with_capacity(count as usize);
    let mut offset = 0u32;
    for (index, e) in dir.chunks_exact(PART_HDR).enumerate() {
        let word = |i: usize| u32::from_le_bytes(e[4 * i..4 * i + 4].try_into().unwrap());
        let (stream, prlen, pcount) = (word(0), word(1), word(2));
        let first_ns = u64::from_le_bytes(e[16..].try_into().unwrap());
        // As a block's, and inside the group's records.
        if pcount == 0
            || pcount > MAX_BLOCK_RECORDS
            || pcount as u64 * 4 > prlen as u64
            || offset as u64 + prlen as u64 > rlen as u64
        {
            return Err(corrupt(path, at, "group directory is implausible"));
        }
        let part = PartRef {
            index: index as u32,
            offset,
            group_rlen: rlen,
            frame_at: dir_at + dir_len as u64,
            frame_len: clen - dir_len,
        };
        parts.push((
            stream,
            BlockRef {
                at,
                clen,
                rlen: prlen,
                count: pcount,
                first_ns,
                part: Some(part),
            },
        ));
        offset += prlen;
    }
    if offset != rlen {
        return Err(corrupt(path, at, "group directory is implausible"));
    }
    Ok(parts)
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
