//! `fsprof compare A B`: exit 0 when no op changed significantly, 1 when one
//! did (so CI can gate on it), 2 on errors.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use fsprof_analysis::compare::{compare_profiles, CompareOptions, Method};
use fsprof_plot::CompareRow;
use fsprof_report::analysis as render;

use super::analysis::calibration;
use super::report::finish;
use crate::args::{pick_format, CalibrationArgs, FormatArg, ToFileArgs};

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline profile
    pub a: PathBuf,
    /// Profile compared with the baseline
    pub b: PathBuf,
    /// How differences are scored
    #[arg(long, value_enum, default_value_t = MethodArg::Emd)]
    pub method: MethodArg,
    /// Score at or above which an op is interesting
    /// [default: emd 0.5, chi2 0.5, jeffrey 0.3, count 0.2, latency 0.3]
    #[arg(long, value_name = "X", value_parser = parse_nonnegative)]
    pub threshold: Option<f64>,
    /// Ignore ops under this share of their layer's calls and latency in both profiles
    #[arg(long, default_value_t = 0.01, value_name = "SHARE", value_parser = parse_share)]
    pub negligible: f64,
    /// Don't let a new or vanished peak alone make an op interesting
    #[arg(long)]
    pub no_peak_changes: bool,
    /// How to print it [default: -o FILE's extension (.json, .csv, .html), else text]
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    #[command(flatten)]
    pub to: ToFileArgs,
    #[command(flatten)]
    pub calibration: CalibrationArgs,
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

fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!(
            "{s:?} is not a share between 0 and 1 (e.g. 0.01 for 1%)"
        )),
    }
}

pub fn compare(a: CompareArgs) -> Result<i32> {
    let format = pick_format(a.format, a.to.output.as_deref(), FormatArg::Text);
    if format == FormatArg::Html && a.to.output.is_none() {
        anyhow::bail!("--format html writes a file: add -o compare.html");
    }
    if let Some(code) =
        super::bench::compare_results(&a.a, &a.b, format, a.to.output.as_deref(), a.to.force)?
    {
        return Ok(code);
    }
    let [pa, pb]: [_; 2] = crate::files::read_inputs([&a.a, &a.b])?
        .try_into()
        .expect("two profiles");
    let opts = CompareOptions {
        method: match a.method {
            MethodArg::Emd => Method::Emd,
            MethodArg::Chi2 => Method::Chi2,
            MethodArg::Jeffrey => Method::Jeffrey,
            MethodArg::Count => Method::Count,
            MethodArg::Latency => Method::Latency,
        },
        threshold: a.threshold,
        negligible: a.negligible,
        peak_changes: !a.no_peak_changes,
        calibration: calibration(&a.calibration)?,
        ..Default::default()
    };
    let c = compare_profiles(&pa, &pb, &opts);
    let (na, nb) = (crate::files::name(&a.a), crate::files::name(&a.b));
    let text = match format {
        FormatArg::Text => render::comparison_text(&c, &na, &nb),
        FormatArg::Json => render::comparison_json(&c, &na, &nb),
        FormatArg::Csv => render::comparison_csv(&c),
        FormatArg::Html => {
            let rows: Vec<CompareRow> = c.ops.iter().map(|o| CompareRow::new(&c, o)).collect();
            fsprof_plot::html::compare((&na, &pa), (&nb, &pb), &rows)?
        }
    };
    finish(&text, a.to.output.as_deref(), a.to.force)?;
    Ok(c.exit_code())
}
