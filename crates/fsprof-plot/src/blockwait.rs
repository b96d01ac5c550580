//! Layered attribution as a picture: per system call op, one bar of its
//! total time, split into the time its calls waited for their own block
//! I/O and the rest (`fsprof report --attribution` in the HTML report).

use fsprof_analysis::attribution::BlockWait;
use fsprof_core::units::format_ns;

use crate::axis::{format_value, Unit, ValueAxis};
use crate::svg::{Anchor, Svg};

const WIDTH: f64 = 640.0;
/// Room for the op names on the left, the share on the right.
const LEFT: f64 = 110.0;
const RIGHT: f64 = 70.0;
/// Title and legend above, the time axis below.
const TOP: f64 = 48.0;
const BOTTOM: f64 = 40.0;
const ROW: f64 = 22.0;
const BAR: f64 = 14.0;

pub const WAIT_COLOUR: &str = "#c44e52";
pub const REST_COLOUR: &str = "#8da0cb";

/// The bars of `rows` (largest wait first, as
/// [`fsprof_analysis::attribution::attribute`] orders them), on one time
/// axis so that the ops compare.
pub fn block_wait_bars(title: &str, rows: &[BlockWait]) -> String {
    let height = TOP + ROW * rows.len().max(1) as f64 + BOTTOM;
    let mut svg = Svg::new(WIDTH, height, "chart attribution");
    svg.text(LEFT, 18.0, Anchor::Start, 13.0, "#111111", title);
    legend(&mut svg);
    let max = rows.iter().map(|r| r.time_ns as f64).fold(0.0, f64::max);
    let ax = ValueAxis::new(max, 1.0, false);
    let pw = WIDTH - LEFT - RIGHT;
    let base = TOP + ROW * rows.len().max(1) as f64;
    for &t in &ax.ticks {
        let x = LEFT + ax.frac(t) * pw;
        svg.line(x, TOP, x, base, "#e6e6e6", 1.0);
        svg.text(
            x,
            base + 14.0,
            Anchor::Middle,
            10.0,
            "#444444",
            &format_value(t, Unit::Nanos),
        );
    }
    for (k, r) in rows.iter().enumerate() {
        let y = TOP + ROW * k as f64 + (ROW - BAR) / 2.0;
        svg.y_tick_label(LEFT, y + BAR / 2.0, &r.op);
        let wait_w = ax.frac(r.wait_ns as f64) * pw;
        let all_w = ax.frac(r.time_ns as f64) * pw;
        let share = 100.0 * r.time_share();
        svg.rect(
            LEFT,
            y,
            wait_w,
            BAR,
            WAIT_COLOUR,
            Some(&format!(
                "{}: {} waiting for block I/O, {share:.1}% of its {} ({} of {} calls waited)",
                r.op,
                format_ns(r.wait_ns as f64),
                format_ns(r.time_ns as f64),
                r.waited_calls,
                r.calls
            )),
        );
        svg.rect(
            LEFT + wait_w,
            y,
            all_w - wait_w,
            BAR,
            REST_COLOUR,
            Some(&format!(
                "{}: {} the rest (not waiting for block I/O)",
                r.op,
                format_ns(r.time_ns.saturating_sub(r.wait_ns) as f64)
            )),
        );
        svg.text(
            LEFT + all_w + 4.0,
            y + BAR - 3.0,
            Anchor::Start,
            10.0,
            "#444444",
            &format!("{share:.0}% waiting"),
        );
    }
    svg.axes_and_x_title((LEFT, TOP, pw, base), height - 8.0, "time in calls");
    svg.finish()
}

fn legend(svg: &mut Svg) {
    for (k, (colour, what)) in [
        (WAIT_COLOUR, "waiting for block I/O"),
        (REST_COLOUR, "the rest"),
    ]
    .iter()
    .enumerate()
    {
        let x = LEFT + 170.0 * k as f64;
        svg.rect(x, 28.0, 10.0, 10.0, colour, None);
        svg.text(x + 14.0, 37.0, Anchor::Start, 10.0, "#333333", what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(op: &str, time_ns: u64, wait_ns: u64) -> BlockWait {
        BlockWait {
            op: op.into(),
            calls: 10,
            waited_calls: u64::from(wait_ns > 0) * 4,
            time_ns,
            wait_ns,
        }
    }

    /// The red part of each bar is the waiting share of the op's time, on
    /// a common axis; an op that never waited has no red.
    #[test]
    fn each_bar_splits_the_ops_time_at_its_wait() {
        let svg = block_wait_bars(
            "t",
            &[
                row("pread64", 8_000_000, 6_000_000),
                row("write", 4_000_000, 0),
            ],
        );
        let widths: Vec<(String, f64)> = svg
            .split("<rect ")
            .skip(1)
            .filter(|r| r.contains("<title>"))
            .map(|r| {
                let w = r.split("width=\"").nth(1).unwrap();
                let w: f64 = w[..w.find('"').unwrap()].parse().unwrap();
                let t = r.split("<title>").nth(1).unwrap();
                (t[..t.find("</title>").unwrap()].to_string(), w)
            })
            .collect();
        assert_eq!(widths.len(), 4, "{widths:?}");
        let (wait, rest) = (widths[0].1, widths[1].1);
        assert!(widths[0]
            .0
            .starts_with("pread64: 6.00ms waiting for block I/O, 75.0%"));
        assert!((wait / (wait + rest) - 0.75).abs() < 0.01, "{widths:?}");
        assert_eq!(widths[2].1, 0.0, "write never waited: {widths:?}");
        // Both on one axis: write's bar is half pread64's.
        assert!((widths[3].1 / (wait + rest) - 0.5).abs() < 0.01);
        assert!(svg.contains("75% waiting") && svg.contains("0% waiting"));
    }
}
