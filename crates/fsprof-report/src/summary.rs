//! Ops ranked by total latency (FSprof Table 1), with the figures every
//! report format shows.

use fsprof_core::{OpStats, Profile};

use crate::ReportError;

/// Which part of a profile to report on; empty means every layer shown by
/// default (see `fsprof_core::profile::layer::shown_by_default`).
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub layers: Vec<String>,
    pub ops: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct Row<'a> {
    pub layer: &'a str,
    pub op: &'a OpStats,
    /// Estimates inside the bucket that holds them (geometric
    /// interpolation, clamped to the op's min and max).
    pub p50_ns: f64,
    pub p99_ns: f64,
    /// The bounds of those buckets (clamped alike): where the true p50
    /// and p99 are known to lie.
    pub p50_range_ns: (f64, f64),
    pub p99_range_ns: (f64, f64),
    /// Of the layer's total latency.
    pub share: f64,
}

pub struct LayerSummary<'a> {
    pub name: &'a str,
    pub total_ns: u64,
    pub calls: u64,
    pub errors: u64,
    pub rows: Vec<Row<'a>>,
}

pub struct Summary<'a> {
    pub layers: Vec<LayerSummary<'a>>,
}

impl<'a> Summary<'a> {
    pub fn build(p: &'a Profile, sel: &Selection) -> Result<Self, ReportError> {
        let known_layers = || crate::fmt::name_list(p.layers.iter().map(|l| l.name.as_str()));
        for name in &sel.layers {
            if p.layer(name).is_none() {
                return Err(ReportError::UnknownLayer {
                    name: name.clone(),
                    known: known_layers(),
                });
            }
        }
        // Without a choice: every layer but those shown only on request
        // (the user layer's calls on non-files).
        let chosen = |l: &str| {
            if sel.layers.is_empty() {
                fsprof_core::profile::layer::shown_by_default(l)
            } else {
                sel.layers.iter().any(|s| s == l)
            }
        };
        for name in &sel.ops {
            let found = p
                .layers
                .iter()
                .filter(|l| chosen(&l.name))
                .any(|l| l.op(name).is_some());
            if !found {
                let mut known: Vec<&str> = p
                    .layers
                    .iter()
                    .filter(|l| chosen(&l.name))
                    .flat_map(|l| l.ops.iter().map(|o| o.name.as_str()))
                    .collect();
                known.sort();
                known.dedup();
                return Err(ReportError::UnknownOp {
                    name: name.clone(),
                    known: if known.is_empty() {
                        "no ops".into()
                    } else {
                        crate::fmt::name_list(known)
                    },
                });
            }
        }
        let res = p.resolution();
        let layers = p
            .layers
            .iter()
            .filter(|l| chosen(&l.name))
            .map(|l| {
                let total_ns = l.total_ns();
                let mut rows: Vec<Row> = l
                    .ops
                    .iter()
                    .filter(|o| sel.ops.is_empty() || sel.ops.contains(&o.name))
                    .map(|op| Row {
                        layer: &l.name,
                        op,
                        p50_ns: op.quantile(0.5, res),
                        p99_ns: op.quantile(0.99, res),
                        p50_range_ns: op.quantile_range(0.5, res),
                        p99_range_ns: op.quantile_range(0.99, res),
                        share: if total_ns == 0 {
                            0.0
                        } else {
                            op.total_ns as f64 / total_ns as f64
                        },
                    })
                    .collect();
                rows.sort_by(|a, b| OpStats::by_latency(a.op, b.op));
                LayerSummary {
                    name: &l.name,
                    total_ns,
                    calls: l.total_calls(),
                    errors: l.ops.iter().fold(0u64, |t, o| t.saturating_add(o.errors)),
                    rows,
                }
            })
            .collect();
        Ok(Summary { layers })
    }
}
