use anyhow::{bail, Result};
use fsprof_analysis::correlation::{correlate_in, Value};
use fsprof_analysis::peaks::PeakOptions;
use fsprof_analysis::render;
use fsprof_analysis::select::{interesting, SelectOptions};
use fsprof_core::Profile;
use fsprof_report::{render, Format, ReportOptions, Selection};

use super::analysis::calibration;
use crate::cli::{CorrelateArg, FormatArg, ReportArgs};

pub fn report(a: ReportArgs) -> Result<i32> {
    if a.format == FormatArg::Html && a.output.is_none() {
        bail!("--format html writes a file: add -o report.html");
    }
    let profile = crate::files::read_input(&a.file)?;
    let an = &a.analysis;
    if a.format == FormatArg::Html {
        if an.correlate.is_some() || an.interesting {
            bail!("--format html shows every op with its peaks; --interesting and --correlate are for text, json and csv");
        }
        let cal = calibration(&an.calibration)?;
        let finder = super::plot::peak_finder(cal.as_ref());
        let opts = fsprof_plot::HtmlOptions {
            selection: Selection {
                layers: a.layers,
                ops: a.ops,
            },
            peaks: Some(&finder),
        };
        let html = fsprof_plot::html::report(&profile, &opts)?;
        return finish(&html, a.output.as_deref(), a.force);
    }
    if an.correlate.is_some() && a.ops.len() != 1 {
        bail!("--correlate needs exactly one --op, e.g. --correlate seek --op read");
    }
    let extras = an.peaks as u8 + an.interesting as u8 + an.correlate.is_some() as u8;
    if extras > 1 && matches!(a.format, FormatArg::Csv) {
        bail!("CSV holds one table: use only one of --peaks, --interesting, --correlate with --format csv");
    }
    let opts = ReportOptions {
        format: match a.format {
            FormatArg::Text => Format::Text,
            FormatArg::Json => Format::Json,
            FormatArg::Csv => Format::Csv,
            FormatArg::Html => unreachable!("handled above"),
        },
        selection: Selection {
            layers: a.layers.clone(),
            ops: a.ops.clone(),
        },
        top: a.top,
        processes: a.processes,
    };
    // Validates --op/--layer even when only analysis tables are printed.
    let mut base = render(&profile, &opts)?;
    if a.attribution && matches!(a.format, FormatArg::Text) {
        base.push_str(&fsprof_kernel::attribution::render_text(&profile));
    }
    if extras == 0 {
        return finish(&base, a.output.as_deref(), a.force);
    }
    let cal = calibration(&an.calibration)?;
    let popts = PeakOptions::default();
    let keep = |layer: &str, op: &str| {
        (a.layers.is_empty() || a.layers.iter().any(|l| l == layer))
            && (a.ops.is_empty() || a.ops.iter().any(|o| o == op))
    };
    let mut peak_rows = if an.peaks {
        render::peak_rows(&profile, keep, cal.as_ref(), &popts)
    } else {
        Vec::new()
    };
    if an.peaks && a.ops.is_empty() {
        // Without --op, the peaks of the ops the text report details.
        let top = top_ops(&profile, &a.layers, a.top);
        peak_rows.retain(|r| top.contains(&(r.layer.clone(), r.op.clone())));
    }
    let chosen = an
        .interesting
        .then(|| interesting(&profile, &SelectOptions::default(), cal.as_ref()));
    let corr = match an.correlate {
        Some(v) => {
            let value = match v {
                CorrelateArg::Size => Value::Size,
                CorrelateArg::Seek => Value::Seek,
            };
            Some(correlate_in(&profile, &a.layers, &a.ops[0], value, &popts)?)
        }
        None => None,
    };
    let text = match a.format {
        FormatArg::Text => {
            let mut out = base;
            if an.peaks {
                out.push_str(&render::peaks_text(&peak_rows, profile.resolution()));
            }
            if let Some(i) = &chosen {
                out.push_str(&render::interesting_text(i));
            }
            if let Some(c) = &corr {
                out.push_str(&render::correlation_text(c));
            }
            out
        }
        FormatArg::Json => {
            let mut doc: serde_json::Value = serde_json::from_str(&base)?;
            if an.peaks {
                doc["peaks"] = serde_json::to_value(&peak_rows)?;
            }
            if let Some(i) = &chosen {
                doc["interesting"] = serde_json::to_value(i)?;
            }
            if let Some(c) = &corr {
                doc["correlation"] = serde_json::to_value(c)?;
            }
            serde_json::to_string_pretty(&doc)? + "\n"
        }
        FormatArg::Csv => {
            if an.peaks {
                render::peaks_csv(&peak_rows)
            } else if let Some(i) = &chosen {
                render::interesting_csv(i)
            } else {
                render::correlation_csv(corr.as_ref().expect("one extra was asked for"))
            }
        }
        FormatArg::Html => unreachable!("handled above"),
    };
    finish(&text, a.output.as_deref(), a.force)
}

/// To `-o FILE` (atomically, no partial file on failure) or standard output.
pub fn finish(text: &str, output: Option<&std::path::Path>, force: bool) -> Result<i32> {
    finish_bytes(text.as_bytes(), output, force)
}

pub fn finish_bytes(bytes: &[u8], output: Option<&std::path::Path>, force: bool) -> Result<i32> {
    crate::files::write_output(bytes, output, force)?;
    Ok(0)
}

/// The `n` ops with most latency per layer (what the text report details).
fn top_ops(p: &Profile, layers: &[String], n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for l in &p.layers {
        if !layers.is_empty() && !layers.contains(&l.name) {
            continue;
        }
        let mut ops: Vec<_> = l.ops.iter().filter(|o| o.post > 0).collect();
        ops.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        out.extend(ops.iter().take(n).map(|o| (l.name.clone(), o.name.clone())));
    }
    out
}

/// A closed pipe (`fsprof report p.json | head`) is a normal end, not an error.
pub fn write_stdout(text: &str) -> Result<()> {
    crate::files::write_stdout(text.as_bytes())
}
