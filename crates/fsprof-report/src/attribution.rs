//! The layered-attribution table (`fsprof report --attribution`, and
//! `fsprof kernel`'s own report); the figures are
//! [`fsprof_analysis::attribution`]'s.

use std::fmt::Write;

use fsprof_analysis::attribution::{attribute, fuse_split, Attribution};
use fsprof_core::Profile;

use fsprof_core::units::format_ns as fmt_ns;

/// The attribution table for the text report; empty when the profile has
/// nothing to attribute.
pub fn render_text(p: &Profile) -> String {
    let mut s = render_fuse_split(p);
    match attribute(p) {
        Attribution::None => {}
        Attribution::NotRecorded(why) => {
            let _ = writeln!(
                s,
                "
layered attribution: {why}"
            );
        }
        Attribution::Measured(rows) => {
            let _ = writeln!(
                s,
                "
layered attribution: system calls that slept uninterruptibly while block I/O completed (docs/profile-format.md#layered-attribution)"
            );
            let _ = writeln!(
                s,
                "  {:<22} {:>9} {:>9} {:>7} {:>10} {:>10} {:>7}",
                "syscall", "calls", "waited", "calls%", "time", "waiting", "time%"
            );
            for r in rows {
                let _ = writeln!(
                    s,
                    "  {:<22} {:>9} {:>9} {:>6.1}% {:>10} {:>10} {:>6.1}%",
                    format!("syscall/{}", r.op),
                    r.calls,
                    r.waited_calls,
                    100.0 * r.calls_share(),
                    fmt_ns(r.time_ns as f64),
                    fmt_ns(r.wait_ns as f64),
                    100.0 * r.time_share()
                );
            }
        }
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
    use fsprof_core::profile::Meta;
    use fsprof_core::Profile;
    use fsprof_testkit::profiles::{op_total as op, profile_layers};

    #[test]
    fn waits_get_a_row_with_their_shares() {
        let p = profile_layers(&[
            ("syscall", vec![op("read", 200, 4_000_000)]),
            ("block", vec![op("sda:read", 5, 1)]),
            ("block-wait", vec![op("read", 5, 1_000_000)]),
        ]);
        let text = super::render_text(&p);
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("syscall/read"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(row.contains("2.5%") && row.contains("25.0%"), "{row}");
        assert!(super::render_text(&Profile::new(Meta::default())).is_empty());
    }

    #[test]
    fn fuse_ops_seen_by_kernel_and_daemon_are_set_side_by_side() {
        let p = profile_layers(&[
            (
                "fuse",
                vec![op("read", 10, 400_000), op("lookup", 3, 30_000)],
            ),
            ("fusefs", vec![op("read", 10, 100_000)]),
        ]);
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
