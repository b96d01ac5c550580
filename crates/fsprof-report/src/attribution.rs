//! The layered-attribution table (`fsprof report --attribution`, and
//! `fsprof kernel`'s own report); the matching itself is
//! [`fsprof_analysis::attribution`].

use std::fmt::Write;

use fsprof_analysis::attribution::attribute;
use fsprof_core::Profile;

/// The attribution table for the text report; empty when no rule applies.
pub fn render_text(p: &Profile) -> String {
    let rows = attribute(p);
    let mut s = String::new();
    if rows.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "\nlayered attribution (calls whose latency bucket matches the lower layer's, see docs/profile-format.md):"
    );
    let _ = writeln!(
        s,
        "  {:<22} {:<34} {:>9} {:>9} {:>7} {:>7}",
        "upper op", "lower ops", "calls", "matched", "calls%", "time%"
    );
    for r in rows {
        let pc = |a: f64, b: f64| if b > 0.0 { 100.0 * a / b } else { 0.0 };
        let mut lower = r.lower.clone();
        if lower.len() > 34 {
            lower.truncate(31);
            lower.push_str("...");
        }
        let _ = writeln!(
            s,
            "  {:<22} {:<34} {:>9} {:>9} {:>6.1}% {:>6.1}%",
            r.upper,
            lower,
            r.calls,
            r.matched_calls,
            pc(r.matched_calls as f64, r.calls as f64),
            pc(r.matched_mass_ns, r.mass_ns)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use fsprof_core::histogram::OpStats;
    use fsprof_core::profile::{layer_in, Meta};
    use fsprof_core::{BucketLayout, Profile, Resolution};

    #[test]
    fn a_matched_op_gets_a_row() {
        let res = Resolution::new(1).unwrap();
        let layout = BucketLayout::new(res);
        let mut p = Profile::new(Meta {
            resolution: res,
            ..Default::default()
        });
        let mut read = OpStats::new("read");
        read.histogram.add_to(layout.index(200_000), 20);
        read.post = 20;
        read.pre = 20;
        layer_in(&mut p.layers, "syscall").ops.push(read);
        let mut b = OpStats::new("sda:read");
        b.histogram.add_to(layout.index(150_000), 5);
        layer_in(&mut p.layers, "block").ops.push(b);
        let text = super::render_text(&p);
        assert!(text.contains("syscall/read"), "{text}");
        assert!(super::render_text(&Profile::new(Meta::default())).is_empty());
    }
}
