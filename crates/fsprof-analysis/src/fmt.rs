//! Small formatting helpers shared by the analysis reasons and labels (and
//! by fsprof-report's tables of them, so both print bounds alike).

use fsprof_core::units::format_ns;
use fsprof_core::Resolution;

/// `2^22 ns` for the upper bound of bucket 21 at resolution 1; fractional
/// exponents (`2^5.25 ns`) at finer resolutions.
pub fn bucket_bound(i: i32, res: Resolution) -> String {
    let r = res.get() as i32;
    let e = i + 1;
    if e % r == 0 {
        format!("2^{} ns", e / r)
    } else {
        let x = e as f64 / r as f64;
        format!("2^{} ns", trim(format!("{x:.3}")))
    }
}

/// `2^22 ns (4.19ms)`: the bucket's upper bound, exactly and in human units.
pub fn bucket_human(i: i32, res: Resolution) -> String {
    format!(
        "{} ({})",
        bucket_bound(i, res),
        format_ns(res.upper_bound(i))
    )
}

fn trim(s: String) -> String {
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub fn pct(x: f64) -> String {
    let p = x * 100.0;
    if p >= 10.0 || p == 0.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}
