//! Profile files, from bytes to every rendering a user can ask of them:
//! `report` in text, JSON and CSV with each analysis table, the report
//! after a capture, `compare` both ways in every method and format,
//! `merge`, the HTML pages and the exports. A profile that loads must
//! render (a 70,000-character op name once loaded and then crashed
//! `report` and `compare`).

use std::path::Path;

use fsprof_analysis::compare::{compare_profiles, CompareOptions, Method};
use fsprof_analysis::correlation::Value;
use fsprof_core::format::parse_profile;
use fsprof_core::merge::merge_profiles;
use fsprof_core::Profile;
use fsprof_report::analysis as tables;
use fsprof_report::{Extras, Format, ReportOptions, Selection};

use super::clean_error;

#[rustfmt::skip]
pub const TOKENS: &[&[u8]] = &[b"\"name\": \"", b"\"ops\": [", b"\"layers\": [", b"\"intervals\": [", b"\"processes\": [", b"\"offset\": ", b"\"counts\": [", b"\"zero\": ", b"\"resolution\": ", b"\"total_ns\": ", b"\"min_ns\": ", b"\"max_ns\": ", b"\"pre\": ", b"\"post\": ", b"\"errors\": ", b"\"cells\": [[", b"\"correlations\": {\"size\": {\"cells\": [[1, 2, 3]]}, \"seek\": {\"cells\": []}}", b"\"interval_ns\": ", b"\"duration_ns\": ", b"\"start_ns\": ", b"\"end_ns\": ", b"\"tsc_hz\": ", b"\"block-size\"", b"\"fusefs\"", b"\"block\"", b"null", b"true", b"[]", b"{}", b"\\u0000", b"\\ud800", b"\\u001b[31m", b"\xe2\x80\xae"];

/// Above this many bytes a profile is rendered in each format once
/// rather than in every combination: a debug build renders a profile of
/// 70,000-character names in ~50 ms per report, and the combinations are
/// some 40 reports.
const RENDER_ALL_BELOW: usize = 64 << 10;

pub fn check(bytes: &[u8]) {
    match parse_profile(bytes, Path::new("fuzz.json")) {
        Ok(p) if bytes.len() < RENDER_ALL_BELOW => render_all(&p),
        Ok(p) => render_each_format(&p),
        Err(e) => clean_error(&e),
    }
}

/// Each format of each command once.
pub fn render_each_format(p: &Profile) {
    let _ = fsprof_report::after_capture(p, 5);
    for format in [Format::Text, Format::Json, Format::Csv] {
        let extras = Extras {
            peaks: format == Format::Text,
            ..Default::default()
        };
        report_one(
            p,
            &ReportOptions {
                format,
                extras,
                ..Default::default()
            },
        );
    }
    // Names the profile lacks: the errors list the ones it has.
    for (layers, ops) in [
        (vec!["no-such-layer".into()], vec![]),
        (vec![], vec!["no-such-op".into()]),
    ] {
        let selection = Selection { layers, ops };
        report_one(
            p,
            &ReportOptions {
                selection,
                ..Default::default()
            },
        );
    }
    let c = compare_profiles(p, &reference(), &CompareOptions::default());
    let _ = tables::comparison_text(&c, "a.json", "b.json");
    let _ = tables::comparison_csv(&c);
    let _ = fsprof_export::prometheus::render(p, &Default::default());
}

/// Every rendering of `p` a command line can ask for.
pub fn render_all(p: &Profile) {
    report(p);
    compare(p);
    let (merged, _warnings) = merge_profiles(&[p.clone(), reference()], p.meta.clone());
    report_one(&merged, &ReportOptions::default());
    // Labels of the command line as a whole, the longer ones.
    let argv = fsprof_export::LabelOptions { argv: true };
    let _ = fsprof_export::prometheus::render(p, &argv);
    let _ = fsprof_export::otlp::render(p, &argv);
    let _ = fsprof_export::protobuf::render(p, &argv);
    let _ = fsprof_plot::html::report_with_analysis(p, Selection::default(), None, Vec::new());
}

fn report(p: &Profile) {
    let _ = fsprof_report::after_capture(p, 5);
    let first = p
        .layers
        .iter()
        .find_map(|l| Some((l.name.clone(), l.ops.first()?.name.clone())));
    let selections = [
        Selection::default(),
        // An op the profile lacks: the error lists the ones it has.
        Selection {
            layers: vec![],
            ops: vec!["no-such-op".into()],
        },
        first
            .clone()
            .map(|(layer, op)| Selection {
                layers: vec![layer],
                ops: vec![op],
            })
            .unwrap_or_default(),
    ];
    for format in [Format::Text, Format::Json, Format::Csv] {
        for (k, selection) in selections.iter().enumerate() {
            for extras in extras(k == 2) {
                let opts = ReportOptions {
                    format,
                    selection: selection.clone(),
                    top: 3,
                    processes: k == 0,
                    extras,
                };
                report_one(p, &opts);
            }
        }
    }
}

/// The tables of `report`: one at a time (CSV holds one), correlation
/// only with one op selected, as the command line allows.
pub fn extras(one_op: bool) -> Vec<Extras> {
    let mut out = vec![
        Extras::default(),
        Extras {
            peaks: true,
            ..Default::default()
        },
        Extras {
            interesting: true,
            ..Default::default()
        },
        Extras {
            attribution: true,
            ..Default::default()
        },
    ];
    if one_op {
        for v in [Value::Size, Value::Seek] {
            out.push(Extras {
                correlate: Some(v),
                ..Default::default()
            });
        }
    }
    out
}

fn report_one(p: &Profile, opts: &ReportOptions) {
    match fsprof_report::render(p, opts, None) {
        Ok(out) if opts.format == Format::Json => {
            serde_json::from_str::<serde_json::Value>(&out)
                .unwrap_or_else(|e| panic!("report --format json is not JSON ({e})"));
        }
        Ok(_) => {}
        Err(e) => clean_error(&e),
    }
}

fn compare(p: &Profile) {
    let other = reference();
    // Every method one way, the default both ways and against itself.
    let methods = Method::ALL.into_iter().map(|m| (m, p, &other));
    let default = Method::Emd;
    for (method, a, b) in methods.chain([(default, &other, p), (default, p, p)]) {
        let opts = CompareOptions {
            method,
            ..Default::default()
        };
        {
            let c = compare_profiles(a, b, &opts);
            let _ = tables::comparison_text(&c, "a.json", "b.json");
            let json = tables::comparison_json(&c, "a.json", "b.json");
            serde_json::from_str::<serde_json::Value>(&json)
                .unwrap_or_else(|e| panic!("compare --format json is not JSON ({e})"));
            let _ = tables::comparison_csv(&c);
        }
    }
    let c = compare_profiles(p, &other, &CompareOptions::default());
    let rows: Vec<_> = c
        .ops
        .iter()
        .map(|o| fsprof_plot::html::CompareRow::new(&c, o))
        .collect();
    let _ = fsprof_plot::html::compare(("a", p), ("b", &other), &rows);
}

/// A profile to compare and merge with.
fn reference() -> Profile {
    fsprof_testkit::samples::user_profile()
}
