//! The reasons not to trust a result, each with what to do about it.

use crate::params::human_bytes;
use crate::result::{BenchResult, PhaseResult, RunWait, Warning};
use fsprof_measure::cache::CacheMode;

/// CI half-width above this share of the mean: too few runs.
pub const CI_LIMIT: f64 = 0.05;
/// A discarded warm-up (or the first measured run) this much slower than
/// the median of the measured runs is a warm-up effect worth saying.
pub const WARMUP_FACTOR: f64 = 1.25;
/// The timer's cost or resolution above this share of an op's median.
pub const TIMER_LIMIT: f64 = 0.10;
/// 1-minute load average above this share of the CPUs: something else runs.
pub const LOAD_LIMIT: f64 = 0.5;
/// Timed loops on a CPU for less than this share of their wall time.
pub const ON_CPU_LIMIT: f64 = 0.8;
/// A run this many times slower than the fastest is a slow run whose
/// cause is named (where the suite records where its time went).
pub const SLOW_FACTOR: f64 = 2.0;

fn w(kind: &str, message: String) -> Warning {
    Warning {
        kind: kind.into(),
        message,
    }
}

pub fn all(r: &BenchResult) -> Vec<Warning> {
    let mut out = Vec::new();
    let phases = r.named_phases(human_bytes);
    for (name, p) in &phases {
        phase(&mut out, r, name, p);
    }
    machine(&mut out, r);
    out
}

fn phase(out: &mut Vec<Warning>, r: &BenchResult, name: &str, p: &PhaseResult) {
    let s = &p.summary;
    let runs = r.params.runs;
    match s.ci95.and_then(|c| c.relative()) {
        Some(rel) if rel > CI_LIMIT => {
            let more = (runs * 3).max(30);
            out.push(w("ci_wide", format!(
                "{name}: the 95% confidence interval is ±{:.1}% of the mean (over 5%): run more (--runs {more}) or quiet the machine",
                rel * 100.0
            )));
        }
        None if runs < 2 => out.push(w(
            "ci_wide",
            format!("{name}: one run has no confidence interval: use --runs 10 or more"),
        )),
        _ => {}
    }
    // Figures are rates (higher is better): slower = smaller.
    let slow = |v: f64| v > 0.0 && s.median / v >= WARMUP_FACTOR;
    if let Some(&v) = p.warmup_runs.first() {
        if slow(v) {
            out.push(w("warmup", format!(
                "{name}: the warm-up run was {:.2}× slower than the median run (a warm-up effect); it is excluded — keep --warmup at 1 or more",
                s.median / v
            )));
        }
    } else if let Some(&v) = p.runs.first() {
        if p.runs.len() > 2 && slow(v) {
            out.push(w("warmup", format!(
                "{name}: the first run was {:.2}× slower than the median run (a warm-up effect) and is included: use --warmup 1",
                s.median / v
            )));
        }
    }
    slow_runs(out, name, p);
    for &i in &s.outliers {
        out.push(w("outlier", format!(
            "{name}: run {} ({:.4} {}) is an outlier (far from the median {:.4} by MAD): another process may have run; check the load and rerun",
            i + 1, p.runs[i], p.unit, s.median
        )));
    }
    let failed: Vec<_> = p
        .cache
        .iter()
        .filter(|c| c.mode == CacheMode::Cold && c.verified_by.is_some() && !c.passed)
        .collect();
    if let Some(c) = failed.first() {
        let why = if r.dir.is_memory_fs() {
            format!("{} is on {}, which keeps files in memory: there is no cold state; use --cache warm", r.dir.path, r.dir.fs_type)
        } else if r.params.drop_caches {
            "the kernel kept pages even after drop_caches (mapped or in use?)".to_string()
        } else {
            "posix_fadvise did not evict them: run as root with --drop-caches".to_string()
        };
        out.push(w("cold_failed", format!(
            "{name}: --cache cold was asked but {:.0}% of the files' pages were still cached in {} of {} runs ({}): {why}",
            c.fraction() * 100.0, failed.len(), p.cache.len(),
            c.verified_by.as_deref().unwrap_or("?")
        )));
    }
    let warm_failed = p
        .cache
        .iter()
        .filter(|c| c.mode == CacheMode::Warm && c.verified_by.is_some() && !c.passed)
        .count();
    if warm_failed > 0 {
        out.push(w("working_set", format!(
            "{name}: --cache warm was asked but the files were not wholly cached in {warm_failed} runs: the working set does not fit in the page cache; use smaller --file-size/--files"
        )));
    }
    if let Some(f) = p.on_cpu.filter(|&f| f < ON_CPU_LIMIT) {
        out.push(w("off_cpu", format!(
            "{name}: the timed loops ran on a CPU only {:.0}% of their wall time; the rest they were blocked in I/O or preempted by other processes: per-second figures include that wait (per-op medians mostly do not) — if the data is cached, quiet the machine or pin the run (taskset) and rerun",
            f * 100.0
        )));
    }
    let cost = r.timer.overhead_ns.max(r.timer.resolution_ns);
    if p.op_median_ns > 0.0 && cost > TIMER_LIMIT * p.op_median_ns {
        out.push(w("timer_coarse", format!(
            "{name}: an operation takes ~{:.0} ns and timing it costs {:.0} ns ({} clock): per-op latencies are inflated; use a larger --io-size (the phase figures are timed per file and unaffected)",
            p.op_median_ns, cost, r.timer.clock
        )));
    }
}

fn machine(out: &mut Vec<Warning>, r: &BenchResult) {
    let m = &r.machine;
    let ws = r.params.working_set();
    if ws > m.memory_available {
        out.push(w("working_set", format!(
            "the working set ({}) is larger than the available memory ({}): data will come from the device whatever --cache says; use fewer --files or a smaller --file-size",
            human_bytes(ws), human_bytes(m.memory_available)
        )));
    }
    if m.load_average > LOAD_LIMIT * m.cpus as f64 {
        out.push(w("busy", format!(
            "the load average was {:.2} on {} CPUs when the benchmark started: other processes compete for the CPU; rerun on a quiet machine and compare the CIs",
            m.load_average, m.cpus
        )));
    }
    if let Some(g) = &m.cpu_governor {
        if g != "performance" {
            out.push(w("frequency_scaling", format!(
                "CPU frequency scaling governor is {g:?}: the clock speed may change during the runs; set it to performance (cpupower frequency-set -g performance)"
            )));
        }
    }
}

/// Each measured run [`SLOW_FACTOR`] or more slower than the fastest, with
/// where its time went ([`slow_cause`]).
fn slow_runs(out: &mut Vec<Warning>, name: &str, p: &PhaseResult) {
    let best = p.runs.iter().copied().fold(0.0, f64::max);
    // The waits list the warm-up runs first.
    let skip = p.waits.len().saturating_sub(p.runs.len());
    for (i, &v) in p.runs.iter().enumerate() {
        if v <= 0.0 || best / v < SLOW_FACTOR {
            continue;
        }
        let Some(wait) = p.waits.get(skip + i) else {
            continue;
        };
        out.push(w(
            "slow_run",
            format!(
                "{name}: run {} ({v:.0} {}) was {:.1}× slower than the fastest ({best:.0}): {}",
                i + 1,
                p.unit,
                best / v,
                slow_cause(wait)
            ),
        ));
    }
}

/// Kernel threads whose work stalls a metadata loop, and what they are.
const CULPRITS: &[(&str, &str)] = &[
    ("[kdamond", "DAMON reclaiming memory (kdamond), which evicts idle page cache and with it cached dentries and inodes"),
    ("[kswapd", "memory reclaim (kswapd)"),
    ("[jbd2/", "the ext4 journal committing (jbd2)"),
    ("[xfsaild", "the xfs log writing back (xfsaild)"),
    ("[kworker", "kernel work queues (kworker: writeback, the journal, RCU)"),
];

/// Where a slow run's time went, in words: preempted (the other
/// processes named), blocked (the kernel threads that ran meanwhile
/// named), or on a CPU doing more work per call.
pub fn slow_cause(wait: &RunWait) -> String {
    let wall = wait.wall_ns.max(1) as f64;
    let off = wait.wall_ns.saturating_sub(wait.cpu_ns);
    let ms = |ns: u64| ns as f64 / 1e6;
    let pct = |ns: u64| ns as f64 * 100.0 / wall;
    let others = |what: &[(String, u64)]| {
        what.iter()
            .map(|(c, ns)| format!("{c} {:.1} ms", ms(*ns)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let queued = wait.runqueue_ns.unwrap_or(0);
    if (off as f64) < 0.3 * wall {
        return format!(
            "it was on a CPU {:.0}% of the time, so each call did more work or the CPU ran slower: dentries or inodes evicted and rebuilt (memory reclaim, DAMON), contended locks, or (in a VM) the hypervisor running another guest on this CPU{}",
            pct(wait.cpu_ns),
            culprits(&wait.others).map_or(String::new(), |c| format!("; meanwhile {c}"))
        );
    }
    if queued * 2 >= off {
        return format!(
            "preempted: it waited {:.1} ms ({:.0}% of the run) for a CPU, switched out {} times, while other processes used the CPUs ({}); rerun on a quiet machine, or as root at real-time priority (chrt -f 1 fsprof bench ...), which other processes cannot preempt",
            ms(queued), pct(queued), wait.involuntary, others(&wait.others)
        );
    }
    let blocked = off.saturating_sub(queued);
    let during = match culprits(&wait.others) {
        Some(c) => format!("; meanwhile {c} ran"),
        None if wait.others.is_empty() => String::new(),
        None => format!("; the busiest other processes: {}", others(&wait.others)),
    };
    format!(
        "blocked {:.1} ms ({:.0}% of the run) in {} sleeps (I/O or a lock){during}",
        ms(blocked),
        pct(blocked),
        wait.voluntary
    )
}

/// The known kernel threads among `others` (named in brackets), described.
fn culprits(others: &[(String, u64)]) -> Option<String> {
    let found: Vec<String> = CULPRITS
        .iter()
        .filter_map(|(prefix, what)| {
            let ns: u64 = others
                .iter()
                .filter(|(c, _)| c.starts_with(prefix))
                .map(|(_, ns)| ns)
                .sum();
            (ns > 0).then(|| format!("{what} for {:.1} ms", ns as f64 / 1e6))
        })
        .collect();
    (!found.is_empty()).then(|| found.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(runs: &[f64], waits: Vec<RunWait>) -> PhaseResult {
        PhaseResult {
            name: "stat_seq".into(),
            unit: "ops/s".into(),
            summary: fsprof_core::stats::Summary::of(runs).unwrap(),
            runs: runs.to_vec(),
            warmup_runs: vec![runs[0]],
            file_ns: Vec::new(),
            op_ns: Vec::new(),
            first_file_dropped: false,
            op_median_ns: 700.0,
            on_cpu: None,
            cache: Vec::new(),
            waits,
        }
    }

    fn wait(wall_ms: u64, cpu_ms: u64, queued_ms: u64, others: &[(&str, u64)]) -> RunWait {
        RunWait {
            wall_ns: wall_ms * 1_000_000,
            cpu_ns: cpu_ms * 1_000_000,
            runqueue_ns: Some(queued_ms * 1_000_000),
            voluntary: 3,
            involuntary: 1,
            others: others
                .iter()
                .map(|(c, ms)| (c.to_string(), ms * 1_000_000))
                .collect(),
        }
    }

    /// A run at half the fastest's rate or slower is named with its
    /// cause; the warm-up's wait (listed first) is not taken for run 1's.
    #[test]
    fn slow_runs_are_named_with_their_cause() {
        let fast = wait(1, 1, 0, &[]);
        let p = phase(
            &[1.0e6, 2.1e5, 1.1e6, 4.0e5, 6.0e5],
            vec![
                wait(9, 1, 8, &[]),
                fast.clone(),
                wait(5, 1, 4, &[("rustc", 30)]),
                fast.clone(),
                wait(3, 1, 0, &[("[jbd2/vda1-8]", 2), ("rustc", 10)]),
                fast,
            ],
        );
        let mut out = Vec::new();
        slow_runs(&mut out, "stat_seq", &p);
        let said: Vec<&str> = out.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].starts_with("stat_seq: run 2 (210000 ops/s) was 5.2× slower than the fastest (1100000): preempted: it waited 4.0 ms (80% of the run) for a CPU"), "{}", said[0]);
        assert!(
            said[0].contains("rustc 30.0 ms") && said[0].contains("chrt -f 1"),
            "{}",
            said[0]
        );
        assert!(said[1].starts_with("stat_seq: run 4 (400000 ops/s) was 2.8× slower than the fastest (1100000): blocked 2.0 ms (67% of the run) in 3 sleeps (I/O or a lock); meanwhile the ext4 journal committing (jbd2) for 2.0 ms ran"), "{}", said[1]);
        assert!(out.iter().all(|w| w.kind == "slow_run"));
    }

    #[test]
    fn a_slow_run_on_a_cpu_the_whole_time_names_the_work_not_a_wait() {
        let w = wait(4, 4, 0, &[("[kdamond.0]", 3)]);
        let c = slow_cause(&w);
        assert!(c.starts_with("it was on a CPU 100% of the time"), "{c}");
        assert!(c.contains("DAMON reclaiming memory (kdamond)"), "{c}");
        // Without schedstats a wait is not called preemption.
        let mut w = wait(10, 1, 0, &[]);
        w.runqueue_ns = None;
        assert!(
            slow_cause(&w).starts_with("blocked 9.0 ms"),
            "{}",
            slow_cause(&w)
        );
    }
}
