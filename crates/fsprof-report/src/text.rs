//! The text report: a header saying what was profiled and what the
//! profiler cost, ops ranked by total latency, then a log2 histogram per
//! top op in the style bcc/bpftrace users read every day.

use std::fmt::Write;

use fsprof_core::units::format_ns;
use fsprof_core::{OpStats, Profile, Resolution};

use crate::fmt::group;
use crate::summary::Summary;
use crate::ReportOptions;

/// Width of a histogram bar at the bucket with most calls.
pub(crate) const BAR: usize = 40;

pub fn render(p: &Profile, s: &Summary, opts: &ReportOptions) -> String {
    let mut out = String::new();
    header(&mut out, p);
    for l in &s.layers {
        let _ = writeln!(
            out,
            "\nlayer {}: {} calls, {} errors, {} in calls",
            l.name,
            group(l.calls),
            group(l.errors),
            format_ns(l.total_ns as f64)
        );
        if l.rows.is_empty() {
            let _ = writeln!(out, "  (no calls)");
            continue;
        }
        let w = l
            .rows
            .iter()
            .map(|r| r.op.name.len())
            .max()
            .unwrap_or(2)
            .max(2);
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
                format_ns(r.op.total_ns as f64),
                r.share * 100.0,
                format_ns(r.op.mean_ns()),
                format_ns(r.p50_ns),
                format_ns(r.p99_ns),
            );
        }
        // A command's exit ends a capture; without one, tracing stopped
        // (--duration, Ctrl-C) while calls were in progress.
        let why = if p.meta.exit.is_some() {
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
        for r in l.rows.iter().take(opts.top) {
            let _ = writeln!(
                out,
                "\n{}/{}: {} calls, {} total, {:.1}% of the layer",
                l.name,
                r.op.name,
                group(r.op.post),
                format_ns(r.op.total_ns as f64),
                r.share * 100.0
            );
            out.push_str(&histogram(r.op, p.resolution()));
        }
    }
    if opts.processes && !p.processes.is_empty() {
        processes(&mut out, p);
    }
    out
}

fn header(out: &mut String, p: &Profile) {
    let m = &p.meta;
    let what = if let Some(target) = &m.target {
        format!("{}: {target}", m.tool)
    } else if m.command.is_empty() {
        m.tool.to_string()
    } else {
        let words: Vec<String> = m.command.iter().map(|w| shell_quote(w)).collect();
        format!("{} -- {}", m.tool, words.join(" "))
    };
    let _ = writeln!(out, "fsprof {what}");
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
    let _ = writeln!(out, "  {}", facts.join(" · "));
    if !m.host.is_empty() {
        let _ = writeln!(
            out,
            "  host {} · kernel {} · started {}",
            m.host, m.kernel, m.start_time
        );
    }
    if let Some(o) = &m.overhead {
        let share = if m.duration_ns > 0 {
            o.estimated_total_ns as f64 * 100.0 / m.duration_ns as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "  self-overhead {} per call (smallest recordable latency {}); ≈ {} in all, {:.2}% of wall time",
            format_ns(o.per_call_ns),
            format_ns(o.min_recordable_ns),
            format_ns(o.estimated_total_ns as f64),
            share
        );
    }
    if !m.merged_from.is_empty() {
        let _ = writeln!(out, "  merged from {} profile(s)", m.merged_from.len());
    }
    if !m.settings.is_empty() {
        let kv: Vec<String> = m.settings.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(out, "  {}", kv.join(" · "));
    }
    for n in &m.notes {
        let _ = writeln!(out, "  note: {n}");
    }
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

/// One row per bucket from the first to the last non-empty one.
pub fn histogram(op: &OpStats, res: Resolution) -> String {
    let h = &op.histogram;
    let mut rows: Vec<(String, u64)> = Vec::new();
    if h.zero > 0 {
        rows.push(("0ns".into(), h.zero));
    }
    if !h.counts.is_empty() {
        for (k, &c) in h.counts.iter().enumerate() {
            let i = h.offset + k as i32;
            let range = format!(
                "{} -> {}",
                format_ns(res.lower_bound(i)),
                format_ns(res.upper_bound(i))
            );
            rows.push((range, c));
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
    let _ = writeln!(out, "  {:>w$} : {:<cw$}  distribution", "latency", "count");
    for (range, c) in rows {
        let n = ((c as f64 / max as f64) * BAR as f64).ceil() as usize;
        let pad = w - range.chars().count();
        let _ = writeln!(
            out,
            "  {}{range} : {:<cw$}  |{:<BAR$}|",
            " ".repeat(pad),
            group(c),
            "*".repeat(n.min(BAR))
        );
    }
    out
}

fn processes(out: &mut String, p: &Profile) {
    let _ = writeln!(out, "\nprocesses");
    let _ = writeln!(
        out,
        "  {:>8} {:>8} {:>11} {:>10}  command",
        "pid", "ppid", "calls", "total"
    );
    for pr in &p.processes {
        let calls: u64 = pr.layers.iter().map(|l| l.total_calls()).sum();
        let total: u64 = pr.layers.iter().map(|l| l.total_ns()).sum();
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
            cmd
        );
    }
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

    #[test]
    fn histogram_spans_first_to_last_bucket() {
        let mut op = OpStats::new("read");
        op.histogram.add_to(Some(9), 10); // 512ns..1.02µs
        op.histogram.add_to(Some(12), 5);
        op.post = 15;
        let text = histogram(&op, Resolution::DEFAULT);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 4, "{text}");
        assert!(lines[1].contains("512ns -> 1.02µs") && lines[1].contains(&"*".repeat(BAR)));
        assert!(lines[2].contains("|                                        |"));
        assert!(lines[4].contains(&format!("|{}{}|", "*".repeat(20), " ".repeat(20))));
    }
}
