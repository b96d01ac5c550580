//! The layered-attribution table (`fsprof report --attribution`, and
//! `fsprof kernel`'s own report); the matching itself is
//! [`fsprof_analysis::attribution`].

use std::fmt::Write;

use fsprof_analysis::attribution::{attribute, fuse_split};
use fsprof_core::Profile;

use fsprof_core::units::format_ns as fmt_ns;

/// The attribution table for the text report; empty when no rule applies.
pub fn render_text(p: &Profile) -> String {
    let rows = attribute(p);
    let mut s = render_fuse_split(p);
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

/// FUSE requests from both sides (the kernel's `fuse` layer and `fsprof
/// mount`'s `fusefs`): how much of each op's request time the daemon's
/// work on LOWER took; the rest is queueing, the transfer and the
/// switches between the application, the kernel and the daemon.
fn render_fuse_split(p: &Profile) -> String {
    let rows = fuse_split(p);
    let mut s = String::new();
    if rows.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "\nFUSE requests, kernel (fuse) and daemon (fusefs) side by side:"
    );
    let _ = writeln!(
        s,
        "  {:<16} {:>9} {:>9} {:>10} {:>10} {:>8}",
        "op", "kernel", "daemon", "kernel", "daemon", "daemon"
    );
    let _ = writeln!(
        s,
        "  {:<16} {:>9} {:>9} {:>10} {:>10} {:>8}",
        "", "calls", "calls", "time", "time", "share"
    );
    for r in rows {
        let note = if r.kernel_calls == r.daemon_calls {
            ""
        } else {
            "  (calls differ: not the same requests)"
        };
        let _ = writeln!(
            s,
            "  {:<16} {:>9} {:>9} {:>10} {:>10} {:>7.1}%{note}",
            r.op,
            r.kernel_calls,
            r.daemon_calls,
            fmt_ns(r.kernel_ns as f64),
            fmt_ns(r.daemon_ns as f64),
            100.0 * r.daemon_share()
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

    #[test]
    fn fuse_ops_seen_by_kernel_and_daemon_are_set_side_by_side() {
        let mut p = Profile::new(Meta::default());
        let op = |name: &str, calls: u64, ns: u64| {
            let mut o = OpStats::new(name);
            (o.pre, o.post, o.total_ns) = (calls, calls, ns);
            o.histogram.add_to(Some(10), calls);
            o
        };
        layer_in(&mut p.layers, "fuse")
            .ops
            .push(op("read", 10, 400_000));
        layer_in(&mut p.layers, "fusefs")
            .ops
            .push(op("read", 10, 100_000));
        layer_in(&mut p.layers, "fuse")
            .ops
            .push(op("lookup", 3, 30_000));
        let text = super::render_text(&p);
        assert!(
            text.contains("FUSE requests, kernel (fuse) and daemon (fusefs)"),
            "{text}"
        );
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("read"))
            .unwrap();
        assert!(row.contains("25.0%"), "{row}");
        assert!(!text.contains("lookup"), "only ops both sides saw: {text}");
    }
}
