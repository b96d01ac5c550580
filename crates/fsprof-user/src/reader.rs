//! Reads the per-process counter files while the processes still write
//! them. Every counter is a naturally aligned u64 with a single writer (or
//! atomic adds), read here with atomic loads, so values are never torn;
//! counters of a call in progress may be one step apart until it returns.
//!
//! A counter file is a pool the shim fills as threads first need things
//! (see `shim/abi.h`): the slot directory lists the thread slot records,
//! each record lists the file offsets of its counters and value tables.
//! Every offset is checked against the part of the file that is mapped
//! (and allocated: the shim reserves before it publishes), so a damaged or
//! half-written file is skipped, never a crash.

use std::fs::File;
use std::io;
use std::mem::{offset_of, size_of};
use std::path::Path;
use std::sync::atomic::{
    AtomicU32, AtomicU64,
    Ordering::{Acquire, Relaxed},
};

use fsprof_core::buckets::MIN_INDEX;
use fsprof_core::{Correlations, Histogram, JointHistogram, OpStats};
use fsprof_shim::abi::FD_OPS;
use fsprof_shim::abi::{self, CtrHeader, OwnSample, ProcHeader, SlotHeader};
use fsprof_shim::OPS;
use fsprof_sys::mmap::SharedMap;

use crate::written::{ones, Written};

/// One process image's counters, summed over its threads, kept flat:
/// four allocations a process, whatever its ops. The profile's types (an
/// op's name, histogram and value cells each an allocation of their own)
/// are built once, at the end ([`ProcessCounters::ops`]): made for every
/// ended process as it was folded, they were a sixth of fsprof's own CPU
/// per short process (docs/benchmarks/history.md, "runproc13").
#[derive(Clone, Debug)]
pub struct ProcessCounters {
    pub seq: u64,
    pub pid: i32,
    pub ppid: i32,
    /// The executable's path, then the command line (NUL-separated), as
    /// the shim wrote them: `exe_len` bytes of path.
    names: Vec<u8>,
    exe_len: usize,
    /// The run's clock when the image set up (abi.rs, `start_ticks`):
    /// [`crate::clock::ClockParams::mono_ns`] makes it CLOCK_MONOTONIC ns.
    pub start_ticks: u64,
    pub threads: u32,
    /// The counters it used, in counter order: file-system ops, then the
    /// calls on pipes, sockets, devices and other non-files.
    pub counted: Vec<Counted>,
    /// The counters' latency buckets, each counter's a run of them.
    buckets: Vec<u64>,
    /// The data ops' value cells (latency, value, calls), each counter's
    /// two runs of them (size, seek) sorted.
    cells: Vec<Cell>,
    /// Calls not counted for want of room for their counters, and the
    /// errno of the first failure to make room.
    pub dropped: u64,
    pub dropped_err: i32,
    /// The shim's own cost timed inside a sample of the calls, summed over
    /// the threads.
    pub own: OwnSample,
}

/// One counter of a process: its op's counts, and where its buckets and
/// value cells lie in the process's.
#[derive(Clone, Debug, Default)]
pub struct Counted {
    /// The counter index ([`abi::counter_name`]).
    pub counter: u32,
    pub pre: u64,
    pub post: u64,
    pub errors: u64,
    pub total_ns: u64,
    /// Calls of 0 ns; the least (above 0) and greatest latencies.
    pub zero: u64,
    min: u64,
    max: u64,
    /// The histogram's first bucket index ([`Histogram::offset`]).
    offset: i32,
    buckets: std::ops::Range<u32>,
    size: std::ops::Range<u32>,
    seek: std::ops::Range<u32>,
}

impl Counted {
    /// Whether it counts a file-system op (else a call on a non-file).
    pub fn is_file(&self) -> bool {
        (self.counter as usize) < OPS.len()
    }

    /// Its op's name: the op's, or `<class>_<op>` for a non-file twin.
    pub fn name(&self) -> &'static str {
        COUNTER_NAMES
            .get(self.counter as usize)
            .and_then(Option::as_ref)
            .map_or("", |(_, n)| n.as_str())
    }

    /// The latency buckets, from bucket index [`Counted::offset`].
    pub fn buckets<'a>(&self, p: &'a ProcessCounters) -> &'a [u64] {
        &p.buckets[range(&self.buckets)]
    }

    pub fn offset(&self) -> i32 {
        self.offset
    }

    /// The least and greatest latency, when it filed any call.
    pub fn extremes(&self) -> Option<(u64, u64)> {
        let min = if self.zero > 0 { 0 } else { self.min };
        (self.zero > 0 || !self.buckets.is_empty()).then_some((min, self.max))
    }

    /// The value cells by request size and by seek distance.
    pub fn cells<'a>(&self, p: &'a ProcessCounters) -> [&'a [Cell]; 2] {
        [&p.cells[range(&self.size)], &p.cells[range(&self.seek)]]
    }

    /// Calls entered and not returned.
    pub fn unfinished(&self) -> u64 {
        self.pre.saturating_sub(self.post)
    }
}

/// A value cell: latency index, value index, calls ([`JointHistogram`]).
pub type Cell = (i32, i32, u64);

fn range(r: &std::ops::Range<u32>) -> std::ops::Range<usize> {
    r.start as usize..r.end as usize
}

impl ProcessCounters {
    /// The executable's path (lossy UTF-8).
    pub fn exe(&self) -> String {
        String::from_utf8_lossy(&self.names[..self.exe_len]).into_owned()
    }

    /// The command line's arguments (lossy UTF-8), empty ones left out.
    pub fn argv(&self) -> Vec<String> {
        self.names[self.exe_len..]
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    }

    /// Counter `c` as the profile's op.
    pub fn op(&self, c: &Counted) -> OpStats {
        let counts = c.buckets(self);
        let (min_ns, max_ns) = c.extremes().unzip();
        let [size, seek] = c.cells(self);
        let correlations = (!size.is_empty() || !seek.is_empty()).then(|| Correlations {
            size: JointHistogram {
                cells: size.to_vec(),
            },
            seek: JointHistogram {
                cells: seek.to_vec(),
            },
        });
        OpStats {
            name: c.name().to_string(),
            pre: c.pre,
            post: c.post,
            errors: c.errors,
            total_ns: c.total_ns,
            min_ns,
            max_ns,
            histogram: Histogram {
                zero: c.zero,
                offset: if counts.is_empty() { 0 } else { c.offset },
                counts: counts.to_vec(),
            },
            correlations,
        }
    }

    /// The file-system ops and the non-file ones, in counter order.
    pub fn ops(&self) -> (Vec<OpStats>, Vec<OpStats>) {
        let (file, nonfile): (Vec<&Counted>, Vec<&Counted>) =
            self.counted.iter().partition(|c| c.is_file());
        let ops = |cs: Vec<&Counted>| cs.into_iter().map(|c| self.op(c)).collect();
        (ops(file), ops(nonfile))
    }
}

/// A process's pool, mapped read-only: its first chunk (a whole counter
/// file, or a block of the run's arena) and, after an arena block, the
/// file `p<seq>` that holds the chunks it grew by (at their pool offsets).
/// Offsets come from the pool, so every accessor answers `None` for a word
/// outside what is mapped rather than faulting; every page below a file's
/// size is allocated (the shim reserves before it grows) but the hole a
/// later-chunks file has where the block stands, which is never read, so
/// reading never makes tmpfs allocate.
struct Mapping<'a> {
    first: &'a SharedMap,
    /// Where the pool starts in `first`, and how much of it is there.
    base: usize,
    first_len: usize,
    later: Option<SharedMap>,
}

impl Mapping<'_> {
    /// Whether `[off, off + n)` lies in what is mapped.
    fn holds(&self, off: usize, n: usize) -> bool {
        let Some(end) = off.checked_add(n) else {
            return false;
        };
        end <= self.first_len
            || self
                .later
                .as_ref()
                .is_some_and(|l| off >= self.first_len && end <= l.len())
    }

    /// The mapping and the offset in it of `[off, off + n)` bytes aligned
    /// to `align`, if they lie in one mapped part.
    fn place(&self, off: usize, n: usize, align: usize) -> Option<(&SharedMap, usize)> {
        if !off.is_multiple_of(align) || !self.holds(off, n) {
            return None;
        }
        Some(match &self.later {
            Some(l) if off >= self.first_len => (l, off),
            _ => (self.first, self.base + off),
        })
    }

    fn u64_at(&self, off: usize) -> Option<u64> {
        self.place(off, 8, 8).map(|(m, at)| m.u64_at(at))
    }

    fn u32_at(&self, off: usize) -> Option<u32> {
        self.place(off, 4, 4).map(|(m, at)| m.u32_at(at))
    }

    /// The `n` u64 words at `off`, if all lie in one mapped part.
    fn words(&self, off: usize, n: usize) -> Option<&[AtomicU64]> {
        let (m, at) = self.place(off, n.checked_mul(8)?, 8)?;
        Some(m.u64_words(at, n))
    }

    /// The `n` u32 words at `off`, as [`Mapping::words`].
    fn u32_words(&self, off: usize, n: usize) -> Option<&[AtomicU32]> {
        let (m, at) = self.place(off, n.checked_mul(4)?, 4)?;
        Some(m.u32_words(at, n))
    }

    /// A copy of the header's fields and of as much of its names as their
    /// lengths say, the rest zeros (copying all 2.5 KiB of room for names
    /// cost 40 cache lines a process); only complete once `ready` is set.
    fn header(&self) -> ProcHeader {
        const _: () = assert!(size_of::<ProcHeader>() <= abi::PROC_HDR_SIZE);
        assert!(self.first_len >= abi::PROC_HDR_SIZE);
        assert!(self.first.len() >= self.base + self.first_len);
        let fixed = offset_of!(ProcHeader, exe);
        // SAFETY: any bit pattern is a valid ProcHeader (integers and byte
        // arrays), so zeros are one. The mapping holds at least
        // PROC_HDR_SIZE >= size_of ProcHeader bytes from `base` (asserted)
        // and every range copied lies inside the header (lengths clamped
        // to their arrays).
        unsafe {
            let mut h: ProcHeader = std::mem::zeroed();
            let src = self.first.as_ptr().add(self.base);
            let dst = &mut h as *mut ProcHeader as *mut u8;
            std::ptr::copy_nonoverlapping(src, dst, fixed);
            let exe = (h.exe_len as usize).min(abi::EXE_MAX);
            let cmd = (h.cmdline_len as usize).min(abi::CMDLINE_MAX);
            let (e, c) = (fixed, offset_of!(ProcHeader, cmdline));
            std::ptr::copy_nonoverlapping(src.add(e), dst.add(e), exe);
            std::ptr::copy_nonoverlapping(src.add(c), dst.add(c), cmd);
            h
        }
    }
}

/// Notes what of the header the shim writes: its fields, the names as
/// long as their lengths, and, once it is made, the slot directory's
/// entries (one more than it counts: a process may die between publishing
/// a slot and counting it).
fn header_written(h: &ProcHeader, w: &mut Written) {
    w.dirty(0, offset_of!(ProcHeader, exe));
    w.dirty(offset_of!(ProcHeader, exe), h.exe_len as usize);
    w.dirty(offset_of!(ProcHeader, cmdline), h.cmdline_len as usize);
    let dir = h.dir_off as usize;
    if dir >= abi::PROC_HDR_SIZE {
        let entries = (h.nslots as usize + 1).min(h.max_slots as usize);
        w.allocation(dir, 4 * h.max_slots as usize);
        w.dirty(dir, 4 * entries);
    }
}

/// The offsets of slot records 0..`nslots` (0: none there yet): slot 1's
/// own place after the header, the others' from the slot directory,
/// which a process makes only for a second slot.
fn slot_records<'m>(m: &'m Mapping, nslots: usize) -> impl Iterator<Item = usize> + 'm {
    let dir_off = m.u32_at(offset_of!(ProcHeader, dir_off)).unwrap_or(0) as usize;
    let dir = (dir_off >= abi::PROC_HDR_SIZE)
        .then(|| m.u32_words(dir_off, nslots))
        .flatten();
    (0..nslots).map(move |k| match (k, dir) {
        (1, _) => abi::PROC_HDR_SIZE,
        (_, Some(d)) => d[k].load(Acquire) as usize,
        (_, None) => 0,
    })
}

/// Sums of one counter index over the threads.
#[derive(Clone)]
struct Acc {
    op: Counted,
    buckets: Vec<u64>,
    /// The buckets added to: all others are zero.
    touched: std::ops::Range<usize>,
}

impl Acc {
    /// Empty, with `nbuckets` buckets; keeps its buckets' memory, and
    /// zeroes only those the last pool added to.
    fn reset(&mut self, nbuckets: usize) {
        self.op = Counted {
            min: u64::MAX,
            ..Counted::default()
        };
        if self.buckets.len() == nbuckets {
            let t = self.touched();
            self.buckets[t].fill(0);
        } else {
            self.buckets.clear();
            self.buckets.resize(nbuckets, 0);
        }
        self.touched = 0..0;
    }

    /// The buckets added to since the last reset, within the buckets.
    fn touched(&self) -> std::ops::Range<usize> {
        let n = self.buckets.len();
        self.touched.start.min(n)..self.touched.end.min(n)
    }

    /// Marks buckets `r` added to.
    fn touch(&mut self, r: &std::ops::Range<usize>) {
        if r.is_empty() {
            return;
        }
        self.touched = match self.touched.is_empty() {
            true => r.clone(),
            false => self.touched.start.min(r.start)..self.touched.end.max(r.end),
        };
    }
}

/// The accumulators of the counters a pool uses, kept from one pool to
/// the next: a short process uses a handful of its ~200 counters, and
/// allocating a table of all of them, then a boxed accumulator and a
/// bucket vector for each one used, was a fifth of fsprof's own CPU per
/// process (malloc and calloc, docs/benchmarks/overhead.md, "the shim's
/// design floor"). Each accumulator is emptied when it is taken
/// ([`Acc::reset`]), never when it is given back, so what one pool left
/// in it cannot reach the next; the value cells likewise
/// ([`Accs::start`]).
struct Accs {
    /// Per counter index: 1 + its place in `accs`, or 0 if unused.
    at: Vec<u32>,
    /// Accumulators; the first `used.len()` are in use.
    accs: Vec<Acc>,
    /// The counter indices in use, in the order first seen.
    used: Vec<u32>,
    /// The value cells of each data op ([`abi::CORR_OPS`]).
    corr: Vec<Correlations>,
}

impl Accs {
    const fn new() -> Self {
        Accs {
            at: Vec::new(),
            accs: Vec::new(),
            used: Vec::new(),
            corr: Vec::new(),
        }
    }

    /// Ready for a pool of `nctr` counters and `ncorr` value tables:
    /// nothing in use.
    fn start(&mut self, nctr: usize, ncorr: usize) {
        for &k in &self.used {
            self.at[k as usize] = 0;
        }
        self.used.clear();
        self.at.resize(nctr, 0);
        self.corr.resize_with(ncorr, Correlations::default);
        for c in &mut self.corr {
            c.size.cells.clear();
            c.seek.cells.clear();
        }
    }

    /// Counter `k`'s accumulator, taken (and emptied) at its first use.
    fn get(&mut self, k: usize, nbuckets: usize) -> &mut Acc {
        let i = match self.at[k] {
            0 => {
                let i = self.used.len();
                if i == self.accs.len() {
                    self.accs.push(Acc {
                        op: Counted::default(),
                        buckets: Vec::new(),
                        touched: 0..0,
                    });
                }
                self.accs[i].reset(nbuckets);
                self.used.push(k as u32);
                self.at[k] = i as u32 + 1;
                i
            }
            n => n as usize - 1,
        };
        &mut self.accs[i]
    }
}

thread_local! {
    /// One set of accumulators per reading thread (the collector's).
    static ACCS: std::cell::RefCell<Accs> = const { std::cell::RefCell::new(Accs::new()) };
}

/// A counter's value tables (their place in [`abi::CORR_OPS`]), and its
/// op's name.
type CounterName = (Option<usize>, String);

/// The name of every counter index: the op's, or `<class>_<op>` for a
/// non-file twin, and its value tables' place in [`abi::CORR_OPS`] if it
/// is a data op's; made once rather than for every process.
static COUNTER_NAMES: std::sync::LazyLock<Vec<Option<CounterName>>> =
    std::sync::LazyLock::new(|| {
        (0..abi::nctr())
            .map(|k| {
                abi::counter_name(k).map(|(class, name)| match class {
                    None => (
                        abi::CORR_OPS.iter().position(|n| *n == name),
                        name.to_string(),
                    ),
                    Some(c) => (None, format!("{c}_{name}")),
                })
            })
            .collect()
    });

/// Reads one counter file (a pool that starts in its own file); `Ok(None)`
/// if the process has not finished setting it up (it is still starting, or
/// died doing so), or if it is not such a file (it holds the later chunks
/// of an arena block's pool).
pub fn read_process(path: &Path, nbuckets: u32) -> io::Result<Option<ProcessCounters>> {
    let file = File::open(path)?;
    let len = file.metadata()?.len() as usize;
    if len < abi::PROC_HDR_SIZE {
        return Ok(None);
    }
    let map = SharedMap::new(&file, len)?;
    let m = Mapping {
        first: &map,
        base: 0,
        first_len: len,
        later: None,
    };
    read_pool(&m, nbuckets, path, None)
}

/// Reads the pool whose first chunk is the block at `base` of `arena` and
/// whose later chunks, if it grew, are in the file `later`. With
/// `written`, notes there what of the block the process may have written
/// (complete only when the answer is `Ok(Some(_))`).
pub fn read_block(
    arena: &SharedMap,
    base: usize,
    later: Option<&Path>,
    nbuckets: u32,
    written: Option<&mut Written>,
) -> io::Result<Option<ProcessCounters>> {
    let later = match later {
        Some(path) => {
            let file = File::open(path)?;
            let len = file.metadata()?.len() as usize;
            (len > abi::FIRST_CHUNK)
                .then(|| SharedMap::new(&file, len))
                .transpose()?
        }
        None => None,
    };
    let m = Mapping {
        first: arena,
        base,
        first_len: abi::FIRST_CHUNK,
        later,
    };
    read_pool(&m, nbuckets, Path::new("the arena"), written)
}

fn read_pool(
    m: &Mapping,
    nbuckets: u32,
    what: &Path,
    written: Option<&mut Written>,
) -> io::Result<Option<ProcessCounters>> {
    if m.u32_at(offset_of!(ProcHeader, ready)) != Some(1) {
        return Ok(None);
    }
    let h = m.header();
    check_header(&h, nbuckets).map_err(|why| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {why}", what.display()),
        )
    })?;
    let mut written = written;
    if let Some(w) = written.as_deref_mut() {
        header_written(&h, w);
    }
    let Slots {
        counted,
        buckets,
        cells,
        threads,
        own,
    } = read_slots(m, &h, written);
    let exe = &h.exe[..(h.exe_len as usize).min(abi::EXE_MAX)];
    let cmdline = &h.cmdline[..(h.cmdline_len as usize).min(abi::CMDLINE_MAX)];
    Ok(Some(ProcessCounters {
        seq: h.seq,
        pid: h.pid,
        ppid: h.ppid,
        names: [exe, cmdline].concat(),
        exe_len: exe.len(),
        start_ticks: h.start_ticks,
        threads,
        counted,
        buckets,
        cells,
        dropped: m.u64_at(offset_of!(ProcHeader, dropped)).unwrap_or(0),
        dropped_err: h.dropped_err,
        own,
    }))
}

/// `Err` names what in the header does not match this fsprof's layout.
fn check_header(h: &ProcHeader, nbuckets: u32) -> Result<(), &'static str> {
    if h.magic != abi::PROC_MAGIC || h.abi_version != abi::ABI_VERSION {
        return Err("not a counter file of this fsprof version");
    }
    if h.nops as usize != OPS.len()
        || h.nctr as usize != abi::nctr()
        || h.nfdops as usize != FD_OPS.len()
        || h.nbuckets != nbuckets
        || h.ctr_size as usize != abi::ctr_size(nbuckets)
        || h.hdr_size as usize != abi::PROC_HDR_SIZE
        || h.max_slots > abi::MAX_SLOTS_LIMIT
    {
        return Err("counter layout differs from this fsprof's");
    }
    if h.corr_ops as usize != abi::CORR_OPS.len()
        || h.corr_lat as usize != abi::CORR_LAT
        || h.corr_val as usize != abi::CORR_VAL
        || (h.slot_size as usize) < abi::slot_size()
    {
        return Err("value-table layout differs from this fsprof's");
    }
    Ok(())
}

/// What the slots of one counter file hold, summed.
struct Slots {
    counted: Vec<Counted>,
    buckets: Vec<u64>,
    cells: Vec<Cell>,
    /// Private thread slots.
    threads: u32,
    own: OwnSample,
}

/// The file ops, the non-file ops, the number of private thread slots and
/// the own-cost samples, summed over the slots published so far. A slot or
/// counter whose offset is not (yet) inside the mapping is skipped. Each
/// slot record, counter and value table read is noted in `written`.
fn read_slots(m: &Mapping, h: &ProcHeader, written: Option<&mut Written>) -> Slots {
    ACCS.with_borrow_mut(|accs| {
        accs.start(abi::nctr(), abi::CORR_OPS.len());
        read_slots_into(m, h, written, accs)
    })
}

/// [`read_slots`] with the accumulators `accs`, ready for the pool.
fn read_slots_into(
    m: &Mapping,
    h: &ProcHeader,
    mut written: Option<&mut Written>,
    acc: &mut Accs,
) -> Slots {
    let nslots = m
        .u32_at(offset_of!(ProcHeader, nslots))
        .unwrap_or(0)
        .min(h.max_slots) as usize;
    let nctr = abi::nctr();
    let ncorr = abi::CORR_OPS.len();
    let slot_size = h.slot_size as usize;
    let mut threads = 0u32;
    let mut own = OwnSample::default();
    for rec in slot_records(m, nslots) {
        if rec < abi::PROC_HDR_SIZE || !m.holds(rec, slot_size) {
            continue; // not published yet, or beyond what is mapped
        }
        let offs_at = rec + size_of::<SlotHeader>();
        let used_at = rec + offset_of!(SlotHeader, used);
        let (Some(offs), Some(used)) = (
            m.u32_words(offs_at, nctr + ncorr),
            m.words(used_at, abi::SLOT_USED_WORDS),
        ) else {
            continue;
        };
        if let Some(w) = written.as_deref_mut() {
            w.allocation(rec, slot_size);
            w.dirty(rec, size_of::<SlotHeader>());
        }
        let shared = m.u32_at(rec + offset_of!(SlotHeader, shared)) == Some(1);
        threads += u32::from(!shared);
        add_own(m, rec + offset_of!(SlotHeader, own), &mut own);
        let (ctr_offs, corr_offs) = offs.split_at(nctr);
        for k in used_offsets(used, nctr + ncorr) {
            if let Some(w) = written.as_deref_mut() {
                w.dirty(offs_at + 4 * k, 4);
            }
            if k < nctr {
                let off = ctr_offs[k].load(Acquire) as usize;
                read_counter(m, off, k, h, written.as_deref_mut(), acc);
                continue;
            }
            let c = k - nctr;
            let off = corr_offs[c].load(Acquire) as usize;
            if off == 0 || !off.is_multiple_of(8) || !m.holds(off, abi::corr_size()) {
                continue;
            }
            let ctr = ctr_offs[CORR_OP_INDEX[c]].load(Acquire) as usize;
            let ended = written.is_some();
            for rows in row_runs(value_rows(m, ctr, h.nbuckets, ended)) {
                add_correlations(m, off, rows.clone(), &mut acc.corr[c]);
                if let Some(w) = written.as_deref_mut() {
                    w.dirty(
                        off + rows.start() * abi::CORR_ROW,
                        (rows.end() + 1 - rows.start()) * abi::CORR_ROW,
                    );
                }
            }
            if let Some(w) = written.as_deref_mut() {
                w.allocation(off, abi::corr_size());
            }
        }
    }
    let (counted, buckets, cells) = finish_ops(acc);
    Slots {
        counted,
        buckets,
        cells,
        threads,
        own,
    }
}

/// The offsets a slot's bitmap `used` says are set, below `n`, in order:
/// each word is read once, so a process setting bits meanwhile cannot make
/// one offset come up twice. Bits at or above `n` (a damaged or hostile
/// record) name nothing.
fn used_offsets(used: &[AtomicU64], n: usize) -> impl Iterator<Item = usize> + '_ {
    used.iter()
        .enumerate()
        .flat_map(move |(i, w)| ones(i, w.load(Acquire)).take_while(move |&k| k < n))
}

/// Adds counter index `k`, at pool offset `off` (0 or outside the mapping:
/// nothing), to its accumulator, noting in `written` what of it the
/// process may have written.
fn read_counter(
    m: &Mapping,
    off: usize,
    k: usize,
    h: &ProcHeader,
    written: Option<&mut Written>,
    acc: &mut Accs,
) {
    let (ctr_size, nbuckets) = (h.ctr_size as usize, h.nbuckets);
    let Some(words) = (off != 0).then(|| m.words(off, ctr_size / 8)).flatten() else {
        return;
    };
    // Read whole while the process may still be filing calls (a bucket is
    // added before the extremes are updated); once it has ended
    // (`written`), only the buckets its extremes allow.
    let filled = match written {
        Some(w) => {
            let filled = filled_buckets(words, nbuckets);
            w.allocation(off, ctr_size);
            w.dirty(off, size_of::<CtrHeader>());
            let first = off + size_of::<CtrHeader>() + 8 * filled.start;
            w.dirty(first, 8 * filled.len());
            filled
        }
        None => 0..nbuckets as usize,
    };
    add_counter(words, nbuckets, filled, k, acc);
}

/// Adds a slot's own-cost sample at `off` to `own`. The count is read
/// first and written last by the shim, so a sample being filed is at most
/// one cost ahead of its count.
fn add_own(m: &Mapping, off: usize, own: &mut OwnSample) {
    let word = |field: usize| m.u64_at(off + field).unwrap_or(0);
    let samples = word(offset_of!(OwnSample, samples));
    own.add(&OwnSample {
        samples,
        ns: word(offset_of!(OwnSample, ns)),
        sq_ns: word(offset_of!(OwnSample, sq_ns)),
        over: word(offset_of!(OwnSample, over)),
    });
}

/// The bucket slots that can hold a call of a counter whose process has
/// ended: those between its least and greatest latency. The shim files ns
/// in a slot from floor(log2 ns)·r to (floor(log2 ns) + 1)·r at r buckets
/// per power of two (record.h, `bucket_slot`). Empty when it filed no call
/// above 0 ns.
fn filled_buckets(words: &[AtomicU64], nbuckets: u32) -> std::ops::Range<usize> {
    let word = |f: usize| words.get(f / 8).map_or(0, |w| w.load(Relaxed));
    let (min, max) = (
        word(offset_of!(CtrHeader, min_ns)),
        word(offset_of!(CtrHeader, max_ns)),
    );
    if min == 0 || max < min {
        return 0..0;
    }
    let r = (nbuckets as usize).saturating_sub(1) / 64;
    let lo = min.ilog2() as usize * r;
    let hi = ((max.ilog2() as usize + 1) * r + 1).min(nbuckets as usize);
    lo..hi.max(lo)
}

/// Adds the counter `words` (a [`CtrHeader`] and its buckets, of which
/// only `filled` are read) to `slot`.
fn add_counter(
    words: &[AtomicU64],
    nbuckets: u32,
    filled: std::ops::Range<usize>,
    k: usize,
    accs: &mut Accs,
) {
    const fn field(off: usize) -> usize {
        off / 8
    }
    let word = |k: usize| words.get(k).map_or(0, |w| w.load(Relaxed));
    let pre = word(field(offset_of!(CtrHeader, pre)));
    if pre == 0 {
        return;
    }
    let a = accs.get(k, nbuckets as usize);
    let o = &mut a.op;
    o.pre = o.pre.saturating_add(pre);
    o.post = o
        .post
        .saturating_add(word(field(offset_of!(CtrHeader, post))));
    o.errors = o
        .errors
        .saturating_add(word(field(offset_of!(CtrHeader, errors))));
    o.total_ns = o
        .total_ns
        .saturating_add(word(field(offset_of!(CtrHeader, total_ns))));
    let mn = word(field(offset_of!(CtrHeader, min_ns)));
    if mn != 0 {
        o.min = o.min.min(mn);
    }
    o.max = o.max.max(word(field(offset_of!(CtrHeader, max_ns))));
    o.zero = o
        .zero
        .saturating_add(word(field(offset_of!(CtrHeader, zero))));
    let buckets = words.get(size_of::<CtrHeader>() / 8..).unwrap_or(&[]);
    let filled = filled.start.min(buckets.len())..filled.end.min(buckets.len());
    a.touch(&filled);
    for (b, w) in a.buckets[filled.clone()].iter_mut().zip(&buckets[filled]) {
        *b = b.saturating_add(w.load(Relaxed));
    }
}

/// The counter index of each data op, in value-table order.
static CORR_OP_INDEX: std::sync::LazyLock<Vec<usize>> = std::sync::LazyLock::new(|| {
    abi::CORR_OPS
        .iter()
        .map(|n| OPS.iter().position(|o| o.name == *n).unwrap_or(0))
        .collect()
});

/// The rows of a value table (latency cells) that can hold anything: the
/// shim files a call's values after its latency, so every value lies in a
/// row between those of the op's least and greatest latency in the slot
/// (row 0 for calls of 0 ns). A short process's table is nearly all zeros;
/// reading only these rows reads a tenth of it. All rows when the counter
/// at `ctr` cannot be read.
fn latency_rows(m: &Mapping, ctr: usize) -> std::ops::RangeInclusive<usize> {
    let all = 0..=abi::CORR_LAT - 1;
    if ctr == 0 {
        return all;
    }
    let word = |f: usize| m.u64_at(ctr + f);
    let (Some(min), Some(max), Some(zero)) = (
        word(offset_of!(CtrHeader, min_ns)),
        word(offset_of!(CtrHeader, max_ns)),
        word(offset_of!(CtrHeader, zero)),
    ) else {
        return all;
    };
    let first = if zero > 0 || min == 0 {
        0
    } else {
        abi::corr_cell(min, abi::CORR_LAT)
    };
    first..=abi::corr_cell(max, abi::CORR_LAT)
}

/// The rows of a value table that can hold anything, one bit each: those
/// [`latency_rows`] allows and, once the process has ended (`ended`), at
/// one bucket per power of two, only the rows whose latencies the op's
/// counter at `ctr` holds calls of. The shim files a call's latency
/// before its values, from the same ns: a call of ns in bucket slot j,
/// (2^(j-1), 2^j], has its values in row j + 1 (`corr_cell`; the last
/// row holds all longer ones), one of 0 ns in row 0. A short process's
/// few calls leave most rows between its least and greatest latency empty,
/// and each row is 11 cache lines the process may have written on the
/// other CPU.
fn value_rows(m: &Mapping, ctr: usize, nbuckets: u32, ended: bool) -> u64 {
    let range = latency_rows(m, ctr);
    let span = (*range.start()..=*range.end()).fold(0u64, |b, r| b | 1 << r);
    // At one bucket per power of two, 64 slots and the one below 1 ns.
    if !ended || ctr == 0 || nbuckets != 65 {
        return span;
    }
    let Some(words) = m.words(ctr, size_of::<CtrHeader>() / 8 + nbuckets as usize) else {
        return span;
    };
    let zero = words[offset_of!(CtrHeader, zero) / 8].load(Relaxed);
    let buckets = &words[size_of::<CtrHeader>() / 8..];
    let mut rows = u64::from(zero > 0);
    for j in filled_buckets(words, nbuckets) {
        if buckets[j].load(Relaxed) != 0 {
            rows |= 1 << (j + 1).min(abi::CORR_LAT - 1);
        }
    }
    rows
}

/// The runs of consecutive rows set in `rows`, in order.
fn row_runs(mut rows: u64) -> impl Iterator<Item = std::ops::RangeInclusive<usize>> {
    std::iter::from_fn(move || {
        if rows == 0 {
            return None;
        }
        let first = rows.trailing_zeros() as usize;
        let n = (!(rows >> first)).trailing_zeros() as usize;
        rows &= !(((1u128 << n) - 1) as u64) << first;
        Some(first..=first + n - 1)
    })
}

/// Adds the value tables at `off` (checked to lie in the mapping) to
/// `out`, reading only `rows`.
fn add_correlations(
    m: &Mapping,
    off: usize,
    rows: std::ops::RangeInclusive<usize>,
    out: &mut Correlations,
) {
    let width = abi::CORR_KINDS * abi::CORR_VAL;
    let cells = rows.start() * width..(rows.end() + 1) * width;
    let Some(words) = m.words(off + cells.start * 8, cells.len()) else {
        return;
    };
    for (cell, w) in cells.zip(words) {
        let n = w.load(Relaxed);
        if n == 0 {
            continue;
        }
        let (row, kind, val) = (
            cell / width,
            cell % width / abi::CORR_VAL,
            cell % abi::CORR_VAL,
        );
        let joint: &mut JointHistogram = if kind == 0 {
            &mut out.size
        } else {
            &mut out.seek
        };
        joint.add(abi::corr_index(row), abi::corr_index(val), n);
    }
}

/// Where the next item of `v` goes, as a counter's range (a pool's few
/// thousand items at most).
fn at<T>(v: &[T]) -> u32 {
    u32::try_from(v.len()).unwrap_or(u32::MAX)
}

/// The accumulated counters, in counter order, with their buckets (those
/// between the first and the last that hold a call) and value cells laid
/// end to end.
fn finish_ops(accs: &mut Accs) -> (Vec<Counted>, Vec<u64>, Vec<Cell>) {
    accs.used.sort_unstable();
    let mut counted = Vec::with_capacity(accs.used.len());
    let (mut buckets, mut cells) = (Vec::new(), Vec::new());
    for &k in &accs.used {
        let a = &accs.accs[accs.at[k as usize] as usize - 1];
        let Some((corr, _)) = &COUNTER_NAMES[k as usize] else {
            continue;
        };
        let t = a.touched();
        let slots = &a.buckets[t.clone()];
        let mut op = Counted {
            counter: k,
            ..a.op.clone()
        };
        if let (Some(first), Some(last)) = (
            slots.iter().position(|&c| c != 0),
            slots.iter().rposition(|&c| c != 0),
        ) {
            op.offset = (t.start + first) as i32 + MIN_INDEX;
            let start = at(&buckets);
            buckets.extend_from_slice(&slots[first..=last]);
            op.buckets = start..at(&buckets);
        }
        if let Some(c) = corr {
            let c = &accs.corr[*c];
            for (kind, joint) in [(&mut op.size, &c.size), (&mut op.seek, &c.seek)] {
                let start = at(&cells);
                cells.extend_from_slice(&joint.cells);
                *kind = start..at(&cells);
            }
        }
        counted.push(op);
    }
    (counted, buckets, cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot's bitmap names offsets in order, each once; bits at or
    /// above the slot's offsets (a damaged or hostile record) name none.
    #[test]
    fn a_bitmap_names_only_offsets_the_slot_has() {
        let n = 130;
        let mut words = [0u64; abi::SLOT_USED_WORDS];
        for k in [0, 63, 64, n - 1, n, 200, 64 * abi::SLOT_USED_WORDS - 1] {
            words[k / 64] |= 1 << (k % 64);
        }
        let used: Vec<AtomicU64> = words.into_iter().map(AtomicU64::new).collect();
        let named: Vec<usize> = used_offsets(&used, n).collect();
        assert_eq!(named, [0, 63, 64, n - 1]);
        assert_eq!(used_offsets(&used[..0], n).count(), 0);
    }

    #[test]
    fn rows_are_read_in_runs_of_neighbours() {
        let runs: Vec<_> = row_runs(0b1011_0001 | 1 << 39).collect();
        assert_eq!(runs, [0..=0, 4..=5, 7..=7, 39..=39]);
        assert_eq!(row_runs(0).count(), 0);
        assert_eq!(row_runs(u64::MAX).collect::<Vec<_>>(), [0..=63]);
    }
}
