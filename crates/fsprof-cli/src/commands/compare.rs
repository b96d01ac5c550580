//! `fsprof compare A B` and `fsprof compare A1 A2 A3 --vs B1 B2 B3`: exit 1
//! when an op got significantly slower (so CI can gate on it; any change
//! with `--fail-on any`), 0 when none did, 2 on errors.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use fsprof_analysis::compare::{compare_runs, CompareOptions, FailOn, Method};
use fsprof_plot::CompareRow;
use fsprof_report::analysis as render;

use super::analysis::calibration;
use super::report::finish;
use crate::args::{pick_format, CalibrationArgs, FormatArg, ToFileArgs};

pub const HELP: &str = "\
Several runs a side (A1 A2 A3 --vs B1 B2 B3) measure the spread a change must
stand out from; with one run a side it is assumed (--spread). Take each side's
runs alternately, A B A B A B (or in a shuffled order), each warmed the same
way: a machine drifts over minutes (caches reclaimed, other work), and all of
A's runs followed by all of B's put that drift between the sides, where it is
a real difference compare cannot tell from a change.";

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline and the profile compared with it (A B); or, with --vs,
    /// the baseline's runs (A1 A2 A3 --vs B1 B2 B3)
    #[arg(required = true, num_args = 1.., value_name = "FILE")]
    pub a: Vec<PathBuf>,
    /// Runs of the profile compared with the baseline: the spread between
    /// each side's runs is measured, and a change must stand out from it
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub vs: Vec<PathBuf>,
    /// How shapes are scored (shown and ranked by; tests decide)
    #[arg(long, value_enum, default_value_t = MethodArg::Emd)]
    pub method: MethodArg,
    /// Chance that two sides differing only by noise exit 1 (all tests together)
    #[arg(long, default_value_t = 0.05, value_name = "P", value_parser = parse_alpha)]
    pub alpha: f64,
    /// A change must move at least this share of its layer's latency to decide
    #[arg(long, default_value_t = 0.03, value_name = "SHARE", value_parser = parse_share)]
    pub min_share: f64,
    /// Spread between runs assumed where one run per side cannot measure it,
    /// in powers of two
    #[arg(long, default_value_t = 0.18, value_name = "POWERS", value_parser = parse_nonnegative)]
    pub spread: f64,
    /// Spread of a whole layer's shift between runs (load slows every op of
    /// a run alike), in powers of two
    #[arg(long, default_value_t = 0.35, value_name = "POWERS", value_parser = parse_nonnegative)]
    pub layer_spread: f64,
    /// Ignore ops under this share of their layer's calls and latency on both sides
    #[arg(long, default_value_t = 0.01, value_name = "SHARE", value_parser = parse_share)]
    pub negligible: f64,
    /// Which changes make compare exit 1: `slower` (a performance gate: an
    /// op slower or taking more time, or a whole layer slower) or `any`
    /// (either way); every change is listed either way
    #[arg(long, value_enum, default_value_t = FailOnArg::Slower, value_name = "WHICH")]
    pub fail_on: FailOnArg,
    /// How to print it [default: -o FILE's extension (.json, .csv, .html), else text]
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    #[command(flatten)]
    pub to: ToFileArgs,
    #[command(flatten)]
    pub calibration: CalibrationArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FailOnArg {
    /// A change that made it slower (or an op that appeared)
    Slower,
    /// A change either way
    Any,
}

impl From<FailOnArg> for FailOn {
    fn from(a: FailOnArg) -> FailOn {
        match a {
            FailOnArg::Slower => FailOn::Slower,
            FailOnArg::Any => FailOn::Any,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum MethodArg {
    /// Earth Mover's Distance, in powers of two
    Emd,
    /// Symmetric chi-square distance
    Chi2,
    /// Jeffrey divergence (symmetric Kullback-Leibler)
    Jeffrey,
    /// Normalized difference in calls
    Count,
    /// Normalized difference in total latency
    Latency,
}

fn parse_nonnegative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a non-negative number")),
    }
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x < 1.0 => Ok(x),
        _ => Err(format!(
            "{s:?} is not a probability between 0 and 1 (e.g. 0.05)"
        )),
    }
}

fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!(
            "{s:?} is not a share between 0 and 1 (e.g. 0.01 for 1%)"
        )),
    }
}

/// A's and B's files: `A B`, or `A1 A2 ... --vs B1 B2 ...`.
fn sides(a: &CompareArgs) -> Result<(&[PathBuf], &[PathBuf])> {
    match (a.a.as_slice(), a.vs.as_slice()) {
        ([one, other], []) => Ok((std::slice::from_ref(one), std::slice::from_ref(other))),
        (_, []) => anyhow::bail!(
            "give two profiles (A B), or each side's runs with --vs (A1 A2 A3 --vs B1 B2 B3)"
        ),
        (a, b) => Ok((a, b)),
    }
}

/// Runs made with `run --no-aslr` (one memory layout) and runs with the
/// layout randomized differ by more than what the user changed: where a
/// program's buffers land can change what its calls cost (a `close` 2.5x
/// as slow after a `munmap`, by where the buffer was). Said, not refused:
/// the comparison is still what the profiles hold.
fn warn_mixed_layouts(ra: &[fsprof_core::Profile], rb: &[fsprof_core::Profile]) {
    let all = ra.len() + rb.len();
    let fixed = ra
        .iter()
        .chain(rb)
        .filter(|p| p.meta.settings.contains_key("layout"))
        .count();
    if fixed != 0 && fixed != all {
        fsprof_sys::diag!(
            "fsprof: warning: {fixed} of the {all} profiles were made with `run --no-aslr` (one memory layout), the others with the layout randomized; a change between them may be the layout's: make every run the same way"
        );
    }
}

/// `a.json`, or `a1.json a2.json a3.json`.
fn names(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| crate::files::name(f))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn compare(a: CompareArgs) -> Result<i32> {
    let format = pick_format(a.format, a.to.output.as_deref(), FormatArg::Text);
    if format == FormatArg::Html && a.to.output.is_none() {
        anyhow::bail!("--format html writes a file: add -o compare.html");
    }
    let (fa, fb) = sides(&a)?;
    let mut docs = crate::files::read_documents(&fa.iter().chain(fb).collect::<Vec<_>>())?;
    if let ([da, db], [pa], [pb]) = (docs.as_slice(), fa, fb) {
        if let (Some(ra), Some(rb)) = (&da.bench, &db.bench) {
            let (na, nb) = (crate::files::name(pa), crate::files::name(pb));
            let (out, force) = (a.to.output.as_deref(), a.to.force);
            let fail_on = a.fail_on.into();
            return super::bench::compare_results(
                (ra, &na),
                (rb, &nb),
                format,
                out,
                force,
                fail_on,
            );
        }
    }
    let rb: Vec<_> = docs
        .split_off(fa.len())
        .into_iter()
        .map(|d| d.profile)
        .collect();
    let ra: Vec<_> = docs.into_iter().map(|d| d.profile).collect();
    warn_mixed_layouts(&ra, &rb);
    let opts = CompareOptions {
        method: match a.method {
            MethodArg::Emd => Method::Emd,
            MethodArg::Chi2 => Method::Chi2,
            MethodArg::Jeffrey => Method::Jeffrey,
            MethodArg::Count => Method::Count,
            MethodArg::Latency => Method::Latency,
        },
        alpha: a.alpha,
        min_share: a.min_share,
        spread: a.spread,
        layer_spread: a.layer_spread,
        negligible: a.negligible,
        fail_on: a.fail_on.into(),
        calibration: calibration(&a.calibration)?,
        ..Default::default()
    };
    let c = compare_runs(&ra, &rb, &opts);
    let (na, nb) = (names(fa), names(fb));
    let text = match format {
        FormatArg::Text => render::comparison_text(&c, &na, &nb),
        FormatArg::Json => render::comparison_json(&c, &na, &nb),
        FormatArg::Csv => render::comparison_csv(&c),
        FormatArg::Html => {
            let rows: Vec<CompareRow> = c.ops.iter().map(|o| CompareRow::new(&c, o)).collect();
            let merged = |rs: &[fsprof_core::Profile]| {
                fsprof_core::merge::merge_profiles(rs, rs[0].meta.clone()).0
            };
            fsprof_plot::html::compare((&na, &merged(&ra)), (&nb, &merged(&rb)), &rows)?
        }
    };
    finish(&text, a.to.output.as_deref(), a.to.force)?;
    Ok(c.exit_code())
}
