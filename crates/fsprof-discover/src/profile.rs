//! Every latency a discovery measured as an fsprof profile, so that
//! `fsprof report`, `compare` and `plot` read it like any other: layer
//! `discover`, one op per method (`block-size.write`, `readahead.read`,
//! ...), log2 histograms over all offsets and iterations. The two peaks
//! of a method's op are the two latency levels it told apart.

use std::ffi::OsString;

use fsprof_core::profile::Layer;
use fsprof_core::{BucketLayout, Profile, Resolution};

use crate::Report;

pub const LAYER: &str = fsprof_core::layer::DISCOVER;

/// The findings' samples as a profile; `command` is fsprof's command line.
pub fn build(report: &Report, command: &[OsString], resolution: Resolution) -> Profile {
    let mut meta = fsprof_capture::meta::describe("discover", command, resolution);
    meta.run.start_time = report.start_time.clone();
    meta.duration_ns = report.duration_ns;
    meta.clock = crate::timing::Clock::process().describe();
    let layout = BucketLayout::new(resolution);
    let mut layer = Layer::new(LAYER);
    for f in &report.findings {
        for (name, series) in &f.samples {
            let op = layer.op_mut(name);
            for ns in series.all_samples() {
                op.record(&layout, ns, false);
            }
        }
    }
    layer.normalize();
    meta.overhead = Some(crate::timing::Overhead::process().describe(layer.total_calls()));
    let mut p = Profile::new(meta);
    if !layer.ops.is_empty() {
        p.layers.push(layer);
    }
    p
}
