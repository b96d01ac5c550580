//! Two whole profiles compared op by op, in OSprof §3.2's three phases:
//!
//! 1. **Negligible pairs are skipped.** An op is negligible when, in both
//!    profiles, its share of its layer's total latency *and* its share of
//!    the layer's calls are below [`CompareOptions::negligible`] (default
//!    1%), or when it has fewer than [`CompareOptions::min_calls`] calls on
//!    both sides (one call is no distribution). Ops whose counts and
//!    histograms are equal are `identical`.
//! 2. **Peaks are compared.** The peaks of each side ([`crate::peaks`]) are
//!    compared: a peak of B over a bucket range where A had less than half
//!    its share of calls (within a power of two) is `new`, the reverse `gone`, and a peak whose
//!    biggest overlapping peak on the other side has its mode two or more
//!    powers of two away `moved`. A new or gone peak holding at least
//!    [`CompareOptions::peak_change_share`] of the op's latency, with the
//!    op's total latency up (down) by at least half of it, makes the op
//!    interesting by itself — a few calls that now wait for the disk are a
//!    change even when they barely move the distribution (turn off with
//!    `peak_changes: false`).
//! 3. **The difference is scored** with the chosen [`Method`]; a score at or
//!    above the threshold makes the op interesting.
//!
//! The layer is the "whole profile" for shares: different layers time the
//! same calls at different depths, so adding them up would count time
//! twice. Histograms at different resolutions are compared at the coarser
//! one.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use fsprof_core::{Histogram, Layer, OpStats, Profile, Resolution};
use serde::{Deserialize, Serialize};

use crate::distance;
use crate::fmt::{bucket_human, pct};
use crate::labels::Calibration;
use crate::peaks::{find_peaks_with, Peak, PeakOptions};
use fsprof_core::layer::Unit;

/// How phase 3 scores the difference between the two sides of an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Earth Mover's Distance between the normalized histograms, in powers
    /// of two (buckets at resolution 1): 1.0 = the calls moved one power of
    /// two on average. Default threshold 0.5.
    Emd,
    /// Symmetric chi-square distance, `[0, 2]`. Default threshold 0.5.
    Chi2,
    /// Jeffrey divergence, `[0, 1.386]`. Default threshold 0.3.
    Jeffrey,
    /// Normalized difference in calls, `[0, 1]`. Default threshold 0.2.
    Count,
    /// Normalized difference in total latency, `[0, 1]`. Default 0.3.
    Latency,
}

impl Method {
    pub const ALL: [Method; 5] = [
        Method::Emd,
        Method::Chi2,
        Method::Jeffrey,
        Method::Count,
        Method::Latency,
    ];

    /// The threshold used when [`CompareOptions::threshold`] is `None`.
    /// Starting points checked against the labelled profile pairs of
    /// `bench/classify.py` (rates in docs/benchmarks.md); bin-by-bin
    /// measures (chi-square, Jeffrey) need high thresholds because any move
    /// across a bucket boundary counts as a full change for them.
    pub fn default_threshold(self) -> f64 {
        match self {
            Method::Emd => 0.5,
            Method::Chi2 => 0.5,
            Method::Jeffrey => 0.3,
            Method::Count => 0.2,
            Method::Latency => 0.3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Method::Emd => "emd",
            Method::Chi2 => "chi2",
            Method::Jeffrey => "jeffrey",
            Method::Count => "count",
            Method::Latency => "latency",
        }
    }

    /// How the score is named in reasons: `EMD`, `chi²`, ...
    fn label(self) -> &'static str {
        match self {
            Method::Emd => "EMD",
            Method::Chi2 => "chi2",
            Method::Jeffrey => "Jeffrey",
            Method::Count => "count diff",
            Method::Latency => "latency diff",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!("unknown method {s:?}: use emd, chi2, jeffrey, count or latency")
            })
    }
}

#[derive(Clone, Debug)]
pub struct CompareOptions {
    pub method: Method,
    /// Score at or above which an op is interesting; `None` = the method's
    /// [`Method::default_threshold`].
    pub threshold: Option<f64>,
    /// Phase 1: share of the layer's latency and calls below which an op is
    /// negligible (in both profiles). Default 0.01.
    pub negligible: f64,
    /// Phase 1: ops with fewer calls than this on both sides are
    /// negligible. Default 10.
    pub min_calls: u64,
    /// Phase 2 on/off: whether a new or gone peak alone makes an op
    /// interesting. Default true.
    pub peak_changes: bool,
    /// Phase 2: smallest share of the op's latency a new/gone peak must
    /// hold (on its side) to count; the op's total latency must also have
    /// grown (shrunk) by at least half the peak's latency. Default 0.2.
    pub peak_change_share: f64,
    pub peaks: PeakOptions,
    /// Labels peaks in reasons ("≈ device read") when given.
    pub calibration: Option<Calibration>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            method: Method::Emd,
            threshold: None,
            negligible: 0.01,
            min_calls: 10,
            peak_changes: true,
            peak_change_share: 0.2,
            peaks: PeakOptions::default(),
            calibration: None,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakChangeKind {
    /// A peak of B matching no peak of A (see the module docs).
    New,
    /// A peak of A matching no peak of B.
    Gone,
    /// Matching peaks whose modes are at least two powers of two apart.
    Moved,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeakChange {
    pub kind: PeakChangeKind,
    /// The peak in A (`gone`, `moved`).
    pub a: Option<Peak>,
    /// The peak in B (`new`, `moved`).
    pub b: Option<Peak>,
    /// Share of the layer's total latency the peak holds on its side (B for
    /// `new`/`moved`, A for `gone`).
    pub layer_latency_share: f64,
    /// Whether it made the op interesting (see
    /// [`CompareOptions::peak_change_share`]).
    pub significant: bool,
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
    /// Whether the op crossed the threshold or had a significant peak
    /// change (or appeared/disappeared).
    pub interesting: bool,
    /// One line for people, starting with the op name, e.g.
    /// `read: new peak at 2.10ms..4.19ms, 12% of total latency; EMD 1.20`.
    pub reason: String,
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
}

/// The result of [`compare_profiles`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub method: Method,
    pub threshold: f64,
    pub negligible: f64,
    /// The resolution the histograms were compared (and peak indices are
    /// expressed) at.
    pub resolution: Resolution,
    /// Interesting ops first, ranked (appeared/disappeared ops, then by
    /// score, highest first), then all the others by score.
    pub ops: Vec<OpComparison>,
}

impl Comparison {
    pub fn interesting(&self) -> impl Iterator<Item = &OpComparison> {
        self.ops.iter().filter(|o| o.interesting)
    }

    pub fn any_interesting(&self) -> bool {
        self.ops.iter().any(|o| o.interesting)
    }

    /// `fsprof compare`'s exit status: 1 if any op is interesting, else 0.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.any_interesting())
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
/// present in either.
pub fn compare_profiles(a: &Profile, b: &Profile, opts: &CompareOptions) -> Comparison {
    let res = a.resolution().min(b.resolution());
    let threshold = opts.threshold.unwrap_or(opts.method.default_threshold());
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
                threshold,
                opts,
            ));
        }
    }
    rank(&mut ops);
    Comparison {
        method: opts.method,
        threshold,
        negligible: opts.negligible,
        resolution: res,
        ops,
    }
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
    threshold: f64,
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
        || (ca < opts.min_calls && cb < opts.min_calls)
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
        peak_changes(&peaks_a, &peaks_b, &a, &b, res, opts)
    } else {
        Vec::new()
    };
    let over = score.is_some_and(|s| s >= threshold);
    // An op that appears or vanishes matters when it holds time: a few
    // cheap calls (a new `fcntl`) must not decide compare's exit status.
    let interesting = match status {
        Status::Added => b.latency_share >= opts.negligible,
        Status::Removed => a.latency_share >= opts.negligible,
        Status::Compared => over || peak_changes.iter().any(|c| c.significant),
        Status::Negligible | Status::Identical => false,
    };
    let reason = reason(
        layer,
        &name,
        status,
        score,
        threshold,
        &a,
        &b,
        &peak_changes,
        res,
        opts,
    );
    OpComparison {
        layer: layer.to_string(),
        op: name,
        method: opts.method,
        score,
        interesting,
        reason,
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

fn overlaps(x: &Peak, y: &Peak) -> bool {
    x.first <= y.last && y.first <= x.last
}

/// Share of `h`'s calls inside `p`'s bucket range widened by one power of
/// two on each side.
fn share_near(h: &Histogram, p: &Peak, res: Resolution) -> f64 {
    let t = h.total();
    if t == 0 {
        return 0.0;
    }
    let r = res.get() as i32;
    let n = h
        .buckets()
        .filter(|(i, _)| (p.first - r..=p.last + r).contains(i))
        .fold(0u64, |t, (_, c)| t.saturating_add(c));
    n as f64 / t as f64
}

/// Phase 2. A peak of B is `new` when A had less than half as large a share
/// of its calls in the same bucket range widened by a power of two each
/// side — judged on A's histogram, not on A's peaks, so that it does not
/// depend on how each side's peaks happen to be cut (a straggler of A
/// inside the range, A's mass split differently into peaks at a fine
/// resolution, or a peak drifting by a bucket change nothing). `gone` is
/// the reverse.
/// A peak that is neither, whose biggest overlapping peak on the other side
/// has its mode two or more powers of two away, `moved`.
fn peak_changes(
    pa: &[Peak],
    pb: &[Peak],
    a: &Side,
    b: &Side,
    res: Resolution,
    opts: &CompareOptions,
) -> Vec<PeakChange> {
    let (ha, hb) = (&a.op.histogram, &b.op.histogram);
    // A new (gone) peak counts when it holds enough of the op's latency and
    // the op's total latency grew (shrank) by at least half of what the
    // peak holds: a change in where the time goes, not a few calls that
    // moved between neighbouring buckets of a cheap op.
    let grew = b.op.total_ns as f64 - a.op.total_ns as f64;
    let significant = |p: &Peak, growth: f64| {
        opts.peak_changes
            && p.latency_share >= opts.peak_change_share
            && growth >= p.latency_ns / 2.0
    };
    let mut out = Vec::new();
    for p in pb {
        if share_near(ha, p, res) < p.count_share / 2.0 {
            out.push(PeakChange {
                kind: PeakChangeKind::New,
                a: None,
                b: Some(p.clone()),
                layer_latency_share: p.latency_share * b.latency_share,
                significant: significant(p, grew),
            });
        } else if let Some(q) = pa.iter().filter(|q| overlaps(q, p)).max_by_key(|q| q.count) {
            if (p.mode - q.mode).abs() >= 2 * res.get() as i32 {
                out.push(PeakChange {
                    kind: PeakChangeKind::Moved,
                    a: Some(q.clone()),
                    b: Some(p.clone()),
                    layer_latency_share: p.latency_share * b.latency_share,
                    // A moved peak is phase 3's business (it is what EMD measures).
                    significant: false,
                });
            }
        }
    }
    for q in pa {
        if share_near(hb, q, res) < q.count_share / 2.0 {
            out.push(PeakChange {
                kind: PeakChangeKind::Gone,
                a: Some(q.clone()),
                b: None,
                layer_latency_share: q.latency_share * a.latency_share,
                significant: significant(q, -grew),
            });
        }
    }
    // Biggest first, so the reason names the most important change.
    out.sort_by(|x, y| {
        (y.significant, y.layer_latency_share)
            .partial_cmp(&(x.significant, x.layer_latency_share))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    out
}

fn describe_peak(
    p: &Peak,
    side: &Side,
    layer: &str,
    res: Resolution,
    opts: &CompareOptions,
) -> String {
    let mut s = bucket_human(p.mode, res, Unit::of(layer));
    if let Some(l) = opts
        .calibration
        .as_ref()
        .and_then(|c| c.label_peak(layer, &side.op, p, res))
    {
        s.push(' ');
        s.push_str(&l);
    }
    s
}

/// The whole reason for an op that was not compared (only on one side,
/// identical, negligible); `None` for a compared one.
fn status_reason(
    name: &str,
    status: Status,
    a: &Side,
    b: &Side,
    opts: &CompareOptions,
) -> Option<String> {
    let calls = |n: u64| format!("{n} calls");
    Some(match status {
        Status::Added | Status::Removed => {
            let (side, s) = if status == Status::Added {
                ("B", b)
            } else {
                ("A", a)
            };
            let minor = if s.latency_share < opts.negligible {
                format!(
                    " (under {}: does not count as a change)",
                    pct(opts.negligible)
                )
            } else {
                String::new()
            };
            format!(
                "{name}: only in {side}, {}, {} of total latency{minor}",
                calls(s.op.count()),
                pct(s.latency_share)
            )
        }
        Status::Identical => format!("{name}: identical"),
        Status::Negligible if a.op.count() < opts.min_calls && b.op.count() < opts.min_calls => {
            format!(
                "{name}: too few calls to compare ({} and {})",
                a.op.count(),
                b.op.count()
            )
        }
        Status::Negligible => format!(
            "{name}: negligible (under {} of calls and latency on both sides)",
            pct(opts.negligible)
        ),
        Status::Compared => return None,
    })
}

#[allow(clippy::too_many_arguments)]
fn reason(
    layer: &str,
    name: &str,
    status: Status,
    score: Option<f64>,
    threshold: f64,
    a: &Side,
    b: &Side,
    changes: &[PeakChange],
    res: Resolution,
    opts: &CompareOptions,
) -> String {
    if let Some(r) = status_reason(name, status, a, b, opts) {
        return r;
    }
    let calls = |n: u64| format!("{n} calls");
    let mut parts = Vec::new();
    if let Some(c) = changes.first().filter(|c| c.significant) {
        parts.push(match c.kind {
            PeakChangeKind::New => format!(
                "new peak at {}, {} of total latency",
                describe_peak(c.b.as_ref().unwrap(), b, layer, res, opts),
                pct(c.layer_latency_share)
            ),
            PeakChangeKind::Gone => format!(
                "peak at {} gone (had {} of total latency)",
                describe_peak(c.a.as_ref().unwrap(), a, layer, res, opts),
                pct(c.layer_latency_share)
            ),
            PeakChangeKind::Moved => unreachable!("moved peaks are never significant"),
        });
    } else if let Some(c) = changes.iter().find(|c| c.kind == PeakChangeKind::Moved) {
        parts.push(format!(
            "peak moved from {} to {}",
            describe_peak(c.a.as_ref().unwrap(), a, layer, res, opts),
            describe_peak(c.b.as_ref().unwrap(), b, layer, res, opts),
        ));
    }
    let (oa, ob) = (&a.op, &b.op);
    // A byte layer (block-size) prints bytes and moves larger or smaller.
    let u = Unit::of(layer);
    let fmt = |v: f64| u.format(v);
    let detail = match opts.method {
        Method::Count => format!("{} → {}", calls(oa.count()), calls(ob.count())),
        Method::Latency => format!(
            "total {} → {}",
            fmt(oa.total_ns as f64),
            fmt(ob.total_ns as f64)
        ),
        // The shape measures: the geometric mean, whose change is the
        // signed EMD, so "slower" and the numbers always agree (the
        // arithmetic mean can fall while most calls got slower).
        // A refined EMD's direction is the change of the (arithmetic)
        // mean itself.
        Method::Emd if crate::refine::emd(oa, ob, res).is_some_and(|r| r.refined) => {
            format!("mean {} → {}", fmt(oa.mean_ns()), fmt(ob.mean_ns()))
        }
        _ => match (
            distance::geometric_mean_ns(&oa.histogram, res),
            distance::geometric_mean_ns(&ob.histogram, res),
        ) {
            (Some(ga), Some(gb)) => format!("geometric mean {} → {}", fmt(ga), fmt(gb)),
            _ => format!("{} → {}", calls(oa.count()), calls(ob.count())),
        },
    };
    if let Some(s) = score {
        let cmp = if s >= threshold { "≥" } else { "<" };
        let mut line = format!("{} {s:.2} {cmp} {threshold:.2}", opts.method.label());
        if opts.method == Method::Emd {
            if let Some(rf) = crate::refine::emd(oa, ob, res) {
                let signed = rf.signed / res.get() as f64;
                if signed.abs() >= 0.05 {
                    let dir = direction(u, signed > 0.0);
                    line.push_str(&format!(" ({:.2} powers of two {dir})", signed.abs()));
                }
            }
        }
        parts.push(line);
    }
    parts.push(detail);
    format!("{name}: {}", parts.join("; "))
}

/// Which way values moved: latencies get slower or faster, a byte
/// layer's requests larger or smaller.
fn direction(u: Unit, up: bool) -> &'static str {
    match (u, up) {
        (Unit::Ns, true) => "slower",
        (Unit::Ns, false) => "faster",
        (Unit::Bytes, true) => "larger",
        (Unit::Bytes, false) => "smaller",
    }
}

fn rank(ops: &mut [OpComparison]) {
    let key = |o: &OpComparison| {
        let one_sided = matches!(o.status, Status::Added | Status::Removed);
        (
            o.interesting,
            one_sided,
            o.score.unwrap_or(f64::INFINITY),
            o.latency_share_a.max(o.latency_share_b),
        )
    };
    ops.sort_by(|x, y| {
        let (kx, ky) = (key(x), key(y));
        (ky.0, ky.1)
            .cmp(&(kx.0, kx.1))
            .then(ky.2.total_cmp(&kx.2))
            .then(ky.3.total_cmp(&kx.3))
    });
}

#[cfg(test)]
mod status_tests {
    use super::Status::*;

    #[test]
    fn status_names_are_the_json_names() {
        for s in [Compared, Negligible, Identical, Added, Removed] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsprof_testkit::profiles::op;

    fn profile(ops: Vec<OpStats>) -> Profile {
        fsprof_testkit::profiles::profile_of("user", ops)
    }

    #[track_caller]
    fn assert_reason_starts(o: &OpComparison, prefix: &str) {
        assert!(o.reason.starts_with(prefix), "{}", o.reason);
    }

    #[test]
    fn flags_the_op_with_a_new_slow_peak_and_nothing_else() {
        let a = profile(vec![
            op("read", &[(9, 1000), (10, 200)]),
            op("open", &[(12, 50)]),
            op("stat", &[(8, 3)]),
        ]);
        let b = profile(vec![
            op("read", &[(9, 1000), (10, 200), (21, 100)]),
            op("open", &[(12, 51)]),
            op("stat", &[(8, 3), (20, 1)]),
        ]);
        let c = compare_profiles(&a, &b, &CompareOptions::default());
        let hits: Vec<&str> = c.interesting().map(|o| o.op.as_str()).collect();
        assert_eq!(hits, vec!["read"]);
        assert_eq!(c.exit_code(), 1);
        let read = &c.ops[0];
        assert_reason_starts(read, "read: new peak at 2.10ms..4.19ms, ");
        assert_eq!(read.peak_changes[0].kind, PeakChangeKind::New);
        let stat = c.ops.iter().find(|o| o.op == "stat").unwrap();
        assert_eq!(stat.status, Status::Negligible);
    }

    #[test]
    fn same_profile_is_not_interesting_under_any_method() {
        let a = profile(vec![
            op("read", &[(9, 1000), (20, 4)]),
            op("open", &[(12, 50)]),
        ]);
        for m in Method::ALL {
            let o = CompareOptions {
                method: m,
                ..Default::default()
            };
            let c = compare_profiles(&a, &a, &o);
            assert_eq!(c.exit_code(), 0, "{m}");
            assert!(c.ops.iter().all(|o| o.status == Status::Identical));
        }
    }

    #[test]
    fn added_and_removed_ops_rank_first() {
        let a = profile(vec![op("read", &[(9, 100)]), op("fsync", &[(20, 10)])]);
        let b = profile(vec![op("read", &[(12, 100)]), op("write", &[(11, 100)])]);
        let c = compare_profiles(&a, &b, &CompareOptions::default());
        let order: Vec<(&str, Status)> = c.ops.iter().map(|o| (o.op.as_str(), o.status)).collect();
        assert_eq!(order[2], ("read", Status::Compared));
        assert!(order[..2].contains(&("fsync", Status::Removed)));
        assert!(order[..2].contains(&("write", Status::Added)));
        let read = &c.ops[2];
        assert!((read.score.unwrap() - 3.0).abs() < 1e-9);
        assert!(
            read.reason
                .contains("EMD 3.00 ≥ 0.50 (3.00 powers of two slower)"),
            "{}",
            read.reason
        );
    }

    #[test]
    fn emd_is_in_powers_of_two_at_any_resolution() {
        let mut a = profile(vec![op("read", &[(40, 100)])]);
        let mut b = profile(vec![op("read", &[(48, 100)])]);
        a.meta.resolution = Resolution::new(4).unwrap();
        b.meta.resolution = Resolution::new(4).unwrap();
        let c = compare_profiles(&a, &b, &CompareOptions::default());
        assert!((c.ops[0].score.unwrap() - 2.0).abs() < 1e-9);
    }

    #[test]
    fn reasons_name_the_calibrated_characteristic() {
        let cal = Calibration::from_json(
            r#"{"format":"fsprof-calibration","format_version":2,"fsprof_version":"t",
                "characteristics":[{"name":"device_read","label":"device read",
                "median_ns":3000000,"p10_ns":2500000,"p90_ns":4000000,"samples":9,
                "rounds":[3000000,3100000]}]}"#,
        )
        .unwrap();
        let a = profile(vec![op("read", &[(9, 1000)])]);
        let b = profile(vec![op("read", &[(9, 1000), (21, 50)])]);
        let o = CompareOptions {
            calibration: Some(cal),
            ..Default::default()
        };
        let c = compare_profiles(&a, &b, &o);
        assert_reason_starts(
            &c.ops[0],
            "read: new peak at 2.10ms..4.19ms ≈ device read, ",
        );
    }

    /// An op only one side has is a change when it holds time there, not
    /// when it is a few cheap calls: 11 `fcntl` calls, 2% of the calls
    /// but 0.0% of the latency, do not make compare exit 1.
    #[test]
    fn an_op_on_one_side_only_counts_when_it_holds_time() {
        let a = profile(vec![op("read", &[(12, 500)])]);
        let b = profile(vec![op("read", &[(12, 500)]), op("fcntl", &[(6, 11)])]);
        let c = compare_profiles(&a, &b, &CompareOptions::default());
        let fcntl = c.ops.iter().find(|o| o.op == "fcntl").unwrap();
        assert_eq!(fcntl.status, Status::Added);
        assert!(!fcntl.interesting, "{}", fcntl.reason);
        assert_eq!(
            fcntl.reason,
            "fcntl: only in B, 11 calls, 0.0% of total latency (under 1.0%: does not count as a change)"
        );
        assert_eq!(c.exit_code(), 0);
        // The same op holding real time is a change, both ways.
        let b = profile(vec![op("read", &[(12, 500)]), op("fcntl", &[(20, 11)])]);
        let c = compare_profiles(&a, &b, &CompareOptions::default());
        assert!(c.ops.iter().any(|o| o.op == "fcntl" && o.interesting));
        assert_eq!(c.exit_code(), 1);
        let c = compare_profiles(&b, &a, &CompareOptions::default());
        let gone = c.ops.iter().find(|o| o.op == "fcntl").unwrap();
        assert_eq!((gone.status, gone.interesting), (Status::Removed, true));
    }

    #[test]
    fn a_vanished_slow_peak_is_reported_when_the_time_went_with_it() {
        let a = profile(vec![op("read", &[(9, 1000), (21, 50)])]);
        let b = profile(vec![op("read", &[(9, 1000)])]);
        let c = compare_profiles(&a, &b, &CompareOptions::default());
        assert!(c.ops[0].interesting);
        assert_reason_starts(&c.ops[0], "read: peak at 2.10ms..4.19ms gone");
        // Same shape, but the op's total latency did not drop: no peak
        // change is significant (the calls only moved between buckets).
        let mut b2 = b.clone();
        b2.layers[0].ops[0].total_ns = a.layers[0].ops[0].total_ns;
        let c = compare_profiles(
            &a,
            &b2,
            &CompareOptions {
                method: Method::Count,
                ..Default::default()
            },
        );
        assert!(!c.ops[0].interesting, "{}", c.ops[0].reason);
    }

    proptest::proptest! {
        #[test]
        fn any_pair_of_profiles_compares_without_nan(
            a in proptest::collection::vec((0usize..4, 0i32..40, 0u64..500), 0..20),
            b in proptest::collection::vec((0usize..4, 0i32..40, 0u64..500), 0..20),
            mi in 0usize..5,
        ) {
            let names = ["read", "write", "open", "stat"];
            let build = |cells: &[(usize, i32, u64)]| {
                let mut ops: Vec<OpStats> = Vec::new();
                for &(n, i, c) in cells {
                    let o = op(names[n], &[(i, c)]);
                    match ops.iter_mut().find(|x| x.name == o.name) {
                        Some(x) => x.merge(&o),
                        None => ops.push(o),
                    }
                }
                profile(ops)
            };
            let (pa, pb) = (build(&a), build(&b));
            let o = CompareOptions { method: Method::ALL[mi], ..Default::default() };
            let c = compare_profiles(&pa, &pb, &o);
            let mut seen_rest = false;
            for x in &c.ops {
                if let Some(s) = x.score {
                    proptest::prop_assert!(s.is_finite() && s >= 0.0, "{:?}", x);
                }
                let head = format!("{}: ", x.op);
                proptest::prop_assert!(x.reason.starts_with(&head), "{}", x.reason);
                // Interesting ops come first.
                if !x.interesting { seen_rest = true; }
                proptest::prop_assert!(!(seen_rest && x.interesting));
            }
            proptest::prop_assert_eq!(c.exit_code(), i32::from(c.ops.iter().any(|x| x.interesting)));
            // Comparing a profile with itself finds nothing.
            proptest::prop_assert_eq!(compare_profiles(&pa, &pa, &o).exit_code(), 0);
        }
    }

    #[test]
    fn method_names_parse() {
        for m in Method::ALL {
            assert_eq!(m.name().parse::<Method>().unwrap(), m);
        }
        assert!("kl".parse::<Method>().unwrap_err().contains("use emd"));
    }
}
