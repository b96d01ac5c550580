//! Small formatting helpers shared by the analysis reasons and labels (and
//! by fsprof-report's tables of them, so both print bounds alike).

use fsprof_core::layer::Unit;
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

/// Where a bucket "is", the one convention every renderer uses: the range
/// it holds, `2.10ms..4.19ms` (lower bound exclusive, upper inclusive, as
/// bucket `i` holds `(2^(i/r), 2^((i+1)/r)]` ns). Where one number must
/// stand for the bucket (a label, a peak's mode), it is [`bucket_mid`].
/// Bounds in the layer's `unit` (bytes for a byte-valued layer).
pub fn bucket_human(i: i32, res: Resolution, unit: Unit) -> String {
    format!(
        "{}..{}",
        unit.format(res.lower_bound(i)),
        unit.format(res.upper_bound(i))
    )
}

/// The geometric middle of bucket `i`, ns: the single value that stands
/// for the bucket (peak modes, labels, markers).
pub fn bucket_mid(i: i32, res: Resolution) -> f64 {
    (res.lower_bound(i) * res.upper_bound(i)).sqrt()
}

/// `~2.97ms`: [`bucket_mid`] for a table column, in `unit`.
pub fn bucket_mid_human(i: i32, res: Resolution, unit: Unit) -> String {
    format!("~{}", unit.format(bucket_mid(i, res)))
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
