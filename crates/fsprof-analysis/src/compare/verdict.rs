//! Which ops changed: statistical tests, so that two runs of the same
//! program differ only by chance and a gate in CI does not cry wolf.
//!
//! Each compared op gets two tests:
//!
//! - **shift**: did its calls get slower or faster? The mean log2 latency
//!   (what EMD's direction and the geometric mean measure);
//! - **time**: did the time spent in it change? Its total latency (a few
//!   calls that now wait for the disk, or more calls).
//!
//! Peak changes (phase 2) say where a change is; they do not decide: a
//! burst of load slows a tenth of one run's calls into a "new peak" as
//! clearly as a cold cache does, and only the time it adds tells them
//! apart.
//!
//! The shift and time tests first take out the *profile shift*: the median
//! shift of the other compared ops in that run ([`super::runs::shifts_for`];
//! the layer's own, printed and tested, is the median of all of them).
//! Load from other programs or a slower clock moves every op of a run
//! alike; what is left is what one op did differently. (A change that
//! slows every op alike is therefore not an op's change; the profile shift
//! is printed.)
//!
//! A test stands out when its change is large against the spread two runs
//! of the same thing show. With several runs per side the spread is
//! measured between them (a two-sample t-test); with few runs that spread
//! is itself uncertain, so it is moderated by an assumed spread,
//! [`super::CompareOptions::spread`] worth
//! [`super::CompareOptions::spread_df`] runs (a Bayesian prior, as
//! moderated t-tests do it for few replicates). With one run per side
//! nothing measures it, and the assumed spread is all there is; the sampling
//! noise of each histogram (`n` calls) adds to it. A layer's own shift, and
//! the ops of a layer too small to take it out, are judged against the
//! spread of whole runs, [`super::CompareOptions::layer_spread`]: load
//! moves whole runs by more than it moves one op against the others.
//!
//! Only a *material* change can decide: one that moves at least
//! [`super::CompareOptions::min_share`] of the layer's latency. The
//! material tests of the whole comparison are one family, held to
//! [`super::CompareOptions::alpha`] together by Holm's step-down, so that
//! the chance that an unchanged comparison exits 1 stays at alpha however
//! many ops it has.

use fsprof_core::stats::t_test_p;
use fsprof_core::{Profile, Resolution};
use serde::{Deserialize, Serialize};

use super::process_shift::process_shifts;
use super::runs::{common_shifts, per_run, pooled_variances, shifts_for, RunStat};
use super::{CompareOptions, Direction, FailOn, Finding, LayerShift, OpComparison, Status};

/// What a test looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    Shift,
    Time,
}

/// Where the noise a test measured a change against came from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum Spread {
    /// Measured between the runs of each side, moderated by the assumed
    /// spread: `sd` of one run, in powers of two, with `df` degrees of
    /// freedom.
    Runs { sd: f64, df: f64 },
    /// One run per side: the assumed spread between runs plus each
    /// histogram's sampling noise.
    Assumed { sd: f64, df: f64 },
}

/// One test of one op.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub test: TestKind,
    /// How big the change is, in powers of two (B over A, the profile
    /// shift taken out; +1 = twice as slow or as long).
    pub effect: f64,
    /// Share of the layer's latency the change moves.
    pub moved: f64,
    /// Two-sided; one-sided for a change that made B slower when the gate
    /// fails on those only ([`FailOn::Slower`]).
    pub p_value: f64,
    /// The level its p-value had to reach in Holm's order; `None` when it
    /// moved under the material share and so could not decide.
    pub level: Option<f64>,
    /// Whether it found a change: material, under its level, and no test
    /// before it in Holm's order failed.
    pub decides: bool,
    pub spread: Spread,
}

/// A difference of means between A's and B's runs of a per-run statistic,
/// tested against their spread.
struct Difference {
    /// Mean of B's runs minus mean of A's.
    diff: f64,
    p_value: f64,
    spread: Spread,
}

/// The mean and median of a side's per-run values; 0 for a side with no
/// runs.
fn mean(x: &[f64]) -> f64 {
    fsprof_core::stats::mean(x).unwrap_or(0.0)
}

fn median(x: &[f64]) -> f64 {
    fsprof_core::stats::median(x).unwrap_or(0.0)
}

/// `xs`: the statistic per run (A's, B's); `sampling`: the variance one
/// run's value has from its calls alone; `prior`: the variance assumed
/// between runs. The spread measured between each side's runs is moderated
/// by the assumed one (which stands alone with one run per side).
fn difference(
    (a, b): (&[f64], &[f64]),
    sampling: f64,
    prior: f64,
    opts: &CompareOptions,
) -> Option<Difference> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (ma, mb) = (mean(a), mean(b));
    let df = na + nb - 2.0;
    let ss: f64 = a.iter().map(|x| (x - ma).powi(2)).sum::<f64>()
        + b.iter().map(|x| (x - mb).powi(2)).sum::<f64>();
    let s2 = (opts.spread_df * (prior + sampling) + ss) / (opts.spread_df + df);
    let se = (s2 * (1.0 / na + 1.0 / nb)).sqrt();
    let dof = opts.spread_df + df;
    if se.is_nan() || se <= 0.0 {
        return None;
    }
    let sd = s2.sqrt();
    Some(Difference {
        diff: mb - ma,
        p_value: t_test_p((mb - ma) / se, dof)?,
        spread: if df > 0.0 {
            Spread::Runs { sd, df: dof }
        } else {
            Spread::Assumed { sd, df: dof }
        },
    })
}

/// The p-value a test reports: two-sided, or, when the gate fails on what
/// got slower ([`FailOn::Slower`]) and the change is one (`effect` and the
/// difference tested both say B is slower), one-sided. The exit status then
/// answers "did B get slower?", and a one-sided test at `alpha` is the one
/// whose chance of failing two sides that differ only by noise is alpha,
/// as `--alpha` says; a two-sided one would hold that gate to alpha / 2
/// and miss more slowdowns (on the benchmarks' read workload, 93% of 2×
/// slowdowns found with one run a side against 97.5%). A faster change
/// keeps its two-sided p: it is listed, tested as strictly as before; so
/// does a whole layer's shift ([`layer_test`]), whose margin is load's.
fn gate_p(d: &Difference, effect: f64, opts: &CompareOptions) -> f64 {
    if opts.fail_on == FailOn::Slower && d.diff > 0.0 && effect > 0.0 {
        d.p_value / 2.0
    } else {
        d.p_value
    }
}

/// The shift and time tests of one op from its runs' statistics (A's runs
/// then B's, with each run's profile shift); none unless every run has
/// the op. `share`: the op's share of its layer's latency in A. `load`:
/// the variance, in powers of two squared, of a shift the runs' op shares
/// with its whole layer that was not taken out (a layer of fewer than
/// three ops has no median to take it from).
pub(super) fn op_tests(
    a: &[Option<RunStat>],
    b: &[Option<RunStat>],
    shifts: &[f64],
    (share, load): (f64, f64),
    opts: &CompareOptions,
) -> Vec<Check> {
    let all: Option<Vec<RunStat>> = a.iter().chain(b).copied().collect();
    let Some(all) = all else {
        return Vec::new();
    };
    let na = a.len();
    let (log_var, lat_var) = pooled_variances(&all);
    let runs = all.len() as f64;
    let moved = moved_share(&all, shifts, na, share);
    let mut out = Vec::new();

    // Shift: each run's mean log2 latency, less its profile shift.
    let xs: Vec<f64> = all
        .iter()
        .zip(shifts)
        .map(|(r, s)| r.log_mean - s)
        .collect();
    let sampling = all.iter().map(|r| log_var / r.calls as f64).sum::<f64>() / runs;
    let prior = opts.spread * opts.spread + load;
    if let Some(d) = difference((&xs[..na], &xs[na..]), sampling, prior, opts) {
        out.push(Check {
            test: TestKind::Shift,
            effect: d.diff,
            moved,
            p_value: gate_p(&d, d.diff, opts),
            level: None,
            decides: false,
            spread: d.spread,
        });
    }

    // Time: each run's total latency, less its profile shift, relative to
    // the mean over all runs; the calls' sampling noise of a total is
    // `calls × σ²`, σ² pooled over the runs. On this scale a few calls
    // preempted for milliseconds make the total as uncertain as they are
    // (a log scale would hide it), while a tenth of the calls now waiting
    // for the disk stands out.
    let ys: Vec<f64> = all
        .iter()
        .zip(shifts)
        .map(|(r, s)| r.total * (-s).exp2())
        .collect();
    let scale = ys.iter().sum::<f64>() / runs;
    if scale > 0.0 {
        let xs: Vec<f64> = ys.iter().map(|y| y / scale).collect();
        let sampling =
            all.iter().map(|r| r.calls as f64 * lat_var).sum::<f64>() / runs / (scale * scale);
        let prior = (opts.spread.powi(2) + load) * std::f64::consts::LN_2.powi(2);
        // How much longer, by each side's median run: one run with a call
        // preempted for 50 ms moves a mean of three runs by a factor the
        // op never changed by (the test, on the means, still weighs it).
        let (ma, mb) = (median(&xs[..na]), median(&xs[na..]));
        if let Some(d) = difference((&xs[..na], &xs[na..]), sampling, prior, opts) {
            let ratio = if ma > 0.0 { mb / ma } else { f64::INFINITY };
            out.push(Check {
                test: TestKind::Time,
                effect: ratio.log2(),
                moved,
                p_value: gate_p(&d, ratio.log2(), opts),
                level: None,
                decides: false,
                spread: d.spread,
            });
        }
    }
    out
}

/// The share of its layer's latency an op's change moved, whichever test
/// finds it: its `share` in A times how much its total changed, each side
/// by its median run, without each run's slowest call (which one
/// preemption makes milliseconds). The change must be that large both in
/// the time the op took and with each run's profile shift out: when every
/// other op of B ran 1.27× faster and `pread` 1.2× slower, `pread` was
/// 1.5× slower against the profile but moved 2% of the layer's time, and
/// a run slowed by load moves every op's time and none against the
/// profile. Measured on the total, not extrapolated from the calls' shift:
/// with a power of two per bucket, calls of 1 µs straddle a bucket
/// boundary, and a 10% change of them moves the mean log2 latency by up
/// to one (2×) between identical runs, while their total moves 10%.
fn moved_share(all: &[RunStat], shifts: &[f64], na: usize, share: f64) -> f64 {
    let change = |shift_out: bool| {
        let ys: Vec<f64> = all
            .iter()
            .zip(shifts)
            .map(|(r, s)| r.trimmed * if shift_out { (-s).exp2() } else { 1.0 })
            .collect();
        let (ma, mb) = (median(&ys[..na]), median(&ys[na..]));
        if ma > 0.0 {
            (mb / ma - 1.0).abs()
        } else {
            f64::INFINITY
        }
    };
    share * change(false).min(change(true))
}

/// Each op's share of its layer's latency in A, what a change must move
/// enough of: its median total over A's runs against the sum of every
/// op's, each total without its slowest call. One call preempted for
/// 15 ms in a run of 138 opens of 10 µs made the other ops' shares a
/// tenth of what they are (in two runs of three, so that the median did
/// not help), and a 2× slower `close` holding 12% of the latency moved
/// "1.5%": too little to decide.
/// `own[j]`: whether op `j` is of the layer its group is judged by
/// ([`judged_with`]); those ops' shares are of their own layer's latency,
/// the others' (`user-nonfile`'s) of the whole group's.
fn baseline_shares(stats: &[Vec<Option<RunStat>>], own: &[bool], runs_a: usize) -> Vec<f64> {
    let medians: Vec<f64> = stats
        .iter()
        .map(|s| {
            let t: Vec<f64> = s[..runs_a]
                .iter()
                .map(|r| r.map_or(0.0, |r| r.trimmed))
                .collect();
            median(&t)
        })
        .collect();
    let all: f64 = medians.iter().sum();
    let layer: f64 = medians
        .iter()
        .zip(own)
        .filter(|(_, &o)| o)
        .map(|(m, _)| m)
        .sum();
    medians
        .iter()
        .zip(own)
        .map(|(m, &o)| {
            let sum = if o { layer } else { all };
            if sum > 0.0 {
                m / sum
            } else {
                0.0
            }
        })
        .collect()
}

/// Holm's step-down over every material check of the comparison: the
/// `k`-th smallest p-value of `m` is held to `alpha / (m − k)`, and once
/// one fails the ones after it fail too. Sets each material check's level.
/// One family whichever way its changes went (with [`FailOn::Slower`], the
/// slower ones one-sided, the faster ones two-sided): every change the
/// comparison lists is held to alpha together, and so is the gate.
pub(super) fn holm(checks: &mut [&mut Check], opts: &CompareOptions) {
    let mut family: Vec<&mut &mut Check> = checks
        .iter_mut()
        .filter(|c| c.moved >= opts.min_share)
        .collect();
    step_down(&mut family, opts.alpha);
}

fn step_down(family: &mut [&mut &mut Check], alpha: f64) {
    family.sort_by(|x, y| x.p_value.total_cmp(&y.p_value));
    let m = family.len();
    let mut failed = false;
    for (k, c) in family.iter_mut().enumerate() {
        let level = alpha / (m - k) as f64;
        failed |= c.p_value > level;
        c.level = Some(level);
        c.decides = !failed;
    }
}

/// The verdict on every op of a comparison whose phases 1–3 are done:
/// each compared op's tests, Holm over all of them, and whether each op is
/// interesting. `shortest_ns` is the shortest run's duration
/// ([`layer_can_decide`]). Returns each layer's profile shift.
pub(super) fn judge(
    ops: &mut [OpComparison],
    (a, b): (&[Profile], &[Profile]),
    res: Resolution,
    opts: &CompareOptions,
    shortest_ns: u64,
) -> Vec<LayerShift> {
    let layers_decide = layer_can_decide(a.len(), b.len(), shortest_ns);
    let mut groups: Vec<String> = Vec::new();
    for o in ops.iter() {
        let g = judged_with(&o.layer);
        if !groups.iter().any(|x| x == g) {
            groups.push(g.to_string());
        }
    }
    let mut shifts: Vec<LayerShift> = groups
        .iter()
        .map(|g| judge_layer(ops, g, (a, b), res, opts))
        .collect();
    let mut all: Vec<&mut Check> = ops
        .iter_mut()
        .flat_map(|o| o.checks.iter_mut())
        .chain(
            shifts
                .iter_mut()
                .filter_map(|s| s.check.as_mut())
                .filter(|_| layers_decide),
        )
        .collect();
    holm(&mut all, opts);
    for o in ops.iter_mut() {
        o.interesting = match (&o.finding, o.status) {
            (Finding::OneSided { counts }, _) => *counts,
            (_, Status::Compared) => o.checks.iter().any(|c| c.decides),
            _ => false,
        };
        o.direction = o.interesting.then(|| direction(o));
    }
    shifts
}

/// Which way an interesting op changed: slower if it appeared or any
/// deciding test found it slower or longer. Time is what a user pays: calls
/// 1.2× faster but three times as many are a slower op.
fn direction(o: &OpComparison) -> Direction {
    match o.status {
        Status::Added => Direction::Slower,
        Status::Removed => Direction::Faster,
        _ if o
            .checks
            .iter()
            .any(|c| c.decides && Direction::of(c.effect) == Direction::Slower) =>
        {
            Direction::Slower
        }
        _ => Direction::Faster,
    }
}

/// Whether a whole layer's shift can decide with `runs_a` and `runs_b`
/// runs a side, the shortest of which lasted `shortest_ns`: not with one
/// run a side unless every run lasted [`LONG_RUN_NS`]. Short runs are
/// moved whole by the machine they ran on: on the benchmarks' VM both
/// vCPUs run 3–11× slower for 6–90 ms at a time, longer than a run of
/// `ls -lR` or `cat` of the headers, and 22 of 1,800 pairs of identical
/// single runs of those (at idle) had every op 2.9–5.4× slower in one (p
/// 0.001–0.015 against the layers' assumed spread). No assumed spread
/// tells that from a slower kernel without also hiding one 5× slower; two
/// runs on a side measure it, and so does a run long enough that no such
/// stretch covers it (a whole build or test suite compared once a side
/// keeps its verdict). The test is still made and printed, and the ops
/// are still judged after the shift.
pub fn layer_can_decide(runs_a: usize, runs_b: usize, shortest_ns: u64) -> bool {
    runs_a > 1 || runs_b > 1 || shortest_ns >= LONG_RUN_NS
}

/// How long every run must have lasted for a whole layer's shift to
/// decide with one run a side: ten times the longest slow stretch of the
/// machine measured (90 ms), so that one covers at most a tenth of a run.
pub const LONG_RUN_NS: u64 = 1_000_000_000;

/// The layer an op of `layer` is judged with: `user-nonfile` goes with
/// `user`, the same program's calls at the same depth, sorted by the
/// descriptor they were made on. The profile shift is the median of both
/// layers' ops, and `user-nonfile`'s share is of both layers' latency.
/// Alone, `ls -lR`'s writes to /dev/null (`device_fwrite`, 27 ns a call)
/// held all of their layer, so any change of them was "material", and
/// with no other op to take the run's shift from, a run whose every call
/// was 3× faster made them a change (the false alarms of identical
/// `ls -lR` runs at idle). `user`'s ops keep their own layer's shares: a
/// program that waits on a pipe for most of its run would otherwise make
/// every file-system op's change immaterial. Every other
/// layer is judged alone: layers at different depths time the same calls
/// again.
pub fn judged_with(layer: &str) -> &str {
    if layer == fsprof_core::layer::USER_NONFILE {
        fsprof_core::layer::USER
    } else {
        layer
    }
}

/// The tests of the ops judged with layer `group` ([`judged_with`]), and
/// the shift they share.
fn judge_layer(
    ops: &mut [OpComparison],
    group: &str,
    (a, b): (&[Profile], &[Profile]),
    res: Resolution,
    opts: &CompareOptions,
) -> LayerShift {
    let runs = a.len() + b.len();
    let mine: Vec<usize> = (0..ops.len())
        .filter(|&k| judged_with(&ops[k].layer) == group)
        .collect();
    // Every op's statistics per run, A's runs then B's.
    let stats: Vec<Vec<Option<RunStat>>> = mine
        .iter()
        .map(|&k| {
            let (layer, op) = (&ops[k].layer, &ops[k].op);
            let mut s = per_run(a, layer, op, res);
            s.extend(per_run(b, layer, op, res));
            s
        })
        .collect();
    // Named after the group's own layer when it has ops of it.
    let name = mine
        .iter()
        .map(|&k| ops[k].layer.as_str())
        .find(|&l| l == group)
        .or_else(|| mine.first().map(|&k| ops[k].layer.as_str()))
        .unwrap_or(group)
        .to_string();
    let of_group: Vec<bool> = mine.iter().map(|&k| ops[k].layer == group).collect();
    let in_median: Vec<usize> = (0..mine.len())
        // An identical op is one whose shift was none.
        .filter(|&j| {
            matches!(ops[mine[j]].status, Status::Compared | Status::Identical)
                && stats[j].iter().all(Option::is_some)
        })
        .collect();
    let compared: Vec<Vec<Option<RunStat>>> = in_median.iter().map(|&j| stats[j].clone()).collect();
    let shifts = common_shifts(&compared, runs, None);
    let own = shifts_for(&compared, runs);
    let shares = baseline_shares(&stats, &of_group, a.len());
    let profiles: Vec<&Profile> = a.iter().chain(b).collect();
    // Without three ops the layer's shift stays in each op's.
    let load = if compared.len() < 3 {
        opts.layer_spread.powi(2)
    } else {
        0.0
    };
    for (j, ((&k, s), share)) in mine.iter().zip(&stats).zip(shares).enumerate() {
        let o = &mut ops[k];
        match o.status {
            Status::Compared => {
                let (a_runs, b_runs) = s.split_at(a.len());
                let process = process_shifts(&profiles, &o.layer, &o.op, res);
                o.process = process.as_ref().map(|(exe, _)| exe.clone());
                let mine_shifts = process.as_ref().map(|(_, s)| s).unwrap_or_else(|| {
                    in_median
                        .iter()
                        .position(|&m| m == j)
                        .map_or(&shifts, |p| &own[p])
                });
                o.checks = op_tests(a_runs, b_runs, mine_shifts, (share, load), opts);
            }
            // Only an op in every run of its side decides by being there.
            Status::Added | Status::Removed => {
                let side = if o.status == Status::Added {
                    &s[a.len()..]
                } else {
                    &s[..a.len()]
                };
                if side.iter().any(Option::is_none) {
                    o.finding = Finding::OneSided { counts: false };
                }
            }
            _ => {}
        }
    }
    let enough = compared.len() >= 3;
    LayerShift {
        layer: name,
        shift: mean(&shifts[a.len()..]) - mean(&shifts[..a.len()]),
        ops: if enough { compared.len() } else { 0 },
        check: enough.then(|| layer_test(&shifts, a.len(), opts)).flatten(),
    }
}

/// The test of a layer's profile shift: every op slower (or faster)
/// together, against the spread such shifts show between runs. The whole
/// layer's latency moves with it.
fn layer_test(shifts: &[f64], runs_a: usize, opts: &CompareOptions) -> Option<Check> {
    let prior = opts.layer_spread * opts.layer_spread;
    let d = difference((&shifts[..runs_a], &shifts[runs_a..]), 0.0, prior, opts)?;
    Some(Check {
        test: TestKind::Shift,
        effect: d.diff,
        moved: (d.diff.exp2() - 1.0).abs(),
        // Two-sided in either gate: `layer_spread` is how far load moves
        // whole runs either way, and a busier machine must not fail the
        // gate at half the margin it needed before.
        p_value: d.p_value,
        level: None,
        decides: false,
        spread: d.spread,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(p: f64, moved: f64) -> Check {
        Check {
            test: TestKind::Shift,
            effect: 1.0,
            moved,
            p_value: p,
            level: None,
            decides: false,
            spread: Spread::Assumed { sd: 0.25, df: 8.0 },
        }
    }

    #[test]
    fn holm_steps_down_and_stops_at_the_first_failure() {
        let opts = CompareOptions::default();
        let mut cs = [
            check(0.03, 0.5),
            check(0.001, 0.5),
            check(0.02, 0.5),
            check(0.0001, 0.001),
        ];
        let mut refs: Vec<&mut Check> = cs.iter_mut().collect();
        holm(&mut refs, &opts);
        // Material: 0.001 (level 0.05/3), 0.02 (0.05/2), 0.03 (0.05/1).
        assert!(cs[1].decides && cs[2].decides && cs[0].decides);
        // The immaterial one never decides, however small its p.
        assert_eq!(cs[3].level, None);
        assert!(!cs[3].decides);
        let mut cs = [check(0.03, 0.5), check(0.001, 0.5), check(0.04, 0.5)];
        let mut refs: Vec<&mut Check> = cs.iter_mut().collect();
        holm(&mut refs, &opts);
        // 0.03 > 0.05/2: it fails, and so does 0.04 after it though
        // 0.04 <= 0.05.
        assert!(cs[1].decides && !cs[0].decides && !cs[2].decides);
    }
}
