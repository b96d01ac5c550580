//! `fsprof calibrate`'s table of this machine's characteristic latencies.

use std::fmt::Write;

use fsprof_analysis::labels::MAX_ROUND_SPREAD;
use fsprof_analysis::Calibration;
use fsprof_core::units::{format_bytes, format_ns};

pub fn render_text(cal: &Calibration) -> String {
    let mut out = format!(
        "{:<18} {:>8} {:>10} {:>10} {:>10} {:>8} {:>7}  how\n",
        "characteristic", "size", "median", "p10", "p90", "samples", "rounds"
    );
    for c in &cal.characteristics {
        let size = c.size_bytes.map_or("-".into(), |b| format_bytes(b as f64));
        let rounds = if !c.is_stable() {
            "unstable".into()
        } else if c.spread() > MAX_ROUND_SPREAD {
            // Stable by the majority: one round was out.
            format!("{:.2}x*", c.agreeing_spread())
        } else {
            format!("{:.2}x", c.spread())
        };
        let _ = writeln!(
            out,
            "{:<18} {:>8} {:>10} {:>10} {:>10} {:>8} {:>7}  {}",
            c.label,
            size,
            format_ns(c.median_ns),
            format_ns(c.p10_ns),
            format_ns(c.p90_ns),
            c.samples,
            rounds,
            c.method
        );
    }
    let k = &cal.conditions;
    let load = |l: Option<f64>| l.map_or("?".into(), |v| format!("{v:.2}"));
    let _ = writeln!(
        out,
        "\n{} rounds on {} ({} CPUs, load {} before, {} after); rounds: largest over smallest round median (*: without the one round farthest out, which disagreed).",
        k.rounds,
        if k.fs_type.is_empty() { "?" } else { &k.fs_type },
        k.cpus,
        load(k.load_before),
        load(k.load_after)
    );
    let unstable: Vec<&str> = cal
        .characteristics
        .iter()
        .filter(|c| !c.is_stable())
        .map(|c| c.label.as_str())
        .collect();
    if !unstable.is_empty() {
        let _ = writeln!(
            out,
            "unstable (no majority of rounds within {MAX_ROUND_SPREAD}x, so never used for labels): {}; calibrate again on a quieter machine",
            unstable.join(", ")
        );
    }
    out
}
