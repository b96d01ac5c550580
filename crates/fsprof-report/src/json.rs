//! `fsprof report --format json`: typed, so the document's shape is one
//! set of structs rather than values patched together.

use fsprof_analysis::correlation::OpValues;
use fsprof_analysis::peak_table::PeakRow;
use fsprof_analysis::select::{CorrelatedPeaks, Interesting, TopOp};
use fsprof_core::layer::Unit;
use fsprof_core::profile::Meta;
use fsprof_core::Profile;
use serde::Serialize;

use crate::summary::Summary;
use crate::Tables;

/// The whole document.
#[derive(Serialize)]
pub struct ProfileReport<'a> {
    /// Always `fsprof-report`.
    pub report: &'static str,
    pub meta: &'a Meta,
    pub layers: Vec<LayerJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peaks: Option<Vec<PeakJson<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interesting: Option<InterestingJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation: Option<&'a OpValues>,
}

/// A peak row, with its calibrated characteristic in words.
#[derive(Serialize)]
pub struct PeakJson<'a> {
    #[serde(flatten)]
    pub row: &'a PeakRow,
    /// `≈ device read (128 KiB)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The label's distance from its cause (`3.7× its calibrated median`),
    /// or why there is no label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_note: Option<String>,
}

/// `report --interesting`, each op and pair with its reason in words.
#[derive(Serialize)]
pub struct InterestingJson<'a> {
    pub top: Vec<Reasoned<'a, TopOp>>,
    pub correlated: Vec<Reasoned<'a, CorrelatedPeaks>>,
}

#[derive(Serialize)]
pub struct Reasoned<'a, T> {
    #[serde(flatten)]
    pub finding: &'a T,
    pub reason: String,
}

impl<'a> InterestingJson<'a> {
    fn new(i: &'a Interesting) -> Self {
        InterestingJson {
            top: i
                .top
                .iter()
                .map(|t| Reasoned {
                    finding: t,
                    reason: crate::reason::top_reason(i, t),
                })
                .collect(),
            correlated: i
                .correlated
                .iter()
                .map(|c| Reasoned {
                    finding: c,
                    reason: crate::reason::pair_reason(i, c),
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
pub struct LayerJson<'a> {
    pub layer: &'a str,
    /// What the layer's `*_ns` figures and bucket bounds count: `ns`, or
    /// `bytes` for a byte-valued layer (`block-size`).
    pub unit: Unit,
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
    pub ops: Vec<OpJson<'a>>,
}

/// One ranked op, with the figures and the histogram the text report
/// shows. Counts of calls are `calls` everywhere (layers, ops, `compare`'s
/// `calls_a`/`calls_b`), as the text report's column.
#[derive(Serialize)]
pub struct OpJson<'a> {
    pub op: &'a str,
    pub calls: u64,
    pub errors: u64,
    pub unfinished: u64,
    pub total_ns: u64,
    pub mean_ns: f64,
    pub min_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// Estimated inside their bucket (geometric interpolation, clamped to
    /// min and max); the `_range_ns` pairs are the bounds that bucket puts
    /// on the true value.
    pub p50_ns: f64,
    pub p99_ns: f64,
    pub p50_range_ns: (f64, f64),
    pub p99_range_ns: (f64, f64),
    /// Of the layer's total latency.
    pub share: f64,
    /// The non-empty latency buckets, fastest first.
    pub buckets: Vec<BucketJson>,
}

/// One latency bucket: calls that took more than `lower_ns` and at most
/// `upper_ns` (both 0 for the calls timed at 0 ns, within one clock tick).
#[derive(Serialize)]
pub struct BucketJson {
    pub lower_ns: f64,
    pub upper_ns: f64,
    pub calls: u64,
    /// The bucket starts under the smallest latency the clock can record
    /// (`meta.overhead.min_recordable_ns`): such calls are only known to be
    /// that fast.
    pub under_floor: bool,
}

fn buckets(
    op: &fsprof_core::OpStats,
    res: fsprof_core::Resolution,
    floor: Option<f64>,
) -> Vec<BucketJson> {
    let h = &op.histogram;
    let zero = (h.zero > 0).then(|| BucketJson {
        lower_ns: 0.0,
        upper_ns: 0.0,
        calls: h.zero,
        under_floor: floor.is_some(),
    });
    let rest = h
        .counts
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(k, &c)| {
            let i = h.offset + k as i32;
            BucketJson {
                lower_ns: res.lower_bound(i),
                upper_ns: res.upper_bound(i),
                calls: c,
                under_floor: floor.is_some_and(|f| res.lower_bound(i) < f),
            }
        });
    zero.into_iter().chain(rest).collect()
}

impl<'a> ProfileReport<'a> {
    pub fn new(p: &'a Profile, s: &Summary<'a>, tables: &'a Tables) -> Self {
        let floor = p.meta.overhead.as_ref().map(|o| o.min_recordable_ns);
        let layers = s
            .layers
            .iter()
            .map(|l| LayerJson {
                layer: l.name,
                unit: Unit::of(l.name),
                calls: l.calls,
                errors: l.errors,
                total_ns: l.total_ns,
                ops: l
                    .rows
                    .iter()
                    .map(|r| OpJson {
                        op: &r.op.name,
                        calls: r.op.post,
                        errors: r.op.errors,
                        unfinished: r.op.unfinished(),
                        total_ns: r.op.total_ns,
                        mean_ns: r.op.mean_ns(),
                        min_ns: r.op.min_ns,
                        max_ns: r.op.max_ns,
                        p50_ns: r.p50_ns,
                        p99_ns: r.p99_ns,
                        p50_range_ns: r.p50_range_ns,
                        p99_range_ns: r.p99_range_ns,
                        share: r.share,
                        buckets: buckets(
                            r.op,
                            p.resolution(),
                            floor.filter(|_| Unit::of(l.name) == Unit::Ns),
                        ),
                    })
                    .collect(),
            })
            .collect();
        ProfileReport {
            report: "fsprof-report",
            meta: &p.meta,
            layers,
            peaks: tables.peaks.as_ref().map(|rows| {
                rows.iter()
                    .map(|row| PeakJson {
                        row,
                        label: row.label.as_ref().map(crate::reason::peak_label),
                        label_note: match (&row.label, &row.no_label) {
                            (Some(l), _) => crate::reason::label_distance(l),
                            (None, Some(n)) => Some(crate::reason::no_label(n)),
                            (None, None) => None,
                        },
                    })
                    .collect()
            }),
            interesting: tables.interesting.as_ref().map(InterestingJson::new),
            correlation: tables.correlation.as_ref(),
        }
    }
}

pub fn render(doc: &ProfileReport) -> String {
    pretty(doc)
}

/// Indented JSON with a final newline, as every JSON output of fsprof.
pub fn pretty(doc: &impl Serialize) -> String {
    serde_json::to_string_pretty(doc).expect("report structs serialize") + "\n"
}
