//! A sweep's figures against file size (`fsprof bench sweep --plot`, and
//! the HTML report of a bench result): one line per phase, the CPU data
//! caches and the memory available marked. Drawn by fsprof-plot's line
//! chart; what goes on it is the bench result's to say.

use fsprof_plot::linechart::{render, Line, LineChart};

use crate::params::human_bytes;
use crate::result::BenchResult;

/// What a sweep plot puts on its value axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SweepMetric {
    /// Each phase's figure (MB/s over wall time), mean ± 95% CI of the runs.
    Rate,
    /// Median latency per operation, ns: robust to other processes.
    OpP50,
}

/// The sweep chart's SVG.
pub fn sweep_svg(b: &BenchResult, metric: SweepMetric) -> String {
    let names: Vec<String> = b
        .sweep
        .first()
        .map(|s| s.phases.iter().map(|p| p.name.clone()).collect())
        .unwrap_or_default();
    let lines = names
        .iter()
        .map(|n| Line {
            name: n.clone(),
            points: b
                .sweep
                .iter()
                .filter_map(|s| {
                    let p = s.phases.iter().find(|p| &p.name == n)?;
                    Some(match metric {
                        SweepMetric::Rate => (
                            s.file_size as f64,
                            p.summary.mean,
                            p.summary.ci95.map_or(0.0, |c| c.half_width),
                        ),
                        SweepMetric::OpP50 => (s.file_size as f64, p.op_median_ns, 0.0),
                    })
                })
                .collect(),
        })
        .collect();
    let mut markers: Vec<(f64, String)> = b
        .machine
        .data_caches()
        .iter()
        .map(|&(level, size)| (size as f64, format!("L{level} {}", human_bytes(size))))
        .collect();
    markers.push((
        b.machine.memory_available as f64,
        format!("memory {}", human_bytes(b.machine.memory_available)),
    ));
    let (what, y_label) = match metric {
        SweepMetric::Rate => ("mean ± 95% CI", "MB/s"),
        SweepMetric::OpP50 => ("median ns per op", "ns per op (median)"),
    };
    let summary = b.params.suite().map(|s| s.summary(&b.params));
    let chart = LineChart {
        title: format!(
            "fsprof bench {}: {} on {} ({}, {what})",
            b.params.suite,
            b.dir.fs_type,
            b.machine.host,
            summary.unwrap_or_default(),
        ),
        x_label: "file size".into(),
        y_label: y_label.into(),
        lines,
        markers,
        x_format: |x| human_bytes(x as u64),
    };
    render(&chart)
}

/// A sweep's charts as figures of the HTML report; none without a sweep.
pub fn report_figures(b: &BenchResult) -> Vec<fsprof_plot::html::Figure> {
    if b.sweep.is_empty() {
        return Vec::new();
    }
    vec![
        fsprof_plot::html::Figure {
            id: "file-size-sweep".into(),
            heading: "Benchmark sweep: throughput against file size".into(),
            svg: sweep_svg(b, SweepMetric::Rate),
            caption: "Mean of the measured runs with its 95% confidence interval per phase; dashed lines mark the CPU data caches (sysfs) and the memory available when the sweep started.".into(),
        },
        fsprof_plot::html::Figure {
            id: "file-size-sweep-op-p50".into(),
            heading: "Benchmark sweep: median latency per operation against file size".into(),
            svg: sweep_svg(b, SweepMetric::OpP50),
            caption: "Median over the measured runs of each run's median per-operation latency (lower is faster); a preempted operation moves a mean, rarely a median.".into(),
        },
    ]
}
