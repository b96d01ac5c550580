//! `fsprof calibrate`'s table of this machine's characteristic latencies.

use std::fmt::Write;

use fsprof_analysis::Calibration;
use fsprof_core::units::format_ns;

pub fn render_text(cal: &Calibration) -> String {
    let mut out = format!(
        "{:<18} {:>10} {:>10} {:>10} {:>8}  how\n",
        "characteristic", "median", "p10", "p90", "samples"
    );
    for c in &cal.characteristics {
        let _ = writeln!(
            out,
            "{:<18} {:>10} {:>10} {:>10} {:>8}  {}",
            c.label,
            format_ns(c.median_ns),
            format_ns(c.p10_ns),
            format_ns(c.p90_ns),
            c.samples,
            c.method
        );
    }
    out
}
