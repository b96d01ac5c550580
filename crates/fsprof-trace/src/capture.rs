//! `fsprof trace`: the user layer's source with recording turned on.
//!
//! The shim appends each thread's calls to chunk files in the run
//! directory. While the command runs, chunks that are done (sealed, or
//! their thread or process image gone) are appended to the trace file as
//! blocks of their thread's stream and deleted, so the run directory holds
//! about one chunk per live thread however long the run, and ending the
//! capture only harvests the last chunks and appends the end block. The
//! reader merges the streams by time and resolves paths
//! ([`crate::reader`]). The counters the shim keeps as always give the
//! `fsprof run` profile of the same run.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use fsprof_capture::{Caps, Ended, Finish, Source, SourceError};
use fsprof_core::profile::{Layer, Meta};

use crate::event::Record;
use fsprof_shim::trace_abi as tabi;
use fsprof_user::{SetupError, UserOptions, UserSource};

use crate::chunks::{self, TickClock};
use crate::dirwatch::DirWatch;
use crate::faultword;
use crate::file::{Spent, TraceHeader, TraceSummary, TraceWriter, MAPPED_BY_FAULTS};
use crate::mapped::MappedCapture;
use fsprof_kernel::faults::FaultSession;

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
    /// The page-fault programs' attach, started as early as the caller
    /// could ([`MappedAttach::start`]); `None`: started by
    /// [`TraceSource::new`].
    pub attach: Option<MappedAttach>,
}

/// The page-fault programs being made ready on a thread of their own (as
/// root; [`crate::faultword`]), or why the trace will not have the faults.
pub struct MappedAttach {
    job: Option<Attaching>,
    note: Option<String>,
}

/// The thread that makes the fault session (the command is held until it
/// is made), then loads the fault programs and attaches them when a
/// traced process asks, then closes what the capture hands it at its end
/// ([`faultword::attacher`]). Never joined: it ends when these are
/// dropped.
struct Attaching {
    made: std::sync::mpsc::Receiver<Result<FaultSession, String>>,
    control: std::sync::mpsc::Sender<Option<std::fs::File>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    done: std::sync::mpsc::Receiver<faultword::Attached>,
    later: std::sync::mpsc::Sender<faultword::Closing>,
}

impl MappedAttach {
    /// Starts making the session. The held command waits for its map of
    /// followed processes and fork followers (~0.7 ms of the kernel's
    /// work; the fault programs' maps and ring come after), so the earlier it
    /// starts the sooner the command does: a caller starts it before it
    /// checks its outputs and sets up the rest. Threads inherit the signal
    /// mask: call it after the stop signals are blocked
    /// ([`fsprof_capture::Capture::new`]).
    pub fn start() -> MappedAttach {
        if let Err(missing) = fsprof_kernel::privs::check(fsprof_kernel::privs::effective_caps()) {
            return MappedAttach {
                job: None,
                note: Some(format!("loads and stores through file mappings are not in this trace: following page faults needs root (missing {missing}); it holds the mmap, msync and munmap calls")),
            };
        }
        let (made_tx, made) = std::sync::mpsc::channel();
        let (control, control_rx) = std::sync::mpsc::channel();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (done_tx, done) = std::sync::mpsc::channel();
        let (later, later_rx) = std::sync::mpsc::channel();
        let job = std::thread::Builder::new()
            .name("fsprof-faults".into())
            .spawn({
                let stop = stop.clone();
                move || faultword::attacher(made_tx, control_rx, stop, done_tx, later_rx)
            })
            .ok()
            .map(|_| Attaching {
                made,
                control,
                stop,
                done,
                later,
            });
        let note = job.is_none().then(|| {
            "loads and stores through file mappings are not in this trace: no thread to attach the page-fault programs on".to_string()
        });
        MappedAttach { job, note }
    }
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

/// How often the chunks' new records are moved into the trace: often
/// enough that ending a capture has little left to do (a few ms of
/// records; it had the whole run's with 200 ms and short programs), not
/// so often that waking up costs more than the work (a wake-up on this
/// VM costs tens of µs: at 2 ms, fsprof used more CPU on grep -r than it
/// saved). A harvest with nothing new is a directory read and a load of
/// each live chunk's committed count.
const HARVEST_NS: u64 = 5_000_000;

/// A chunk being harvested: what of it is in the trace already.
struct Live {
    /// The chunk file; `None` for a process image's window in its arena
    /// block.
    path: Option<PathBuf>,
    chunk: chunks::Chunk,
    stream: u32,
    /// Bytes of records handed on to the trace.
    consumed: u64,
    /// Bytes committed at the last harvest: a thread is asked whether it
    /// is still there only when its chunk did not grow since.
    seen: u64,
    /// Read once nothing wrote it any more: its counts are final.
    settled: bool,
}

pub struct TraceSource {
    user: UserSource,
    data: DataMode,
    output: PathBuf,
    force: bool,
    clock: Option<TickClock>,
    start_unix_ns: u64,
    /// Created when the capture starts (its header says when).
    writer: Option<TraceWriter>,
    /// Its compressor and buffers once it finished, until this is dropped
    /// or left to the exit ([`TraceSource::leave_to_exit`]).
    spent: Option<Spent>,
    /// Stream number of each thread of each process image (proc_seq, tid).
    streams: HashMap<(u64, i32), u32>,
    /// Chunk files being harvested, by sequence number (a thread's
    /// chunks in the order it wrote them).
    live: std::collections::BTreeMap<u64, Live>,
    /// A chunk's records, read out of it (kept between chunks).
    body: Vec<u8>,
    /// The run directory, held open for its listings.
    dir: Option<fsprof_sys::dir::HeldDir>,
    /// The chunk files of the last listing (kept between harvests).
    listed: Vec<u64>,
    /// Says whether a chunk file may have been made since the last
    /// listing; `None`: not made yet ([`WATCH_AFTER`]), none could be set
    /// up, or it failed (the directory is then listed at every harvest).
    watch: Option<DirWatch>,
    /// Listings made without a watch; at [`WATCH_AFTER`] one is tried,
    /// once.
    unwatched: u32,
    /// The last listing found a chunk file its shim had not finished
    /// making (no magic yet): list again, whatever the watch says.
    relist: bool,
    /// CLOCK_MONOTONIC ns when the user source's upkeep is next due.
    user_upkeep_due: u64,
    /// Newest process image seen per pid: chunks of older images are done.
    newest_image: HashMap<i32, u64>,
    /// The free slots that held a chunk file handed back, as the last
    /// listing of the run directory showed them and since filled.
    slots_taken: u64,
    dropped: u64,
    notes: Vec<String>,
    peak_pending: u64,
    outcome: Option<TraceOutcome>,
    /// Page faults on file mappings, when they can be followed (root).
    mapped: Option<MappedCapture>,
    /// Making the fault session, under way while the capture sets up the
    /// rest and starts the command (held until it is made); then loading
    /// the fault programs and attaching them on request.
    attaching: Option<Attaching>,
    /// The thread that attaches them, once the session is made.
    attacher: Option<Attaching>,
    /// The attaching thread, once it attached: it closes the fault
    /// programs and the watch at the end.
    closer: Option<std::sync::mpsc::Sender<faultword::Closing>>,
    /// Why they are not, for the trace's header and the notes.
    mapped_note: Option<String>,
    layout: fsprof_core::BucketLayout,
}

/// The key of a thread's stream of page faults in `TraceSource::streams`
/// (its calls' streams are keyed by their process image).
const FAULT_STREAMS: u64 = u64::MAX;

impl TraceSource {
    pub fn new(opts: TraceOptions) -> Result<TraceSource, SetupError> {
        if !opts.force && opts.output.exists() {
            return Err(SetupError::Exists(opts.output));
        }
        // Before anything else, and before the command is forked: the
        // programs take 1-2 ms to load and attach, in which the user source
        // is set up and the command forked and parked (held before its
        // execve until they are attached).
        let layout = fsprof_core::BucketLayout::new(opts.user.resolution);
        let MappedAttach {
            job: attaching,
            note: mapped_note,
        } = opts.attach.unwrap_or_else(MappedAttach::start);
        let mut user = UserSource::new(&opts.user)?;
        user.hold_trace_windows();
        if let Some(a) = &attaching {
            // The thread waits on the control file's word for requests.
            let file = user.arena().and_then(|a| a.shared().1.try_clone().ok());
            let _ = a.control.send(file);
        }
        let source = TraceSource {
            user,
            data: opts.data,
            output: opts.output,
            force: opts.force,
            clock: None,
            start_unix_ns: 0,
            writer: None,
            spent: None,
            streams: HashMap::new(),
            live: Default::default(),
            body: Vec::new(),
            dir: None,
            listed: Vec::new(),
            watch: None,
            unwatched: 0,
            relist: false,
            user_upkeep_due: 0,
            newest_image: HashMap::new(),
            slots_taken: 0,
            dropped: 0,
            notes: Vec::new(),
            peak_pending: 0,
            outcome: None,
            mapped: None,
            attaching,
            attacher: None,
            closer: None,
            mapped_note,
            layout,
        };
        Ok(source)
    }

    /// The trace written by [`Source::finish`].
    pub fn outcome(&self) -> Option<&TraceOutcome> {
        self.outcome.as_ref()
    }

    /// The control file's descriptor (for fsprof_sys::keeper).
    pub fn control_fd(&self) -> Option<std::os::fd::RawFd> {
        self.user.control_fd()
    }

    /// For a process that exits right after dropping this source: the
    /// run directory is removed, the control file's mapping and
    /// descriptor are left to the exit (`UserSource::leave_to_exit`), and
    /// so is the finished trace writer's memory.
    pub fn leave_to_exit(&mut self) {
        self.user.leave_to_exit();
        std::mem::forget(self.spent.take());
    }

    /// Moves the records committed since the last harvest into the trace,
    /// and deletes the chunks that are done (all of them when `all`).
    fn harvest(&mut self, all: bool) {
        if self.clock.is_none() || self.writer.is_none() {
            return;
        }
        // Faults first: the mappings they touch are in the chunks by now.
        if let Some(m) = self.mapped.as_mut() {
            m.drain();
        }
        self.find_chunks(all);
        let pending: u64 = self.live.values().map(|l| l.chunk.committed_now()).sum();
        self.peak_pending = self.peak_pending.max(pending);
        let seqs: Vec<u64> = self.live.keys().copied().collect();
        for seq in seqs {
            self.harvest_chunk(seq, all);
        }
        self.flush_faults(all);
    }

    /// Writes the faults drained before this harvest into their threads'
    /// streams.
    fn flush_faults(&mut self, last: bool) {
        let (Some(m), Some(w)) = (self.mapped.as_mut(), self.writer.as_mut()) else {
            return;
        };
        let streams = &mut self.streams;
        let stream_of = |tid: i32| {
            let next = streams.len() as u32 + 1;
            *streams.entry((FAULT_STREAMS, tid)).or_insert(next)
        };
        if let Err(e) = m.flush(w, last, stream_of) {
            self.notes
                .push(format!("lost page faults of the trace: {e}"));
        }
    }

    /// Opens the chunks that appeared since the last harvest: files, and
    /// windows in the blocks processes took (in every block when `every`:
    /// at the end, when the run has given every block back).
    fn find_chunks(&mut self, every: bool) {
        let mut found = Vec::new();
        if !self.no_new_files(every) && !self.find_files(&mut found) {
            return;
        }
        self.find_windows(every, &mut found);
        // After every new chunk was seen: a process image is known to be
        // gone once a newer one of its pid has written a chunk.
        for (seq, path, chunk) in found {
            self.take_chunk(seq, path, chunk);
        }
    }

    /// Adds to `found` the chunk files of the run directory not being
    /// harvested yet; false if it could not be listed.
    fn find_files(&mut self, found: &mut Vec<Found>) -> bool {
        let mut seqs = std::mem::take(&mut self.listed);
        seqs.clear();
        self.relist = false;
        let listed = self.list_run_dir(&mut seqs).is_ok();
        if !listed {
            seqs.clear();
        }
        for &seq in &seqs {
            if self.live.contains_key(&seq) {
                continue;
            }
            let path = self
                .user
                .run_dir()
                .join(format!("{}{seq}", tabi::TCHUNK_PREFIX));
            match chunks::open_chunk(&path) {
                Ok(Some(chunk)) => {
                    let info = chunk.info;
                    let e = self.newest_image.entry(info.pid).or_insert(info.proc_seq);
                    *e = (*e).max(info.proc_seq);
                    found.push((seq, Some(path), chunk));
                }
                // Its shim is still making it.
                Ok(None) => self.relist = true,
                Err(e) => {
                    self.notes.push(format!(
                        "skipped a trace chunk, whose records are not in the trace: {e}"
                    ));
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        self.listed = seqs;
        listed
    }

    /// Whether the run directory can be left unlisted at this harvest: it
    /// was listed before, nothing there was half made, and its watch saw
    /// no chunk file made or renamed into it since (the events queued
    /// until now are taken either way, before any listing). Never at the
    /// end (`every`).
    fn no_new_files(&mut self, every: bool) -> bool {
        let Some(w) = self.watch.as_mut() else {
            return false;
        };
        match w.made_since(|name| chunk_seq(name).is_some()) {
            Ok(made) => !made && !every && !self.relist && self.dir.is_some(),
            // Listed at every harvest from now on, as without a watch.
            Err(_) => {
                self.watch = None;
                false
            }
        }
    }

    /// The sequence numbers of the chunk files in the run directory, into
    /// `seqs`, and the free slots there into `slots_taken`: through the
    /// directory held open since the first listing.
    fn list_run_dir(&mut self, seqs: &mut Vec<u64>) -> io::Result<()> {
        if self.dir.is_none() {
            self.dir = Some(fsprof_sys::dir::HeldDir::open(self.user.run_dir())?);
        }
        if self.watch.is_none() && self.unwatched < WATCH_AFTER {
            self.unwatched += 1;
            if self.unwatched == WATCH_AFTER {
                // Watched before this listing: a file made after the
                // watch is an event, one made before it is in the listing.
                self.watch = DirWatch::new(self.user.run_dir()).ok();
            }
        }
        let dir = self.dir.as_mut().expect("opened above");
        let mut slots = 0u64;
        dir.list(|name| {
            if let Some(k) = free_slot(name) {
                slots |= 1 << k;
            } else if let Some(seq) = chunk_seq(name) {
                seqs.push(seq);
            }
        })?;
        self.slots_taken = slots;
        Ok(())
    }

    /// Adds to `found` the windows of arena blocks (`shim/trace_abi.h`,
    /// FSPROF_TWIN_SIZE) that hold a chunk not being harvested yet: of the
    /// blocks taken, or of every block when `every`.
    fn find_windows(&mut self, every: bool, found: &mut Vec<Found>) {
        let Some(a) = self.user.arena() else {
            return;
        };
        let (map, file) = a.shared();
        let blocks: Vec<u32> = match every {
            // A block whose pages were never made holds no window (and
            // reading it would make them).
            true => a.with_pages().collect(),
            false => a.taken().iter().map(|t| t.block).collect(),
        };
        for k in blocks {
            let base = a.window(k);
            // Not read where its process made no window (a hole: read, it
            // would be made, or raise SIGBUS on a full /dev/shm).
            if !a.window_made(k)
                || map.u64_acquire_at(base) != tabi::TCHUNK_MAGIC
                || self.live.contains_key(&map.u64_at(base + WINDOW_SEQ))
            {
                continue;
            }
            match chunks::open_window(&file, &map, base, tabi::TWIN_SIZE) {
                Ok(Some(chunk)) => {
                    let info = chunk.info;
                    let e = self.newest_image.entry(info.pid).or_insert(info.proc_seq);
                    *e = (*e).max(info.proc_seq);
                    found.push((chunk.seq, None, chunk));
                }
                Ok(None) => {}
                Err(e) => {
                    self.notes.push(format!(
                        "skipped a trace chunk, whose records are not in the trace: {e}"
                    ));
                    // Its block can be taken back.
                    map.zero(base, tabi::TCHUNK_HDR);
                }
            }
        }
    }

    /// Starts harvesting a chunk just opened: read as it is when nothing
    /// writes it any more (most short processes' only chunk, found after
    /// they exited), else watched through a mapping of its header.
    fn take_chunk(&mut self, seq: u64, path: Option<PathBuf>, mut chunk: chunks::Chunk) {
        let info = chunk.info;
        let settled = chunk.sealed_now() || self.image_gone(&info);
        // Read again after it was found done: now the counts are final.
        let ready = match settled {
            true => chunk.settle(),
            false => chunk.watch(),
        };
        if let Err(e) = ready {
            let at = path
                .as_ref()
                .map_or("a window".into(), |p| p.display().to_string());
            self.notes.push(format!("skipped a trace chunk: {at}: {e}"));
            discard(&chunk, path.as_deref());
            return;
        }
        let next = self.streams.len() as u32 + 1;
        let stream = *self
            .streams
            .entry((info.proc_seq, info.tid))
            .or_insert(next);
        self.dropped += info.dropped;
        self.live.insert(
            seq,
            Live {
                path,
                chunk,
                stream,
                consumed: 0,
                seen: 0,
                settled,
            },
        );
    }

    /// Whether the thread that wrote a chunk, or its process image, is gone.
    fn image_gone(&self, info: &chunks::ChunkInfo) -> bool {
        self.newest_image.get(&info.pid) > Some(&info.proc_seq) || !thread_alive(info.pid, info.tid)
    }

    /// Hands on the new records of chunk `seq`; deletes it once it is done
    /// (sealed, its thread or process image gone, or `all`).
    fn harvest_chunk(&mut self, seq: u64, all: bool) {
        let (Some(clock), Some(writer), Some(l)) =
            (self.clock, self.writer.as_mut(), self.live.get_mut(&seq))
        else {
            return;
        };
        let mut mapped = self.mapped.as_mut();
        let info = l.chunk.info;
        // Sealed first: once it is, the committed count read after it is
        // the chunk's last.
        let sealed = l.chunk.sealed_now();
        let mut committed = l.chunk.committed_now();
        let gone = !sealed
            && !all
            && !l.settled
            && committed == l.seen
            && (self.newest_image.get(&info.pid) > Some(&info.proc_seq)
                || !thread_alive(info.pid, info.tid));
        if gone {
            // Records it committed before it went.
            committed = l.chunk.committed_now();
        }
        let done = all || sealed || gone || l.settled;
        l.seen = committed;
        let mut failed = None;
        if committed > l.consumed {
            let mut lost = None;
            let parsed = l
                .chunk
                .read(l.consumed, committed, &mut self.body)
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    chunks::parse(&info, &self.body, !done, &clock, |r| {
                        let w = match r {
                            chunks::Parsed::Call(c) => {
                                if let Some(m) = mapped.as_deref_mut() {
                                    m.saw_call(&c);
                                }
                                writer.push_call(l.stream, &c)
                            }
                            chunks::Parsed::Process(p) => {
                                if let Some(m) = mapped.as_deref_mut() {
                                    m.saw_process(&p);
                                }
                                writer.push_to(l.stream, &Record::Process(p))
                            }
                            chunks::Parsed::Mapped(m) => {
                                writer.push_to(l.stream, &Record::Mapped(m))
                            }
                            chunks::Parsed::Descriptor(d) => {
                                writer.push_to(l.stream, &Record::Descriptor(d))
                            }
                        };
                        w.map_err(|e| {
                            lost = Some(e.to_string());
                            "not written".to_string()
                        })
                    })
                });
            match (parsed, lost) {
                (_, Some(e)) => failed = Some(format!("lost a trace chunk: {e}")),
                (Ok(n), None) => l.consumed += n as u64,
                (Err(e), None) => {
                    failed = Some(format!(
                        "skipped (the rest of) a corrupt trace chunk of pid {} tid {}: {e}",
                        info.pid, info.tid
                    ))
                }
            }
        }
        if done || failed.is_some() {
            // A thread that is gone writes no more: its block need not
            // wait for more records.
            if !sealed {
                let _ = writer.close_stream(l.stream);
            }
            self.dropped += l.chunk.dropped_after_now();
            // A chunk nothing writes to any more (full, or its thread is
            // gone: most short processes' only chunk) goes back to the
            // shim, whose next chunk then costs no page allocation.
            let idle = sealed || gone || l.settled;
            let slot = (0..tabi::TFREE_SLOTS).find(|k| self.slots_taken & (1 << k) == 0);
            let handed = match (slot, &l.path) {
                (Some(k), Some(path)) if idle && failed.is_none() => recycle(&l.chunk, path, k),
                _ => false,
            };
            if let (true, Some(k)) = (handed, slot) {
                self.slots_taken |= 1 << k;
            } else {
                discard(&l.chunk, l.path.as_deref());
            }
            self.live.remove(&seq);
        }
        self.notes.extend(failed);
    }

    fn header(&self, meta_command: Vec<String>) -> TraceHeader {
        let mut h = TraceHeader::new("shim", self.data.name());
        h.command = meta_command;
        match (&self.mapped, &self.mapped_note) {
            (Some(m), _) => {
                h.mapped_accesses = MAPPED_BY_FAULTS.into();
                h.notes.push(mapped_note(m.reports_around()));
                if !m.filters_in_kernel() {
                    h.notes.push(UNFILTERED_NOTE.into());
                }
            }
            (None, Some(why)) => h.notes.push(why.clone()),
            (None, None) => {}
        }
        h.run = fsprof_capture::meta::run_info(self.start_unix_ns);
        h.clock = self.user.clock().describe().source.to_string();
        h
    }
}

/// Hands a chunk file whose records are all in the trace and that nothing
/// writes any more back to the shim (`shim/trace_abi.h`, FSPROF_TFREE_SLOTS)
/// as free slot `k`: its header zeroed first, through the descriptor it was
/// opened by, so that until a thread has written a new one it is not taken
/// for a chunk with records. Whether it was. Only into a slot the directory
/// did not list as taken: a file renamed over another frees the other's
/// pages, which a thread would have used.
fn recycle(chunk: &chunks::Chunk, path: &std::path::Path, k: u64) -> bool {
    let free = path.with_file_name(format!("{}{k}", tabi::TFREE_PREFIX));
    chunk.clear_header().is_ok() && std::fs::rename(path, free).is_ok()
}

/// Lets a chunk go whose records are in the trace (or that is corrupt): a
/// file is deleted; a window's header is zeroed, and with it the magic
/// that keeps `fsprof run` from taking its block back.
fn discard(chunk: &chunks::Chunk, path: Option<&std::path::Path>) {
    match path {
        Some(p) => {
            let _ = std::fs::remove_file(p);
        }
        None => {
            let _ = chunk.clear_header();
        }
    }
}

/// A chunk just found: its sequence number, its file (None: a window),
/// and the chunk.
type Found = (u64, Option<PathBuf>, chunks::Chunk);

/// The chunk header's sequence number, read before a window is opened.
const WINDOW_SEQ: usize = std::mem::offset_of!(tabi::ChunkHeader, seq);

/// The free slot a run directory entry is, if it is one (`f0` ..).
fn free_slot(name: &[u8]) -> Option<u64> {
    match name {
        [f, k] if *f == tabi::TFREE_PREFIX.as_bytes()[0] && k.is_ascii_digit() => {
            Some(u64::from(k - b'0')).filter(|&k| k < tabi::TFREE_SLOTS)
        }
        _ => None,
    }
}

/// The sequence number of a chunk file's name (`t<seq>`), if it is one.
fn chunk_seq(name: &[u8]) -> Option<u64> {
    let digits = name.strip_prefix(tabi::TCHUNK_PREFIX.as_bytes())?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Listings of the run directory made before it is watched
/// ([`DirWatch`]): about a second of harvests. Closing an inotify
/// descriptor waits for an SRCU grace period, 5 ms at idle on this
/// project's test machine (`perf trace` of a trace's end), which a short
/// trace, listing a few times, would pay for nothing; a long one saves
/// the listing at every harvest after the first second.
const WATCH_AFTER: u32 = 200;

/// Where the kernel cannot tell which processes map files: what that costs.
const UNFILTERED_NOTE: &str = "this kernel has no exceptions:page_fault_kernel tracepoint, so every page fault of the traced processes was sent to fsprof, not only those of processes that map files (about 1 µs more for each fault of the others)";

/// What a trace that followed page faults holds of mapped accesses.
fn mapped_note(around: bool) -> String {
    let around = if around {
        "the pages the kernel maps around a read fault (up to 16, when cached) are named in it"
    } else {
        "the pages the kernel maps around a read fault are not reported by this kernel"
    };
    format!("loads and stores through file mappings are page faults: the first touch of a page not mapped yet, the first store to a page not written since it was mapped or written back; {around}, and later accesses to a page already mapped are not observable")
}

impl TraceSource {
    /// The fault session, once made (waits for the thread that makes it),
    /// or why not.
    fn join_mapped(&mut self) {
        let Some(a) = self.attaching.take() else {
            return;
        };
        match a.made.recv() {
            Ok(Ok(s)) => {
                self.mapped = Some(MappedCapture::new(s, self.layout.clone()));
                self.attacher = Some(a);
            }
            // Dropping `a` ends the thread: it waits for the control file,
            // which a wait for it here would never send
            // (held::a_fault_session_that_cannot_be_made_leaves_a_trace_of_the_calls).
            Ok(Err(e)) => self.mapped_not_captured(&e),
            Err(_) => self.mapped_not_captured("making the page-fault session failed"),
        }
    }

    /// Says that the fault programs are to be attached on request (the
    /// control file's word, [`faultword`]), before the command is let go;
    /// without a control file, waits for the thread to attach them.
    fn arm_mapped(&mut self) {
        if self.mapped.is_none() {
            return;
        }
        match self.user.arena().map(|a| a.shared().0) {
            Some(map) => {
                // Not over a value the thread (or a process) wrote first.
                let _ = faultword::word(&map).compare_exchange(
                    fsprof_shim::abi::FAULTS_NONE,
                    fsprof_shim::abi::FAULTS_ARMED,
                    std::sync::atomic::Ordering::AcqRel,
                    std::sync::atomic::Ordering::Acquire,
                );
            }
            None => self.end_attacher(),
        }
    }

    /// Stops the attaching thread and takes the programs it attached.
    fn end_attacher(&mut self) {
        let Some(a) = self.attacher.take() else {
            return;
        };
        a.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(map) = self.user.arena().map(|a| a.shared().0) {
            faultword::futex_wake(faultword::word(&map));
        }
        let attached = a.done.recv();
        self.closer = Some(a.later);
        let Some(m) = self.mapped.as_mut() else {
            return;
        };
        match attached {
            Ok(Ok(Some(f))) => m.attached(f),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => self.notes.push(format!(
                "loads and stores through file mappings are not in this trace: attaching the page-fault programs failed: {e}"
            )),
            Err(_) => self
                .notes
                .push("attaching the page-fault programs failed".into()),
        }
    }

    fn mapped_not_captured(&mut self, why: &str) {
        self.mapped = None;
        self.mapped_note = Some(format!(
            "loads and stores through file mappings are not in this trace: {why}"
        ));
    }

    /// Follows page faults from `pid` on.
    fn start_mapped(&mut self, pid: i32) {
        if let Some(Err(e)) = self.mapped.as_ref().map(|m| m.follow(pid)) {
            self.mapped_not_captured(&e);
        }
    }

    /// The faults' ops in the profile's user layer, lost faults counted.
    fn finish_mapped(&mut self, fin: &mut Finish, writer: &mut TraceWriter) {
        let late = self
            .user
            .arena()
            .map_or(0, |a| faultword::late(&a.shared().0));
        if late > 0 && self.mapped.is_some() {
            fin.warnings.push(format!(
                "{late} process(es) went on after waiting {} ms for the page-fault programs to be attached: their loads and stores through file mappings until then are not in the trace",
                fsprof_shim::abi::FAULTS_WAIT_MS
            ));
        }
        let Some(m) = &self.mapped else {
            fin.notes.extend(self.mapped_note.clone());
            return;
        };
        let ops = m.ops();
        if !ops.is_empty() {
            match fin
                .layers
                .iter_mut()
                .find(|l| l.name == fsprof_core::profile::layer::USER)
            {
                Some(l) => l.ops.extend(ops),
                None => {
                    let mut l = Layer::new(fsprof_core::profile::layer::USER);
                    l.ops = ops;
                    fin.layers.push(l);
                }
            }
        }
        let (lost, unfollowed) = (m.lost(), m.unfollowed());
        writer.set_mapped_lost(lost, unfollowed);
        if lost > 0 {
            fin.warnings.push(format!(
                "{lost} page fault(s) on mapped files were not recorded (the event ring was full)"
            ));
        }
        fin.warnings
            .extend(fsprof_kernel::follow::unfollowed_warning(
                unfollowed,
                m.followed_entries(),
                "their loads and stores through file mappings are not in the trace",
            ));
    }
}

fn thread_alive(pid: i32, tid: i32) -> bool {
    // SAFETY: signal 0 only checks that the thread exists.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

impl Source for TraceSource {
    fn caps(&self) -> Caps {
        let user = self.user.caps();
        Caps {
            upkeep_ns: Some(HARVEST_NS),
            // Page faults are followed from the command's pid on, which
            // `start` adds: a command let go at once could map and read a
            // file before that, and on a loaded machine a short one did
            // (runs of the mmap tests that recorded no fault at all, one
            // in four beside three busy loops).
            hold_command: user.hold_command || self.mapped.is_some() || self.attaching.is_some(),
            ..user
        }
    }

    fn command_env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.user.command_env();
        env.push((tabi::TRACE_ENV.into(), self.data.name().into()));
        env
    }

    fn start(&mut self, command: Option<i32>) -> Result<String, SourceError> {
        let what = self.user.start(command)?;
        // The file is made while the page-fault programs are still being
        // attached (the command is held until they are): ~0.1 ms off the
        // path before it starts.
        let staged = TraceWriter::stage(&self.output, self.force)?;
        self.join_mapped();
        if let Some(pid) = command {
            self.start_mapped(pid);
        }
        self.arm_mapped();
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
        let header = self.header(std::env::args().collect());
        self.writer = Some(staged.start(&header)?);
        Ok(format!("{what} (tracing every call)"))
    }

    fn snapshot(&mut self) -> Result<Vec<Layer>, SourceError> {
        self.user.snapshot()
    }

    fn upkeep(&mut self) {
        // The user source's own upkeep keeps its slower pace (a trace does
        // not sleep on the offers' low water, as `fsprof run` does).
        let now = fsprof_sys::clock::mono_ns();
        if now >= self.user_upkeep_due {
            self.user.upkeep();
            self.user_upkeep_due = now + fsprof_user::REFILL_NS;
        }
        self.harvest(false);
        // Off the end's path, while the command runs.
        if let Some(w) = self.writer.as_mut() {
            w.warm();
        }
    }

    fn finish(&mut self, how: &Ended) -> Result<Finish, SourceError> {
        let mut fin = self.user.finish(how)?;
        // The attaching thread first: it starts the fault ring's reader
        // after it woke the processes that waited for the attach, and the
        // last harvest drains that ring.
        self.end_attacher();
        self.harvest(true);
        let mut writer = self.writer.take().ok_or("the trace was never started")?;
        writer.set_origin(how.start_mono_ns);
        self.finish_mapped(&mut fin, &mut writer);
        // Detached (the programs' links, events and maps closed) on
        // another thread while the trace and the profile are written: 0.2-0.3
        // ms of every trace's end on this project's test machine. The watch
        // too: its close waits for a grace period (WATCH_AFTER). On the
        // attaching thread, which waits for them: a new thread's start was
        // ~0.1 ms of fsprof's main thread at the end (perf trace).
        let watch = self.watch.take();
        let closing: Option<faultword::Closing> = match self.mapped.take() {
            Some(m) => Some(Box::new((m, watch))),
            None => watch.map(|w| Box::new(w) as faultword::Closing),
        };
        if let Some(c) = closing {
            let c = match self.closer.take() {
                Some(to) => to.send(c).err().map(|e| e.0),
                None => Some(c),
            };
            if let Some(c) = c {
                let _ = std::thread::Builder::new().spawn(move || drop(c));
            }
        }
        writer.set_pending_peak(self.peak_pending);
        let (summary, file_bytes, spent) = writer.finish_leaving(self.dropped, how.duration_ns)?;
        self.spent = Some(spent);
        if summary.dropped > 0 {
            fin.warnings.push(format!(
                "{} call(s) were not recorded in the trace (the run directory was full, or a signal handler called into a call being recorded)",
                summary.dropped
            ));
        }
        let lost = uncounted_loss(&fin.layers, &summary);
        if lost > 0 {
            fin.warnings.push(format!(
                "{lost} call(s) the profile counted are not in the trace, and no process could say so (no room for its trace chunks: is /dev/shm full?)"
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

/// The calls the run's profile counted that the trace neither holds nor
/// counts as dropped. The shim counts a record it could not write in the
/// next chunk it makes; a process that can make no chunk at all (a full
/// /dev/shm) leaves that count nowhere, and its calls would be missing
/// from the trace without a word. The profile counts every call the trace
/// records (trace capture tests: `assert_profile_matches`), so any excess
/// is such a loss. Accesses through mappings are not calls.
fn uncounted_loss(layers: &[Layer], summary: &TraceSummary) -> u64 {
    let profiled = layers
        .iter()
        .filter(|l| l.name == fsprof_core::profile::layer::USER)
        .flat_map(|l| &l.ops)
        .filter(|o| !crate::event::MAPPED_OPS.contains(&o.name.as_str()))
        .fold(0u64, |t, o| t.saturating_add(o.post));
    profiled.saturating_sub(summary.calls.saturating_add(summary.dropped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::histogram::OpStats;

    fn user(ops: &[(&str, u64)]) -> Vec<Layer> {
        let mut l = Layer::new(fsprof_core::profile::layer::USER);
        for &(name, post) in ops {
            let mut o = OpStats::new(name);
            o.post = post;
            l.ops.push(o);
        }
        vec![l]
    }

    #[test]
    fn calls_missing_from_the_trace_and_uncounted_are_a_loss() {
        let layers = user(&[("openat", 5), ("read", 4), ("mapped_read", 9)]);
        let summary = |calls, dropped| TraceSummary {
            calls,
            dropped,
            ..TraceSummary::default()
        };
        assert_eq!(uncounted_loss(&layers, &summary(9, 0)), 0);
        assert_eq!(uncounted_loss(&layers, &summary(6, 3)), 0);
        assert_eq!(uncounted_loss(&layers, &summary(0, 0)), 9);
        assert_eq!(uncounted_loss(&layers, &summary(6, 1)), 2);
        // Another layer's calls are not the trace's.
        let mut kernel = user(&[("vfs_read", 50)]);
        kernel[0].name = "kernel".into();
        assert_eq!(uncounted_loss(&kernel, &summary(0, 0)), 0);
    }
}
