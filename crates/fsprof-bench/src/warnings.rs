//! The reasons not to trust a result, each with what to do about it.

use crate::params::human_bytes;
use crate::result::{BenchResult, PhaseResult, Warning};
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
