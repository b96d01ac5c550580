//! The profile shift of one process, for an op whose calls all come from
//! it: a machine slowed for a few milliseconds moves whatever ran then,
//! and the calls of one process at one moment move together.
//!
//! On the benchmarks' VM both vCPUs run 3–11× slower for 6–90 ms at a
//! time, 4–5% of the time. A shell's glob reads its directory with 573
//! buffered `readdir` calls in about 30 µs; a stretch that falls on them
//! moves every one, as one sample, by its full factor, while the layer's
//! other ops, spread over the run's 138 other processes, barely move. The
//! layer's shift does not take that out; the shell's own other calls
//! (`opendir`, `closedir`, `stat`), made in the same milliseconds, moved
//! the same way by a similar factor in every such run (23 of 23 `readdir` alarms of the
//! many-process workload, docs/benchmarks/analysis.md). A slowdown of the
//! op itself (a slower `readdir`) leaves them where they were, and still
//! stands out.

use fsprof_core::{Layer, OpStats, Process, Profile, Resolution};

use super::runs::{common_shifts, RunStat};
use super::verdict::judged_with;

/// The share of an op's calls in a run one process must have made for
/// the op to be judged after that process's shift.
const ONE_PROCESS: f64 = 0.9;

/// Other ops of the process a median needs (as for a layer's).
const MIN_OPS: usize = 3;

fn op_in<'p>(layers: &'p [Layer], layer: &str, op: &str) -> Option<&'p OpStats> {
    layers.iter().find(|l| l.name == layer)?.op(op)
}

/// The process of run `p` that made nearly all of `layer`/`op`'s calls,
/// when the run has other processes too (a run of one process has the
/// layer's shift for its own).
fn owner<'p>(p: &'p Profile, layer: &str, op: &str) -> Option<&'p Process> {
    if p.processes.len() < 2 {
        return None;
    }
    let total = p.layer(layer)?.op(op)?.count();
    let calls = |pr: &Process| op_in(&pr.layers, layer, op).map_or(0, OpStats::count);
    let best = p.processes.iter().max_by_key(|pr| calls(pr))?;
    (total > 0 && calls(best) as f64 >= ONE_PROCESS * total as f64).then_some(best)
}

/// Each run's shift of the process that made `layer`/`op`'s calls: the
/// median, over that process's other ops judged with `layer` (made in
/// every run's process), of how far each sits from its mean over the runs.
/// `None` unless every run has such a process, of one executable, with
/// three other ops; else the executable and the shifts.
pub fn process_shifts(
    runs: &[&Profile],
    layer: &str,
    op: &str,
    res: Resolution,
) -> Option<(String, Vec<f64>)> {
    let owners: Vec<&Process> = runs
        .iter()
        .map(|p| owner(p, layer, op))
        .collect::<Option<_>>()?;
    if owners.iter().any(|o| o.exe != owners[0].exe) {
        return None;
    }
    let group = judged_with(layer);
    let others: Vec<(&str, &str)> = owners[0]
        .layers
        .iter()
        .filter(|l| judged_with(&l.name) == group)
        .flat_map(|l| {
            l.ops
                .iter()
                .map(move |o| (l.name.as_str(), o.name.as_str()))
        })
        .filter(|&(l, o)| (l, o) != (layer, op))
        .collect();
    let stats: Vec<Vec<Option<RunStat>>> = others
        .iter()
        .map(|&(l, o)| {
            owners
                .iter()
                .zip(runs)
                .map(|(pr, p)| RunStat::of(op_in(&pr.layers, l, o)?, p.resolution(), res, 0))
                .collect()
        })
        .filter(|s: &Vec<Option<RunStat>>| s.iter().all(Option::is_some))
        .collect();
    (stats.len() >= MIN_OPS).then(|| {
        (
            owners[0].exe.clone(),
            common_shifts(&stats, runs.len(), None),
        )
    })
}
