//! The trace file: a magic, a JSON header, zstd-compressed blocks of
//! records, each block one *stream*'s (one traced thread's, or a whole
//! import's) records in time order, and an end block. A capture appends a
//! thread's records as they are harvested, so ending it only appends the
//! end block; [`TraceReader`] merges the streams by time. Written to a
//! temporary name and renamed into place, so a trace file that exists is
//! complete; a file without its end block was cut short and is refused
//! with that reason. Layout in `docs/trace-format.md`.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use fsprof_core::format::FormatError;
use fsprof_core::output::OutputFile;
use fsprof_core::profile::RunInfo;
use serde::{Deserialize, Serialize};

use crate::codec::{self, CallRef};
use crate::event::Record;

pub use crate::reader::TraceReader;

pub const MAGIC: &[u8; 8] = b"fsprtrc\0";
pub const FORMAT_NAME: &str = "fsprof-trace";
/// 2: blocks belong to streams (and carry their first start time), times
/// may be offset by the end block's `origin_ns`, `resolved` is optional;
/// sendfile's `fd` is the file it reads (version 1 files disagree on it).
/// 3: records of accesses through file mappings (kind 3); a version 2 file
/// is a version 3 file without them, and is read as one.
/// 4: records of descriptors at their first use (kind 4); `fsprof trace`'s
/// process records list no descriptors. A version 3 file is read as one
/// without them.
/// 5: groups (tag 3): small blocks of several streams in one zstd frame. A
/// version 4 file is a version 5 file without them.
pub const FORMAT_VERSION: u32 = 5;
/// The first version with groups.
pub(crate) const GROUPS_SINCE: u32 = 5;
/// The oldest version this fsprof reads.
pub const OLDEST_READ: u32 = 2;

pub(crate) const TAG_RECORDS: u32 = 1;
pub(crate) const TAG_END: u32 = 2;
pub(crate) const TAG_GROUP: u32 = 3;
/// Bytes of a group's directory entry for one part: stream, rlen, count,
/// 0 (u32 each), first start (u64).
pub(crate) const PART_HDR: usize = 24;
/// Bytes of a block header: tag, clen, rlen, count, stream, 0 (u32 each),
/// first start (u64).
pub(crate) const BLOCK_HDR: usize = 32;
/// A block is flushed once its records take this many bytes: small
/// enough that ending a capture compresses little (a thread's records are
/// compressed as they come, a block at a time), large enough that zstd
/// finds the repeats.
const BLOCK_RAW: usize = 128 << 10;
/// Every stream's block is flushed once together they take this many
/// bytes (a capture of a thousand threads holds no more than this).
const PENDING_MAX: usize = 8 << 20;
/// Headers and end blocks larger than this are corrupt.
pub(crate) const MAX_JSON: u32 = 16 << 20;
/// Decompressed blocks larger than this are refused.
pub(crate) const MAX_BLOCK_RAW: u32 = 1 << 31;
/// Records a block may claim: a block is ended once its records take
/// [`BLOCK_RAW`] bytes, and a record takes at least 9. A reader holds a
/// block's records decoded (~350 bytes each): a count beyond what a writer
/// makes would let a file of a kilobyte, whose 4 MiB block of zeros zstd
/// packs into a few hundred bytes, make it hold a million.
pub(crate) const MAX_BLOCK_RECORDS: u32 = 1 << 15;
const _: () = assert!(BLOCK_RAW / 9 + 1 < MAX_BLOCK_RECORDS as usize);
/// zstd level of the blocks and groups: 1 compresses a capture's records
/// at several hundred MB/s; level 3 (version 1) cost three times the CPU
/// for ~10% less.
const ZSTD_LEVEL: i32 = 1;
/// Ended streams' buffers kept for new ones, and the largest kept (a
/// block's worth, which a long thread's grew to, is let go).
const SPARE_BUFFERS: usize = 64;
const SPARE_CAPACITY: usize = 16 << 10;
/// Blocks below this many bytes are small: they go into a group, not a
/// frame of their own. Most short processes' whole stream is one block of
/// a few hundred bytes, and a frame of its own cost fsprof more than
/// reading and encoding its records: ~7 us a frame (perf of the loop of
/// 2,000 `cat`s, 4,004 frames of a median 263 bytes), most of it setting
/// up the frame and its entropy tables, for 8% less than the records
/// (`zstd -b -B263` of their bytes: x1.12; in 64 KiB groups x4.0).
const SMALL_BLOCK: usize = 8 << 10;
/// A group is written once its parts hold this many bytes (and at the
/// end): large enough that a frame's set-up is paid for a few hundred
/// short processes' records, small enough that ending a capture
/// compresses little and a reader holds little.
const GROUP_RAW: usize = 64 << 10;
/// Bytes of records a group may hold, for readers: a writer's groups hold
/// up to [`GROUP_RAW`] plus one small block.
pub(crate) const MAX_GROUP_RAW: u32 = 1 << 20;
/// Parts a group may have, for readers (a part holds at least one record
/// of at least 4 bytes).
pub(crate) const MAX_GROUP_PARTS: u32 = MAX_GROUP_RAW / 4;
const _: () = assert!(GROUP_RAW + SMALL_BLOCK <= MAX_GROUP_RAW as usize);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    pub format: String,
    pub format_version: u32,
    pub fsprof_version: String,
    /// How the trace was made: `shim` (`fsprof trace`), `strace`, `fio-iolog`.
    pub source: String,
    #[serde(default)]
    pub command: Vec<String>,
    /// Where and when the traced run ran, as in a profile's `Meta`.
    #[serde(flatten)]
    pub run: RunInfo,
    /// `tsc`, `monotonic`, or `imported`.
    #[serde(default)]
    pub clock: String,
    /// What was kept of written data: `none`, `digest` or `full`.
    pub data: String,
    /// Op names; records refer to them by index.
    pub ops: Vec<String>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// How loads and stores through file mappings were captured:
    /// `page-faults` (the capture followed the program's page faults), or
    /// empty (not captured: the trace holds the mmap, msync and munmap
    /// calls only).
    #[serde(default)]
    pub mapped_accesses: String,
}

/// [`TraceHeader::mapped_accesses`] of a capture that followed page faults.
pub const MAPPED_BY_FAULTS: &str = "page-faults";

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
    /// CLOCK_MONOTONIC ns of the trace's start: records' times minus this
    /// are ns since the start (0: they are stored relative already).
    #[serde(default)]
    pub origin_ns: u64,
    /// Records of accesses through file mappings.
    #[serde(default)]
    pub mapped: u64,
    /// Page faults the capture could not record (its event ring was full),
    /// or that it could not tell the file of (none of the program's file
    /// mappings it saw covered them).
    #[serde(default)]
    pub mapped_lost: u64,
    /// Processes of the traced tree whose page faults were not followed
    /// at all (nor those of any process they started): more were alive at
    /// once than the capture's map of followed processes holds.
    #[serde(default)]
    pub mapped_unfollowed: u64,
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
    #[error("{path}: trace format version {found}, this fsprof reads versions {OLDEST_READ} to {FORMAT_VERSION}; capture or import the trace again with this fsprof")]
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
    #[error(transparent)]
    Output(FormatError),
}

/// A stream's block under way: its encoded records, their count, the first
/// one's start and the last one's; whether the group under way holds an
/// earlier block of the stream.
#[derive(Default)]
struct Pending {
    block: Vec<u8>,
    count: u32,
    first: u64,
    prev_start: u64,
    grouped: bool,
}

/// The group under way: small blocks of any streams, their records back to
/// back, and one directory entry each.
#[derive(Default)]
struct Group {
    raw: Vec<u8>,
    parts: Vec<Part>,
}

struct Part {
    stream: u32,
    rlen: u32,
    count: u32,
    first: u64,
}

/// Writes a trace, block by block: [`TraceWriter::push`] for a trace that
/// is one stream (imports), [`TraceWriter::push_to`] for a capture's
/// per-thread streams.
pub struct TraceWriter {
    path: PathBuf,
    /// The file under a temporary name until [`TraceWriter::finish`].
    out: BufWriter<OutputFile>,
    zstd: zstd::bulk::Compressor<'static>,
    /// Compressed bytes of the block being written (kept between blocks).
    packed: Vec<u8>,
    /// Blocks of fewer than [`SMALL_BLOCK`] bytes, until they are written
    /// together.
    group: Group,
    /// The block under way of each stream, by stream number. A capture
    /// hands on a thread's records a few at a time; they are compressed
    /// once a block's worth has come (or the thread is done).
    blocks: Vec<Pending>,
    /// Bytes in all blocks under way.
    pending: usize,
    /// Buffers of streams closed ([`TraceWriter::close_stream`]), for new
    /// streams: a capture starts one or two a short process, each of which
    /// grew its own from nothing (~7 reallocations), and a long capture's
    /// ended streams kept theirs.
    spare: Vec<Vec<u8>>,
    summary: TraceSummary,
    bytes_raw: u64,
    bytes_file: u64,
    /// A frame was compressed ([`TraceWriter::warm`]'s or a block's).
    warm: bool,
}

impl TraceWriter {
    /// Starts `path` (written under a temporary name beside it until
    /// [`TraceWriter::finish`], by fsprof-core's output rules); refuses an
    /// existing file unless `overwrite`.
    pub fn create(path: &Path, header: &TraceHeader, overwrite: bool) -> Result<Self, TraceError> {
        TraceWriter::stage(path, overwrite)?.start(header)
    }

    /// The first half of [`TraceWriter::create`]: the file made (under its
    /// temporary name) and the compressors set up, before the header is
    /// known. A capture does this while its command is held, before it
    /// waits for what the header says (`trace`'s page-fault programs).
    pub fn stage(path: &Path, overwrite: bool) -> Result<StagedTrace, TraceError> {
        let io = |e| TraceError::Io {
            path: path.into(),
            source: e,
        };
        // Never through a link, never over a device, FIFO or socket.
        let file = OutputFile::create_file(path, overwrite).map_err(|e| output_error(path, e))?;
        let compressor = || {
            let mut z = zstd::bulk::Compressor::new(ZSTD_LEVEL)?;
            z.include_checksum(true)?;
            Ok(z)
        };
        Ok(StagedTrace {
            path: path.into(),
            out: BufWriter::with_capacity(1 << 16, file),
            zstd: compressor().map_err(io)?,
        })
    }
}

/// A trace file made and not started yet ([`TraceWriter::stage`]); dropped,
/// it leaves nothing behind.
pub struct StagedTrace {
    path: PathBuf,
    out: BufWriter<OutputFile>,
    zstd: zstd::bulk::Compressor<'static>,
}

impl StagedTrace {
    /// Writes the header: the trace is under way.
    pub fn start(self, header: &TraceHeader) -> Result<TraceWriter, TraceError> {
        let StagedTrace {
            path,
            mut out,
            zstd,
        } = self;
        let io = |e| TraceError::Io {
            path: path.clone(),
            source: e,
        };
        let json = serde_json::to_vec(header).expect("a trace header serializes");
        out.write_all(MAGIC).map_err(io)?;
        out.write_all(&FORMAT_VERSION.to_le_bytes()).map_err(io)?;
        out.write_all(&(json.len() as u32).to_le_bytes())
            .map_err(io)?;
        out.write_all(&json).map_err(io)?;
        Ok(TraceWriter {
            path,
            out,
            zstd,
            packed: Vec::new(),
            group: Group::default(),
            blocks: Vec::new(),
            pending: 0,
            spare: Vec::new(),
            summary: TraceSummary::default(),
            bytes_raw: 0,
            bytes_file: (16 + json.len()) as u64,
            warm: false,
        })
    }
}

impl TraceWriter {
    /// Appends a record to stream 0, for a trace that is one stream
    /// (imports): its records go in time order.
    pub fn push(&mut self, r: &Record) -> Result<(), TraceError> {
        self.push_to(0, r)
    }

    /// The block under way of `stream`.
    fn pending(&mut self, stream: u32, start_ns: u64) -> &mut Pending {
        let i = stream as usize;
        if self.blocks.len() <= i {
            self.blocks.resize_with(i + 1, Pending::default);
        }
        let p = &mut self.blocks[i];
        if p.count == 0 {
            p.first = start_ns;
            if p.block.capacity() == 0 {
                p.block = self.spare.pop().unwrap_or_default();
            }
        }
        p.count += 1;
        p
    }

    /// After a record was added to `stream`'s block (`grew` bytes): ends
    /// the block once it is full, and every block when together they hold
    /// too much.
    fn added(&mut self, stream: u32, grew: usize) -> Result<(), TraceError> {
        self.summary.records += 1;
        self.pending += grew;
        if self.blocks[stream as usize].block.len() >= BLOCK_RAW {
            self.end_stream(stream)?;
        }
        if self.pending >= PENDING_MAX {
            self.end_block()?;
        }
        Ok(())
    }

    /// Appends the next record of `stream` (a capture's thread), in time
    /// order after the stream's earlier ones.
    pub fn push_to(&mut self, stream: u32, r: &Record) -> Result<(), TraceError> {
        match r {
            Record::Call(c) => return self.push_call(stream, &CallRef::from(c)),
            Record::Process(_) => self.summary.processes += 1,
            Record::Mapped(_) => self.summary.mapped += 1,
            Record::Descriptor(_) => {}
        }
        let p = self.pending(stream, r.start_ns());
        let before = p.block.len();
        codec::encode(&mut p.block, r, &mut p.prev_start);
        let grew = p.block.len() - before;
        self.added(stream, grew)
    }

    /// [`TraceWriter::push_to`] for a call borrowed from where it is.
    pub fn push_call(&mut self, stream: u32, c: &CallRef) -> Result<(), TraceError> {
        self.summary.calls += 1;
        let p = self.pending(stream, c.start_ns);
        let before = p.block.len();
        codec::encode_call(&mut p.block, c, &mut p.prev_start);
        let grew = p.block.len() - before;
        self.added(stream, grew)
    }

    /// Compresses and writes the blocks under way of every stream, and the
    /// group under way.
    pub fn end_block(&mut self) -> Result<(), TraceError> {
        for s in 0..self.blocks.len() {
            self.end_stream(s as u32)?;
        }
        self.end_group()
    }

    /// Ends `stream`'s block under way (a capture ends a thread's when the
    /// thread is gone): a small one goes into the group under way, a large
    /// one is compressed and written as a block of its own (after the
    /// group, if that holds an earlier block of the stream: a stream's
    /// blocks follow one another in the file in time order).
    pub fn end_stream(&mut self, stream: u32) -> Result<(), TraceError> {
        let Some(p) = self.blocks.get_mut(stream as usize) else {
            return Ok(());
        };
        if p.count == 0 {
            return Ok(());
        }
        let rlen = p.block.len();
        if rlen < SMALL_BLOCK {
            self.group.raw.extend_from_slice(&p.block);
            self.group.parts.push(Part {
                stream,
                rlen: rlen as u32,
                count: p.count,
                first: p.first,
            });
            p.grouped = true;
        } else {
            if p.grouped {
                self.end_group()?;
            }
            let p = &self.blocks[stream as usize];
            let words = [TAG_RECORDS, 0, rlen as u32, p.count, stream, 0];
            let first = p.first;
            self.write_frame(words, first, &[], Frame::Block(stream))?;
        }
        self.bytes_raw += rlen as u64;
        self.pending -= rlen;
        let p = &mut self.blocks[stream as usize];
        p.block.clear();
        p.count = 0;
        p.prev_start = 0;
        if self.group.raw.len() >= GROUP_RAW {
            self.end_group()?;
        }
        Ok(())
    }

    /// Compresses and writes the group under way, if it has parts.
    fn end_group(&mut self) -> Result<(), TraceError> {
        if self.group.parts.is_empty() {
            return Ok(());
        }
        let mut dir = Vec::with_capacity(self.group.parts.len() * PART_HDR);
        for part in &self.group.parts {
            for v in [part.stream, part.rlen, part.count, 0] {
                dir.extend_from_slice(&v.to_le_bytes());
            }
            dir.extend_from_slice(&part.first.to_le_bytes());
            if let Some(p) = self.blocks.get_mut(part.stream as usize) {
                p.grouped = false;
            }
        }
        let words = [
            TAG_GROUP,
            0,
            self.group.raw.len() as u32,
            self.group.parts.len() as u32,
            0,
            0,
        ];
        self.write_frame(words, 0, &dir, Frame::Group)?;
        self.group.raw.clear();
        self.group.parts.clear();
        Ok(())
    }

    /// Writes a block header (`words`, whose `clen` is filled in here, and
    /// `first`), `dir`, and the zstd frame of `what`'s records.
    fn write_frame(
        &mut self,
        mut words: [u32; 6],
        first: u64,
        dir: &[u8],
        what: Frame,
    ) -> Result<(), TraceError> {
        let io = |e| TraceError::Io {
            path: self.path.clone(),
            source: e,
        };
        let raw = match what {
            Frame::Block(s) => &self.blocks[s as usize].block,
            Frame::Group => &self.group.raw,
        };
        self.warm = true;
        self.packed.clear();
        self.packed
            .reserve(zstd::zstd_safe::compress_bound(raw.len()));
        self.zstd
            .compress_to_buffer(raw, &mut self.packed)
            .map_err(io)?;
        words[1] = (dir.len() + self.packed.len()) as u32;
        let mut hdr = [0u8; BLOCK_HDR];
        for (i, v) in words.into_iter().enumerate() {
            hdr[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        hdr[24..].copy_from_slice(&first.to_le_bytes());
        self.out.write_all(&hdr).map_err(io)?;
        self.out.write_all(dir).map_err(io)?;
        self.out.write_all(&self.packed).map_err(io)?;
        self.bytes_file += (BLOCK_HDR + dir.len() + self.packed.len()) as u64;
        Ok(())
    }

    /// [`TraceWriter::end_stream`] for a stream that has ended (its thread
    /// is gone): its buffer goes to the next stream. Records pushed to it
    /// after all start a new block, as after `end_stream`.
    pub fn close_stream(&mut self, stream: u32) -> Result<(), TraceError> {
        self.end_stream(stream)?;
        if let Some(p) = self.blocks.get_mut(stream as usize) {
            let block = std::mem::take(&mut p.block);
            if self.spare.len() < SPARE_BUFFERS && block.capacity() <= SPARE_CAPACITY {
                self.spare.push(block);
            }
        }
        Ok(())
    }

    /// Has zstd make its workspace, if no frame has yet: it allocates it
    /// at a compressor's first frame, and a frame touches the pages of
    /// the tables and buffers its size needs (zstd sizes them by the
    /// frame): a short capture's first frame, at its end, took 37-57 page
    /// faults and 0.2-0.3 ms on this project's 2-CPU test machine
    /// (bpftrace of `ZSTD_compress2` at load 18, 13-32 KB frames), on the
    /// way out. A capture calls this while its command runs. Frames
    /// written nowhere: a large block's zeros, which sizes the workspace
    /// (zstd keeps one large enough), then record-like bytes the size of
    /// a group's half and of a small group, whose tables and buffers are
    /// the ones a short capture's end uses (0 faults after it; zeros
    /// alone left 14).
    pub fn warm(&mut self) {
        if self.warm {
            return;
        }
        self.warm = true;
        let frames = [
            vec![0u8; BLOCK_RAW],
            record_like(GROUP_RAW / 2),
            record_like(2 * SMALL_BLOCK),
        ];
        for raw in &frames {
            self.packed.clear();
            self.packed
                .reserve(zstd::zstd_safe::compress_bound(raw.len()));
            // A failure here is the next frame's to report.
            let _ = self.zstd.compress_to_buffer(raw, &mut self.packed);
        }
        self.packed.clear();
    }

    /// Bytes of encoded records so far (before compression).
    pub fn raw_bytes(&self) -> u64 {
        self.bytes_raw + self.pending as u64
    }

    /// Records [`TraceSummary::pending_peak_bytes`].
    pub fn set_pending_peak(&mut self, bytes: u64) {
        self.summary.pending_peak_bytes = bytes;
    }

    /// Records [`TraceSummary::mapped_lost`] and
    /// [`TraceSummary::mapped_unfollowed`].
    pub fn set_mapped_lost(&mut self, lost: u64, unfollowed: u64) {
        self.summary.mapped_lost = lost;
        self.summary.mapped_unfollowed = unfollowed;
    }

    /// Records [`TraceSummary::origin_ns`]: the records' times are
    /// CLOCK_MONOTONIC, and the trace started at `mono_ns`.
    pub fn set_origin(&mut self, mono_ns: u64) {
        self.summary.origin_ns = mono_ns;
    }

    /// Writes the end block and puts the file in place; returns the summary
    /// and the file's size.
    pub fn finish(self, dropped: u64, duration_ns: u64) -> Result<(TraceSummary, u64), TraceError> {
        self.finish_leaving(dropped, duration_ns)
            .map(|(summary, bytes, _)| (summary, bytes))
    }

    /// [`TraceWriter::finish`], which also hands back the compressor and
    /// the buffers, unfreed ([`Spent`]).
    pub fn finish_leaving(
        mut self,
        dropped: u64,
        duration_ns: u64,
    ) -> Result<(TraceSummary, u64, Spent), TraceError> {
        self.end_block()?;
        self.summary.dropped = dropped;
        self.summary.duration_ns = duration_ns;
        let json = serde_json::to_vec(&self.summary).expect("a summary serializes");
        let io = |e| TraceError::Io {
            path: self.path.clone(),
            source: e,
        };
        let mut hdr = [0u8; BLOCK_HDR];
        for (i, v) in [TAG_END, json.len() as u32, json.len() as u32]
            .into_iter()
            .enumerate()
        {
            hdr[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        self.out.write_all(&hdr).map_err(io)?;
        self.out.write_all(&json).map_err(io)?;
        // Not synced, like every file fsprof writes: the rename makes the
        // complete file appear at once (a sync cost a capture 10-20 ms).
        let file = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        file.commit().map_err(|e| output_error(&self.path, e))?;
        let spent = Spent {
            _zstd: self.zstd,
            _buffers: (self.packed, self.spare, self.blocks),
        };
        Ok((
            self.summary.clone(),
            self.bytes_file + (BLOCK_HDR + json.len()) as u64,
            spent,
        ))
    }
}

/// A finished writer's compressor (its workspace, ~0.7 MB once warmed)
/// and buffers ([`TraceWriter::finish_leaving`]), for a caller about to
/// exit to leave to its exit (`std::mem::forget`): freeing them was two
/// `munmap`s, ~0.1 ms of `fsprof trace`'s way from its command's exit to
/// its own, on this project's 2-CPU test machine.
pub struct Spent {
    _zstd: zstd::bulk::Compressor<'static>,
    _buffers: (Vec<u8>, Vec<Vec<u8>>, Vec<Pending>),
}

/// `len` bytes that compress like records: 16-byte items with a few
/// bytes that vary (a linear congruential sequence).
fn record_like(len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 16);
    let mut x: u32 = 1;
    while v.len() < len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let [a, b, c, _] = x.to_be_bytes();
        v.extend_from_slice(&[1, 0, 0, 0, b, c, 7, 0, 0, 0, 0x10, 0, a, 0, 0, 0]);
    }
    v.truncate(len);
    v
}

/// Whose records a frame holds.
#[derive(Clone, Copy)]
enum Frame {
    Block(u32),
    Group,
}

/// An output error as a trace error: "exists" keeps its own variant.
pub(crate) fn output_error(path: &Path, e: FormatError) -> TraceError {
    match e {
        FormatError::Exists { .. } => TraceError::Exists { path: path.into() },
        e => TraceError::Output(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(dir: &Path) -> TraceWriter {
        TraceWriter::create(
            &dir.join("t.trace"),
            &TraceHeader::new("test", "digest"),
            true,
        )
        .unwrap()
    }

    /// Bytes zstd finds some matches in, as records are.
    fn bytes(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i * 7 % 251) as u8 ^ (i >> 9) as u8)
            .collect()
    }

    #[test]
    fn a_warmed_compressor_does_not_grow_for_the_frames_a_capture_writes() {
        let d = tempfile::tempdir().unwrap();
        let mut w = writer(d.path());
        w.warm();
        let warmed = w.zstd.context_mut().sizeof();
        // A short process's block, a group's sizes, a large block.
        for len in [300, 4 << 10, 13 << 10, GROUP_RAW + SMALL_BLOCK, BLOCK_RAW] {
            let raw = bytes(len);
            w.packed.clear();
            w.packed.reserve(zstd::zstd_safe::compress_bound(len));
            w.zstd.compress_to_buffer(&raw, &mut w.packed).unwrap();
            let now = w.zstd.context_mut().sizeof();
            assert!(
                now <= warmed,
                "{len} B frame: workspace {warmed} -> {now} B"
            );
        }
    }

    #[test]
    fn warming_writes_nothing_into_the_trace() {
        let d = tempfile::tempdir().unwrap();
        let write = |name: &str, warm: bool| {
            let path = d.path().join(name);
            let mut w =
                TraceWriter::create(&path, &TraceHeader::new("test", "digest"), true).unwrap();
            if warm {
                w.warm();
            }
            w.push(&crate::event::Record::Process(crate::event::ProcessInfo {
                pid: 1,
                ..Default::default()
            }))
            .unwrap();
            w.finish(0, 1_000).unwrap();
            std::fs::read(path).unwrap()
        };
        assert_eq!(write("warm.trace", true), write("cold.trace", false));
    }
}
