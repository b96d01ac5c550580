//! Per-request timing without locks on the request path.
//!
//! Every worker thread owns one [`ThreadStats`]: counters per op (entered,
//! returned, errors, total, min, max) and a dense histogram in the profile's
//! exact buckets. Only that thread writes them, so an update is a plain
//! load and store of relaxed atomics — no read-modify-write, no lock, no
//! cache line shared with another writer. The thread finds its counters
//! through a thread-local pointer set up at its first request (the only
//! time it touches the shared registry).
//!
//! A reader (a snapshot for `--interval`, the control file, the metrics
//! endpoint) must not see a returned call whose histogram bucket is not yet
//! counted, or `fsprof check` would fail on a live profile. Each thread's
//! updates are therefore bracketed by a sequence counter (a seqlock): odd
//! while the thread writes, and the reader retries until it read a stable,
//! even value on both sides. The writer never waits for the reader.
//! `entered` is bumped before the sequence opens and read after it closes,
//! so a snapshot never shows more returned than entered calls.

use std::cell::Cell;
use std::sync::atomic::{fence, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};

use fsprof_core::histogram::{Histogram, OpStats};
use fsprof_core::profile::{Clock, ClockSource, Layer, Overhead};
use fsprof_core::{BucketLayout, Resolution};
use fsprof_sys::clock::{mono_ns, rdtsc, tsc_is_invariant, TscRate};

use crate::opcodes::{op, Op};

/// The layer name of the daemon's view. The kernel's own FUSE tracepoint
/// layer keeps `fuse`; this one is the file system's side of the requests.
pub const LAYER: &str = fsprof_core::layer::FUSEFS;

/// Counter fields per op, before the histogram slots.
const PRE: usize = 0;
const POST: usize = 1;
const ERRORS: usize = 2;
const TOTAL: usize = 3;
const MIN: usize = 4;
const MAX: usize = 5;
const ZERO: usize = 6;
const FIELDS: usize = 7;

/// How the daemon reads time: the TSC where the CPU guarantees a constant
/// rate (a third of the cost of a vDSO clock_gettime), else
/// CLOCK_MONOTONIC.
#[derive(Clone, Copy, Debug)]
pub struct Ticks {
    tsc_hz: Option<f64>,
    ns_per_tick: f64,
}

impl Ticks {
    pub fn choose() -> Ticks {
        if tsc_is_invariant() {
            let hz = TscRate::calibrate(None).hz;
            if hz > 0.0 {
                return Ticks {
                    tsc_hz: Some(hz),
                    ns_per_tick: 1e9 / hz,
                };
            }
        }
        Ticks::monotonic()
    }

    pub fn monotonic() -> Ticks {
        Ticks {
            tsc_hz: None,
            ns_per_tick: 1.0,
        }
    }

    #[inline]
    pub fn now(&self) -> u64 {
        match self.tsc_hz {
            Some(_) => rdtsc(),
            None => mono_ns(),
        }
    }

    #[inline]
    fn to_ns(self, ticks: u64) -> u64 {
        match self.tsc_hz {
            Some(_) => (ticks as f64 * self.ns_per_tick) as u64,
            None => ticks,
        }
    }

    pub fn clock(&self) -> Clock {
        match self.tsc_hz {
            Some(hz) => Clock {
                source: ClockSource::Tsc,
                tsc_hz: Some(hz),
            },
            None => Clock {
                source: ClockSource::Monotonic,
                tsc_hz: None,
            },
        }
    }
}

/// One worker thread's counters.
pub struct ThreadStats {
    seq: AtomicU64,
    /// `Op::COUNT` rows of `FIELDS + slots` cells.
    cells: Box<[AtomicU64]>,
    row: usize,
}

impl ThreadStats {
    fn new(slots: usize) -> ThreadStats {
        let row = FIELDS + slots;
        let cells: Box<[AtomicU64]> = (0..row * Op::COUNT)
            .map(|k| AtomicU64::new(if k % row == MIN { u64::MAX } else { 0 }))
            .collect();
        ThreadStats {
            seq: AtomicU64::new(0),
            cells,
            row,
        }
    }

    #[inline]
    fn cell(&self, op: Op, field: usize) -> &AtomicU64 {
        &self.cells[op.index() * self.row + field]
    }

    /// Single writer: a load and a store, not an atomic add.
    #[inline]
    fn bump(c: &AtomicU64, n: u64) {
        c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
    }

    #[inline]
    fn enter(&self, op: Op) {
        Self::bump(self.cell(op, PRE), 1);
    }

    #[inline]
    fn leave(&self, op: Op, ns: u64, slot: Option<usize>, failed: bool) {
        let s = self.seq.load(Relaxed);
        self.seq.store(s.wrapping_add(1), Relaxed);
        fence(Release);
        Self::bump(self.cell(op, POST), 1);
        if failed {
            Self::bump(self.cell(op, ERRORS), 1);
        }
        Self::bump(self.cell(op, TOTAL), ns);
        let min = self.cell(op, MIN);
        if ns < min.load(Relaxed) {
            min.store(ns, Relaxed);
        }
        let max = self.cell(op, MAX);
        if ns > max.load(Relaxed) {
            max.store(ns, Relaxed);
        }
        match slot {
            Some(j) => Self::bump(self.cell(op, FIELDS + j), 1),
            None => Self::bump(self.cell(op, ZERO), 1),
        }
        self.seq.store(s.wrapping_add(2), Release);
    }

    /// A consistent copy of the counters (see the module doc).
    fn read(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.cells.len()];
        loop {
            let s1 = self.seq.load(Acquire);
            if s1 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            for (o, c) in out.iter_mut().zip(self.cells.iter()) {
                *o = c.load(Relaxed);
            }
            fence(Acquire);
            if self.seq.load(Relaxed) == s1 {
                break;
            }
        }
        // Entered calls last: never fewer than the returned ones read above.
        for op in Op::all() {
            let k = op.index() * self.row + PRE;
            out[k] = self.cells[k].load(Acquire);
        }
        out
    }
}

/// Hands out per-thread counters and adds them up.
struct Registry {
    threads: Mutex<Vec<Arc<ThreadStats>>>,
    /// What `reset` subtracted: the counts of the live view at the reset.
    baseline: Mutex<Option<Layer>>,
    /// Requests counted but then found to be the control file's (see
    /// [`Recorder::exclude`]); subtracted from every view.
    excluded: Mutex<Layer>,
    /// Views begun and ended ([`Recorder::layer`]): a call may only be
    /// excluded if no view could have counted it (see [`Recorder::exclude`]).
    views_begun: AtomicU64,
    views_ended: AtomicU64,
}

/// Identifies a recorder, so that a thread-local pointer set by one
/// recorder is never used with another.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// (recorder id, this thread's counters of that recorder).
    static LOCAL: Cell<(u64, *const ThreadStats)> = const { Cell::new((0, std::ptr::null())) };
}

/// Times requests into per-thread counters; cheap to clone (one per
/// worker thread shares the same registry).
#[derive(Clone)]
pub struct Recorder {
    id: u64,
    registry: Arc<Registry>,
    layout: Arc<BucketLayout>,
    ticks: Ticks,
}

impl Recorder {
    pub fn new(resolution: Resolution, ticks: Ticks) -> Recorder {
        Recorder {
            id: NEXT_ID.fetch_add(1, Relaxed),
            registry: Arc::new(Registry {
                threads: Mutex::new(Vec::new()),
                baseline: Mutex::new(None),
                excluded: Mutex::new(Layer::new(LAYER)),
                views_begun: AtomicU64::new(0),
                views_ended: AtomicU64::new(0),
            }),
            layout: Arc::new(BucketLayout::new(resolution)),
            ticks,
        }
    }

    pub fn resolution(&self) -> Resolution {
        self.layout.resolution()
    }

    pub fn ticks(&self) -> Ticks {
        self.ticks
    }

    /// This thread's counters, registered at its first request.
    #[inline]
    fn local(&self) -> &ThreadStats {
        let (id, ptr) = LOCAL.with(Cell::get);
        if id == self.id && !ptr.is_null() {
            // SAFETY: the pointer was taken from an Arc that the registry of
            // this recorder (id matches, ids are never reused) keeps until
            // the recorder is dropped, and `&self` proves it is not.
            return unsafe { &*ptr };
        }
        self.register()
    }

    #[cold]
    fn register(&self) -> &ThreadStats {
        let ts = Arc::new(ThreadStats::new(self.layout.resolution().slots()));
        let ptr = Arc::as_ptr(&ts);
        self.registry
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ts);
        LOCAL.with(|c| c.set((self.id, ptr)));
        // SAFETY: as in `local`: the registry now owns the Arc.
        unsafe { &*ptr }
    }

    /// Runs `f` as one `op` request: counted as entered, timed, and counted
    /// as returned (an error when `f` fails).
    #[inline]
    #[cfg(not(feature = "untimed"))]
    pub fn timed<T, E>(&self, op: Op, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let ts = self.local();
        ts.enter(op);
        let t0 = self.ticks.now();
        let r = f();
        let t1 = self.ticks.now();
        self.file(ts, op, t1.wrapping_sub(t0), r.is_err());
        r
    }

    /// Like [`Recorder::timed`], also returning the latency filed (0 in the
    /// untimed build), for a request that may later be excluded.
    #[inline]
    pub fn timed_ns<T, E>(&self, op: Op, f: impl FnOnce() -> Result<T, E>) -> (Result<T, E>, u64) {
        if cfg!(feature = "untimed") {
            return (f(), 0);
        }
        let ts = self.local();
        ts.enter(op);
        let t0 = self.ticks.now();
        let r = f();
        let ticks = self.ticks.now().wrapping_sub(t0);
        self.file(ts, op, ticks, r.is_err());
        (r, self.ticks.to_ns(ticks))
    }

    /// Taken before timing a call that may be excluded later: `None` while
    /// a view is being read (it might count the call).
    pub fn quiet_epoch(&self) -> Option<u64> {
        let begun = self.registry.views_begun.load(SeqCst);
        (self.registry.views_ended.load(SeqCst) == begun).then_some(begun)
    }

    /// Takes one successful `op` call of `ns` back out of the counts: a
    /// request that turned out to serve the control file (the kernel's
    /// permission check of the mount root before it opens `.fsprof`).
    /// Only if no view began since `epoch` (taken before the call was
    /// counted): a view that counted the call would be followed by one
    /// that does not, and the per-interval counts would no longer add up
    /// to the totals. Returns whether the call was excluded.
    pub fn exclude(&self, op: Op, ns: u64, epoch: u64) -> bool {
        if cfg!(feature = "untimed") {
            return false;
        }
        let mut one = OpStats::new(op.name());
        one.pre = 1;
        one.post = 1;
        one.total_ns = ns;
        one.histogram.add_to(self.layout.index(ns), 1);
        let mut ex = self
            .registry
            .excluded
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Under the lock every view takes before subtracting: a view that
        // begins after this check subtracts the call as well.
        if self.registry.views_begun.load(SeqCst) != epoch {
            return false;
        }
        ex.op_mut(op.name()).merge(&one);
        true
    }

    /// The untimed build: the request runs, nothing is counted.
    #[inline]
    #[cfg(feature = "untimed")]
    pub fn timed<T, E>(&self, _op: Op, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        f()
    }

    /// Counts a request that has no reply and so cannot fail (`forget`).
    #[inline]
    pub fn timed_quiet(&self, op: Op, f: impl FnOnce()) {
        let _ = self.timed(op, || -> Result<(), ()> {
            f();
            Ok(())
        });
    }

    #[inline]
    fn file(&self, ts: &ThreadStats, op: Op, ticks: u64, failed: bool) {
        let ns = self.ticks.to_ns(ticks);
        let slot = self
            .layout
            .index(ns)
            .map(|i| (i - fsprof_core::buckets::MIN_INDEX) as usize);
        ts.leave(op, ns, slot, failed);
    }

    /// Everything counted since the start (or the last reset), as the
    /// `fusefs` layer.
    pub fn layer(&self) -> Layer {
        self.registry.views_begun.fetch_add(1, SeqCst);
        let view = self.view();
        self.registry.views_ended.fetch_add(1, SeqCst);
        view
    }

    fn view(&self) -> Layer {
        let total = self.raw_layer();
        let since = {
            let base = self
                .registry
                .baseline
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match base.as_ref() {
                None => total,
                Some(b) => minus(&total, b),
            }
        };
        let ex = self
            .registry
            .excluded
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if ex.ops.is_empty() {
            return since;
        }
        minus(&since, &ex)
    }

    /// The counts since the start, ignoring resets.
    fn raw_layer(&self) -> Layer {
        let threads: Vec<Arc<ThreadStats>> = self
            .registry
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let slots = self.layout.resolution().slots();
        let mut layer = Layer::new(LAYER);
        for ts in threads {
            let cells = ts.read();
            for op in Op::all() {
                let row = &cells[op.index() * ts.row..(op.index() + 1) * ts.row];
                if row[PRE] == 0 {
                    continue;
                }
                let mut s = OpStats::new(op.name());
                s.pre = row[PRE];
                s.post = row[POST];
                s.errors = row[ERRORS];
                s.total_ns = row[TOTAL];
                s.min_ns = (row[MIN] != u64::MAX).then_some(row[MIN]);
                s.max_ns = (row[POST] > 0).then_some(row[MAX]);
                s.histogram = Histogram::from_slots(row[ZERO], &row[FIELDS..FIELDS + slots]);
                layer.op_mut(op.name()).merge(&s);
            }
        }
        layer.normalize();
        layer
    }

    /// Zeroes the live counts: later views count from now.
    pub fn reset(&self) {
        let now = self.raw_layer();
        let reg = &self.registry;
        *reg.baseline.lock().unwrap_or_else(|e| e.into_inner()) = Some(now);
        *reg.excluded.lock().unwrap_or_else(|e| e.into_inner()) = Layer::new(LAYER);
    }

    /// What timing one request costs, measured with this recorder's clock
    /// on a private counter set (FSprof §4.2): the time the measurement
    /// adds per request, and the smallest latency it can record.
    pub fn measure_overhead(&self) -> Overhead {
        const N: u64 = 20_000;
        let private = Recorder::new(self.resolution(), self.ticks);
        // Warm the thread-local and the cells.
        for _ in 0..100 {
            let _ = private.timed(op!("getattr"), || Ok::<(), ()>(()));
        }
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t0 = mono_ns();
            for _ in 0..N {
                let _ = private.timed(op!("getattr"), || Ok::<(), ()>(()));
            }
            best = best.min((mono_ns() - t0) as f64 / N as f64);
        }
        let mut min_pair = u64::MAX;
        for _ in 0..1000 {
            let a = self.ticks.now();
            let b = self.ticks.now();
            min_pair = min_pair.min(self.ticks.to_ns(b.wrapping_sub(a)));
        }
        Overhead {
            per_call_ns: best,
            min_recordable_ns: min_pair as f64,
            estimated_total_ns: 0,
            sampled: None,
        }
    }
}

/// `now - base`, op by op (min and max cannot be differenced: dropped).
fn minus(now: &Layer, base: &Layer) -> Layer {
    let mut out = Layer::new(&now.name);
    for op in &now.ops {
        let d = match base.op(&op.name) {
            Some(b) => op.delta_since(b),
            None => op.clone(),
        };
        out.ops.push(d);
    }
    out.normalize();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_core::check::check_profile;
    use fsprof_core::Profile;

    fn rec() -> Recorder {
        Recorder::new(Resolution::new(4).unwrap(), Ticks::monotonic())
    }

    #[test]
    fn calls_errors_and_buckets_are_counted_per_op() {
        let r = rec();
        for k in 0..10 {
            let _ = r.timed(op!("read"), || if k < 3 { Err(()) } else { Ok(()) });
        }
        r.timed_quiet(op!("forget"), || {});
        let l = r.layer();
        let read = l.op("read").unwrap();
        assert_eq!((read.pre, read.post, read.errors), (10, 10, 3));
        assert_eq!(read.histogram.total(), 10);
        assert_eq!(l.op("forget").unwrap().post, 1);
        assert!(l.op("write").is_none());
    }

    #[test]
    fn a_known_latency_lands_in_its_bucket() {
        let r = rec();
        let _ = r.timed(op!("getattr"), || {
            std::thread::sleep(std::time::Duration::from_millis(3));
            Ok::<(), ()>(())
        });
        let op = r.layer().op("getattr").unwrap().clone();
        let ns = op.min_ns.unwrap();
        assert!((3_000_000..50_000_000).contains(&ns), "{ns}");
        let want = BucketLayout::new(Resolution::new(4).unwrap()).index(ns);
        assert_eq!(op.histogram.buckets().next().map(|b| b.0), want);
        assert_eq!(op.total_ns, ns);
    }

    #[test]
    fn threads_add_up_and_live_snapshots_stay_consistent() {
        let r = rec();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The reader starts with the workers: on an idle machine the
        // workers could otherwise finish before it was first scheduled (an
        // official CI run saw no snapshot at all).
        let start = Arc::new(std::sync::Barrier::new(5));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (r, start) = (r.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for k in 0..50_000u32 {
                        let _ =
                            r.timed(op!("lookup"), || if k % 7 == 0 { Err(()) } else { Ok(()) });
                    }
                })
            })
            .collect();
        let reader = {
            let (r, stop, start) = (r.clone(), stop.clone(), start.clone());
            std::thread::spawn(move || {
                let mut seen = 0;
                start.wait();
                loop {
                    let mut p = Profile::new(Default::default());
                    p.layers.push(r.layer());
                    let c = check_profile(&p);
                    assert!(c.ok(), "{:?}", c);
                    seen += 1;
                    if stop.load(Relaxed) {
                        break seen;
                    }
                }
            })
        };
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Relaxed);
        assert!(reader.join().unwrap() > 0);
        let l = r.layer();
        let op = l.op("lookup").unwrap();
        assert_eq!((op.pre, op.post), (200_000, 200_000));
        assert_eq!(op.errors, 4 * 7143);
    }

    #[test]
    fn reset_zeroes_the_live_view() {
        let r = rec();
        for _ in 0..5 {
            let _ = r.timed(op!("write"), || Ok::<(), ()>(()));
        }
        r.reset();
        assert!(r.layer().ops.is_empty());
        let _ = r.timed(op!("write"), || Ok::<(), ()>(()));
        assert_eq!(r.layer().op("write").unwrap().post, 1);
    }

    #[test]
    fn an_excluded_call_leaves_the_counts_exactly() {
        let r = rec();
        let epoch = r.quiet_epoch().unwrap();
        let (_, ns) = r.timed_ns(op!("getattr"), || Ok::<(), ()>(()));
        let _ = r.timed(op!("getattr"), || Ok::<(), ()>(()));
        assert!(r.exclude(op!("getattr"), ns, epoch));
        let op = r.layer().op("getattr").unwrap().clone();
        assert_eq!((op.pre, op.post), (1, 1));
        assert_eq!(op.histogram.total(), 1);
        let epoch = r.quiet_epoch().unwrap();
        assert!(r.exclude(op!("getattr"), op.total_ns, epoch));
        assert!(r.layer().ops.is_empty());
    }

    #[test]
    fn a_call_a_view_has_counted_stays_counted() {
        let r = rec();
        let epoch = r.quiet_epoch().unwrap();
        let (_, ns) = r.timed_ns(op!("getattr"), || Ok::<(), ()>(()));
        // An interval's view between the call and its exclusion.
        let seen = r.layer().op("getattr").unwrap().post;
        assert!(!r.exclude(op!("getattr"), ns, epoch));
        assert_eq!(r.layer().op("getattr").unwrap().post, seen);
    }

    #[test]
    fn overhead_is_measured_not_assumed() {
        let o = rec().measure_overhead();
        assert!(o.per_call_ns > 0.0 && o.per_call_ns < 10_000.0, "{o:?}");
    }
}
