//! The loads and stores a traced program makes through file mappings, as
//! `fsprof trace` captures them: each page fault of the traced processes
//! (fsprof-kernel's [`FaultSession`], as root), kept when it falls in a
//! file mapping the program made, written to a stream per thread.
//!
//! The fault events arrive with addresses; the mappings are the program's
//! `mmap` calls, which the shim records in its chunk files. A fault comes
//! after the `mmap` it touches returned, so once the ring is drained, the
//! chunks harvested after it hold every mapping its faults can be in: the
//! capture keeps a fault if any file mapping its process (or the parent
//! it was forked from) ever had covers it, and leaves the exact question
//! (which mapping, then) to the reader, which follows mappings in time
//! order. The kernel sends only the faults of processes that made such a
//! mapping (or were forked by one that had); of those, anonymous memory
//! (the heap, stacks) faults too, and is dropped here rather than stored; so are the faults of a process whose records
//! have not come yet (a process starting, whose libraries the loader maps
//! without a call the shim sees) until they have.

use std::collections::{BTreeMap, HashMap, HashSet};

use fsprof_core::histogram::OpStats;
use fsprof_core::BucketLayout;
use fsprof_kernel::faults::{Fault, FaultSession, FaultsAttached};

use crate::codec::CallRef;
use crate::event::{Access, Mapped, ProcessInfo, Record, MAPPED_OPS};
use crate::file::{TraceError, TraceWriter};

/// Faults held back for processes whose records have not come (a bound:
/// beyond it they are dropped as unresolvable).
const MAX_WAITING: usize = 1 << 20;

/// How far the shim's call times (its clock, converted) and the kernel's
/// fault times may disagree: a fault within this before the `mmap` that
/// made its mapping is taken to come just after it. The first fault after
/// an `mmap` has been seen to come before the call by the two clocks, in
/// about 1 capture of 10; a window of 1 ms also took in the shim's own
/// stores into a chunk file that had been at those addresses just before
/// (in 4 captures of 5 of the program with `--data full`).
const SKEW_NS: u64 = 200_000;

/// A process's `mmap`s in order: (start address, end, call start, end).
type Made = Vec<(u64, u64, u64, u64)>;

/// Address ranges a process ever had mapped from a file: start → (end,
/// when the first mapping merged into it was made, CLOCK_MONOTONIC ns).
type Ranges = BTreeMap<u64, (u64, u64)>;

/// Adds `[lo, hi)` mapped at `t`, merged with the ranges it overlaps or
/// touches.
fn add_range(r: &mut Ranges, mut lo: u64, mut hi: u64, mut t: u64) {
    let hit: Vec<(u64, (u64, u64))> = r
        .range(..=hi)
        .filter(|(_, &(e, _))| e >= lo)
        .map(|(&s, &v)| (s, v))
        .collect();
    for (s, (e, made)) in hit {
        r.remove(&s);
        lo = lo.min(s);
        hi = hi.max(e);
        t = t.min(made);
    }
    r.insert(lo, (hi, t));
}

/// Whether `addr` was in a file mapping at `t`, as far as the merged
/// ranges tell: a fault before any mapping there was made is of the
/// anonymous memory the address held first.
fn covers(r: &Ranges, addr: u64, t: u64) -> bool {
    r.range(..=addr)
        .next_back()
        .is_some_and(|(_, &(e, made))| addr < e && made <= t)
}

/// When a fault is recorded: its time, or just after the end of the
/// `mmap` that made its mapping when the two clocks put it before (within
/// [`SKEW_NS`]), so that a reader following mappings in time order finds
/// the mapping made.
fn after_its_mmap(made: &[(u64, u64, u64, u64)], f: &Fault) -> u64 {
    let t = f.start_ns.saturating_add(SKEW_NS);
    match made
        .iter()
        .rev()
        .find(|&&(lo, hi, start, _)| lo <= f.addr && f.addr < hi && start <= t)
    {
        Some(&(_, _, _, end)) if f.start_ns <= end => end + 1,
        _ => f.start_ns,
    }
}

/// Page faults of the traced processes, on their way into the trace.
pub struct MappedCapture {
    session: FaultSession,
    /// The fault programs, once a process asked for them
    /// ([`crate::faultword`]).
    attached: Option<FaultsAttached>,
    /// Drained from the ring, waiting for the chunks harvested after.
    pending: Vec<Fault>,
    ranges: HashMap<i32, Ranges>,
    made: HashMap<i32, Made>,
    /// Processes whose image record came: their faults can be judged.
    known: HashSet<i32>,
    /// Per op (mapped_read, mapped_write), the faults' service times.
    stats: [OpStats; 2],
    layout: BucketLayout,
    /// Faults of processes whose file mappings cover none of them.
    outside: u64,
}

impl MappedCapture {
    /// The capture of the faults an attached session reports.
    pub fn new(session: FaultSession, layout: BucketLayout) -> MappedCapture {
        MappedCapture {
            session,
            attached: None,
            pending: Vec::new(),
            ranges: HashMap::new(),
            made: HashMap::new(),
            known: HashSet::new(),
            stats: MAPPED_OPS.map(OpStats::new),
            layout,
            outside: 0,
        }
    }

    /// The fault programs, attached apart from the session: kept (and
    /// dropped) with it.
    pub fn attached(&mut self, f: FaultsAttached) {
        self.attached = Some(f);
    }

    /// Follows `pid` and the children it forks.
    pub fn follow(&self, pid: i32) -> Result<(), String> {
        self.session.follow(pid).map_err(|e| e.to_string())
    }

    /// Whether the kernel says which pages it mapped around a fault.
    pub fn reports_around(&self) -> bool {
        self.session.around
    }

    /// Whether the faults of processes that map no file through the shim
    /// stay in the kernel (fsprof-kernel's `faults` module doc).
    pub fn filters_in_kernel(&self) -> bool {
        self.session.marks
    }

    /// Takes the faults the kernel reported so far (before the chunks
    /// are harvested: see the module's note on order).
    pub fn drain(&mut self) {
        let pending = &mut self.pending;
        self.session.drain(|f| pending.push(f));
    }

    /// A call the capture handed on: a file mapping it made.
    pub fn saw_call(&mut self, c: &CallRef) {
        if c.op.is("mmap") && c.ret != -1 && c.errno == 0 {
            let len = c.len.unwrap_or(0).div_ceil(4096) * 4096;
            let lo = c.ret as u64;
            let hi = lo.saturating_add(len);
            add_range(self.ranges.entry(c.pid).or_default(), lo, hi, c.start_ns);
            let made = self.made.entry(c.pid).or_default();
            made.push((lo, hi, c.start_ns, c.end_ns));
        }
    }

    /// A process image: a fork starts with its parent's mappings.
    pub fn saw_process(&mut self, p: &ProcessInfo) {
        self.known.insert(p.pid);
        if !self.ranges.contains_key(&p.pid) {
            if let Some(r) = self.ranges.get(&p.ppid).cloned() {
                self.ranges.insert(p.pid, r);
            }
            if let Some(m) = self.made.get(&p.ppid).cloned() {
                self.made.insert(p.pid, m);
            }
        }
    }

    /// Writes the pending faults that fall in file mappings, each thread's
    /// to its stream (`stream_of`), and times them into the profile's ops.
    /// Faults of a process whose records have not come yet wait, unless
    /// this is the `last` flush.
    pub fn flush(
        &mut self,
        writer: &mut TraceWriter,
        last: bool,
        mut stream_of: impl FnMut(i32) -> u32,
    ) -> Result<(), TraceError> {
        let mut waiting = Vec::new();
        for f in std::mem::take(&mut self.pending) {
            if !self.known.contains(&f.pid) {
                if !last && waiting.len() < MAX_WAITING {
                    waiting.push(f);
                } else {
                    self.outside += 1;
                }
                continue;
            }
            if !self
                .ranges
                .get(&f.pid)
                .is_some_and(|r| covers(r, f.addr, f.start_ns.saturating_add(SKEW_NS)))
            {
                self.outside += 1;
                continue;
            }
            let made = self.made.get(&f.pid).map(Vec::as_slice).unwrap_or(&[]);
            let start_ns = after_its_mmap(made, &f);
            let m = Mapped {
                start_ns,
                end_ns: start_ns.saturating_add(f.dur_ns),
                pid: f.pid,
                tid: f.tid,
                access: if f.write { Access::Write } else { Access::Read },
                major: f.major,
                in_kernel: f.in_kernel,
                addr: f.addr,
                around: f.around,
                ..Default::default()
            };
            self.stats[f.write as usize].record(&self.layout, f.dur_ns, false);
            writer.push_to(stream_of(f.tid), &Record::Mapped(m))?;
        }
        self.pending = waiting;
        Ok(())
    }

    /// The ops of the profile beside the trace (those with faults).
    pub fn ops(&self) -> Vec<OpStats> {
        self.stats
            .iter()
            .filter(|s| s.count() > 0)
            .cloned()
            .collect()
    }

    /// Faults the kernel reported none of (the ring was full, or a
    /// program was skipped).
    pub fn lost(&self) -> u64 {
        self.session.lost()
            + self.session.missed()
            + self.attached.as_ref().map_or(0, FaultsAttached::missed)
    }

    /// Processes of the tree not followed (the map of followed processes
    /// was full): none of their faults were reported.
    pub fn unfollowed(&self) -> u64 {
        self.session.unfollowed()
    }

    /// Processes the map of followed processes holds alive at once.
    pub fn followed_entries(&self) -> u32 {
        self.session.followed_entries()
    }

    /// Faults dropped as outside every file mapping (the heap, stacks).
    pub fn outside(&self) -> u64 {
        self.outside
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shim marks a process at the address the fault programs take
    /// for a mark.
    #[test]
    fn the_shim_marks_where_the_kernel_looks() {
        assert_eq!(
            fsprof_shim::trace_abi::TMAP_MARK,
            fsprof_kernel::faults::MAPPING_MARK
        );
    }

    #[test]
    fn ranges_merge_and_cover() {
        let mut r = Ranges::new();
        add_range(&mut r, 0x1000, 0x9000, 50);
        add_range(&mut r, 0x2000, 0x3000, 60);
        add_range(&mut r, 0x9000, 0xa000, 40);
        add_range(&mut r, 0x20000, 0x21000, 100);
        assert_eq!(r.len(), 2, "{r:?}");
        let at = |a| covers(&r, a, 100);
        assert!(at(0x5000) && at(0x9fff) && at(0x20000));
        assert!(!at(0xa000) && !at(0xfff) && !at(0x21000));
        assert!(covers(&r, 0x5000, 40), "made at the earliest merged");
        assert!(!covers(&r, 0x20000, 99), "a fault before the mmap");
    }

    /// A fault the clocks put a little before its mmap's end is moved
    /// just after it; one well after keeps its time, and so does one in
    /// the second mapping at the same address.
    #[test]
    fn faults_come_after_the_mmap_of_their_mapping() {
        let made = [
            (0x1000, 0x3000, 100, 200),
            (0x1000, 0x3000, 500_000, 500_100),
        ];
        let at = |addr, t| Fault {
            start_ns: t,
            dur_ns: 1,
            pid: 1,
            tid: 1,
            addr,
            write: false,
            major: false,
            in_kernel: false,
            around: None,
        };
        assert_eq!(after_its_mmap(&made, &at(0x1000, 150)), 201);
        assert_eq!(after_its_mmap(&made, &at(0x1000, 300)), 300);
        assert_eq!(after_its_mmap(&made, &at(0x2000, 499_990)), 500_101);
        assert_eq!(
            after_its_mmap(&made, &at(0x8000, 150)),
            150,
            "in no mapping"
        );
    }
}
