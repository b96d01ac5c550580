//! `fsprof trace`: the user layer's source with recording turned on.
//!
//! The shim appends each thread's calls to chunk files in the run
//! directory. While the command runs, chunks that are done (sealed, or
//! their thread or process image gone) are compressed into a spool file
//! beside the output and deleted, so the run directory holds about one
//! chunk per live thread however long the run. At the end the spool's
//! per-thread streams are merged by time, paths are resolved
//! ([`crate::resolve`]) and the trace file is written. The counters the
//! shim keeps as always give the `fsprof run` profile of the same run.

use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use fsprof_capture::{Caps, Ended, Finish, Source, SourceError};
use fsprof_core::profile::{Layer, Meta};
use fsprof_shim::trace_abi as tabi;
use fsprof_user::{SetupError, UserOptions, UserSource};

use crate::chunks::{self, ChunkInfo, TickClock};
use crate::codec::{self, Reader};
use crate::event::Record;
use crate::file::{TraceError, TraceHeader, TraceSummary, TraceWriter};
use crate::resolve::Resolver;

/// What `--data` keeps of written bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataMode {
    None,
    Digest,
    Full,
}

impl DataMode {
    pub fn name(self) -> &'static str {
        match self {
            DataMode::None => "none",
            DataMode::Digest => "digest",
            DataMode::Full => "full",
        }
    }
}

pub struct TraceOptions {
    pub user: UserOptions,
    pub data: DataMode,
    /// Where the trace goes.
    pub output: PathBuf,
    pub force: bool,
}

/// The trace a capture wrote.
#[derive(Clone, Debug)]
pub struct TraceOutcome {
    pub path: PathBuf,
    pub summary: TraceSummary,
    pub file_bytes: u64,
    /// Peak bytes of chunk files waiting in the run directory.
    pub peak_pending_bytes: u64,
}

/// How often finished chunks are moved out of the run directory.
const HARVEST_NS: u64 = 200_000_000;

pub struct TraceSource {
    user: UserSource,
    data: DataMode,
    output: PathBuf,
    force: bool,
    clock: Option<TickClock>,
    start_unix_ns: u64,
    spool: Spool,
    /// Newest process image seen per pid: chunks of older images are done.
    newest_image: HashMap<i32, u64>,
    dropped: u64,
    notes: Vec<String>,
    peak_pending: u64,
    outcome: Option<TraceOutcome>,
}

impl TraceSource {
    pub fn new(opts: TraceOptions) -> Result<TraceSource, SetupError> {
        if !opts.force && opts.output.exists() {
            return Err(SetupError::new(format!(
                "{} already exists; use --force to replace it",
                opts.output.display()
            )));
        }
        let spool = Spool::create(&opts.output)
            .map_err(|e| SetupError::new(format!("cannot create the trace spool: {e}")))?;
        Ok(TraceSource {
            user: UserSource::new(&opts.user)?,
            data: opts.data,
            output: opts.output,
            force: opts.force,
            clock: None,
            start_unix_ns: 0,
            spool,
            newest_image: HashMap::new(),
            dropped: 0,
            notes: Vec::new(),
            peak_pending: 0,
            outcome: None,
        })
    }

    /// The trace written by [`Source::finish`].
    pub fn outcome(&self) -> Option<&TraceOutcome> {
        self.outcome.as_ref()
    }

    /// Moves finished chunks (all of them when `all`) into the spool.
    fn harvest(&mut self, all: bool) {
        let Some(clock) = self.clock else { return };
        let dir = self.user.run_dir().to_path_buf();
        let mut files: Vec<(u64, PathBuf)> = match std::fs::read_dir(&dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name();
                    let seq = name
                        .to_str()?
                        .strip_prefix(tabi::TCHUNK_PREFIX)?
                        .parse()
                        .ok()?;
                    Some((seq, e.path()))
                })
                .collect(),
            Err(_) => return,
        };
        files.sort();
        let mut chunks = Vec::new();
        let mut pending = 0u64;
        for (_, path) in files {
            match chunks::read_chunk(&path) {
                Ok(Some((info, bytes))) => {
                    let e = self.newest_image.entry(info.pid).or_insert(info.proc_seq);
                    *e = (*e).max(info.proc_seq);
                    pending += bytes.len() as u64;
                    chunks.push((path, info, bytes));
                }
                Ok(None) => {}
                Err(e) => {
                    self.notes.push(format!("skipped a trace chunk: {e}"));
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        self.peak_pending = self.peak_pending.max(pending);
        for (path, info, bytes) in chunks {
            let done = all
                || info.sealed
                || self.newest_image.get(&info.pid) > Some(&info.proc_seq)
                || !thread_alive(info.pid, info.tid);
            if !done {
                continue;
            }
            self.dropped += info.dropped;
            match chunks::parse(&info, &bytes, &clock) {
                Ok(records) => {
                    if let Err(e) = self.spool.add(&info, &records) {
                        self.notes.push(format!("lost a trace chunk: {e}"));
                    }
                }
                Err(e) => self.notes.push(format!(
                    "skipped a corrupt trace chunk of pid {} tid {}: {e}",
                    info.pid, info.tid
                )),
            }
            let _ = std::fs::remove_file(&path);
        }
    }

    fn header(&self, meta_command: Vec<String>) -> TraceHeader {
        let mut h = TraceHeader::new("shim", self.data.name());
        h.command = meta_command;
        h.host = fsprof_sys::host::hostname();
        h.kernel = fsprof_sys::host::kernel_release();
        h.start_unix_ns = self.start_unix_ns;
        h.start_time = fsprof_core::units::rfc3339_utc(self.start_unix_ns);
        h.clock = self.user.clock().describe().source.to_string();
        h
    }
}

fn thread_alive(pid: i32, tid: i32) -> bool {
    // SAFETY: signal 0 only checks that the thread exists.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

impl Source for TraceSource {
    fn caps(&self) -> Caps {
        Caps {
            upkeep_ns: Some(HARVEST_NS),
            ..self.user.caps()
        }
    }

    fn command_env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.user.command_env();
        env.push((tabi::TRACE_ENV.into(), self.data.name().into()));
        env
    }

    fn start(&mut self, command: Option<i32>) -> Result<String, SourceError> {
        let what = self.user.start(command)?;
        let c = self.user.clock();
        self.clock = Some(if c.kind == fsprof_shim::abi::CLOCK_TSC {
            let (tsc, mono) = fsprof_sys::clock::tsc_mono_pair();
            TickClock {
                mult: c.mult,
                ref_ticks: tsc,
                ref_mono: mono,
            }
        } else {
            TickClock {
                mult: 1 << 32,
                ref_ticks: 0,
                ref_mono: 0,
            }
        });
        self.start_unix_ns = fsprof_sys::clock::wall_unix_ns();
        Ok(format!("{what} (tracing every call)"))
    }

    fn snapshot(&mut self) -> Result<Vec<Layer>, SourceError> {
        self.user.snapshot()
    }

    fn upkeep(&mut self) {
        self.user.upkeep();
        self.harvest(false);
    }

    fn finish(&mut self, how: &Ended) -> Result<Finish, SourceError> {
        let mut fin = self.user.finish(how)?;
        self.harvest(true);
        let command = std::env::args().collect();
        let header = self.header(command);
        let mut writer = TraceWriter::create(&self.output, &header, self.force)?;
        let mut resolver = Resolver::default();
        self.spool.merge(how.start_mono_ns, |mut rec| {
            match &mut rec {
                Record::Process(p) => resolver.process(p),
                Record::Call(c) => resolver.call(c),
            }
            writer.push(&rec)
        })?;
        writer.set_pending_peak(self.peak_pending);
        let (summary, file_bytes) = writer.finish(self.dropped, how.duration_ns)?;
        if summary.dropped > 0 {
            fin.warnings.push(format!(
                "{} call(s) were not recorded in the trace (the run directory was full, or a signal handler called into a call being recorded)",
                summary.dropped
            ));
        }
        fin.notes.append(&mut self.notes);
        self.outcome = Some(TraceOutcome {
            path: self.output.clone(),
            summary,
            file_bytes,
            peak_pending_bytes: self.peak_pending,
        });
        Ok(fin)
    }

    fn amend_meta(&mut self, meta: &mut Meta) {
        self.user.amend_meta(meta);
    }
}

/// Where finished chunks wait, compressed, until the end of the capture:
/// a file beside the output, removed when the trace is written.
struct Spool {
    path: PathBuf,
    file: File,
    len: u64,
    blocks: Vec<SpoolBlock>,
}

#[derive(Clone, Copy, Debug)]
struct SpoolBlock {
    stream: (u64, i32),
    index: u32,
    offset: u64,
    clen: u64,
    count: u32,
    first_ns: u64,
}

impl Spool {
    fn create(output: &Path) -> io::Result<Spool> {
        let name = output
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trace".into());
        let path = output.with_file_name(format!(".{name}.spool-{}", std::process::id()));
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(Spool {
            path,
            file,
            len: 0,
            blocks: Vec::new(),
        })
    }

    fn add(&mut self, info: &ChunkInfo, records: &[Record]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut raw = Vec::new();
        let mut prev = 0;
        for r in records {
            codec::encode(&mut raw, r, &mut prev);
        }
        let z = zstd::bulk::compress(&raw, 1)?;
        self.file.seek(SeekFrom::Start(self.len))?;
        self.file.write_all(&z)?;
        self.blocks.push(SpoolBlock {
            stream: (info.proc_seq, info.tid),
            index: info.index,
            offset: self.len,
            clen: z.len() as u64,
            count: records.len() as u32,
            first_ns: records[0].start_ns(),
        });
        self.len += z.len() as u64;
        Ok(())
    }

    fn load(&mut self, b: &SpoolBlock) -> io::Result<VecDeque<Record>> {
        let mut z = vec![0u8; b.clen as usize];
        self.file.seek(SeekFrom::Start(b.offset))?;
        self.file.read_exact(&mut z)?;
        let mut raw = Vec::new();
        zstd::stream::read::Decoder::new(&z[..])?.read_to_end(&mut raw)?;
        let mut r = Reader::new(&raw);
        let mut prev = 0;
        let mut out = VecDeque::with_capacity(b.count as usize);
        for _ in 0..b.count {
            out.push_back(
                codec::decode(&mut r, &mut prev, fsprof_shim::OPS.len())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?,
            );
        }
        Ok(out)
    }

    /// Every record, by time, with times made relative to `start_mono`.
    /// Only the streams under way at a given time hold a block in memory.
    fn merge(
        &mut self,
        start_mono: u64,
        mut emit: impl FnMut(Record) -> Result<(), TraceError>,
    ) -> Result<(), TraceError> {
        let io_err = |e: io::Error, p: &Path| TraceError::Io {
            path: p.to_path_buf(),
            source: e,
        };
        let mut streams: HashMap<(u64, i32), VecDeque<SpoolBlock>> = HashMap::new();
        for b in &self.blocks {
            streams.entry(b.stream).or_default().push_back(*b);
        }
        let mut waiting: Vec<VecDeque<SpoolBlock>> = streams
            .into_values()
            .map(|mut q| {
                q.make_contiguous().sort_by_key(|b| b.index);
                q
            })
            .collect();
        // Latest first, so that pop() gives the earliest stream.
        waiting.sort_by_key(|q| std::cmp::Reverse(q[0].first_ns));
        struct Active {
            blocks: VecDeque<SpoolBlock>,
            records: VecDeque<Record>,
        }
        let mut active: Vec<Active> = Vec::new();
        let mut heap: BinaryHeap<std::cmp::Reverse<(u64, usize)>> = BinaryHeap::new();
        loop {
            let next_active = heap.peek().map(|r| r.0 .0);
            let next_waiting = waiting.last().map(|q| q[0].first_ns);
            let activate = match (next_active, next_waiting) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(a), Some(w)) => w <= a,
            };
            if activate {
                let mut blocks = waiting.pop().expect("a waiting stream");
                let first = blocks.pop_front().expect("streams have blocks");
                let records = self.load(&first).map_err(|e| io_err(e, &self.path))?;
                let k = active.len();
                if let Some(t) = records.front().map(Record::start_ns) {
                    heap.push(std::cmp::Reverse((t, k)));
                }
                active.push(Active { blocks, records });
                continue;
            }
            let Some(std::cmp::Reverse((_, k))) = heap.pop() else {
                break;
            };
            let a = &mut active[k];
            let mut rec = a.records.pop_front().expect("heap entries have a record");
            if a.records.is_empty() {
                a.records = match a.blocks.pop_front() {
                    Some(b) => self.load(&b).map_err(|e| io_err(e, &self.path))?,
                    // Done: give back the block's memory.
                    None => VecDeque::new(),
                };
            }
            if let Some(t) = active[k].records.front().map(Record::start_ns) {
                heap.push(std::cmp::Reverse((t, k)));
            }
            match &mut rec {
                Record::Call(c) => {
                    c.start_ns = c.start_ns.saturating_sub(start_mono);
                    c.end_ns = c.end_ns.saturating_sub(start_mono);
                }
                Record::Process(p) => p.start_ns = p.start_ns.saturating_sub(start_mono),
            }
            emit(rec)?;
        }
        Ok(())
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
