//! The text report: a header saying what was profiled and what the
//! profiler cost, ops ranked by total latency, then a log2 histogram per
//! top op in the style bcc/bpftrace users read every day.

use std::fmt::Write;

use fsprof_core::layer::Unit;
use fsprof_core::printable::field;
use fsprof_core::units::format_ns;
use fsprof_core::{OpStats, Profile, Resolution};

use crate::fmt::group;
use crate::summary::{LayerSummary, Row, Summary};
use crate::ReportOptions;

/// Width of a histogram bar at the bucket with most calls.
pub(crate) const BAR: usize = 40;

pub fn render(p: &Profile, s: &Summary, opts: &ReportOptions) -> String {
    let mut out = String::new();
    header(&mut out, p);
    // The measurement floor of the clock that timed the calls, when the
    // profile knows it (the user layer's shim and fsprof mount measure it).
    let mut floor = Floor {
        ns: p.meta.overhead.as_ref().map(|o| o.min_recordable_ns),
        told: false,
    };
    for l in &s.layers {
        // A byte layer's values, totals and quantiles are bytes.
        let u = Unit::of(l.name);
        let _ = writeln!(
            out,
            "\nlayer {}: {} calls, {} errors, {} {}",
            l.name,
            group(l.calls),
            group(l.errors),
            u.format(l.total_ns as f64),
            u.total_phrase()
        );
        if l.rows.is_empty() {
            let _ = writeln!(out, "  (no calls)");
            continue;
        }
        op_table(&mut out, l, u);
        unfinished(&mut out, l, p.meta.exit.is_some());
        for r in l.rows.iter().take(opts.top) {
            top_op(&mut out, l.name, r, p.resolution(), &mut floor);
        }
    }
    if opts.processes && !p.processes.is_empty() {
        processes(&mut out, p);
    }
    out
}

/// The clock's measurement floor, and whether the report explained it yet
/// (once, under the first histogram that marks it).
struct Floor {
    ns: Option<f64>,
    told: bool,
}

/// One layer's ops, ranked, one line each.
fn op_table(out: &mut String, l: &LayerSummary, u: Unit) {
    let w = crate::fmt::name_column(l.rows.iter().map(|r| r.op.name.as_str()));
    let _ = writeln!(
        out,
        "  {:<w$} {:>11} {:>8} {:>10} {:>6} {:>9} {:>9} {:>9}",
        "op", "calls", "errors", "total", "share", "mean", "p50", "p99"
    );
    for r in &l.rows {
        let _ = writeln!(
            out,
            "  {:<w$} {:>11} {:>8} {:>10} {:>5.1}% {:>9} {:>9} {:>9}",
            r.op.name,
            group(r.op.post),
            group(r.op.errors),
            u.format(r.op.total_ns as f64),
            r.share * 100.0,
            u.format(r.op.mean_ns()),
            u.format(r.p50_ns),
            u.format(r.p99_ns),
        );
    }
}

/// A note per op with calls that entered and never returned.
fn unfinished(out: &mut String, l: &LayerSummary, exited: bool) {
    // A command's exit ends a capture; without one, tracing stopped
    // (--duration, Ctrl-C) while calls were in progress.
    let why = if exited {
        "their process ended inside them, or was still in them when the command exited"
    } else {
        "they were in progress when tracing stopped"
    };
    for r in l.rows.iter().filter(|r| r.op.unfinished() > 0) {
        let _ = writeln!(
            out,
            "  note: {}: {} call(s) entered but not returned ({why})",
            r.op.name,
            r.op.unfinished()
        );
    }
}

/// A top op's summary line and histogram.
fn top_op(out: &mut String, layer: &str, r: &Row, res: Resolution, floor: &mut Floor) {
    let u = Unit::of(layer);
    let _ = writeln!(
        out,
        "\n{}/{}: {} calls, {} total, {:.1}% of the layer; p50 in {}, p99 in {}",
        layer,
        r.op.name,
        group(r.op.post),
        u.format(r.op.total_ns as f64),
        r.share * 100.0,
        range_in(r.p50_range_ns, u),
        range_in(r.p99_range_ns, u),
    );
    // The clock's floor says nothing about byte counts.
    let ns = floor.ns.filter(|_| u == Unit::Ns);
    let (text, marked) = histogram_in(r.op, res, ns, u);
    out.push_str(&text);
    if marked && !floor.told {
        floor.told = true;
        let _ = writeln!(
            out,
            "  (< floor: calls shorter than the smallest recordable latency, {} (two back-to-back clock\n   \
             reads): fsprof only knows they were that fast, e.g. answered by libc from memory without a\n   \
             system call; 0ns: within one clock tick)",
            format_ns(ns.unwrap_or(0.0))
        );
    }
}

/// The profile's metadata is printed field by field through
/// `printable::field`: a shared profile's command line or host name must
/// not carry escape sequences (or line breaks) to the reader's terminal.
fn header(out: &mut String, p: &Profile) {
    let m = &p.meta;
    let _ = writeln!(out, "fsprof {}", what_ran(m));
    let _ = writeln!(out, "  {}", facts(p).join(" · "));
    if !m.run.host.is_empty() {
        let _ = writeln!(
            out,
            "  host {} · kernel {} · started {}",
            field(&m.run.host),
            field(&m.run.kernel),
            field(&m.run.start_time)
        );
    }
    conditions(out, m);
    unprofiled(out, &m.unprofiled);
    let filtered = m.target.as_deref() != Some(fsprof_core::profile::SYSTEM_WIDE);
    let unfiltered = p
        .layers
        .iter()
        .find(|l| fsprof_core::layer::system_wide(&l.name));
    if let Some(l) = unfiltered.filter(|_| filtered) {
        let _ = writeln!(
            out,
            "  {} layer: system-wide, every task's requests, not only the target's (they are issued from plugs, kworkers and interrupts)",
            l.name
        );
    }
}

/// `run -- grep -r x /usr`, `mount: /mnt`.
fn what_ran(m: &fsprof_core::profile::Meta) -> String {
    if let Some(target) = &m.target {
        format!("{}: {}", m.tool, field(target))
    } else if m.command.is_empty() {
        m.tool.to_string()
    } else {
        let words: Vec<String> = m.command.iter().map(|w| shell_quote(w)).collect();
        format!("{} -- {}", m.tool, field(&words.join(" ")))
    }
}

/// Exit, wall time, processes, clock, buckets, intervals.
fn facts(p: &Profile) -> Vec<String> {
    let m = &p.meta;
    let mut facts = Vec::new();
    if let Some(exit) = &m.exit {
        facts.push(match exit {
            fsprof_core::profile::ExitStatus::Code(c) => format!("exit {c}"),
            fsprof_core::profile::ExitStatus::Signal(s) => format!("killed by signal {s}"),
        });
    }
    facts.push(format!("{} wall", format_ns(m.duration_ns as f64)));
    if !p.processes.is_empty() {
        facts.push(format!("{} process image(s)", p.processes.len()));
    }
    let clock = match m.clock.tsc_hz {
        Some(hz) => format!("clock {} {:.3} GHz", m.clock.source, hz / 1e9),
        None => format!("clock {}", m.clock.source),
    };
    facts.push(clock);
    facts.push(match m.resolution.get() {
        1 => "log2 buckets".to_string(),
        r => format!("{r} buckets per power of 2"),
    });
    if let Some(iv) = m.interval_ns {
        facts.push(format!(
            "{} intervals of {}",
            p.intervals.len(),
            format_ns(iv as f64)
        ));
    }
    facts
}

/// What the profiler cost, what it was merged from, its settings and
/// notes.
fn conditions(out: &mut String, m: &fsprof_core::profile::Meta) {
    if let Some(o) = &m.overhead {
        let share = if m.duration_ns > 0 {
            o.estimated_total_ns as f64 * 100.0 / m.duration_ns as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "  self-overhead {}, {:.2}% of wall time",
            o.summary(),
            share
        );
    }
    if !m.merged_from.is_empty() {
        let _ = writeln!(out, "  merged from {} profile(s)", m.merged_from.len());
    }
    if !m.settings.is_empty() {
        let kv: Vec<String> = m
            .settings
            .iter()
            .map(|(k, v)| format!("{} {}", field(k), field(v)))
            .collect();
        let _ = writeln!(out, "  {}", kv.join(" · "));
    }
    for n in &m.notes {
        let _ = writeln!(out, "  note: {}", field(n));
    }
}

/// The processes the capture could not profile (the first ten).
fn unprofiled(out: &mut String, list: &[fsprof_core::profile::Unprofiled]) {
    if list.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  {} process(es) not profiled (their calls are missing):",
        list.len()
    );
    for u in list.iter().take(10) {
        let _ = writeln!(
            out,
            "    pid {} ({}): {}",
            u.pid,
            field(&u.exe),
            field(&u.reason)
        );
    }
}

/// `131µs..262µs`: the bucket a quantile lies in (one value when clamping
/// to the op's min and max closed it).
fn range_in((lo, hi): (f64, f64), u: Unit) -> String {
    if lo == hi {
        u.format(lo)
    } else {
        format!("{}..{}", u.format(lo), u.format(hi))
    }
}

/// One row per bucket from the first to the last non-empty one, bounds in
/// `unit`, with the rows of latencies under the measurement `floor` (the
/// 0 ns row, and buckets starting below it) marked `< floor`; says whether
/// it marked any.
pub fn histogram_in(
    op: &OpStats,
    res: Resolution,
    floor: Option<f64>,
    unit: Unit,
) -> (String, bool) {
    let h = &op.histogram;
    // (range, calls, under the floor)
    let mut rows: Vec<(String, u64, bool)> = Vec::new();
    if h.zero > 0 {
        rows.push((unit.format(0.0), h.zero, floor.is_some()));
    }
    if !h.counts.is_empty() {
        for (k, &c) in h.counts.iter().enumerate() {
            let i = h.offset + k as i32;
            let range = format!(
                "{} -> {}",
                unit.format(res.lower_bound(i)),
                unit.format(res.upper_bound(i))
            );
            let under = floor.is_some_and(|f| res.lower_bound(i) < f);
            rows.push((range, c, under));
        }
    }
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0).max(1);
    let w = rows
        .iter()
        .map(|r| r.0.chars().count())
        .max()
        .unwrap_or(0)
        .max(13);
    let cw = rows
        .iter()
        .map(|r| group(r.1).len())
        .max()
        .unwrap_or(0)
        .max(5);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  {:>w$} : {:<cw$}  distribution",
        unit.quantity(),
        "count"
    );
    let mut marked = false;
    for (range, c, under) in rows {
        let n = ((c as f64 / max as f64) * BAR as f64).ceil() as usize;
        let pad = w - range.chars().count();
        let mark = if under && c > 0 { "  < floor" } else { "" };
        marked |= !mark.is_empty();
        let _ = writeln!(
            out,
            "  {}{range} : {:<cw$}  |{:<BAR$}|{mark}",
            " ".repeat(pad),
            group(c),
            "*".repeat(n.min(BAR))
        );
    }
    (out, marked)
}

fn processes(out: &mut String, p: &Profile) {
    let _ = writeln!(out, "\nprocesses");
    let _ = writeln!(
        out,
        "  {:>8} {:>8} {:>11} {:>10}  command",
        "pid", "ppid", "calls", "total"
    );
    for pr in &p.processes {
        let calls = pr
            .layers
            .iter()
            .fold(0u64, |t, l| t.saturating_add(l.total_calls()));
        let total = pr
            .layers
            .iter()
            .fold(0u64, |t, l| t.saturating_add(l.total_ns()));
        let cmd = if pr.argv.is_empty() {
            pr.exe.clone()
        } else {
            pr.argv.join(" ")
        };
        let _ = writeln!(
            out,
            "  {:>8} {:>8} {:>11} {:>10}  {}",
            pr.pid,
            pr.ppid,
            group(calls),
            format_ns(total as f64),
            truncate(&field(&cmd), COMMAND_WIDTH)
        );
    }
}

/// Characters of a command line the process table shows: lines end by
/// column 120, as `ps` cuts them at the terminal's width (the JSON report
/// keeps every argument).
const COMMAND_WIDTH: usize = 120 - 44;

/// `s` cut to `width` characters, the cut marked with `…`.
fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut t: String = s.chars().take(width - 1).collect();
    t.push('…');
    t
}

/// The word as a shell would need it typed, so the header can be pasted.
fn shell_quote(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_words_a_shell_would_split() {
        for (w, s) in [
            ("grep", "grep"),
            ("a b", "'a b'"),
            ("it's", "'it'\\''s'"),
            ("", "''"),
        ] {
            assert_eq!(shell_quote(w), s);
        }
    }

    fn header_of(p: &Profile) -> String {
        let mut out = String::new();
        header(&mut out, p);
        out
    }

    /// A capture without a command names its target; the block layer,
    /// which no target filters, says so unless the target is everything.
    #[test]
    fn header_names_the_target_and_the_unfiltered_block_layer() {
        let mut p = Profile::new(fsprof_core::Meta {
            tool: "kernel".into(),
            target: Some("tasks named postgres".into()),
            ..Default::default()
        });
        p.layer_mut("syscall");
        let h = header_of(&p);
        assert!(
            h.starts_with("fsprof kernel: tasks named postgres\n"),
            "{h}"
        );
        assert!(!h.contains("block layer"), "{h}");
        p.layer_mut("block");
        assert!(header_of(&p).contains("  block layer: system-wide, every task's requests"));
        p.meta.target = Some(fsprof_core::profile::SYSTEM_WIDE.into());
        let h = header_of(&p);
        assert!(
            h.starts_with("fsprof kernel: every task (system-wide)\n"),
            "{h}"
        );
        assert!(!h.contains("block layer"), "{h}");
        p.meta.target = None;
        p.meta.command = vec!["tar".into(), "-cf".into(), "x y.tar".into()];
        assert!(header_of(&p).starts_with("fsprof kernel -- tar -cf 'x y.tar'\n"));
        assert!(header_of(&p).contains("block layer: system-wide"));
    }

    /// The 0 ns row and the buckets starting under the measurement floor
    /// are marked, and the report says once what that means.
    #[test]
    fn latencies_under_the_floor_are_marked_and_explained() {
        let mut op = OpStats::new("readdir");
        op.histogram.zero = 106;
        op.histogram.add_to(Some(3), 9_336); // 8ns..16ns, floor 10ns
        op.histogram.add_to(Some(4), 10); // 16ns..32ns
        op.post = 106 + 9_336 + 10;
        let (text, marked) = histogram_in(&op, Resolution::DEFAULT, Some(10.0), Unit::Ns);
        assert!(marked);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].contains("0ns : 106") && lines[1].ends_with("|  < floor"),
            "{text}"
        );
        assert!(
            lines[2].contains("8ns -> 16ns") && lines[2].ends_with("< floor"),
            "{text}"
        );
        assert!(lines[3].ends_with('|'), "{text}");
        assert!(!histogram_in(&op, Resolution::DEFAULT, None, Unit::Ns).1);

        let mut p = Profile::new(fsprof_core::Meta {
            tool: "run".into(),
            overhead: Some(fsprof_core::profile::Overhead {
                per_call_ns: 20.0,
                min_recordable_ns: 10.0,
                estimated_total_ns: 0,
                sampled: None,
            }),
            ..Default::default()
        });
        p.layer_mut("user").ops = vec![op.clone(), {
            let mut o = op;
            o.name = "fread".into();
            o
        }];
        p.layer_mut("user").normalize();
        let text = crate::render(&p, &crate::ReportOptions::default(), None).unwrap();
        assert_eq!(
            text.matches("(< floor: calls shorter than the smallest recordable latency, 10ns")
                .count(),
            1,
            "{text}"
        );
    }

    /// A 2,000-character command line (a compiler's) does not flood the
    /// process table: lines stop at column 120, like ps's.
    #[test]
    fn long_command_lines_are_cut_like_ps() {
        let mut p = Profile::new(fsprof_core::Meta::default());
        let long: Vec<String> = (0..300).map(|i| format!("-Iinc{i}")).collect();
        for (pid, argv) in [(7, vec!["cc1".to_string(), "-O2".into()]), (8, long)] {
            p.processes.push(fsprof_core::profile::Process {
                pid,
                argv,
                ..Default::default()
            });
        }
        let mut out = String::new();
        processes(&mut out, &p);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[3].ends_with("  cc1 -O2"), "{out}");
        assert_eq!(lines[4].chars().count(), 120, "{out}");
        assert!(
            lines[4].ends_with('…') && lines[4].contains("-Iinc0 -Iinc1 "),
            "{out}"
        );
    }

    #[test]
    fn histogram_spans_first_to_last_bucket() {
        let mut op = OpStats::new("read");
        op.histogram.add_to(Some(9), 10); // 512ns..1.02µs
        op.histogram.add_to(Some(12), 5);
        op.post = 15;
        let text = histogram_in(&op, Resolution::DEFAULT, None, Unit::Ns).0;
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 4, "{text}");
        assert!(lines[1].contains("512ns -> 1.02µs") && lines[1].contains(&"*".repeat(BAR)));
        assert!(lines[2].contains("|                                        |"));
        assert!(lines[4].contains(&format!("|{}{}|", "*".repeat(20), " ".repeat(20))));
    }
}
