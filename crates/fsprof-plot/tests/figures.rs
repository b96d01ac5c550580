//! Figures are deterministic: the SVG of a fixed profile is pinned by
//! snapshots (review changes with `cargo insta review`), the PNG is
//! rasterized identically twice and shows the bars, and the HTML page is
//! self-contained.

use fsprof_core::profile::{Clock, Interval, Layer, Meta, RunInfo};
use fsprof_core::{Histogram, OpStats, Profile, Resolution};
use fsprof_plot::html::{self, CompareRow, HtmlOptions};
use fsprof_plot::{plot_svg, svg_to_png, PeakMark, PlotError, PlotKind, PlotRequest};

fn op(name: &str, zero: u64, offset: i32, counts: &[u64]) -> OpStats {
    let res = Resolution::DEFAULT;
    let mut o = OpStats::new(name);
    o.histogram = Histogram {
        zero,
        offset,
        counts: counts.to_vec(),
    };
    o.post = o.histogram.total();
    o.pre = o.post;
    o.total_ns = o
        .histogram
        .buckets()
        .map(|(i, c)| c * ((res.lower_bound(i) + res.upper_bound(i)) / 2.0) as u64)
        .sum();
    o.min_ns = Some(1 << offset.max(0));
    o.max_ns = Some(1 << (offset + counts.len() as i32));
    o
}

/// A bimodal read (cache hits and misses, as in the README) and a write,
/// over three intervals.
fn profile(with_intervals: bool) -> Profile {
    let mut p = Profile::new(Meta {
        fsprof_version: "0.1.0".into(),
        tool: "run".into(),
        command: vec![
            "grep".into(),
            "-r".into(),
            "x".into(),
            "/usr/include".into(),
        ],
        run: RunInfo {
            host: "testhost".into(),
            kernel: "6.1.0".into(),
            start_time: "2026-11-22T00:00:00.000Z".into(),
            start_unix_ns: 1_795_305_600_000_000_000,
        },
        duration_ns: 300_000_000,
        clock: Clock {
            source: "monotonic".into(),
            tsc_hz: None,
        },
        resolution: Resolution::DEFAULT,
        interval_ns: with_intervals.then_some(100_000_000),
        ..Default::default()
    });
    let slices = [
        (
            vec![40, 300, 20, 0, 0, 0, 0, 0, 0, 5, 60, 10],
            vec![0, 9, 30, 4],
        ),
        (
            vec![10, 200, 10, 0, 0, 0, 0, 0, 0, 9, 120, 30],
            vec![0, 2, 10, 1],
        ),
        (
            vec![0, 100, 10, 0, 0, 0, 0, 0, 0, 1, 20, 0],
            vec![1, 1, 5, 0],
        ),
    ];
    let mut user = Layer::new("user");
    for (k, (r, w)) in slices.iter().enumerate() {
        let mut l = Layer::new("user");
        l.ops.push(op("read", 0, 6, r));
        l.ops.push(op("write", u64::from(k == 0), 9, w));
        for o in &mut l.ops {
            o.min_ns = None;
            o.max_ns = None;
        }
        l.normalize();
        user.merge(&l);
        if with_intervals {
            p.intervals.push(Interval {
                start_ns: k as u64 * 100_000_000,
                end_ns: (k as u64 + 1) * 100_000_000,
                layers: vec![l],
            });
        }
    }
    p.layers.push(user);
    p
}

fn req(op: &str, kind: PlotKind, log_y: bool) -> PlotRequest {
    PlotRequest {
        op: op.into(),
        layer: None,
        kind,
        log_y,
    }
}

/// `op`'s plot of `kind` (linear y axis) from the test profile, with or
/// without its intervals.
fn plot(
    intervals: bool,
    op: &str,
    kind: PlotKind,
    peaks: Option<fsprof_plot::PeakFinder>,
) -> Result<String, PlotError> {
    plot_svg(&profile(intervals), &req(op, kind, false), peaks)
}

fn two_peaks(_: &str, _: &OpStats, _: Resolution) -> Vec<PeakMark> {
    vec![
        PeakMark {
            lo: 6,
            hi: 8,
            mode: 7,
            label: "cache hits".into(),
        },
        PeakMark {
            lo: 15,
            hi: 17,
            mode: 16,
            label: "".into(),
        },
    ]
}

#[test]
fn count_histogram_svg() {
    let svg = plot_svg(&profile(false), &req("read", PlotKind::Count, false), None).unwrap();
    insta::assert_snapshot!(svg);
}

#[test]
fn delay_histogram_log_y_svg() {
    let svg = plot_svg(&profile(false), &req("write", PlotKind::Delay, true), None).unwrap();
    insta::assert_snapshot!(svg);
}

#[test]
fn timeline_heatmap_svg() {
    let svg = plot(true, "read", PlotKind::Timeline, None).unwrap();
    insta::assert_snapshot!(svg);
}

#[test]
fn peaks_are_marked_and_labelled() {
    let svg = plot(false, "read", PlotKind::Count, Some(&two_peaks)).unwrap();
    assert!(svg.contains(">cache hits</text>"), "{svg}");
    assert!(svg.contains(">peak 2</text>"));
    assert_eq!(svg.matches("<polygon").count(), 2);
    insta::assert_snapshot!(svg);
}

#[test]
fn timeline_needs_intervals() {
    let e = plot(false, "read", PlotKind::Timeline, None).unwrap_err();
    assert!(matches!(e, PlotError::NoIntervals), "{e}");
    assert!(e.to_string().contains("--interval"));
}

#[test]
fn unknown_op_names_the_known_ones() {
    let e = plot_svg(&profile(false), &req("raed", PlotKind::Count, false), None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no op named \"raed\" in the profile (it has: read, write)"
    );
}

#[test]
fn png_is_deterministic_and_shows_the_bars() {
    let svg = plot_svg(&profile(false), &req("read", PlotKind::Count, false), None).unwrap();
    let a = svg_to_png(&svg, 1.0).unwrap();
    let b = svg_to_png(&svg, 1.0).unwrap();
    assert_eq!(a, b);
    let img = resvg::tiny_skia::Pixmap::decode_png(&a).unwrap();
    assert_eq!((img.width(), img.height()), (640, 280));
    // #0072b2 is the bar colour; the background is white.
    let bar = img
        .pixels()
        .iter()
        .filter(|p| (p.red(), p.green(), p.blue()) == (0x00, 0x72, 0xb2))
        .count();
    assert!(bar > 2000, "only {bar} bar pixels");
    // Labels are drawn: dark anti-aliased text pixels exist outside the bars.
    let dark = img
        .pixels()
        .iter()
        .filter(|p| p.red() < 90 && p.green() < 90 && p.blue() < 90)
        .count();
    assert!(dark > 500, "only {dark} text pixels: fonts missing?");
    let big = svg_to_png(&svg, 2.0).unwrap();
    let img = resvg::tiny_skia::Pixmap::decode_png(&big).unwrap();
    assert_eq!((img.width(), img.height()), (1280, 560));
}

fn count(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}

#[test]
fn html_report_has_every_chart_and_fetches_nothing() {
    let p = profile(true);
    let opts = HtmlOptions {
        peaks: Some(&two_peaks),
        ..Default::default()
    };
    let page = html::report(&p, &opts).unwrap();
    // Per op: count, delay, heat map; per layer: latency per interval.
    assert_eq!(count(&page, "<figure class=\"chart\""), 2 * 3 + 1);
    assert_eq!(count(&page, "data-kind=\"heatmap\""), 2);
    assert_eq!(count(&page, "data-kind=\"interval-total\""), 1);
    // Each histogram comes with its linear and log variant.
    assert_eq!(count(&page, "<div class=\"ylog\">"), 4);
    assert!(page.contains("cache hits"));
    assert!(page.contains("testhost"));
    for bad in ["src=\"http", "href=\"http", "url(http", "@import", "<link"] {
        assert!(!page.contains(bad), "page references {bad}");
    }
    // The summary ranks read (more latency) above write.
    let read = page.find("href=\"#op-user-read\"").unwrap();
    let write = page.find("href=\"#op-user-write\"").unwrap();
    assert!(read < write);
}

#[test]
fn html_report_without_intervals_has_no_timeline() {
    let page = html::report(&profile(false), &HtmlOptions::default()).unwrap();
    assert_eq!(count(&page, "<figure class=\"chart\""), 4);
    assert!(!page.contains("id=\"timeline\""));
}

#[test]
fn compare_overlays_interesting_ops_with_scores() {
    let a = profile(false);
    let mut b = profile(false);
    b.layers[0].ops[0].histogram.counts[10] *= 5;
    let rows = vec![
        CompareRow {
            layer: "user".into(),
            op: "read".into(),
            method: "EMD".into(),
            score: Some(0.4123),
            interesting: true,
            reason: "slow peak grew".into(),
            direction: Some("slower".into()),
            fails: true,
        },
        CompareRow {
            layer: "user".into(),
            op: "write".into(),
            method: "EMD".into(),
            score: Some(0.01),
            interesting: false,
            reason: "same".into(),
            direction: None,
            fails: false,
        },
    ];
    let page = html::compare(("a.json", &a), ("b.json", &b), &rows).unwrap();
    assert_eq!(count(&page, "<figure class=\"chart\""), 2);
    assert!(page.contains("0.412"));
    assert!(page.contains("slow peak grew"));
    // Which way it went, and whether it fails the comparison.
    assert!(page.contains("<strong>slower, fails</strong> slow peak grew"));
    let mut faster = rows.clone();
    (faster[0].direction, faster[0].fails) = (Some("faster".into()), false);
    let page = html::compare(("a.json", &a), ("b.json", &b), &faster).unwrap();
    assert!(page.contains("<strong>faster</strong> (listed, does not fail)"));
    // Overlaid: both series drawn, with a legend.
    assert!(page.contains(">A ("));
    assert!(page.contains(">B ("));
    // A finer B is drawn at A's coarser buckets: index 2i and 2i+1 at r=2
    // are index i at r=1.
    let mut c = b.clone();
    c.meta.resolution = Resolution::new(2).unwrap();
    for l in &mut c.layers {
        for o in &mut l.ops {
            o.histogram.offset *= 2;
        }
    }
    let page = html::compare(("a", &a), ("c", &c), &rows).unwrap();
    assert!(page.contains("1 per 2x"));
    assert!(!page.contains("2 per 2x"));
}
