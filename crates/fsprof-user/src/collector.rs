//! Gathers the per-process counters during and after a run: the arena's
//! blocks (arena.rs) and the counter files of processes that found none on
//! offer.
//!
//! Counters a process can no longer write to — the process is gone, or the
//! same pid has exec'd a newer image that has counters of its own — are
//! read once and kept in memory; the block is zeroed and offered again, a
//! file deleted. A build that runs tens of thousands of processes would
//! otherwise hold tens of thousands of them (~100 KB of tmpfs each) until
//! the end.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::mem::offset_of;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use fsprof_core::profile::Layer;
use fsprof_shim::abi::ProcHeader;
use fsprof_sys::clock::mono_ns;
use fsprof_sys::process::pid_exists;

use crate::arena::ABANDONED_NS;
use crate::layers::merged;
use crate::reader::{read_block, read_process, ProcessCounters};
use crate::rundir::RunDir;
use crate::written::Written;

/// How often `fsprof trace` tops the arena's offers up and folds ended
/// processes (a fork storm takes ~2,000 blocks a second, twice what
/// started in the last period is kept on offer). Until the first top-up
/// only the few blocks reserved at the start are on offer: at 20 ms, the
/// first ~40 processes of `find | xargs -n4 wc` made counter files (at 10
/// ms, 0 or 1 of them in six runs, none in a storm of 300 `true &`). A
/// wake-up costs fsprof ~25 µs on this VM (the sleep's timer and two
/// context switches: `fsprof run -- sleep 2` used 11-13 ms of CPU, `--
/// true` 1.3): at 5 ms they were a quarter of fsprof's main thread over a
/// loop of 1,000 `cat`s (docs/benchmarks/history.md, own15). `fsprof run`
/// sleeps until the offers run low instead ([`Collector::bell`]).
pub const REFILL_NS: u64 = 10_000_000;
/// `fsprof run`'s upkeep when no process rang the bell: this long after
/// an upkeep that found processes had started or ended, so that the
/// blocks of the last ones of a burst are given back soon after it (the
/// arena holds about what runs: a block reserved anew costs the page
/// allocation and zeroing a block given back does not) ...
const AFTER_ACTIVITY_NS: u64 = 100_000_000;
/// ... and this long after one that found nothing to do: `fsprof run --
/// sleep 2` wakes a few times, not 200. It also bounds how long a process
/// that keeps the bell from ringing (it writes the low water or the word)
/// leaves the offers empty: its run's processes make counter files
/// meanwhile, and are counted as exactly.
const IDLE_NS: u64 = 1_000_000_000;
/// How often ended processes' counter files are (a directory read, then
/// an open a file).
const HARVEST_NS: u64 = 500_000_000;

pub struct Collector {
    /// Owned, so the directory (and every file in it) goes with the run.
    dir: RunDir,
    nbuckets: u32,
    /// Processes whose counters are final, in no particular order.
    done: Vec<ProcessCounters>,
    next_harvest_ns: u64,
    /// The last upkeep found processes that had started (the offers were
    /// taken) or ended (their blocks folded).
    active: bool,
    upkept: bool,
    /// `FSPROF_TEST_UPKEEP_MS`: the upkeep without the bell, for tests
    /// (very long: only the bell keeps the offers up).
    upkeep_ns: Option<u64>,
    /// What of the block being folded its process may have written.
    written: Box<Written>,
    /// The newest pool of each pid, kept (emptied) from one fold to the
    /// next: made anew, it was an allocation and a rehash at every wake-up.
    newest: HashMap<i32, u64>,
    /// `fsprof trace` reads process images' first chunks in their blocks:
    /// a block is taken back only once that is done.
    hold_windows: bool,
    /// The command fsprof started, while it has not been reaped
    /// ([`Collector::command_unreaped`]).
    command: Option<i32>,
    pub notes: Vec<String>,
}

/// A pool whose header is complete: where it is and whose.
struct Pool {
    seq: u64,
    pid: i32,
    at: Place,
}

enum Place {
    /// A taken arena block; `file`: its later chunks' file exists.
    Block {
        block: u32,
        file: bool,
    },
    File(PathBuf),
}

impl Collector {
    pub fn new(dir: RunDir, nbuckets: u32) -> Self {
        Collector {
            dir,
            nbuckets,
            done: Vec::new(),
            next_harvest_ns: 0,
            active: false,
            upkept: false,
            upkeep_ns: fsprof_sys::test_knob("FSPROF_TEST_UPKEEP_MS")
                .map(|ms| u64::from(ms) * 1_000_000),
            written: Box::default(),
            newest: HashMap::new(),
            hold_windows: false,
            command: None,
            notes: Vec::new(),
        }
    }

    /// `pid`, fsprof's own child, is not reaped while the capture runs:
    /// its pid exists (a zombie, at worst), and the folds during the run
    /// (every [`BLOCKS_NS`]) do not ask the kernel (a `kill(pid, 0)` at
    /// every wake-up, on top of the capture's own `wait4` for the same
    /// process). At the end ([`Collector::finish`]) a pool still taken
    /// for live is read where it is, as a fold would read it.
    pub fn command_unreaped(&mut self, pid: i32) {
        self.command = Some(pid);
    }

    /// Whether `pid` may still write its counters.
    fn exists(&self, pid: i32) -> bool {
        self.command == Some(pid) || pid_exists(pid)
    }

    pub fn dir(&self) -> &RunDir {
        &self.dir
    }

    pub fn dir_mut(&mut self) -> &mut RunDir {
        &mut self.dir
    }

    /// Blocks whose trace window is still being read are not taken back
    /// ([`crate::arena::Arena::window_busy`]). `fsprof trace` keeps its
    /// upkeep every [`REFILL_NS`]: nobody listens to the bell.
    pub fn hold_trace_windows(&mut self) {
        self.hold_windows = true;
        if let Some(a) = self.dir.arena_mut() {
            a.set_bell(false);
        }
    }

    /// The word processes ring when the offers run low (None: no arena).
    pub fn bell(&self) -> Option<&std::sync::atomic::AtomicU32> {
        self.dir.arena().map(crate::arena::Arena::bell)
    }

    /// The longest the next upkeep may wait (the bell may ask sooner).
    pub fn upkeep_ns(&self) -> u64 {
        self.upkeep_ns.unwrap_or(IDLE_NS)
    }

    /// When the next upkeep is wanted if the bell does not ring: the first
    /// [`REFILL_NS`] after the start, which gives the blocks offered at
    /// the start their pages (the few processes before make the pages
    /// they write themselves: shim/pool.c, make_below) as the 10 ms tick
    /// did, whether or not three of them ring the bell first.
    pub fn next_upkeep_ns(&self) -> u64 {
        match self.upkeep_ns {
            Some(ns) => ns,
            None if !self.upkept => REFILL_NS,
            None if self.active => AFTER_ACTIVITY_NS,
            None => IDLE_NS,
        }
    }

    /// Whether `p`'s block must wait for `fsprof trace`.
    fn held(&self, p: &Pool) -> bool {
        match (&p.at, self.dir.arena()) {
            (Place::Block { block, .. }, Some(a)) => self.hold_windows && a.window_busy(*block),
            _ => false,
        }
    }

    /// Folds the counters of processes that ended into memory, gives
    /// their blocks back and tops up the arena's offers; every
    /// [`HARVEST_NS`], the counter files' too.
    pub fn upkeep(&mut self) {
        let now = mono_ns();
        let files = now >= self.next_harvest_ns;
        if files {
            self.next_harvest_ns = now + HARVEST_NS;
        }
        self.active = self.harvest_from(files);
        self.upkept = true;
    }

    /// Moves the counters of processes that cannot write any more into
    /// memory, gives their blocks back and deletes their files.
    pub fn harvest(&mut self) {
        self.harvest_from(true);
    }

    /// [`Collector::harvest`], of the arena's blocks only unless `files`;
    /// whether a process had ended or taken an offer since the last.
    fn harvest_from(&mut self, files: bool) -> bool {
        let now = mono_ns();
        let pools = self.pools(now, files);
        let n = pools.len();
        let folded = n - self.fold_ended(pools).len();
        let Some(a) = self.dir.arena_mut() else {
            return folded > 0;
        };
        let taken = a.taken().len();
        a.refill(now);
        folded > 0 || a.taken().len() != taken
    }

    /// Folds the pools whose process cannot write any more into memory
    /// (giving their blocks back, deleting their files); returns the
    /// others.
    fn fold_ended(&mut self, pools: Vec<Pool>) -> Vec<Pool> {
        let mut live = Vec::new();
        let mut newest = std::mem::take(&mut self.newest);
        newest.clear();
        for p in &pools {
            let e = newest.entry(p.pid).or_insert(p.seq);
            *e = (*e).max(p.seq);
        }
        for p in pools {
            // A pid runs one image at a time: an older pool of a pid that
            // has a newer one belongs to an image that exec replaced. A
            // zombie counts as alive (harmless: it is harvested once
            // reaped); a pid reused by an unrelated process only delays
            // the harvest.
            if (newest[&p.pid] <= p.seq && self.exists(p.pid)) || self.held(&p) {
                live.push(p);
                continue;
            }
            match p.at {
                Place::File(path) => self.fold_file(&path),
                Place::Block { block, file } => {
                    let later = file.then(|| self.later_file(p.seq));
                    let known = self.fold_block(block, later.as_deref());
                    if let Some(a) = self.dir.arena_mut() {
                        a.give_back(block, known.then_some(&*self.written));
                    }
                }
            }
        }
        self.newest = newest;
        live
    }

    /// Every complete pool: the taken arena blocks' (blocks abandoned by
    /// a process that died taking one are given back here) and, if
    /// `files`, the counter files'.
    fn pools(&mut self, now: u64, files: bool) -> Vec<Pool> {
        let mut pools = Vec::new();
        let mut later = Vec::new();
        let command = self.command;
        if let Some(a) = self.dir.arena_mut() {
            let mut abandoned = Vec::new();
            for t in a.taken() {
                if !a.header_made(t.block) {
                    // Its process could not make the page (and made a
                    // counter file, or is lost), or is about to.
                    if now.saturating_sub(t.seen_ns) > ABANDONED_NS {
                        abandoned.push(t.block);
                    }
                    continue;
                }
                let word = |f| a.header_u32(t.block, f);
                let pid = word(offset_of!(ProcHeader, pid)) as i32;
                if word(offset_of!(ProcHeader, ready)) != 1 {
                    let dead = pid <= 0 || !(command == Some(pid) || pid_exists(pid));
                    if dead && now.saturating_sub(t.seen_ns) > ABANDONED_NS {
                        abandoned.push(t.block);
                    }
                    continue;
                }
                let seq = a.header_u64(t.block, offset_of!(ProcHeader, seq));
                let file = word(offset_of!(ProcHeader, file)) == 1;
                if file {
                    later.push(seq);
                }
                pools.push(Pool {
                    seq,
                    pid,
                    at: Place::Block {
                        block: t.block,
                        file,
                    },
                });
            }
            for block in abandoned {
                a.give_back(block, None);
            }
        }
        let files = if files && self.dir.may_hold_files() {
            self.dir.process_files().unwrap_or_default()
        } else {
            Vec::new()
        };
        for (seq, path) in files {
            if later.contains(&seq) {
                continue; // an arena block's later chunks
            }
            if let Ok(Some(pid)) = peek_pid(&path) {
                pools.push(Pool {
                    seq,
                    pid,
                    at: Place::File(path),
                });
            }
        }
        pools
    }

    fn later_file(&self, seq: u64) -> PathBuf {
        self.dir.path().join(format!("p{seq}"))
    }

    fn fold_file(&mut self, path: &Path) {
        match read_process(path, self.nbuckets) {
            Ok(Some(p)) => {
                self.done.push(p);
                let _ = std::fs::remove_file(path);
            }
            Ok(None) => {}
            Err(e) => {
                self.notes
                    .push(format!("skipped a process's counters: {e}"));
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// Folds the block's counters into memory; whether the reading found
    /// all its process may have written (`self.written`).
    fn fold_block(&mut self, block: u32, later: Option<&Path>) -> bool {
        let Some(a) = self.dir.arena() else {
            return false;
        };
        let (map, base) = a.block(block);
        self.written.clear();
        let read = read_block(map, base, later, self.nbuckets, Some(&mut self.written));
        if let Some(f) = later {
            let _ = std::fs::remove_file(f);
        }
        match read {
            Ok(Some(p)) => {
                self.done.push(p);
                true
            }
            Ok(None) => false,
            Err(e) => {
                self.notes
                    .push(format!("skipped a process's counters: {e}"));
                false
            }
        }
    }

    /// The layers of every process seen so far: the harvested ones and
    /// the current counters of the others.
    pub fn snapshot(&mut self) -> Vec<Layer> {
        self.harvest();
        let pools = self.pools(mono_ns(), true);
        let live = self.read_live(pools, Vec::new());
        merged(self.done.iter().chain(&live))
    }

    /// [`Collector::snapshot`] at the end of the run, which hands the
    /// harvested processes over rather than copy them, and reads the run
    /// directory once: what is not folded is read where it is.
    pub fn finish(&mut self) -> Vec<ProcessCounters> {
        let now = mono_ns();
        // Notes the offers taken since the last refill: their blocks are
        // among the pools (the run has ended: nothing is reserved).
        if let Some(a) = self.dir.arena_mut() {
            a.refill(now);
        }
        let pools = self.pools(now, true);
        let live = self.fold_ended(pools);
        let done = std::mem::take(&mut self.done);
        self.read_live(live, done)
    }

    /// `all` and the current counters of `pools`, in creation order.
    fn read_live(
        &mut self,
        pools: Vec<Pool>,
        mut all: Vec<ProcessCounters>,
    ) -> Vec<ProcessCounters> {
        for p in pools {
            let read = match &p.at {
                Place::File(path) => read_process(path, self.nbuckets),
                Place::Block { block, file } => {
                    let later = file.then(|| self.later_file(p.seq));
                    let Some(a) = self.dir.arena() else { continue };
                    let (map, base) = a.block(*block);
                    read_block(map, base, later.as_deref(), self.nbuckets, None)
                }
            };
            match read {
                Ok(Some(p)) => all.push(p),
                Ok(None) => {}
                Err(e) => self
                    .notes
                    .push(format!("skipped a process's counters: {e}")),
            }
        }
        all.sort_by_key(|p| p.seq);
        all
    }
}

/// The pid a counter file belongs to, once its header is complete.
fn peek_pid(path: &Path) -> io::Result<Option<i32>> {
    let mut head = [0u8; 128];
    let n = File::open(path)?.read_at(&mut head, 0)?;
    let ready = offset_of!(ProcHeader, ready);
    let pid = offset_of!(ProcHeader, pid);
    if n < ready + 4 || u32::from_ne_bytes(head[ready..ready + 4].try_into().unwrap()) != 1 {
        return Ok(None);
    }
    Ok(Some(i32::from_ne_bytes(
        head[pid..pid + 4].try_into().unwrap(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ClockParams;
    use fsprof_core::{BucketLayout, Resolution};
    use fsprof_shim::abi::{self, ControlHeader};

    /// The run's end reads the run directory for counter files only when
    /// the shim counted one it made (`ControlHeader::files`): for a run
    /// whose processes all took arena blocks, five system calls fewer at
    /// its end. A file nobody counted is not looked for; once counted, it
    /// is read (and, its header unreadable, removed with a note).
    #[test]
    fn counter_files_are_looked_for_only_when_the_shim_counted_one() {
        let layout = BucketLayout::new(Resolution::DEFAULT);
        let dir = RunDir::create(&ClockParams::monotonic(), &layout).unwrap();
        let file = dir.path().join("p9");
        let mut hdr = vec![0u8; abi::PROC_HDR_SIZE];
        hdr[offset_of!(ProcHeader, ready)..][..4].copy_from_slice(&1u32.to_ne_bytes());
        // No process has this pid (above pid_max): never read as live.
        hdr[offset_of!(ProcHeader, pid)..][..4].copy_from_slice(&i32::MAX.to_ne_bytes());
        std::fs::write(&file, &hdr).unwrap();
        let control = File::options()
            .write(true)
            .open(dir.path().join(abi::CTL_NAME))
            .unwrap();
        let mut c = Collector::new(dir, layout.thresholds().len() as u32);
        c.finish();
        assert!(file.exists() && c.notes.is_empty(), "{:?}", c.notes);
        let files = offset_of!(ControlHeader, files) as u64;
        control.write_all_at(&1u32.to_ne_bytes(), files).unwrap();
        c.finish();
        assert!(!file.exists(), "the counted file was not read");
        assert_eq!(c.notes.len(), 1, "{:?}", c.notes);
    }
}
