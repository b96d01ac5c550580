//! The arena: blocks of the control file, each the first chunk (header,
//! slots, first counters) of one process image's counters.
//!
//! A process used to create, reserve, map and later have removed a file of
//! its own, and fsprof to open, map and delete it: most of what a short
//! process cost (docs/benchmarks/overhead.md). Here `fsprof run` reserves
//! blocks ahead (`fallocate`, so that a process never faults on a page
//! tmpfs does not have), offers them through a ring in the control header,
//! and a process takes the next one with one compare-and-swap; a forked
//! child, which has the control file mapped already, makes no system call
//! for it. Blocks of ended processes are read where they are, zeroed and
//! offered again. With none on offer a process makes a file, as before.
//!
//! fsprof trusts nothing a process wrote: it keeps its own list of the
//! blocks it offered (never reading block numbers back from the ring) and
//! reads each block's words with bounds checks (reader.rs).

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::mem::offset_of;
use std::os::fd::AsRawFd;
use std::rc::Rc;

use fsprof_shim::abi::{self, ControlHeader, ProcHeader};
use fsprof_shim::trace_abi as tabi;
use fsprof_sys::mmap::SharedMap;

use crate::written::Written;

/// Blocks on offer when the command starts. Not fewer: a block offered
/// only once the command has been started may come after its first forks
/// in a loaded machine (those processes then map counter files of their
/// own; `run::faults` counts on the four). All four are offered before the
/// command starts, none with its pages (32 of them, allocated by
/// `fallocate`: ~34 µs a block before the clone, and ~16 µs more to free
/// them at the end): they get theirs at the first refill, off the
/// start-up's path. A process that takes a block before its pages are
/// there (`ControlHeader::blocks_ready`) makes the pages it writes as the
/// shim hands them out (shim/pool.c, `make_below`: three at its set-up,
/// one `madvise` each time it needs more), or uses a file where it cannot
/// make even those; one that finds no room later counts its calls as
/// dropped, as when a counter file cannot grow. Until the eleventh session
/// the first block was made ready before the clone, because a process that
/// took it unready made all its 32 pages at once (+58 µs on the command,
/// which got to it first in 43% of runs when it was made only after the
/// clone). Two earlier ways failed: reserving three blocks only after the
/// clone (fsprof then ran on the command's CPU, and reached the offers
/// after the command's first fork), and a gate that made the command's
/// processes wait for fsprof (cost the command more than the start-up
/// gained; docs/benchmarks/overhead.md, "Start-up, sixth session").
const AT_START: usize = 4;
/// The most blocks kept on offer. The ring is refilled every
/// [`crate::collector::REFILL_NS`] with twice as many as processes started
/// since the last time, so that a fork storm (a shell loop takes ~2,000 a
/// second) finds blocks, and a quiet program holds few.
const MAX_ON_OFFER: usize = 256;
/// With the bell on ([`Arena::set_bell`]): the offers are topped up to
/// twice what started in this long at the rate seen since the last top-up,
/// and the low water is a quarter of them, so that a steady stream of
/// processes wakes fsprof every ~1.5 times this. A loop of `cat`s takes
/// ~1,000 blocks a second: ~40 offers, a wake every ~30 ms, where the 10
/// ms tick woke 100 times a second (a wake-up ~25 µs of fsprof's CPU on
/// this VM, docs/benchmarks/history.md, own15). Not longer: a block
/// reserved costs ~50 µs (its pages allocated and zeroed, and freed at the
/// end), and at 50 ms the test loop of 300 `cat`s reserved ~150 blocks.
const WAKE_GAP_NS: u64 = 20_000_000;
/// Blocks reserved at once when none is free (fewer when fewer are
/// needed).
const BATCH: u32 = 16;
/// A block taken whose process never said whose it is (it died between
/// taking it and writing its pid) is taken back after this long.
pub const ABANDONED_NS: u64 = 2_000_000_000;

/// A block a process took.
#[derive(Clone, Copy, Debug)]
pub struct Taken {
    pub block: u32,
    /// CLOCK_MONOTONIC ns when fsprof saw it taken.
    pub seen_ns: u64,
}

pub struct Arena {
    /// Shared with `fsprof trace`'s reader of the blocks' windows.
    map: Rc<SharedMap>,
    file: Rc<File>,
    max_blocks: u32,
    /// Blocks the file holds (numbered; offered or to be).
    reserved: u32,
    /// Blocks `0..ready` have their pages (the rest of `0..reserved` are
    /// holes until [`Arena::make_ready`]).
    ready: u32,
    /// The first blocks' pages are never made (tests: as late as a
    /// loaded machine may make them).
    held: bool,
    /// Zeroed, not on offer.
    free: Vec<u32>,
    /// On offer, in ring order: offers `tail - offered.len() .. tail`.
    offered: VecDeque<u32>,
    tail: u64,
    taken: Vec<Taken>,
    /// fallocate failed (a full file system): offer only freed blocks.
    full: bool,
    /// Blocks to keep on offer.
    target: usize,
    /// The control header's process count at the last refill.
    seen_seq: u64,
    /// When the offers were last topped up (CLOCK_MONOTONIC ns).
    topped_ns: u64,
    /// Processes wake fsprof at the low water (`ControlHeader::wake_at`).
    bell: bool,
    /// [`fsprof_sys::mapfault::replaced_pages`] when the arena last
    /// looked at which pages its guard replaced.
    replaced_mark: u64,
    /// Blocks with a page the guard replaced by zeros: fsprof's mapping of
    /// that page no longer shows the file (even after the file is made
    /// long again), so a process given the block would write counts fsprof
    /// reads as zeros. Never offered again.
    detached: Vec<u32>,
    /// More pages were replaced than the guard remembers (a process of the
    /// run cut the control file again and again): no freed block is
    /// offered again, as any may hold a detached page.
    reuse_unsafe: bool,
}

impl Arena {
    /// The arena of the control file `file` (open for writing), of room
    /// for `max_blocks` blocks, none reserved yet.
    pub fn new(file: &Rc<File>, max_blocks: u32) -> io::Result<Arena> {
        let len = abi::ARENA_OFF + max_blocks as usize * abi::FIRST_CHUNK;
        Ok(Arena {
            map: Rc::new(SharedMap::new_writable(file, len)?),
            // The run directory's descriptor, not a copy: one system call
            // fewer before the command and one at the end.
            file: file.clone(),
            max_blocks,
            reserved: 0,
            ready: 0,
            held: false,
            free: Vec::new(),
            offered: VecDeque::new(),
            tail: 0,
            taken: Vec::new(),
            full: false,
            target: AT_START,
            seen_seq: 0,
            topped_ns: 0,
            bell: true,
            replaced_mark: fsprof_sys::mapfault::replaced_pages(),
            detached: Vec::new(),
            reuse_unsafe: false,
        })
    }

    /// Ends the run ([`crate::rundir::RunDir::end`]): the shim reads the
    /// state with acquire ordering. Nobody listens to the bell any more.
    pub fn end(&self) {
        self.map.store_u32(offset_of!(ControlHeader, wake_at), 0);
        self.map
            .store_u32_release(offset_of!(ControlHeader, state), abi::RUN_ENDED);
    }

    /// Whether processes ring the bell at the low water: `fsprof run`
    /// sleeps on it; `fsprof trace`, which keeps its 10 ms upkeep, does not
    /// (a process would pay a system call for nobody).
    pub fn set_bell(&mut self, on: bool) {
        self.bell = on;
        if !on {
            self.map.store_u32(offset_of!(ControlHeader, wake_at), 0);
        }
    }

    /// The word processes bump and wake at the low water (and fsprof
    /// itself, when a top-up leaves the offers below it).
    pub fn bell(&self) -> &std::sync::atomic::AtomicU32 {
        &self.map.u32_words(offset_of!(ControlHeader, wake), 1)[0]
    }

    /// Whether fsprof has ended the run ([`crate::rundir::RunDir::end`]).
    fn ended(&self) -> bool {
        self.map.u32_at(offset_of!(ControlHeader, state)) == abi::RUN_ENDED
    }

    /// Offers the first blocks before the command starts, their pages not
    /// reserved yet (the file made longer, sparse): [`AT_START`].
    pub fn offer_first(&mut self, now_ns: u64) {
        self.top_up(now_ns, false);
    }

    /// Reserves the pages of the blocks offered up to block `upto` (the
    /// first blocks are offered without them: [`Arena::offer_first`]).
    pub fn make_ready(&mut self, upto: u32) {
        if !self.full && !self.held {
            self.fill(upto.min(self.reserved));
        }
    }

    /// Allocates the pages of blocks `ready..upto` and tells the processes;
    /// false (and no more blocks) where the file system has no room.
    fn fill(&mut self, upto: u32) -> bool {
        if upto <= self.ready {
            return true;
        }
        let off = abi::ARENA_OFF + self.ready as usize * abi::FIRST_CHUNK;
        let len = (upto - self.ready) as usize * abi::FIRST_CHUNK;
        // SAFETY: fallocate on a descriptor we own, with a range in bounds
        // of off_t (at most ARENA_OFF + MAX_BLOCKS blocks).
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, off as i64, len as i64) };
        if rc != 0 {
            self.full = true;
            return false;
        }
        self.ready = upto;
        // Relaxed: what it publishes is the file system's, made by the
        // call that returned before this store.
        self.map
            .store_u32(offset_of!(ControlHeader, blocks_ready), upto);
        true
    }

    /// The first blocks' pages are left to the processes that take them
    /// (`FSPROF_TEST_UNREADY_BLOCKS=1`, for `run::faults`).
    pub fn hold_first(&mut self) {
        self.held = true;
    }

    /// Processes the shim recorded as lost (`ControlHeader::lost_count`).
    pub fn lost_count(&self) -> u64 {
        self.map
            .u64_acquire_at(offset_of!(ControlHeader, lost_count))
    }

    /// Whether any process of the run made a counter file of its own
    /// (`ControlHeader::files`).
    pub fn files_made(&self) -> bool {
        self.map.u32_at(offset_of!(ControlHeader, files)) != 0
    }

    /// Blocks whose pages are there (numbered from 0).
    pub fn ready(&self) -> u32 {
        self.ready
    }

    /// Notes the offers processes took since the last call, and tops the
    /// offers up: to twice as many as processes started since, if that is
    /// more than before (at most [`MAX_ON_OFFER`]).
    pub fn refill(&mut self, now_ns: u64) {
        self.top_up(now_ns, true);
    }

    /// [`Arena::refill`]; the blocks reserved now get their pages only
    /// `with_pages`.
    fn top_up(&mut self, now_ns: u64, with_pages: bool) {
        let taken = self.offers_taken();
        // Processes that started, with a block or, when the offers ran out,
        // a counter file of their own (a file costs a process ~30 us more:
        // creating, reserving and mapping it, and fsprof's reading and
        // removing it). What was taken alone is at most what was offered,
        // so the offers grew by half at most each time, and the first 60-80
        // ms of a fork storm made files: 15% of `find | xargs -n4 wc`'s
        // processes. The count is the processes' to write: a bad one only
        // moves the target within its bounds.
        let seq = self.map.u64_acquire_at(offset_of!(ControlHeader, next_seq));
        let started = seq.saturating_sub(self.seen_seq).min(MAX_ON_OFFER as u64) as usize;
        self.seen_seq = self.seen_seq.max(seq);
        let demand = taken.max(started);
        // With the bell, a top-up comes when the offers are low: what was
        // taken since the last is three quarters of them by design, and
        // twice that would grow them at every wake. The rate decides
        // (WAKE_GAP_NS), and twice what started only when the offers ran
        // out (fsprof was late, processes made counter files).
        let since = now_ns.saturating_sub(self.topped_ns).max(1);
        self.topped_ns = now_ns;
        let want = match self.bell {
            true => {
                let for_gap = (2 * demand as u64).saturating_mul(WAKE_GAP_NS) / since;
                let ran_out = taken >= self.offered.len();
                (for_gap.min(MAX_ON_OFFER as u64) as usize).max(if ran_out {
                    2 * demand
                } else {
                    0
                })
            }
            false => 2 * demand,
        };
        self.target = self.target.max(want).min(MAX_ON_OFFER);
        for _ in 0..taken {
            if let Some(block) = self.offered.pop_front() {
                self.taken.push(Taken {
                    block,
                    seen_ns: now_ns,
                });
            }
        }
        let before = self.tail;
        // Once the run has ended no process joins it: a block reserved
        // now (32 pages allocated and zeroed) would only be removed again.
        let ended = self.ended();
        if !ended && with_pages {
            self.make_ready(self.reserved);
        }
        while !ended && self.offered.len() < self.target {
            let want = (self.target - self.offered.len()) as u32;
            let Some(block) = self.free.pop().or_else(|| self.reserve(want, with_pages)) else {
                break;
            };
            let at = offset_of!(ControlHeader, ring) + 4 * (self.tail as usize % abi::RING);
            self.map.store_u32(at, block);
            self.offered.push_back(block);
            self.tail += 1;
        }
        if self.tail != before {
            // Release: the zeroed blocks and the entries before the count.
            self.map
                .store_u64(offset_of!(ControlHeader, ring_tail), self.tail);
        }
        if self.bell && !ended {
            self.set_low_water();
        }
    }

    /// A quarter of the offers made is the low water. Offers taken meanwhile may
    /// already have passed it, and no take would ring: fsprof rings the
    /// bell itself then (the capture's next upkeep comes after its
    /// `BELL_GAP`), unless the offers fell short of the target (no block
    /// to offer: only ended processes' folds give some back, at the
    /// upkeep that follows activity, and a bell rung at every upkeep
    /// would make that every `BELL_GAP`).
    fn set_low_water(&self) {
        let at = (self.offered.len() / 4).max(1) as u32;
        self.map.store_u32(offset_of!(ControlHeader, wake_at), at);
        let head = self
            .map
            .u64_acquire_at(offset_of!(ControlHeader, ring_head));
        let short = self.offered.len() < self.target;
        if !short && self.tail.saturating_sub(head) <= at as u64 {
            self.bell()
                .fetch_add(1, std::sync::atomic::Ordering::Release);
        }
    }

    /// A newly reserved block, reserving up to `want` (at most [`BATCH`])
    /// when the last is used; their pages made only `with_pages`.
    fn reserve(&mut self, want: u32, with_pages: bool) -> Option<u32> {
        if self.full || self.reserved >= self.max_blocks {
            return None;
        }
        let n = want.clamp(1, BATCH).min(self.max_blocks - self.reserved);
        let first = self.reserved;
        let made = match with_pages {
            true => self.fill(first + n),
            // A hole: a process that takes the block before it is made
            // ready writes only inside the file.
            false => {
                let end = abi::ARENA_OFF + (first + n) as usize * abi::FIRST_CHUNK;
                self.file.set_len(end as u64).is_ok()
            }
        };
        if !made {
            self.full = true;
            return None;
        }
        self.reserved += n;
        self.free.extend((first + 1..self.reserved).rev());
        Some(first)
    }

    /// Whether a process of the run cut the control file, or wrote over
    /// its header (the shim never does either). fsprof's reads past a cut
    /// raise SIGBUS, which its guard counts (fsprof-sys mapfault.rs), but
    /// only where it reads, and its next refill makes the file long again:
    /// cut before any block was made ready, the file left fsprof nothing
    /// to fault on, and the run looked as if no process had loaded the
    /// shim. The header's magic, written before the command started, is
    /// gone from a file cut and made long again.
    pub fn control_damaged(&self) -> bool {
        // Where the blocks reserved end: the file is at least that long.
        let end = self.block(self.reserved).1 as u64;
        self.file.metadata().is_ok_and(|m| m.len() < end)
            || self.map.u64_at(offset_of!(ControlHeader, magic)) != abi::CTL_MAGIC
    }

    /// The arena's mapping and the control file it maps, for `fsprof
    /// trace`'s reader of the blocks' windows.
    pub fn shared(&self) -> (Rc<SharedMap>, Rc<File>) {
        (self.map.clone(), self.file.clone())
    }

    /// Where block `k`'s trace window starts, in the mapping and the file
    /// (`shim/trace_abi.h`, FSPROF_TWIN_SIZE: the block's last bytes).
    pub fn window(&self, k: u32) -> usize {
        self.block(k).1 + abi::FIRST_CHUNK - tabi::TWIN_SIZE
    }

    /// Whether block `k`'s window holds a trace chunk `fsprof trace` has
    /// not finished reading (it zeroes the chunk's magic once it has): its
    /// block is not taken back before, while the run is active. What the
    /// process wrote decides only when its block comes back, never whether
    /// fsprof reads out of bounds.
    pub fn window_busy(&self, k: u32) -> bool {
        !self.ended()
            && self.window_made(k)
            && self.map.u64_acquire_at(self.window(k)) == tabi::TCHUNK_MAGIC
    }

    /// Whether block `k`'s trace window has its first page, as
    /// [`Arena::header_made`] asks of its header: a process in a block
    /// taken before its pages were made makes the window's pages when it
    /// takes the window (shim/pool.c, `make_above`), and leaves holes
    /// where the file system had no room, or where it never traced.
    pub fn window_made(&self, k: u32) -> bool {
        self.page_made(k, self.window(k))
    }

    /// Whether the page at `off` of block `k` is there to read: always in
    /// a ready block; in one taken before, only once its process made it.
    fn page_made(&self, k: u32, off: usize) -> bool {
        k < self.ready || fsprof_sys::mmap::file_has_page(&self.file, off as u64)
    }

    /// The blocks whose pages are there: the ready ones, and those above
    /// that a process took (it made them), whether fsprof has noted it
    /// taken yet, holds it, or has given it back. The others are holes
    /// still on offer, which reading would fill.
    pub fn with_pages(&self) -> impl Iterator<Item = u32> + '_ {
        let holes: Vec<u32> = (self.offered.iter().copied())
            .skip(self.offers_taken())
            .filter(|&k| k >= self.ready)
            .collect();
        (0..self.reserved).filter(move |k| *k < self.ready || !holes.contains(k))
    }

    /// How many of the offers on the list processes have taken: the ring's
    /// head, as they moved it, bounded by the offers made.
    fn offers_taken(&self) -> usize {
        let head = self
            .map
            .u64_acquire_at(offset_of!(ControlHeader, ring_head))
            .min(self.tail);
        let first_offered = self.tail - self.offered.len() as u64;
        head.saturating_sub(first_offered) as usize
    }

    /// The blocks processes have taken and not given back.
    pub fn taken(&self) -> &[Taken] {
        &self.taken
    }

    /// The mapping the blocks are in and block `k`'s offset in it.
    pub fn block(&self, k: u32) -> (&SharedMap, usize) {
        (&self.map, abi::ARENA_OFF + k as usize * abi::FIRST_CHUNK)
    }

    /// Whether block `k`'s header page is there to read: always for a
    /// ready block; for one taken before, only once its process made it
    /// (shim/pool.c). A process that could not (a full file system) left
    /// a hole, which reading would fill, or fault on.
    pub fn header_made(&self, k: u32) -> bool {
        self.page_made(k, self.block(k).1)
    }

    /// A header word of block `k`: pid, ready, seq, file, used.
    pub fn header_u32(&self, k: u32, field: usize) -> u32 {
        self.map.u32_at(self.block(k).1 + field)
    }

    pub fn header_u64(&self, k: u32, field: usize) -> u64 {
        self.map.u64_at(self.block(k).1 + field)
    }

    /// Takes back taken block `block`, whose process has ended and been
    /// read (or never set it up): zeroes what it may have written (all it
    /// used, without `written`) and frees it for a later offer.
    pub fn give_back(&mut self, block: u32, written: Option<&Written>) {
        let Some(i) = self.taken.iter().position(|t| t.block == block) else {
            return;
        };
        self.taken.swap_remove(i);
        if self.ended() || (written.is_none() && block >= self.ready) {
            // Never offered again: zeroing it would be work for nothing.
            // A block abandoned before its pages were made (its taker
            // could not make them, or died first) is left: its pages may
            // not be there, even for zeros.
            return;
        }
        let used = self.header_u32(block, offset_of!(ProcHeader, used)) as usize;
        let top_used = self.header_u32(block, offset_of!(ProcHeader, top_used)) as usize;
        let base = self.block(block).1;
        // Through the mapping: the reader has mapped these pages, and a
        // tmpfs page mapped by reading is writable without a fault; the
        // file would cost a page-cache look-up, lock and copy a page.
        match written {
            Some(w) => {
                w.zero_each(used, top_used, |off, len| self.map.zero(base + off, len));
            }
            None => {
                let n = used.clamp(abi::PROC_HDR_SIZE, abi::FIRST_CHUNK);
                self.map.zero(base, n.next_multiple_of(8));
                let top = top_used.min(abi::FIRST_CHUNK - n) / 8 * 8;
                self.map.zero(base + abi::FIRST_CHUNK - top, top);
            }
        }
        if self.may_reuse(block) {
            self.free.push(block);
        }
    }

    /// Whether freed block `block` shows the file in fsprof's mapping: no
    /// page of it was replaced by the guard (a process of the run cut the
    /// control file while fsprof read the block, fsprof-sys mapfault.rs).
    fn may_reuse(&mut self, block: u32) -> bool {
        let (pages, now) = fsprof_sys::mapfault::pages_replaced_since(self.replaced_mark);
        self.replaced_mark = now;
        let base = self.map.as_ptr() as usize;
        match pages {
            None => self.reuse_unsafe = true,
            Some(pages) => {
                let blocks = pages.into_iter().filter_map(|p| {
                    let off = p.checked_sub(base + abi::ARENA_OFF)?;
                    let k = off / abi::FIRST_CHUNK;
                    (off < self.map.len() - abi::ARENA_OFF).then_some(k as u32)
                });
                self.detached.extend(blocks);
            }
        }
        !self.reuse_unsafe && !self.detached.contains(&block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// Blocks are reserved (the control file grows) while the run is
    /// active, and none once it has ended.
    #[test]
    fn no_block_is_reserved_after_the_run_ended() {
        for (state, grows) in [(abi::RUN_ACTIVE, true), (abi::RUN_ENDED, false)] {
            let file = Rc::new(tempfile::tempfile().unwrap());
            file.write_all_at(&vec![0u8; abi::ARENA_OFF], 0).unwrap();
            let at = offset_of!(ControlHeader, state) as u64;
            file.write_all_at(&state.to_ne_bytes(), at).unwrap();
            let mut a = Arena::new(&file, 8).unwrap();
            a.refill(0);
            let len = file.metadata().unwrap().len() as usize;
            assert_eq!(len > abi::ARENA_OFF, grows, "state {state}: {len} bytes");
        }
    }

    /// A control file of an active run, with room for its header only.
    fn active_control() -> Rc<File> {
        let file = Rc::new(tempfile::tempfile().unwrap());
        file.write_all_at(&vec![0u8; abi::ARENA_OFF], 0).unwrap();
        let state = offset_of!(ControlHeader, state) as u64;
        file.write_all_at(&abi::RUN_ACTIVE.to_ne_bytes(), state)
            .unwrap();
        file
    }

    /// The first blocks are offered with no pages (a longer, sparse file);
    /// the first is made ready before the command starts, the others at
    /// the first refill, each time telling the processes how many are.
    #[test]
    fn the_first_blocks_are_offered_before_their_pages_are_made() {
        use std::os::unix::fs::MetadataExt;
        let file = active_control();
        let allocated = || file.metadata().unwrap().blocks() * 512;
        let before = allocated();
        let mut a = Arena::new(&file, 64).unwrap();
        a.offer_first(0);
        assert_eq!(a.offered.len(), AT_START);
        let len = (abi::ARENA_OFF + AT_START * abi::FIRST_CHUNK) as u64;
        assert_eq!(file.metadata().unwrap().len(), len);
        assert_eq!(allocated(), before, "pages made before the command");
        let ready = |a: &Arena| a.map.u32_at(offset_of!(ControlHeader, blocks_ready));
        assert_eq!((ready(&a), a.ready()), (0, 0));
        a.make_ready(1);
        assert_eq!((ready(&a), a.ready()), (1, 1));
        assert!(allocated() >= before + abi::FIRST_CHUNK as u64);
        a.refill(1);
        let all = AT_START as u32;
        assert_eq!((ready(&a), a.ready()), (all, all));
        assert!(allocated() >= before + (AT_START * abi::FIRST_CHUNK) as u64);
    }

    /// A control file of an active run on tmpfs (a memfd), where a load
    /// from a hole through the mapping makes a page.
    fn active_control_on_tmpfs() -> Rc<File> {
        use std::os::fd::FromRawFd;
        // SAFETY: a new anonymous tmpfs file, owned by the File.
        let file = unsafe {
            let fd = libc::memfd_create(c"fsprof-arena-test".as_ptr(), libc::MFD_CLOEXEC);
            assert!(fd >= 0, "{}", io::Error::last_os_error());
            File::from_raw_fd(fd)
        };
        file.write_all_at(&vec![0u8; abi::ARENA_OFF], 0).unwrap();
        let state = offset_of!(ControlHeader, state) as u64;
        file.write_all_at(&abi::RUN_ACTIVE.to_ne_bytes(), state)
            .unwrap();
        Rc::new(file)
    }

    /// A block taken before its pages were made, whose process made its
    /// header's page and no window (shim/pool.c: no room for it): its
    /// window is not read, so no page is made there (on a full /dev/shm
    /// the read would raise SIGBUS); once the process has written its
    /// window, the window is there and busy.
    #[test]
    fn a_window_its_process_did_not_make_is_not_read() {
        use std::os::unix::fs::MetadataExt;
        let file = active_control_on_tmpfs();
        // Room for the first blocks only: a refill reserves (and makes)
        // no more.
        let mut a = Arena::new(&file, AT_START as u32).unwrap();
        a.hold_first();
        a.offer_first(0);
        let head = offset_of!(ControlHeader, ring_head) as u64;
        file.write_all_at(&1u64.to_ne_bytes(), head).unwrap();
        a.refill(1);
        assert_eq!((a.ready(), a.taken()[0].block), (0, 0));
        let base = a.block(0).1 as u64;
        file.write_all_at(&7u32.to_ne_bytes(), base).unwrap();
        let pages = || file.metadata().unwrap().blocks();
        let before = pages();
        assert!(a.header_made(0));
        assert!(!a.window_made(0) && !a.window_busy(0));
        assert_eq!(pages(), before, "a page made in the window's hole");
        let magic = tabi::TCHUNK_MAGIC.to_ne_bytes();
        file.write_all_at(&magic, a.window(0) as u64).unwrap();
        assert!(a.window_made(0) && a.window_busy(0));
        assert!(!a.header_made(1), "block 1 is untouched");
    }

    /// A process of the run that cuts the control file before any block is
    /// ready leaves fsprof nothing to fault on, and the refill makes the
    /// file long again: the header's lost magic still tells.
    #[test]
    fn a_control_file_cut_and_made_long_again_is_seen() {
        let file = active_control_on_tmpfs();
        let magic = offset_of!(ControlHeader, magic) as u64;
        file.write_all_at(&abi::CTL_MAGIC.to_ne_bytes(), magic)
            .unwrap();
        let mut a = Arena::new(&file, AT_START as u32).unwrap();
        a.hold_first();
        a.offer_first(0);
        assert!(!a.control_damaged());
        file.set_len(0).unwrap();
        assert!(a.control_damaged(), "cut");
        file.set_len((abi::ARENA_OFF + AT_START * abi::FIRST_CHUNK) as u64)
            .unwrap();
        assert!(a.control_damaged(), "cut and made long again");
        file.write_all_at(&abi::CTL_MAGIC.to_ne_bytes(), magic)
            .unwrap();
        assert!(!a.control_damaged());
    }

    /// A block whose page fsprof's guard replaced while reading it (a
    /// process of the run cut the control file) is not offered again once
    /// the file is long again: fsprof's mapping of that page shows zeros,
    /// not what the block's next process would write. A block read without
    /// a fault is.
    #[test]
    fn a_block_read_through_a_cut_is_not_offered_again() {
        let file = active_control_on_tmpfs();
        let mut a = Arena::new(&file, AT_START as u32).unwrap();
        a.offer_first(0);
        a.make_ready(AT_START as u32);
        let head = offset_of!(ControlHeader, ring_head) as u64;
        file.write_all_at(&2u64.to_ne_bytes(), head).unwrap();
        a.refill(1);
        let taken: Vec<u32> = a.taken().iter().map(|t| t.block).collect();
        assert_eq!(taken, [0, 1]);
        let long = file.metadata().unwrap().len();
        // Block 1's process cuts the file in the middle of block 1;
        // fsprof's read of its header faults there, and block 1's header
        // page is replaced.
        let cut = a.block(1).1 as u64;
        file.set_len(cut).unwrap();
        assert_eq!(a.header_u32(1, offset_of!(ProcHeader, used)), 0);
        file.set_len(long).unwrap();
        a.give_back(0, None);
        a.give_back(1, None);
        assert!(a.free.contains(&0), "block 0 was read whole");
        assert!(!a.free.contains(&1), "block 1 offered again: {:?}", a.free);
        let block1 = a.block(1).1 as u64;
        file.write_all_at(&9u32.to_ne_bytes(), block1).unwrap();
        assert_eq!(a.header_u32(1, 0), 0, "the page is detached from the file");
    }

    /// Processes that started without a block (the offers ran out, they
    /// made counter files) count towards the offers: the next refill
    /// offers twice as many as started, not twice the few that were taken.
    #[test]
    fn the_offers_follow_the_processes_that_started() {
        let file = active_control();
        let mut a = Arena::new(&file, 512).unwrap();
        a.refill(0);
        assert_eq!(a.offered.len(), AT_START);
        // Forty processes started: the four on offer were taken, the
        // others made files.
        let head = offset_of!(ControlHeader, ring_head) as u64;
        file.write_all_at(&(AT_START as u64).to_ne_bytes(), head)
            .unwrap();
        let seq = offset_of!(ControlHeader, next_seq) as u64;
        file.write_all_at(&40u64.to_ne_bytes(), seq).unwrap();
        // A top-up a whole WAKE_GAP after the last: twice what started.
        a.refill(WAKE_GAP_NS);
        assert_eq!(a.offered.len(), 80);
        // A count that goes back (written by a process) moves nothing.
        file.write_all_at(&3u64.to_ne_bytes(), seq).unwrap();
        a.refill(2 * WAKE_GAP_NS);
        assert_eq!(a.offered.len(), 80);
    }

    /// The low water is a quarter of the offers, and the offers are topped
    /// up to last twice WAKE_GAP at the rate they were taken: a top-up a
    /// tenth of it after the last, with twelve offers taken, offers 240,
    /// low water 60 (at a whole WAKE_GAP, 2 x 12 = 24 would have been the
    /// target, and the bell would ring every 18 takes). Without the bell
    /// (`fsprof trace`) neither: no low water, and twice what was taken.
    #[test]
    fn the_low_water_is_a_quarter_of_the_offers_made_for_the_rate_seen() {
        let low = offset_of!(ControlHeader, wake_at);
        let head = offset_of!(ControlHeader, ring_head) as u64;
        for bell in [true, false] {
            let file = active_control();
            let mut a = Arena::new(&file, 512).unwrap();
            a.set_bell(bell);
            a.refill(WAKE_GAP_NS);
            assert_eq!(a.offered.len(), AT_START);
            let at = if bell { AT_START as u32 / 4 } else { 0 };
            assert_eq!(a.map.u32_at(low), at);
            // Twelve taken (the four offered, and the ring read as if
            // there were more: only what was offered counts).
            file.write_all_at(&(AT_START as u64).to_ne_bytes(), head)
                .unwrap();
            let seq = offset_of!(ControlHeader, next_seq) as u64;
            file.write_all_at(&12u64.to_ne_bytes(), seq).unwrap();
            a.refill(WAKE_GAP_NS + WAKE_GAP_NS / 10);
            let (offers, at) = if bell { (240, 60) } else { (24, 0) };
            assert_eq!((a.offered.len(), a.map.u32_at(low)), (offers, at));
        }
    }

    /// Offers taken past the low water while fsprof topped them up would
    /// ring no bell (no take leaves exactly `wake_at` offers): fsprof rings
    /// it itself. Not when the offers fell short of the target (the arena
    /// is full): a bell rung at every upkeep would make one every
    /// BELL_GAP.
    #[test]
    fn offers_taken_past_the_low_water_ring_the_bell() {
        use std::sync::atomic::Ordering;
        let head = offset_of!(ControlHeader, ring_head) as u64;
        for (blocks, rings) in [(512, true), (AT_START as u32, false)] {
            let file = active_control();
            let mut a = Arena::new(&file, blocks).unwrap();
            a.refill(WAKE_GAP_NS);
            let rung = a.bell().load(Ordering::Relaxed);
            // The four offers taken, and seven of the next top-up's as
            // soon as it publishes them (before it sets the low water):
            // one of its eight left, its low water (two) already passed.
            let tail = a.tail;
            file.write_all_at(&(tail + 7).to_ne_bytes(), head).unwrap();
            a.top_up(2 * WAKE_GAP_NS, true);
            let now = a.bell().load(Ordering::Relaxed);
            assert_eq!(
                now != rung,
                rings,
                "{blocks} blocks, {} offered",
                a.offered.len()
            );
        }
    }
}
