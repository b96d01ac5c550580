//! `fsprof compare A B`: exit 0 when no op changed significantly, 1 when one
//! did (so CI can gate on it), 2 on errors.

use anyhow::Result;
use fsprof_analysis::compare::{compare_profiles, CompareOptions, Method};
use fsprof_report::analysis as render;

use super::analysis::calibration;
use fsprof_plot::CompareRow;

use super::report::finish;
use crate::cli::{CompareArgs, FormatArg, MethodArg};

pub fn compare(a: CompareArgs) -> Result<i32> {
    if a.format == FormatArg::Html && a.output.is_none() {
        anyhow::bail!("--format html writes a file: add -o compare.html");
    }
    if let Some(code) =
        super::bench::compare_results(&a.a, &a.b, a.format, a.output.as_deref(), a.force)?
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
    let text = match a.format {
        FormatArg::Text => render::comparison_text(&c, &na, &nb),
        FormatArg::Json => render::comparison_json(&c, &na, &nb),
        FormatArg::Csv => render::comparison_csv(&c),
        FormatArg::Html => {
            let rows: Vec<CompareRow> = c.ops.iter().map(|o| CompareRow::new(&c, o)).collect();
            fsprof_plot::html::compare((&na, &pa), (&nb, &pb), &rows)?
        }
    };
    finish(&text, a.output.as_deref(), a.force)?;
    Ok(c.exit_code())
}
