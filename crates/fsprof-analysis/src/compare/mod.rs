//! Two sides compared op by op, each side one profile or several runs of
//! the same thing, in OSprof §3.2's three phases and then a verdict:
//!
//! 1. **Negligible pairs are skipped.** An op is negligible when, in both
//!    sides, its share of its layer's total latency *and* its share of
//!    the layer's calls are below [`CompareOptions::negligible`] (default
//!    1%), or when it has fewer than [`CompareOptions::min_calls`] calls on
//!    both sides (one call is no distribution). Ops whose counts and
//!    histograms are equal are `identical`. An op on one side only is
//!    `added` or `removed` however few its calls: there is no distribution
//!    to compare, but its being there is the change, and one `sync` that
//!    holds most of a side's time must not be skipped while its time
//!    counts in the layer's total that every other op's share is taken of.
//! 2. **Peaks are compared.** The peaks of each side ([`crate::peaks`]) are
//!    compared: a peak of B over a bucket range where A had less than half
//!    its share of calls (within a power of two) is `new`, the reverse
//!    `gone`, and a peak whose biggest overlapping peak on the other side
//!    has its mode two or more powers of two away `moved`. A new or gone
//!    peak holding at least [`CompareOptions::peak_change_share`] of the
//!    op's latency, with the op's total latency up (down) by at least half
//!    of it, is *significant*: named first in the reason (a few calls that
//!    now wait for the disk are a change even when they barely move the
//!    distribution, and the verdict's time test finds them).
//! 3. **The difference is scored** with the chosen [`Method`] (EMD by
//!    default): how different the shapes are, for ranking and reading.
//! 4. **The verdict** ([`verdict`]): whether the change stands out from the
//!    noise two runs of the same thing show, and moves enough of the
//!    layer's latency to matter. That alone decides whether an op is
//!    interesting and so compare's exit status.
//!
//! Phases 1–3 look at each side's runs merged; the verdict at each run.
//! The layer is the "whole profile" for shares: different layers time the
//! same calls at different depths, so adding them up would count time
//! twice. Histograms at different resolutions are compared at the coarser
//! one.

use std::collections::HashMap;

use fsprof_core::{Histogram, Layer, OpStats, Profile, Resolution};
use serde::{Deserialize, Serialize};

use crate::distance;
use crate::labels::Calibration;
use crate::peaks::{find_peaks_with, Peak, PeakOptions};

mod finding;
mod method;
mod peak_change;
pub mod process_shift;
mod runs;
pub mod verdict;

pub use finding::{Difference, Finding, Moved};
pub use method::Method;
pub use peak_change::{PeakChange, SeenPeak};
pub use verdict::{judged_with, layer_can_decide, Check, Spread, TestKind, LONG_RUN_NS};

#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// How phase 3 scores the shapes (shown and ranked by, never deciding).
    pub method: Method,
    /// The chance that a comparison of two sides that differ only by noise
    /// finds a change (Holm over all of its tests). Default 0.05.
    pub alpha: f64,
    /// Share of the layer's latency a change must move to decide; smaller
    /// changes are listed but cannot make compare exit 1. Default 0.03: in
    /// identical runs of a read-heavy workload, ops holding 2–3% of the
    /// latency (`close`, `readdir`) took twice as long in one run of ten,
    /// and at 0.02 those alone made one single-run pair in eleven exit 1;
    /// an op holding the 5% issue 24 asks about, twice as slow, moves 5%.
    pub min_share: f64,
    /// The spread (standard deviation of one run), in powers of two,
    /// assumed between runs of the same thing where the runs do not measure
    /// it (one run per side), and the prior that a few runs' measured
    /// spread is moderated by. Default 0.18. Over 360 pairs of identical
    /// runs of three workloads on a shared 2-CPU machine, an op's shift
    /// once the profile shift is out spread by 0.04–0.25 in one run (the
    /// median op 0.12), with heavier tails; over 720 pairs, 0.18 was the
    /// smallest that kept the false alarms of single-run pairs under 5% on
    /// each workload (docs/benchmarks/analysis.md). At the former 0.3 a 2×
    /// slower op stood out at p ≈ 0.04, which Holm's levels did not let
    /// through.
    pub spread: f64,
    /// How many runs' worth of evidence the assumed spread carries
    /// against the measured one. Default 8.
    pub spread_df: f64,
    /// The spread (standard deviation of one run), in powers of two, of a
    /// whole layer's shift between runs of the same thing: load from other
    /// programs slows every op of a run alike, by more than ops differ
    /// from each other once it is out. A layer's shift is judged against
    /// it, and so is an op of a layer with too few ops to take the shift
    /// out (it is in the op's own change). Default 0.35.
    pub layer_spread: f64,
    /// Phase 1: share of the layer's latency and calls below which an op is
    /// negligible (in both profiles). Default 0.01.
    pub negligible: f64,
    /// Phase 1: ops with fewer calls than this on both sides (and some on
    /// each) are negligible. Default 10.
    pub min_calls: u64,
    /// Phase 2: smallest share of the op's latency a new/gone peak must
    /// hold (on its side) to count; the op's total latency must also have
    /// grown (shrunk) by at least half the peak's latency. Default 0.2.
    pub peak_change_share: f64,
    pub peaks: PeakOptions,
    /// Labels peaks in reasons ("≈ device read") when given.
    pub calibration: Option<Calibration>,
    /// Which changes make the comparison fail (exit 1). Default: slower
    /// only, as a performance gate.
    pub fail_on: FailOn,
}

/// Which found changes make `fsprof compare` exit 1. Every change found is
/// listed either way; this decides only the exit status.
///
/// The default is [`FailOn::Slower`]: the exit status is a performance
/// gate, and a gate fails on regressions only, as pytest-benchmark's
/// `--benchmark-compare-fail` ("if Min is 5% slower"), Bencher's upper
/// boundary on a latency measure and iai-callgrind's regression limits
/// do; a change that made the program faster is reported and passes. A
/// mode that makes some runs of an op faster (on the benchmarks' VM, where
/// layout randomization put `cat`'s buffer halved its `close` in one run
/// of twenty) then fails the gate only when the baseline fell into it.
/// The gate's tests are one-sided ([`verdict`]'s `gate_p`), so that
/// `alpha` stays the chance that identical sides fail it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailOn {
    /// An op whose calls got slower or that took more time, one that
    /// appeared, or a whole layer that got slower.
    #[default]
    Slower,
    /// Any change found, either way: "did anything change?".
    Any,
}

impl FailOn {
    /// Whether a change in direction `d` fails the comparison.
    pub fn counts(self, d: Direction) -> bool {
        self == FailOn::Any || d == Direction::Slower
    }

    /// The option's value, as the user gives it.
    pub fn name(self) -> &'static str {
        match self {
            FailOn::Slower => "slower",
            FailOn::Any => "any",
        }
    }
}

/// Which way a found change went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Calls slower, or more time in the op (more calls), or the op
    /// appeared.
    Slower,
    /// Calls faster or less time, or the op vanished.
    Faster,
}

impl Direction {
    /// Of a test's effect (B over A, in powers of two).
    pub fn of(effect: f64) -> Direction {
        if effect > 0.0 {
            Direction::Slower
        } else {
            Direction::Faster
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Direction::Slower => "slower",
            Direction::Faster => "faster",
        }
    }
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            method: Method::Emd,
            alpha: 0.05,
            min_share: 0.03,
            spread: 0.18,
            spread_df: 8.0,
            layer_spread: 0.35,
            negligible: 0.01,
            min_calls: 10,
            peak_change_share: 0.2,
            peaks: PeakOptions::default(),
            calibration: None,
            fail_on: FailOn::Slower,
        }
    }
}

/// What phase 1 decided about an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Scored in phase 3.
    Compared,
    /// Below the negligible threshold on both sides (still scored, never
    /// interesting).
    Negligible,
    /// Same calls, same histogram.
    Identical,
    /// Only in B (and not negligible there: interesting).
    Added,
    /// Only in A (and not negligible there: interesting).
    Removed,
}

impl Status {
    /// The name reports print, as in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Status::Compared => "compared",
            Status::Negligible => "negligible",
            Status::Identical => "identical",
            Status::Added => "added",
            Status::Removed => "removed",
        }
    }
}

/// One op of one layer in both profiles.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpComparison {
    pub layer: String,
    pub op: String,
    pub method: Method,
    /// The phase-3 score (higher = more different); `None` when the op has
    /// calls on one side only.
    pub score: Option<f64>,
    /// Whether one of its tests decided that it changed (or it appeared
    /// or vanished holding a material share of the latency).
    pub interesting: bool,
    /// Why, as data (fsprof-report words it).
    pub finding: Finding,
    pub status: Status,
    pub calls_a: u64,
    pub calls_b: u64,
    pub total_ns_a: u64,
    pub total_ns_b: u64,
    /// Share of the layer's total latency in A and B.
    pub latency_share_a: f64,
    pub latency_share_b: f64,
    pub peaks_a: Vec<Peak>,
    pub peaks_b: Vec<Peak>,
    pub peak_changes: Vec<PeakChange>,
    /// The verdict's tests, in the order run (see [`verdict`]).
    pub checks: Vec<Check>,
    /// The executable whose own shift the tests took out, when one process
    /// made the op's calls ([`process_shift`]); else the layer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// Which way it changed, when it is interesting: slower when any test
    /// that decided found it slower or longer (calls 1.2× faster but
    /// three times as many is more time: slower), or it appeared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
}

impl OpComparison {
    /// The test that decided the op changed: the one with the smallest
    /// p-value among those that did.
    pub fn decided_by(&self) -> Option<&Check> {
        self.checks
            .iter()
            .filter(|c| c.decides)
            .min_by(|x, y| x.p_value.total_cmp(&y.p_value))
    }

    /// The test closest to deciding, material or not: what a reader asks
    /// about an op that was not flagged.
    pub fn nearest(&self) -> Option<&Check> {
        self.checks
            .iter()
            .min_by(|x, y| x.p_value.total_cmp(&y.p_value))
    }
}

/// The shift every compared op of a layer shares (B over A, in powers of
/// two), taken out before each op is judged, and judged itself: every op
/// slower together is a change of the whole layer (a slower kernel or
/// device, or a busier machine), which only stands out when it is larger
/// than such shifts are between runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerShift {
    pub layer: String,
    pub shift: f64,
    /// Ops it is the median of (none: fewer than three, and no shift taken
    /// out).
    pub ops: usize,
    /// Its test (with three ops or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
}

impl LayerShift {
    pub fn decides(&self) -> bool {
        self.check.is_some_and(|c| c.decides)
    }

    /// Which way the layer moved, when its shift decided.
    pub fn direction(&self) -> Option<Direction> {
        self.check
            .filter(|c| c.decides)
            .map(|c| Direction::of(c.effect))
    }
}

/// The result of [`compare_runs`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// How it was compared (flattened: its fields are the comparison's).
    #[serde(flatten)]
    pub terms: Terms,
    /// Interesting ops first, ranked (appeared/disappeared ops, then by
    /// the deciding p-value), then all the others by score.
    pub ops: Vec<OpComparison>,
    /// Per layer, the shift all its ops shared.
    pub layer_shifts: Vec<LayerShift>,
}

/// The terms of a comparison: what was compared and what decided.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Terms {
    pub method: Method,
    /// Runs on each side.
    pub runs_a: usize,
    pub runs_b: usize,
    /// The shortest run's duration (a whole layer's shift decides with
    /// one run a side only if every run lasted [`LONG_RUN_NS`]).
    #[serde(default)]
    pub shortest_run_ns: u64,
    pub alpha: f64,
    pub min_share: f64,
    /// The assumed spread between runs, powers of two, and its weight.
    pub spread: f64,
    pub spread_df: f64,
    /// The assumed spread of a whole layer's shift between runs.
    #[serde(default)]
    pub layer_spread: f64,
    pub negligible: f64,
    /// Ops with fewer calls on both sides were not compared.
    pub min_calls: u64,
    /// The resolution the histograms were compared (and peak indices are
    /// expressed) at.
    pub resolution: Resolution,
    /// Which changes fail the comparison (exit 1).
    #[serde(default)]
    pub fail_on: FailOn,
}

impl Comparison {
    pub fn interesting(&self) -> impl Iterator<Item = &OpComparison> {
        self.ops.iter().filter(|o| o.interesting)
    }

    /// Whether anything changed: an op, or a whole layer.
    pub fn any_interesting(&self) -> bool {
        self.ops.iter().any(|o| o.interesting) || self.layer_shifts.iter().any(LayerShift::decides)
    }

    /// The changes found, each as its name (`layer/op`, or the layer for a
    /// whole layer's shift) and direction: interesting ops in rank order,
    /// then layers.
    pub fn changes(&self) -> Vec<(String, Direction)> {
        let ops = self
            .interesting()
            .filter_map(|o| Some((format!("{}/{}", o.layer, o.op), o.direction?)));
        let layers = self
            .layer_shifts
            .iter()
            .filter_map(|s| Some((format!("{} (every op)", s.layer), s.direction()?)));
        ops.chain(layers).collect()
    }

    /// Whether a change found fails the comparison: one in a direction
    /// [`Terms::fail_on`] counts.
    pub fn fails(&self) -> bool {
        self.changes()
            .iter()
            .any(|(_, d)| self.terms.fail_on.counts(*d))
    }

    /// Whether op `o`'s change (if it is one) fails the comparison.
    pub fn op_fails(&self, o: &OpComparison) -> bool {
        o.direction.is_some_and(|d| self.terms.fail_on.counts(d))
    }

    /// `fsprof compare`'s exit status: 1 if a change fails it
    /// ([`Comparison::fails`]), else 0.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.fails())
    }
}

/// Layers and ops, found by name.
trait Named {
    fn name(&self) -> &str;
}

impl Named for Layer {
    fn name(&self) -> &str {
        &self.name
    }
}

impl Named for OpStats {
    fn name(&self) -> &str {
        &self.name
    }
}

/// Each side's positions by name, and the union of the names: `a`'s in
/// order, then those of `b` that `a` lacks. By index because a profile may
/// hold 100k layers, and finding each by a scan made compare quadratic.
type ByName<'x> = (
    HashMap<&'x str, usize>,
    HashMap<&'x str, usize>,
    Vec<&'x str>,
);

fn by_name<'x, T: Named>(a: &'x [T], b: &'x [T]) -> ByName<'x> {
    let index = |v: &'x [T]| -> HashMap<&'x str, usize> {
        v.iter().enumerate().map(|(k, t)| (t.name(), k)).collect()
    };
    let (ia, ib) = (index(a), index(b));
    let mut names: Vec<&str> = a.iter().map(Named::name).collect();
    names.extend(b.iter().map(Named::name).filter(|n| !ia.contains_key(n)));
    (ia, ib, names)
}

/// Compares profile `a` (the baseline) with `b`, every op of every layer
/// present in either: [`compare_runs`] with one run per side.
pub fn compare_profiles(a: &Profile, b: &Profile, opts: &CompareOptions) -> Comparison {
    compare_runs(std::slice::from_ref(a), std::slice::from_ref(b), opts)
}

/// Compares the runs `a` (the baseline) with the runs `b`: phases 1–3 on
/// each side's runs merged, the verdict on the runs. Each side needs a run.
pub fn compare_runs(a: &[Profile], b: &[Profile], opts: &CompareOptions) -> Comparison {
    let res = a
        .iter()
        .chain(b)
        .map(Profile::resolution)
        .min()
        .unwrap_or_default();
    let (ma, mb) = (merged(a), merged(b));
    let mut ops = phases(&ma, &mb, res, opts);
    // A profile that does not say how long it ran counts as short.
    let shortest_ns = a
        .iter()
        .chain(b)
        .map(|p| p.meta.duration_ns)
        .min()
        .unwrap_or(0);
    let layer_shifts = verdict::judge(&mut ops, (a, b), res, opts, shortest_ns);
    rank(&mut ops);
    Comparison {
        terms: Terms {
            method: opts.method,
            runs_a: a.len(),
            runs_b: b.len(),
            shortest_run_ns: shortest_ns,
            alpha: opts.alpha,
            min_share: opts.min_share,
            spread: opts.spread,
            spread_df: opts.spread_df,
            layer_spread: opts.layer_spread,
            negligible: opts.negligible,
            min_calls: opts.min_calls,
            resolution: res,
            fail_on: opts.fail_on,
        },
        ops,
        layer_shifts,
    }
}

/// One side's runs as one profile (the run itself when there is one).
fn merged(runs: &[Profile]) -> std::borrow::Cow<'_, Profile> {
    match runs {
        [one] => std::borrow::Cow::Borrowed(one),
        _ => {
            std::borrow::Cow::Owned(fsprof_core::merge::merge_profiles(runs, Default::default()).0)
        }
    }
}

/// Phases 1–3 of every op of every layer in either side.
fn phases(a: &Profile, b: &Profile, res: Resolution, opts: &CompareOptions) -> Vec<OpComparison> {
    let empty = Layer::default();
    let (ia, ib, layer_names) = by_name(&a.layers, &b.layers);
    let mut ops = Vec::new();
    for name in layer_names {
        let la = ia.get(name).map_or(&empty, |&k| &a.layers[k]);
        let lb = ib.get(name).map_or(&empty, |&k| &b.layers[k]);
        let (oa, ob, op_names) = by_name(&la.ops, &lb.ops);
        // Once per layer, not per op.
        let (ta, tb) = (
            (la.total_ns(), la.total_calls()),
            (lb.total_ns(), lb.total_calls()),
        );
        for op in op_names {
            let side = |l: &Layer, idx: &HashMap<&str, usize>, t, p: &Profile| {
                let mut s = idx
                    .get(op)
                    .map_or_else(|| OpStats::new(op), |&k| l.ops[k].clone());
                s.downscale(p.resolution(), res);
                Side::new(s, t)
            };
            ops.push(compare_op(
                name,
                side(la, &oa, ta, a),
                side(lb, &ob, tb, b),
                res,
                opts,
            ));
        }
    }
    ops
}

struct Side {
    op: OpStats,
    latency_share: f64,
    calls_share: f64,
}

impl Side {
    /// `totals`: the layer's total latency and calls.
    fn new(op: OpStats, (total_ns, calls): (u64, u64)) -> Self {
        let share = |x: u64, t: u64| if t == 0 { 0.0 } else { x as f64 / t as f64 };
        Side {
            latency_share: share(op.total_ns, total_ns),
            calls_share: share(op.post, calls),
            op,
        }
    }

    fn negligible(&self, limit: f64) -> bool {
        self.latency_share < limit && self.calls_share < limit
    }
}

fn compare_op(
    layer: &str,
    a: Side,
    b: Side,
    res: Resolution,
    opts: &CompareOptions,
) -> OpComparison {
    let (ha, hb) = (&a.op.histogram, &b.op.histogram);
    let score = score(opts.method, &a.op, &b.op, res);
    let peaks_a = find_peaks_with(ha, res, &opts.peaks);
    let peaks_b = find_peaks_with(hb, res, &opts.peaks);
    let name = a.op.name.clone();
    let (ca, cb) = (a.op.count(), b.op.count());
    let status = if (ca == 0 && cb == 0)
        || (a.negligible(opts.negligible) && b.negligible(opts.negligible))
        || (ca > 0 && cb > 0 && ca < opts.min_calls && cb < opts.min_calls)
    {
        Status::Negligible
    } else if ca == 0 {
        Status::Added
    } else if cb == 0 {
        Status::Removed
    } else if ca == cb && ha == hb {
        Status::Identical
    } else {
        Status::Compared
    };
    let peak_changes = if status == Status::Compared {
        let peaks = peak_change::Peaks {
            a: &peaks_a,
            b: &peaks_b,
            layer,
        };
        peak_change::peak_changes(peaks, &a, &b, res, opts)
    } else {
        Vec::new()
    };
    let finding = finding::finding(status, &a, &b, &peak_changes, res, opts);
    OpComparison {
        layer: layer.to_string(),
        op: name,
        method: opts.method,
        score,
        // Decided by the verdict.
        interesting: false,
        finding,
        status,
        calls_a: ca,
        calls_b: cb,
        total_ns_a: a.op.total_ns,
        total_ns_b: b.op.total_ns,
        latency_share_a: a.latency_share,
        latency_share_b: b.latency_share,
        peaks_a,
        peaks_b,
        peak_changes,
        checks: Vec::new(),
        process: None,
        direction: None,
    }
}

/// The phase-3 score of one op; `None` when a shape measure meets an empty
/// side.
pub fn score(method: Method, a: &OpStats, b: &OpStats, res: Resolution) -> Option<f64> {
    let (ha, hb): (&Histogram, &Histogram) = (&a.histogram, &b.histogram);
    match method {
        Method::Emd => crate::refine::emd(a, b, res).map(|d| d.emd / res.get() as f64),
        Method::Chi2 => distance::chi2(ha, hb),
        Method::Jeffrey => distance::jeffrey(ha, hb),
        Method::Count if a.count() == 0 || b.count() == 0 => None,
        Method::Count => Some(distance::count_diff(a, b)),
        Method::Latency if a.count() == 0 || b.count() == 0 => None,
        Method::Latency => Some(distance::latency_diff(a, b)),
    }
}

fn rank(ops: &mut [OpComparison]) {
    let key = |o: &OpComparison| {
        let one_sided = matches!(o.status, Status::Added | Status::Removed);
        (
            o.interesting,
            one_sided,
            // Smaller first: the clearest change leads.
            o.decided_by().map_or(1.0, |c| c.p_value),
            o.score.unwrap_or(f64::INFINITY),
            o.latency_share_a.max(o.latency_share_b),
        )
    };
    ops.sort_by(|x, y| {
        let (kx, ky) = (key(x), key(y));
        (ky.0, ky.1)
            .cmp(&(kx.0, kx.1))
            .then(kx.2.total_cmp(&ky.2))
            .then(ky.3.total_cmp(&kx.3))
            .then(ky.4.total_cmp(&kx.4))
    });
}

#[cfg(test)]
mod tests;
