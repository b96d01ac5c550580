//! The HTML report: one self-contained file (inline CSS, inline JS, inline
//! SVG; nothing is fetched), readable without JavaScript. The only script
//! switches the value axes between linear and logarithmic.

use std::fmt::Write;

use fsprof_core::layer::Unit;
use fsprof_core::profile::ExitStatus;
use fsprof_core::units::format_ns;
use fsprof_core::{OpStats, Profile, Resolution};
use fsprof_report::fmt::group;
use fsprof_report::summary::{Selection, Summary};

use crate::histchart::{self, HistogramChart, Kind, PeakMark, Series};
use crate::svg::esc;
use crate::timeline;
use crate::PlotError;

/// Finds the peaks of a histogram (fsprof-analysis when it is linked in).
pub type PeakFinder<'a> = &'a dyn Fn(&str, &OpStats, Resolution) -> Vec<PeakMark>;

#[derive(Clone, Default)]
pub struct HtmlOptions<'a> {
    pub selection: Selection,
    pub peaks: Option<PeakFinder<'a>>,
    /// Figures the caller drew from data beside the profile (a benchmark
    /// sweep's throughput against file size), each in its own section
    /// after the run facts.
    pub figures: Vec<Figure>,
}

/// A pre-rendered SVG with its section heading and caption.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figure {
    /// The section's anchor (`id`), e.g. `sweep`.
    pub id: String,
    pub heading: String,
    pub svg: String,
    pub caption: String,
}

/// One op of a comparison of two profiles, as fsprof-analysis scores it.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareRow {
    pub layer: String,
    pub op: String,
    pub method: String,
    /// None when the op is in only one profile (nothing to score).
    pub score: Option<f64>,
    pub interesting: bool,
    pub reason: String,
    /// Which way a change found went ("slower", "faster").
    pub direction: Option<String>,
    /// The change fails the comparison (its `--fail-on`).
    pub fails: bool,
}

impl CompareRow {
    /// The row of op `o` of comparison `c`.
    pub fn new(c: &fsprof_analysis::Comparison, o: &fsprof_analysis::OpComparison) -> Self {
        CompareRow {
            layer: o.layer.clone(),
            op: o.op.clone(),
            method: o.method.name().to_string(),
            score: o.score,
            interesting: o.interesting,
            reason: fsprof_report::reason::compare_reason(c, o),
            direction: o.direction.map(|d| d.name().to_string()),
            fails: c.op_fails(o),
        }
    }
}

const STYLE: &str = r#"
:root { color-scheme: light; }
body { font-family: "DejaVu Sans", Verdana, Arial, sans-serif; margin: 24px auto; max-width: 1360px; color: #111; background: #fafafa; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 0 0 6px; }
code, .cmd { font-family: "DejaVu Sans Mono", monospace; }
.cmd { background: #eee; padding: 4px 8px; border-radius: 4px; display: inline-block; word-break: break-all; }
table { border-collapse: collapse; font-size: 13px; background: #fff; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; position: sticky; top: 0; }
td.l, th.l { text-align: left; }
table.meta td { text-align: left; }
table.meta td:first-child { color: #555; }
table.meta td:last-child { max-width: 440px; white-space: normal; overflow-wrap: anywhere; }
.share { display: inline-block; height: 9px; background: #0072b2; vertical-align: middle; margin-right: 6px; }
.controls { position: sticky; top: 0; background: #fafafa; padding: 8px 0; z-index: 2; border-bottom: 1px solid #ddd; }
.op { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 12px; margin: 14px 0; }
.top { display: flex; flex-wrap: wrap; gap: 0 40px; align-items: flex-start; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
figure.chart { margin: 0; }
figure.chart svg { display: block; max-width: 100%; height: auto; }
figure.chart figcaption { font-size: 12px; color: #555; max-width: 640px; }
.ylog { display: none; }
body.logy .ylog { display: block; }
body.logy .ylin { display: none; }
.peaks { font-size: 12px; color: #7a3b00; margin: 6px 0 0; }
.interesting { color: #b00020; font-weight: bold; }
.muted { color: #777; }
a { color: #0060a0; }
"#;

const SCRIPT: &str = r#"
(function () {
  var box = document.getElementById('logy');
  function apply() { document.body.classList.toggle('logy', box.checked); }
  box.addEventListener('change', apply);
  apply();
})();
"#;

fn page_start(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        esc(title)
    );
}

fn page_end(out: &mut String) {
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
}

fn controls(out: &mut String) {
    out.push_str(
        "<div class=\"controls\"><label><input type=\"checkbox\" id=\"logy\"> logarithmic value axes</label>\
         <span class=\"muted\"> · hover a bar for its bucket and value</span></div>\n",
    );
}

fn command_line(p: &Profile) -> String {
    if p.meta.command.is_empty() {
        p.meta.tool.to_string()
    } else {
        p.meta.command.join(" ")
    }
}

fn meta_table(out: &mut String, p: &Profile) {
    let m = &p.meta;
    let mut rows: Vec<(&str, String)> = vec![
        ("command", command_line(p)),
        ("tool", format!("fsprof {} {}", m.fsprof_version, m.tool)),
        ("host", m.run.host.clone()),
        ("kernel", m.run.kernel.clone()),
        ("started", m.run.start_time.clone()),
        ("wall time", format_ns(m.duration_ns as f64)),
    ];
    if let Some(e) = &m.exit {
        rows.push((
            "exit",
            match e {
                ExitStatus::Code(c) => format!("status {c}"),
                ExitStatus::Signal(s) => format!("killed by signal {s}"),
            },
        ));
    }
    rows.push((
        "clock",
        match m.clock.tsc_hz {
            Some(hz) => format!("{} at {:.3} GHz", m.clock.source, hz / 1e9),
            None => m.clock.source.to_string(),
        },
    ));
    rows.push(("buckets", format!("{} per power of two", m.resolution)));
    if let Some(iv) = m.interval_ns {
        rows.push((
            "intervals",
            format!("{} of {}", p.intervals.len(), format_ns(iv as f64)),
        ));
    }
    if let Some(o) = &m.overhead {
        rows.push(("self-overhead", o.summary()));
    }
    if !p.processes.is_empty() {
        rows.push(("processes", p.processes.len().to_string()));
    }
    out.push_str("<table class=\"meta\">\n");
    for (k, v) in rows {
        if v.is_empty() {
            continue;
        }
        let _ = writeln!(out, "<tr><td>{k}</td><td>{}</td></tr>", esc(&v));
    }
    out.push_str("</table>\n");
    if !m.merged_from.is_empty() {
        let _ = writeln!(
            out,
            "<h3 style=\"margin-top:12px\">merged from {} profiles</h3>\n<table>\n\
             <tr><th class=\"l\">host</th><th class=\"l\">tool</th><th class=\"l\">command</th><th class=\"l\">started</th><th>wall time</th></tr>",
            m.merged_from.len()
        );
        for s in &m.merged_from {
            let _ = writeln!(
                out,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td></tr>",
                esc(&s.host),
                esc(s.tool.name()),
                esc(&s.command.join(" ")),
                esc(&s.start_time),
                format_ns(s.duration_ns as f64)
            );
        }
        out.push_str("</table>\n");
    }
}

fn anchor(layer: &str, op: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect()
    };
    format!("op-{}-{}", clean(layer), clean(op))
}

fn summary_tables(out: &mut String, s: &Summary) {
    for l in &s.layers {
        let u = Unit::of(l.name);
        let _ = writeln!(
            out,
            "<h3 style=\"margin-top:14px\">layer {}: {} calls, {} errors, {} {}</h3>",
            esc(l.name),
            group(l.calls),
            group(l.errors),
            u.format(l.total_ns as f64),
            u.total_phrase()
        );
        out.push_str(
            "<table class=\"summary\">\n<tr><th class=\"l\">op</th><th>calls</th><th>errors</th><th>total</th>\
             <th class=\"l\">share</th><th>mean</th><th>p50</th><th>p99</th><th>max</th></tr>\n",
        );
        for r in &l.rows {
            let _ = writeln!(
                out,
                "<tr><td class=\"l\"><a href=\"#{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td>\
                 <td class=\"l\"><span class=\"share\" style=\"width:{:.0}px\"></span>{:.1}%</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                anchor(l.name, &r.op.name),
                esc(&r.op.name),
                group(r.op.post),
                group(r.op.errors),
                u.format(r.op.total_ns as f64),
                r.share * 120.0,
                r.share * 100.0,
                u.format(r.op.mean_ns()),
                u.format(r.p50_ns),
                u.format(r.p99_ns),
                r.op.max_ns.map(|m| u.format(m as f64)).unwrap_or_default(),
            );
        }
        out.push_str("</table>\n");
    }
}

/// What a Delay chart sums: time, or bytes in a byte-valued layer.
fn total_of(u: Unit) -> &'static str {
    match u {
        Unit::Ns => "total latency",
        Unit::Bytes => "total bytes",
    }
}

fn score(s: Option<f64>) -> String {
    s.map(|s| format!("{s:.3}")).unwrap_or_else(|| "–".into())
}

/// A histogram chart in both axis variants; the page shows one at a time.
fn hist_figure(out: &mut String, chart: &HistogramChart, caption: &str) {
    let kind = match chart.kind {
        Kind::Count => "count",
        Kind::Delay => "delay",
    };
    let _ = write!(out, "<figure class=\"chart\" data-kind=\"{kind}\">");
    let mut c = chart.clone();
    for (log, class) in [(false, "ylin"), (true, "ylog")] {
        c.log_y = log;
        let _ = write!(
            out,
            "<div class=\"{class}\">{}</div>",
            histchart::render(&c)
        );
    }
    let _ = writeln!(out, "<figcaption>{}</figcaption></figure>", esc(caption));
}

fn plain_figure(out: &mut String, kind: &str, svg: &str, caption: &str) {
    let _ = writeln!(
        out,
        "<figure class=\"chart\" data-kind=\"{kind}\">{svg}<figcaption>{}</figcaption></figure>",
        esc(caption)
    );
}

fn peak_list(out: &mut String, peaks: &[PeakMark], res: Resolution, u: Unit) {
    if peaks.is_empty() {
        return;
    }
    let items: Vec<String> = peaks
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let name = if p.label.is_empty() {
                format!("peak {}", k + 1)
            } else {
                p.label.clone()
            };
            format!(
                "{}: {} – {} (highest bucket {} – {})",
                name,
                u.format(res.lower_bound(p.lo)),
                u.format(res.upper_bound(p.hi)),
                u.format(res.lower_bound(p.mode)),
                u.format(res.upper_bound(p.mode))
            )
        })
        .collect();
    let _ = writeln!(out, "<p class=\"peaks\">{}</p>", esc(&items.join(" · ")));
}

fn has_interval_data(p: &Profile, layer: &str, op: &str) -> bool {
    p.intervals.iter().any(|iv| {
        iv.layers
            .iter()
            .find(|l| l.name == layer)
            .and_then(|l| l.op(op))
            .is_some_and(|o| !o.histogram.counts.is_empty())
    })
}

/// The single-profile report with fsprof-analysis's peaks (labelled with
/// `cal`), as `fsprof report --format html` writes it.
pub fn report_with_analysis(
    p: &Profile,
    selection: Selection,
    cal: Option<&fsprof_analysis::Calibration>,
    figures: Vec<Figure>,
) -> Result<String, PlotError> {
    let finder = crate::marks::peak_finder(cal);
    report(
        p,
        &HtmlOptions {
            selection,
            peaks: Some(&finder),
            figures,
        },
    )
}

/// The single-profile report.
pub fn report(p: &Profile, opts: &HtmlOptions) -> Result<String, PlotError> {
    let summary = Summary::build(p, &opts.selection)?;
    let res = p.resolution();
    let mut out = String::new();
    page_start(&mut out, &format!("fsprof report: {}", command_line(p)));
    let _ = writeln!(
        out,
        "<header><h1>fsprof report</h1><div class=\"cmd\">{}</div></header>",
        esc(&command_line(p))
    );
    controls(&mut out);
    // Run facts beside the ranking: both fit one screen on a wide display.
    out.push_str("<div class=\"top\"><div>\n<h2 id=\"run\">Run</h2>\n");
    meta_table(&mut out, p);
    out.push_str("</div><div>\n<h2 id=\"summary\">Operations ranked by total latency</h2>\n");
    summary_tables(&mut out, &summary);
    out.push_str("</div></div>\n");
    for f in &opts.figures {
        let _ = writeln!(
            out,
            "<h2 id=\"{}\">{}</h2>\n<div class=\"charts\">",
            esc(&f.id),
            esc(&f.heading)
        );
        plain_figure(&mut out, &esc(&f.id), &f.svg, &f.caption);
        out.push_str("</div>\n");
    }

    attribution_section(&mut out, p);
    if !p.intervals.is_empty() {
        out.push_str("<h2 id=\"timeline\">Over time</h2>\n<div class=\"charts\">\n");
        for l in &summary.layers {
            let top: Vec<&str> = l.rows.iter().take(4).map(|r| r.op.name.as_str()).collect();
            let what = timeline::total_per_interval_title(l.name);
            let svg = timeline::total_per_interval(
                &format!("layer {}: {what}", l.name),
                &p.intervals,
                l.name,
                &top,
            );
            let caption = match Unit::of(l.name) {
                Unit::Ns => {
                    let e = fsprof_core::layer::entries(l.name);
                    format!("Time spent in {e} per interval: the latencies of the {e} that ended in it, added up ({e} on several threads or queues at once add up, so it can exceed the interval), split by the ops with the most of it.")
                }
                Unit::Bytes => "Bytes per interval: the sizes of the requests that completed in it, added up, split by the ops with the most bytes.".into(),
            };
            plain_figure(&mut out, "interval-total", &svg, &caption);
        }
        out.push_str("</div>\n");
    }

    out.push_str("<h2 id=\"ops\">Latency distributions</h2>\n");
    for l in &summary.layers {
        for r in &l.rows {
            op_section(&mut out, p, l.name, r.op, res, opts);
        }
    }
    page_end(&mut out);
    Ok(out)
}

/// `report --attribution` as bars: which system calls waited for block
/// I/O, and how much of their time; or why the profile cannot say.
fn attribution_section(out: &mut String, p: &Profile) {
    use fsprof_analysis::attribution::{attribute, Attribution};
    let rows = match attribute(p) {
        Attribution::None => return,
        Attribution::NotRecorded(why) => {
            let _ = writeln!(
                out,
                "<h2 id=\"attribution\">Waiting for block I/O</h2>\n<p>No attribution: {}.</p>",
                esc(&why)
            );
            return;
        }
        Attribution::Measured(rows) if rows.is_empty() => return,
        Attribution::Measured(rows) => rows,
    };
    out.push_str("<h2 id=\"attribution\">Waiting for block I/O</h2>\n<div class=\"charts\">\n");
    let svg = crate::blockwait::block_wait_bars("system calls: time waiting for block I/O", &rows);
    plain_figure(
        out,
        "attribution",
        &svg,
        "Each system call op's total time, split into the time its calls waited for block I/O they had queued themselves (charged per call in the kernel) and the rest.",
    );
    out.push_str("</div>\n");
}

fn op_section(
    out: &mut String,
    p: &Profile,
    layer: &str,
    op: &OpStats,
    res: Resolution,
    opts: &HtmlOptions,
) {
    let _ = writeln!(
        out,
        "<section class=\"op\" id=\"{}\"><h3>{}/{}: {} calls, {} total, mean {}</h3>",
        anchor(layer, &op.name),
        esc(layer),
        esc(&op.name),
        group(op.post),
        Unit::of(layer).format(op.total_ns as f64),
        Unit::of(layer).format(op.mean_ns())
    );
    let peaks = opts.peaks.map(|f| f(layer, op, res)).unwrap_or_default();
    out.push_str("<div class=\"charts\">\n");
    let u = Unit::of(layer);
    let mut chart = HistogramChart {
        title: format!("{layer}/{}: calls per {} bucket", op.name, u.quantity()),
        res,
        unit: u,
        kind: Kind::Count,
        series: vec![Series {
            label: op.name.clone(),
            hist: &op.histogram,
        }],
        log_y: false,
        peaks: peaks.clone(),
    };
    let (how_many, where_it_went) = match u {
        Unit::Ns => (
            "How many calls took how long.",
            "Calls × the bucket's mean latency: where this op's time went.",
        ),
        Unit::Bytes => (
            "How many requests were how large.",
            "Requests × the bucket's mean size: where this op's bytes went.",
        ),
    };
    hist_figure(out, &chart, how_many);
    // All of them empty (a flush moves no bytes): nothing to draw.
    if op.total_ns > 0 {
        chart.kind = Kind::Delay;
        chart.title = format!("{layer}/{}: {} per bucket", op.name, total_of(u));
        hist_figure(out, &chart, where_it_went);
    }
    if has_interval_data(p, layer, &op.name) {
        let svg = timeline::heatmap(
            &format!("{layer}/{}: {} over time", op.name, u.quantity()),
            res,
            &p.intervals,
            layer,
            &op.name,
        );
        plain_figure(
            out,
            "heatmap",
            &svg,
            &format!(
                "Calls per interval and {} bucket (colour: number of calls, log scale).",
                u.quantity()
            ),
        );
    }
    out.push_str("</div>\n");
    peak_list(out, &peaks, res, u);
    out.push_str("</section>\n");
}

/// Two profiles side by side: every compared op with its score, and the
/// overlaid histograms of the interesting ones (FSprof Fig 14).
pub fn compare(
    a: (&str, &Profile),
    b: (&str, &Profile),
    rows: &[CompareRow],
) -> Result<String, PlotError> {
    let (na, pa) = a;
    let (nb, pb) = b;
    let pair = Pair {
        a: pa,
        b: pb,
        // Overlaid bars need one bucket layout: the coarser one, which the
        // finer one's buckets nest in exactly (as the comparison itself does).
        res: pa.resolution().min(pb.resolution()),
    };
    let mut out = String::new();
    page_start(&mut out, &format!("fsprof compare: {na} vs {nb}"));
    let _ = writeln!(
        out,
        "<header><h1>fsprof compare</h1><div class=\"cmd\">A = {} · B = {}</div></header>",
        esc(na),
        esc(nb)
    );
    controls(&mut out);
    for (tag, name, p) in [("A", na, pa), ("B", nb, pb)] {
        let _ = writeln!(out, "<h2>{tag}: {}</h2>", esc(name));
        meta_table(&mut out, p);
    }
    let mut ranked: Vec<&CompareRow> = rows.iter().collect();
    ranked.sort_by(|x, y| {
        y.interesting
            .cmp(&x.interesting)
            .then(
                y.score
                    .unwrap_or(f64::INFINITY)
                    .total_cmp(&x.score.unwrap_or(f64::INFINITY)),
            )
            .then(x.layer.cmp(&y.layer))
            .then(x.op.cmp(&y.op))
    });
    score_table(&mut out, &pair, &ranked);
    out.push_str("<h2 id=\"ops\">Interesting ops</h2>\n");
    if !ranked.iter().any(|r| r.interesting) {
        out.push_str("<p>No op differs enough to be interesting.</p>\n");
    }
    for r in ranked.iter().filter(|r| r.interesting) {
        overlaid_op(&mut out, &pair, r);
    }
    page_end(&mut out);
    Ok(out)
}

/// The two profiles of a comparison, on the bucket layout they share.
struct Pair<'a> {
    a: &'a Profile,
    b: &'a Profile,
    res: Resolution,
}

impl Pair<'_> {
    /// The op in A and in B, on the shared layout; empty where absent.
    fn op(&self, layer: &str, op: &str) -> (OpStats, OpStats) {
        let find = |p: &Profile| {
            let mut o = p.layer(layer).and_then(|l| l.op(op)).cloned()?;
            o.downscale(p.resolution(), self.res);
            Some(o)
        };
        let empty = || OpStats::new(op);
        (
            find(self.a).unwrap_or_else(empty),
            find(self.b).unwrap_or_else(empty),
        )
    }
}

/// Every compared op, interesting ones first, with its score and verdict.
fn score_table(out: &mut String, pair: &Pair, ranked: &[&CompareRow]) {
    let n_interesting = ranked.iter().filter(|r| r.interesting).count();
    let _ = writeln!(
        out,
        "<h2 id=\"scores\">Differences: {n_interesting} of {} ops interesting</h2>",
        ranked.len()
    );
    out.push_str(
        "<table class=\"scores\">\n<tr><th class=\"l\">layer</th><th class=\"l\">op</th><th>calls A</th><th>calls B</th>\
         <th>total A</th><th>total B</th><th class=\"l\">method</th><th>score</th><th class=\"l\">verdict</th></tr>\n",
    );
    for r in ranked {
        let (oa, ob) = pair.op(&r.layer, &r.op);
        let verdict = if r.interesting {
            let way = match (&r.direction, r.fails) {
                (Some(d), true) => format!("<strong>{}, fails</strong> ", esc(d)),
                (Some(d), false) => format!("<strong>{}</strong> (listed, does not fail) ", esc(d)),
                (None, _) => String::new(),
            };
            format!(
                "<a class=\"interesting\" href=\"#{}\">interesting</a> {way}{}",
                anchor(&r.layer, &r.op),
                esc(&r.reason)
            )
        } else {
            format!("<span class=\"muted\">{}</span>", esc(&r.reason))
        };
        let _ = writeln!(
            out,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"l\">{}</td><td>{}</td><td class=\"l\">{verdict}</td></tr>",
            esc(&r.layer),
            esc(&r.op),
            group(oa.post),
            group(ob.post),
            Unit::of(&r.layer).format(oa.total_ns as f64),
            Unit::of(&r.layer).format(ob.total_ns as f64),
            esc(&r.method),
            score(r.score),
        );
    }
    out.push_str("</table>\n");
}

/// An interesting op's section: A and B overlaid, counts and delay.
fn overlaid_op(out: &mut String, pair: &Pair, r: &CompareRow) {
    let (oa, ob) = pair.op(&r.layer, &r.op);
    let _ = writeln!(
        out,
        "<section class=\"op\" id=\"{}\"><h3>{}/{}: {} score {}</h3><p class=\"muted\">{}</p><div class=\"charts\">",
        anchor(&r.layer, &r.op),
        esc(&r.layer),
        esc(&r.op),
        esc(&r.method),
        score(r.score),
        esc(&r.reason)
    );
    let u = Unit::of(&r.layer);
    let mut chart = HistogramChart {
        title: format!("{}/{}: calls per {} bucket", r.layer, r.op, u.quantity()),
        res: pair.res,
        unit: u,
        kind: Kind::Count,
        series: vec![
            Series {
                label: format!("A ({} calls)", group(oa.post)),
                hist: &oa.histogram,
            },
            Series {
                label: format!("B ({} calls)", group(ob.post)),
                hist: &ob.histogram,
            },
        ],
        log_y: false,
        peaks: Vec::new(),
    };
    hist_figure(out, &chart, "Calls per bucket, A and B overlaid.");
    chart.kind = Kind::Delay;
    chart.title = format!("{}/{}: {} per bucket", r.layer, r.op, total_of(u));
    hist_figure(
        out,
        &chart,
        "Calls × bucket mean latency, A and B overlaid.",
    );
    out.push_str("</div></section>\n");
}
