//! Printing a result as text, CSV or Markdown (JSON is the file itself),
//! in the spirit of hyperfine's exports: one row per phase with the mean
//! and its 95% interval, median, min, max, stddev and outliers.

use std::fmt::Write;

use crate::params::human_bytes;
use crate::result::{BenchResult, PhaseResult};
use fsprof_measure::cache::{CacheCheck, CacheMode};

fn ci(p: &PhaseResult) -> (f64, f64) {
    p.summary
        .ci95
        .map(|c| (c.half_width, c.relative().unwrap_or(0.0) * 100.0))
        .unwrap_or((f64::NAN, f64::NAN))
}

pub fn text(r: &BenchResult) -> String {
    let mut s = header(r);
    table(&mut s, r);
    if let Some(line) = cache_line(r) {
        let _ = writeln!(s, "\n{line}");
    }
    let p = &r.params;
    if let Some(note) = p.suite().ok().and_then(|suite| suite.figures_note(p)) {
        let _ = writeln!(s, "{note}");
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {}", w.message);
    }
    s
}

/// What ran where, on which machine, with which timer.
fn header(r: &BenchResult) -> String {
    let p = &r.params;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "fsprof bench {} on {} ({} {}, {}), {} runs after {} warm-up, --cache {}",
        p.suite,
        r.dir.path,
        r.dir.fs_type,
        r.dir.source,
        r.dir.mount_options,
        p.runs,
        p.warmup,
        p.cache.name()
    );
    let _ = writeln!(
        s,
        "machine: {}, {} CPUs, {} memory, kernel {}; timer {} (adds {:.1} ns/op, resolves {:.0} ns)",
        r.machine.cpu_model,
        r.machine.cpus,
        human_bytes(r.machine.memory_total),
        r.machine.kernel,
        r.timer.clock,
        r.timer.overhead_ns,
        r.timer.resolution_ns
    );
    s
}

/// One row per phase.
fn table(s: &mut String, r: &BenchResult) {
    let _ = writeln!(
        s,
        "\n{:<22} {:>12} {:>18} {:>12} {:>12} {:>12} {:>10} {:>9} {:>4} {:>6}",
        "phase", "mean", "± 95% CI", "median", "min", "max", "stddev", "op p50", "out", "on CPU"
    );
    for (name, ph) in r.named_phases(human_bytes) {
        let m = &ph.summary;
        let (hw, rel) = ci(ph);
        let _ = writeln!(
            s,
            "{:<22} {:>12} {:>18} {:>12} {:>12} {:>12} {:>10} {:>9} {:>4} {:>6}",
            name,
            format!("{:.1} {}", m.mean, ph.unit),
            format!("± {hw:.1} ({rel:.1}%)"),
            format!("{:.1}", m.median),
            format!("{:.1}", m.min),
            format!("{:.1}", m.max),
            m.stddev.map_or("-".into(), |d| format!("{d:.1}")),
            fsprof_core::units::format_ns(ph.op_median_ns),
            m.outliers.len(),
            ph.on_cpu
                .map_or("-".into(), |f| format!("{:.0}%", f * 100.0))
        );
    }
}

/// The cache state every phase started in, as the checks found it, in
/// one line: the worst check in words (`cold: verified, 0 of 2816 pages
/// cached (cachestat)`) and how many passed; `None` when nothing was
/// prepared.
pub fn cache_line(r: &BenchResult) -> Option<String> {
    let all: Vec<&CacheCheck> = r
        .phases
        .iter()
        .chain(r.sweep.iter().flat_map(|s| s.phases.iter()))
        .flat_map(|p| p.cache.iter())
        .collect();
    let first = all.first()?;
    let how = first.eviction.map_or_else(
        || match first.mode {
            CacheMode::Warm => "a read pass".to_string(),
            _ => "nothing done".to_string(),
        },
        |e| e.describe().to_string(),
    );
    let verified: Vec<&CacheCheck> = all
        .iter()
        .copied()
        .filter(|c| c.verified_by.is_some())
        .collect();
    // The worst check speaks for all: the most pages cached for cold (and
    // as-is), the fewest for warm.
    let by_share = |a: &&&CacheCheck, b: &&&CacheCheck| a.fraction().total_cmp(&b.fraction());
    let worst = match first.mode {
        CacheMode::Warm => verified.iter().min_by(by_share),
        _ => verified.iter().max_by(by_share),
    };
    let Some(worst) = worst else {
        return Some(format!(
            "cache: {} by {how} before each phase: not verified (no residency call for these files)",
            first.mode.name()
        ));
    };
    let failed = verified.iter().filter(|c| !c.passed).count();
    let tally = match failed {
        0 => format!("the worst of {} checks, all passed", verified.len()),
        k => format!("{k} of {} checks FAILED", verified.len()),
    };
    Some(format!(
        "cache: {} — {tally} ({how} before each phase)",
        worst.describe()
    ))
}

pub fn csv(r: &BenchResult) -> String {
    let mut s = String::from(
        "phase,unit,runs,mean,ci95_low,ci95_high,median,min,max,stddev,mad,outliers,op_median_ns,on_cpu\n",
    );
    for (name, p) in r.named_phases(human_bytes) {
        let m = &p.summary;
        let (lo, hi) = m.ci95.map_or((f64::NAN, f64::NAN), |c| (c.low, c.high));
        let _ = writeln!(
            s,
            "{name},{},{},{},{lo},{hi},{},{},{},{},{},{},{},{}",
            p.unit,
            m.n,
            m.mean,
            m.median,
            m.min,
            m.max,
            m.stddev.unwrap_or(f64::NAN),
            m.mad,
            m.outliers.len(),
            p.op_median_ns,
            p.on_cpu.map_or(String::new(), |f| f.to_string())
        );
    }
    s
}

pub fn markdown(r: &BenchResult) -> String {
    let mut s = String::from(
        "| phase | mean ± 95% CI | median | min | max | stddev | op p50 |\n|:---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (name, p) in r.named_phases(human_bytes) {
        let m = &p.summary;
        let (hw, rel) = ci(p);
        let _ = writeln!(
            s,
            "| `{name}` | {:.1} ± {hw:.1} {} ({rel:.1}%) | {:.1} | {:.1} | {:.1} | {} | {} |",
            m.mean,
            p.unit,
            m.median,
            m.min,
            m.max,
            m.stddev.map_or("-".into(), |d| format!("{d:.1}")),
            fsprof_core::units::format_ns(p.op_median_ns)
        );
    }
    s
}
