//! `fsprof export FILE`: a profile in a monitoring system's format
//! (fsprof-export).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};

use crate::args::ToFileArgs;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Profile file
    pub file: PathBuf,
    #[arg(long, value_enum, required = true)]
    pub format: ExportFormatArg,
    /// Label the series with the whole command line, not only the program's name
    #[arg(long)]
    pub command_argv: bool,
    #[command(flatten)]
    pub to: ToFileArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ExportFormatArg {
    /// OpenTelemetry ExportMetricsServiceRequest, protobuf JSON mapping (exponential histograms)
    OtlpJson,
    /// Prometheus text exposition format 0.0.4 (classic histograms)
    Prometheus,
    /// Prometheus protobuf exposition, delimited MetricFamily messages (native and classic histograms)
    PrometheusProtobuf,
}

pub fn export(a: ExportArgs) -> Result<i32> {
    let profile = crate::files::read_input(&a.file)?;
    let labels = fsprof_export::LabelOptions {
        argv: a.command_argv,
    };
    let bytes = match a.format {
        ExportFormatArg::OtlpJson => fsprof_export::otlp::render(&profile, &labels).into_bytes(),
        ExportFormatArg::Prometheus => {
            fsprof_export::prometheus::render(&profile, &labels).into_bytes()
        }
        ExportFormatArg::PrometheusProtobuf => fsprof_export::protobuf::render(&profile, &labels),
    };
    super::report::finish_bytes(&bytes, a.to.output.as_deref(), a.to.force)
}
