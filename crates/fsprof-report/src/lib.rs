//! Every text, JSON and CSV rendering of fsprof: the profile report, the
//! analysis tables (peaks, interesting ops, value correlation, layered
//! attribution, comparisons), the byte tables of the `block-size` layer and
//! the calibration table. Computation lives in fsprof-analysis; this crate
//! only lays results out. Every format of the profile report is built from
//! the same ranked [`summary::Summary`], so they agree.

pub mod analysis;
pub mod attribution;
pub mod block_sizes;
pub mod calibration;
mod csv;
pub mod fmt;
pub mod json;
pub mod reason;
pub mod summary;
mod text;

use fsprof_analysis::correlation::{correlate_in, CorrelationError, Value};
use fsprof_analysis::peak_table::{peak_rows, PeakRow};
use fsprof_analysis::peaks::PeakOptions;
use fsprof_analysis::select::{interesting, Interesting, SelectOptions};
use fsprof_analysis::{correlation::OpValues, Calibration};
use fsprof_core::{OpStats, Profile};

pub use summary::{Selection, Summary};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Csv,
}

#[derive(Clone, Debug)]
pub struct ReportOptions {
    pub format: Format,
    pub selection: Selection,
    /// Ops that get a histogram in the text report.
    pub top: usize,
    pub processes: bool,
    /// Analysis tables added after the summary (see [`Extras`]).
    pub extras: Extras,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            format: Format::Text,
            selection: Selection::default(),
            top: 5,
            processes: false,
            extras: Extras::default(),
        }
    }
}

/// The tables `fsprof report` can add to the summary. CSV holds one table,
/// so with [`Format::Csv`] the first one asked for replaces the summary.
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// The per-peak table; without `--op`, of the ops the text report
    /// details (the `top` of each layer).
    pub peaks: bool,
    /// The ops holding most latency and the peaks with matching counts.
    pub interesting: bool,
    /// Per peak of the one selected op, the distribution of this value.
    pub correlate: Option<Value>,
    /// Layered attribution (text only).
    pub attribution: bool,
}

impl Extras {
    fn any_table(&self) -> bool {
        self.peaks || self.interesting || self.correlate.is_some()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("no op named {name:?} in the profile (it has: {known})")]
    UnknownOp { name: String, known: String },
    #[error("no layer named {name:?} in the profile (it has: {known})")]
    UnknownLayer { name: String, known: String },
    #[error(transparent)]
    Correlation(#[from] CorrelationError),
}

/// The profile report with the tables `opts.extras` asks for; peaks are
/// labelled with `calibration`'s characteristic latencies when given.
pub fn render(
    profile: &Profile,
    opts: &ReportOptions,
    calibration: Option<&Calibration>,
) -> Result<String, ReportError> {
    // Validates --op/--layer even when only analysis tables are printed.
    let summary = Summary::build(profile, &opts.selection)?;
    let tables = Tables::compute(profile, opts, calibration)?;
    Ok(match opts.format {
        Format::Text => {
            let mut out = text::render(profile, &summary, opts);
            if opts.extras.attribution {
                out.push_str(&attribution::render_text(profile));
            }
            tables.push_text(&mut out, profile);
            terminal_safe(out)
        }
        Format::Json => json::render(&json::ProfileReport::new(profile, &summary, &tables)),
        Format::Csv => terminal_safe(match tables.first_csv() {
            Some(csv) => csv,
            None => csv::render(&summary),
        }),
    })
}

/// Text and CSV end up on terminals: whatever a profile's names hold (op
/// and layer names, command lines), no control character but the line
/// breaks gets through (JSON escapes them itself).
pub(crate) fn terminal_safe(out: String) -> String {
    match fsprof_core::printable::text(&out) {
        std::borrow::Cow::Borrowed(_) => out,
        std::borrow::Cow::Owned(safe) => safe,
    }
}

/// The report printed after a capture (`fsprof run`, `fsprof kernel`): the
/// summary of the latency layers, then each byte layer as a byte table, then
/// layered attribution where the profile's layers allow it.
pub fn after_capture(profile: &Profile, top: usize) -> Result<String, ReportError> {
    let mut opts = ReportOptions {
        top,
        ..Default::default()
    };
    opts.selection.layers = profile
        .layers
        .iter()
        .map(|l| l.name.clone())
        .filter(|n| !fsprof_core::layer::holds_bytes(n) && fsprof_core::layer::shown_by_default(n))
        .collect();
    if opts.selection.layers.is_empty() {
        // Nothing recorded: the header alone.
        opts.selection = Selection::default();
    }
    let mut out = render(profile, &opts, None)?;
    out.push_str(&block_sizes::render_text(profile));
    out.push_str(&attribution::render_text(profile));
    Ok(terminal_safe(out))
}

/// The analysis results [`Extras`] asked for.
#[derive(Default)]
pub struct Tables {
    pub peaks: Option<Vec<PeakRow>>,
    pub interesting: Option<Interesting>,
    pub correlation: Option<OpValues>,
}

impl Tables {
    fn compute(
        p: &Profile,
        opts: &ReportOptions,
        cal: Option<&Calibration>,
    ) -> Result<Tables, ReportError> {
        let (x, sel) = (&opts.extras, &opts.selection);
        if !x.any_table() {
            return Ok(Tables::default());
        }
        let popts = PeakOptions::default();
        let peaks = x.peaks.then(|| {
            let keep = |layer: &str, op: &str| {
                (sel.layers.is_empty() || sel.layers.iter().any(|l| l == layer))
                    && (sel.ops.is_empty() || sel.ops.iter().any(|o| o == op))
            };
            let mut rows = peak_rows(p, keep, cal, &popts);
            if sel.ops.is_empty() {
                let top = top_ops(p, &sel.layers, opts.top);
                rows.retain(|r| top.contains(&(r.layer.clone(), r.op.clone())));
            }
            rows
        });
        let interesting = x
            .interesting
            .then(|| interesting(p, &SelectOptions::default(), cal));
        let correlation = match (x.correlate, sel.ops.first()) {
            (Some(value), Some(op)) => Some(correlate_in(p, &sel.layers, op, value, &popts)?),
            _ => None,
        };
        Ok(Tables {
            peaks,
            interesting,
            correlation,
        })
    }

    fn push_text(&self, out: &mut String, p: &Profile) {
        if let Some(rows) = &self.peaks {
            out.push_str(&analysis::peaks_text(rows, p.resolution()));
        }
        if let Some(i) = &self.interesting {
            out.push_str(&analysis::interesting_text(i));
        }
        if let Some(c) = &self.correlation {
            out.push_str(&analysis::correlation_text(c));
        }
    }

    fn first_csv(&self) -> Option<String> {
        if let Some(rows) = &self.peaks {
            Some(analysis::peaks_csv(rows))
        } else if let Some(i) = &self.interesting {
            Some(analysis::interesting_csv(i))
        } else {
            self.correlation.as_ref().map(analysis::correlation_csv)
        }
    }
}

/// The `n` ops with most latency per layer (what the text report details).
fn top_ops(p: &Profile, layers: &[String], n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for l in &p.layers {
        if !layers.is_empty() && !layers.contains(&l.name) {
            continue;
        }
        let mut ops: Vec<_> = l.ops.iter().filter(|o| o.post > 0).collect();
        ops.sort_by(|a, b| OpStats::by_latency(a, b));
        out.extend(ops.iter().take(n).map(|o| (l.name.clone(), o.name.clone())));
    }
    out
}
