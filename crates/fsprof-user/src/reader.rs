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

use fsprof_core::{Correlations, Histogram, JointHistogram, OpStats};
use fsprof_shim::abi::FD_OPS;
use fsprof_shim::abi::{self, CtrHeader, OwnSample, ProcHeader, SlotHeader};
use fsprof_shim::OPS;
use fsprof_sys::mmap::SharedMap;

/// One process image's counters, summed over its threads.
#[derive(Clone, Debug)]
pub struct ProcessCounters {
    pub seq: u64,
    pub pid: i32,
    pub ppid: i32,
    pub exe: String,
    pub argv: Vec<String>,
    pub start_mono_ns: u64,
    pub threads: u32,
    /// File-system ops.
    pub ops: Vec<OpStats>,
    /// Calls on pipes, sockets, devices and other non-files, named
    /// `<class>_<op>` (`pipe_read`).
    pub nonfile: Vec<OpStats>,
    /// Calls not counted for want of room for their counters, and the
    /// errno of the first failure to make room.
    pub dropped: u64,
    pub dropped_err: i32,
    /// The shim's own cost timed inside a sample of the calls, summed over
    /// the threads.
    pub own: OwnSample,
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

    fn u64_at(&self, off: usize) -> Option<u64> {
        if !off.is_multiple_of(8) || !self.holds(off, 8) {
            return None;
        }
        Some(match &self.later {
            Some(l) if off >= self.first_len => l.u64_at(off),
            _ => self.first.u64_at(self.base + off),
        })
    }

    fn u32_at(&self, off: usize) -> Option<u32> {
        if !off.is_multiple_of(4) || !self.holds(off, 4) {
            return None;
        }
        Some(match &self.later {
            Some(l) if off >= self.first_len => l.u32_at(off),
            _ => self.first.u32_at(self.base + off),
        })
    }

    /// A copy of the header; only complete once `ready` is set.
    fn header(&self) -> ProcHeader {
        const _: () = assert!(size_of::<ProcHeader>() <= abi::PROC_HDR_SIZE);
        assert!(self.first_len >= abi::PROC_HDR_SIZE);
        assert!(self.first.len() >= self.base + self.first_len);
        // SAFETY: the mapping holds at least PROC_HDR_SIZE >= size_of
        // ProcHeader bytes from `base` (asserted), page aligned (base is a
        // multiple of the block size); any bit pattern is a valid
        // ProcHeader.
        unsafe { std::ptr::read(self.first.as_ptr().add(self.base) as *const ProcHeader) }
    }
}

/// Sums of one counter index over the threads.
#[derive(Clone)]
struct Acc {
    op: OpStats,
    zero: u64,
    min: u64,
    max: u64,
    buckets: Vec<u64>,
}

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
    read_pool(&m, nbuckets, path)
}

/// Reads the pool whose first chunk is the block at `base` of `arena` and
/// whose later chunks, if it grew, are in the file `later`.
pub fn read_block(
    arena: &SharedMap,
    base: usize,
    later: Option<&Path>,
    nbuckets: u32,
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
    read_pool(&m, nbuckets, Path::new("the arena"))
}

fn read_pool(m: &Mapping, nbuckets: u32, what: &Path) -> io::Result<Option<ProcessCounters>> {
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
    let Slots {
        ops,
        nonfile,
        threads,
        own,
    } = read_slots(m, &h, nbuckets);
    let exe =
        String::from_utf8_lossy(&h.exe[..(h.exe_len as usize).min(abi::EXE_MAX)]).into_owned();
    let argv = h.cmdline[..(h.cmdline_len as usize).min(abi::CMDLINE_MAX)]
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Ok(Some(ProcessCounters {
        seq: h.seq,
        pid: h.pid,
        ppid: h.ppid,
        exe,
        argv,
        start_mono_ns: h.start_ns,
        threads,
        ops,
        nonfile,
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
    ops: Vec<OpStats>,
    nonfile: Vec<OpStats>,
    /// Private thread slots.
    threads: u32,
    own: OwnSample,
}

/// The file ops, the non-file ops, the number of private thread slots and
/// the own-cost samples, summed over the slots published so far. A slot or
/// counter whose offset is not (yet) inside the mapping is skipped.
fn read_slots(m: &Mapping, h: &ProcHeader, nbuckets: u32) -> Slots {
    let nslots = m
        .u32_at(offset_of!(ProcHeader, nslots))
        .unwrap_or(0)
        .min(h.max_slots) as usize;
    let nctr = abi::nctr();
    // Boxed: most counters of a process are never used, and a table of
    // ~200 unboxed accumulators (~45 KB) cost more to allocate and fill
    // than reading a short run's counters (docs/benchmarks.md, "Start-up,
    // fourth session").
    let mut acc: Vec<Option<Box<Acc>>> = vec![None; nctr];
    let mut corr: Vec<Correlations> = vec![Correlations::default(); abi::CORR_OPS.len()];
    let mut threads = 0u32;
    let mut own = OwnSample::default();
    for s in 0..nslots {
        let Some(rec) = m.u32_at(abi::SLOT_DIR_OFF + 4 * s).map(|o| o as usize) else {
            continue;
        };
        if rec < abi::PROC_HDR_SIZE || !m.holds(rec, h.slot_size as usize) {
            continue; // not published yet, or beyond what is mapped
        }
        let shared = m.u32_at(rec + offset_of!(SlotHeader, shared)) == Some(1);
        threads += u32::from(!shared);
        add_own(m, rec + offset_of!(SlotHeader, own), &mut own);
        let offs = rec + size_of::<SlotHeader>();
        for (k, slot) in acc.iter_mut().enumerate() {
            let Some(off) = m.u32_at(offs + 4 * k).filter(|&o| o != 0) else {
                continue;
            };
            add_counter(m, off as usize, h.ctr_size as usize, nbuckets, slot);
        }
        let corr_offs = offs + 4 * nctr;
        for (c, out) in corr.iter_mut().enumerate() {
            if let Some(off) = m.u32_at(corr_offs + 4 * c).filter(|&o| o != 0) {
                let ctr = m.u32_at(offs + 4 * CORR_OP_INDEX[c]).unwrap_or(0) as usize;
                let rows = latency_rows(m, ctr);
                add_correlations(m, off as usize, rows, out);
            }
        }
    }
    let (ops, nonfile) = finish_ops(acc, corr);
    Slots {
        ops,
        nonfile,
        threads,
        own,
    }
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

/// Adds the counters at `off` to `slot`.
fn add_counter(
    m: &Mapping,
    off: usize,
    ctr_size: usize,
    nbuckets: u32,
    slot: &mut Option<Box<Acc>>,
) {
    if !off.is_multiple_of(8) || !m.holds(off, ctr_size) {
        return;
    }
    let word = |field: usize| m.u64_at(off + field).unwrap_or(0);
    let pre = word(offset_of!(CtrHeader, pre));
    if pre == 0 {
        return;
    }
    let a = slot.get_or_insert_with(|| {
        Box::new(Acc {
            op: OpStats::new(""),
            zero: 0,
            min: u64::MAX,
            max: 0,
            buckets: vec![0; nbuckets as usize],
        })
    });
    a.op.pre = a.op.pre.saturating_add(pre);
    a.op.post = a.op.post.saturating_add(word(offset_of!(CtrHeader, post)));
    a.op.errors =
        a.op.errors
            .saturating_add(word(offset_of!(CtrHeader, errors)));
    a.op.total_ns =
        a.op.total_ns
            .saturating_add(word(offset_of!(CtrHeader, total_ns)));
    let mn = word(offset_of!(CtrHeader, min_ns));
    if mn != 0 {
        a.min = a.min.min(mn);
    }
    a.max = a.max.max(word(offset_of!(CtrHeader, max_ns)));
    a.zero = a.zero.saturating_add(word(offset_of!(CtrHeader, zero)));
    let first = size_of::<CtrHeader>();
    for (j, b) in a.buckets.iter_mut().enumerate() {
        *b = b.saturating_add(word(first + 8 * j));
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

fn add_correlations(
    m: &Mapping,
    off: usize,
    rows: std::ops::RangeInclusive<usize>,
    out: &mut Correlations,
) {
    if !off.is_multiple_of(8) || !m.holds(off, abi::corr_size()) {
        return;
    }
    let cells = rows.start() * abi::CORR_VAL..(rows.end() + 1) * abi::CORR_VAL;
    for kind in 0..abi::CORR_KINDS {
        let table = off + kind * abi::CORR_CELLS * 8;
        let joint: &mut JointHistogram = if kind == 0 {
            &mut out.size
        } else {
            &mut out.seek
        };
        for cell in cells.clone() {
            let n = m.u64_at(table + cell * 8).unwrap_or(0);
            if n != 0 {
                joint.add(
                    abi::corr_index(cell / abi::CORR_VAL),
                    abi::corr_index(cell % abi::CORR_VAL),
                    n,
                );
            }
        }
    }
}

/// The accumulated counters as ops: file ops (with their value tables)
/// and the non-file twins.
fn finish_ops(
    acc: Vec<Option<Box<Acc>>>,
    mut corr: Vec<Correlations>,
) -> (Vec<OpStats>, Vec<OpStats>) {
    let (mut ops, mut nonfile) = (Vec::new(), Vec::new());
    for (k, a) in acc.into_iter().enumerate() {
        let Some(mut a) = a.map(|a| *a) else { continue };
        let Some((class, name)) = abi::counter_name(k) else {
            continue;
        };
        a.op.name = match class {
            None => name.to_string(),
            Some(c) => format!("{c}_{name}"),
        };
        a.op.histogram = Histogram::from_slots(a.zero, &a.buckets);
        if a.op.histogram.total() > 0 {
            a.op.min_ns = Some(if a.zero > 0 { 0 } else { a.min });
            a.op.max_ns = Some(a.max);
        }
        match class {
            None => {
                if let Some(c) = abi::CORR_OPS.iter().position(|n| *n == name) {
                    let t = std::mem::take(&mut corr[c]);
                    a.op.correlations = (!t.is_empty()).then_some(t);
                }
                ops.push(a.op);
            }
            Some(_) => nonfile.push(a.op),
        }
    }
    (ops, nonfile)
}
