//! The text report: one row per parameter (discovered value, what the
//! kernel states, confidence, iterations, time), then the evidence in
//! sentences.

use std::fmt::Write;

use fsprof_core::units::format_ns;

use crate::finding::{Finding, Status, Unit};
use crate::methods::bytes;
use crate::Report;

fn value(f: &Finding, v: u64) -> String {
    match f.unit {
        Unit::Bytes => bytes(v),
        Unit::Blocks => v.to_string(),
    }
}

/// The discovered value, or why there is none.
pub fn discovered(f: &Finding) -> String {
    match (f.status, f.value) {
        (Status::Found, Some(v)) => value(f, v),
        (Status::NotApplicable, _) => "not applicable".into(),
        (Status::Undetermined, _) => "undetermined".into(),
        _ => "inconclusive".into(),
    }
}

/// The first value the kernel states, with where it comes from.
pub fn kernel_says(f: &Finding) -> String {
    match f.kernel.first() {
        Some(k) => format!("{} ({})", value(f, k.value), short_source(&k.source)),
        None => "-".into(),
    }
}

fn short_source(s: &str) -> String {
    if s.ends_with("/memory.max") || s.ends_with("/memory.limit_in_bytes") {
        "memory cgroup limit".into()
    } else if let Some(rest) = s.strip_prefix("/sys/") {
        format!("sysfs {}", rest.rsplit('/').next().unwrap_or(rest))
    } else if s.starts_with("statfs(") {
        "statfs f_bsize".into()
    } else if let Some((head, _)) = s.split_once(':') {
        head.to_string()
    } else {
        s.to_string()
    }
}

pub fn text(r: &Report) -> String {
    let mut o = String::new();
    let t = &r.target;
    let _ = write!(o, "fsprof discover {} ({}", t.dir.display(), t.fs_type);
    if let (Some(src), Some(mp)) = (&t.source, &t.mount_point) {
        let _ = write!(o, " on {src}, mounted at {}", mp.display());
    }
    let _ = writeln!(o, ")");
    let _ = writeln!(
        o,
        "  cold cache: {} — {}",
        r.cold_cache.name(),
        r.cold_cache_why
    );
    if let Some(fb) = &r.cold_cache_fallback {
        let _ = writeln!(o, "  cold cache fallback: {fb}");
    }
    let _ = writeln!(
        o,
        "  host {} · kernel {} · clock {} (+{} per timed call) · {} in all",
        r.host,
        r.kernel,
        r.clock.name(),
        format_ns(r.timing_overhead_ns),
        format_ns(r.duration_ns as f64)
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<22} {:>15}  {:<38} {:<10} {:>5} {:>8}",
        "parameter", "discovered", "kernel says", "confidence", "iter", "time"
    );
    for f in &r.findings {
        let conf = f.confidence.as_ref().map_or("-", |c| c.level.name());
        let _ = writeln!(
            o,
            "{:<22} {:>15}  {:<38} {:<10} {:>5} {:>8}",
            f.parameter.title(),
            discovered(f),
            kernel_says(f),
            conf,
            f.iterations,
            format_ns(f.run_time_ns as f64)
        );
    }
    for f in &r.findings {
        let _ = writeln!(o, "\n{}: {}", f.parameter.title(), discovered(f));
        if let Some(why) = &f.reason {
            let _ = writeln!(o, "  {}", why);
        }
        for c in &f.candidates {
            let _ = writeln!(o, "  candidate {}: {}", value(f, c.value), c.evidence);
        }
        if f.status != Status::NotApplicable {
            let _ = writeln!(
                o,
                "  method: {} ({} of {} iterations per offset)",
                f.method,
                f.summary.name(),
                f.iterations
            );
        }
        if let Some(c) = &f.confidence {
            let _ = writeln!(o, "  confidence {}: {}", c.level.name(), c.statement);
        }
        for x in &f.cross_checks {
            let _ = writeln!(o, "  cross-check, {}: {}", x.method, x.statement);
        }
        for k in &f.kernel {
            let _ = writeln!(o, "  kernel: {} = {}", k.source, value(f, k.value));
        }
        for n in &f.notes {
            let _ = writeln!(o, "  note: {n}");
        }
    }
    o
}
