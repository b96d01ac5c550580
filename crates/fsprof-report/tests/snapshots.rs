//! Every report a user reads, pinned: the text, JSON and CSV of `fsprof
//! report` with each analysis table, the report after a capture,
//! `compare` in each format, and a merged profile's report, all of fixed
//! profiles (`fsprof_testkit::samples`: no host, time or machine in them).
//! A change of wording or layout shows as a snapshot diff to review with
//! `cargo insta review` (or `INSTA_UPDATE=always`, then `git diff`).

use fsprof_analysis::compare::{compare_profiles, CompareOptions, Method};
use fsprof_analysis::correlation::Value;
use fsprof_core::merge::merge_profiles;
use fsprof_core::Profile;
use fsprof_report::{analysis, render, Extras, Format, ReportOptions, Selection};
use fsprof_testkit::samples;

fn report(p: &Profile, format: Format, extras: Extras, selection: Selection) -> String {
    let opts = ReportOptions {
        format,
        selection,
        extras,
        ..Default::default()
    };
    render(p, &opts, None).unwrap_or_else(|e| panic!("{e}"))
}

/// The tables `report` adds: `--peaks`, `--interesting`, `--attribution`.
fn table(name: &str) -> Extras {
    let mut x = Extras::default();
    match name {
        "peaks" => x.peaks = true,
        "interesting" => x.interesting = true,
        "attribution" => x.attribution = true,
        _ => panic!("no table {name}"),
    }
    x
}

/// `--correlate V`.
fn correlate(v: Value) -> Extras {
    Extras {
        correlate: Some(v),
        ..Default::default()
    }
}

/// `--op read` (what `--correlate` needs).
fn read_op() -> Selection {
    Selection {
        layers: vec![],
        ops: vec!["read".into()],
    }
}

/// The sample whose reads lost their cache hits against the one that has
/// them.
fn comparison(method: Method) -> fsprof_analysis::Comparison {
    let opts = CompareOptions {
        method,
        ..Default::default()
    };
    compare_profiles(
        &samples::user_profile(),
        &samples::user_profile_changed(),
        &opts,
    )
}

macro_rules! snapshots {
    ($($name:ident => $value:expr;)*) => {
        $(
            #[test]
            fn $name() {
                insta::assert_snapshot!($value);
            }
        )*
    };
}

snapshots! {
    text_report => report(&samples::user_profile(), Format::Text, Extras::default(), Selection::default());
    text_report_with_processes => render(
        &samples::user_profile(),
        &ReportOptions { processes: true, ..Default::default() },
        None,
    ).unwrap();
    text_peaks => report(&samples::user_profile(), Format::Text, table("peaks"), Selection::default());
    text_interesting => report(&samples::user_profile(), Format::Text, table("interesting"), Selection::default());
    text_correlate_size => report(&samples::user_profile(), Format::Text, correlate(Value::Size), read_op());
    text_correlate_seek => report(&samples::user_profile(), Format::Text, correlate(Value::Seek), read_op());
    text_attribution => report(&samples::kernel_profile(), Format::Text, table("attribution"), Selection::default());
    text_one_layer_one_op => report(
        &samples::kernel_profile(),
        Format::Text,
        Extras::default(),
        Selection { layers: vec!["fs".into()], ops: vec!["read".into()] },
    );
    json_report => report(&samples::user_profile(), Format::Json, Extras::default(), Selection::default());
    json_peaks => report(&samples::user_profile(), Format::Json, table("peaks"), Selection::default());
    json_interesting => report(&samples::user_profile(), Format::Json, table("interesting"), Selection::default());
    json_correlate => report(&samples::user_profile(), Format::Json, correlate(Value::Size), read_op());
    csv_report => report(&samples::user_profile(), Format::Csv, Extras::default(), Selection::default());
    csv_peaks => report(&samples::user_profile(), Format::Csv, table("peaks"), Selection::default());
    csv_interesting => report(&samples::user_profile(), Format::Csv, table("interesting"), Selection::default());
    csv_correlate => report(&samples::user_profile(), Format::Csv, correlate(Value::Seek), read_op());
    after_kernel_capture => fsprof_report::after_capture(&samples::kernel_profile(), 5).unwrap();
    after_mount_capture => fsprof_report::after_capture(&samples::mount_profile(), 5).unwrap();
    after_empty_capture => fsprof_report::after_capture(&samples::all().pop().unwrap(), 5).unwrap();
    compare_text => analysis::comparison_text(&comparison(Method::Emd), "cold.json", "warm.json");
    compare_text_unchanged => analysis::comparison_text(
        &compare_profiles(&samples::user_profile(), &samples::user_profile(), &CompareOptions::default()),
        "a.json",
        "b.json",
    );
    compare_text_chi2 => analysis::comparison_text(&comparison(Method::Chi2), "cold.json", "warm.json");
    compare_json => analysis::comparison_json(&comparison(Method::Emd), "cold.json", "warm.json");
    compare_csv => analysis::comparison_csv(&comparison(Method::Emd));
    merged_report => {
        let (merged, warnings) = merge_profiles(
            &[samples::user_profile(), samples::user_profile_changed()],
            samples::meta("merge"),
        );
        let text = report(&merged, Format::Text, Extras::default(), Selection::default());
        format!("{text}\nwarnings: {warnings:?}\n")
    };
}
