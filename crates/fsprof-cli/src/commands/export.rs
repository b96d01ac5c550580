//! `fsprof export FILE`: a profile in a monitoring system's format
//! (fsprof-export).

use anyhow::Result;

use crate::cli::{ExportArgs, ExportFormatArg};

pub fn export(a: ExportArgs) -> Result<i32> {
    let profile = crate::files::read_input(&a.file)?;
    let labels = fsprof_export::LabelOptions::default();
    let bytes = match a.format {
        ExportFormatArg::OtlpJson => fsprof_export::otlp::render(&profile, &labels).into_bytes(),
        ExportFormatArg::Prometheus => {
            fsprof_export::prometheus::render(&profile, &labels).into_bytes()
        }
        ExportFormatArg::PrometheusProtobuf => fsprof_export::protobuf::render(&profile, &labels),
    };
    super::report::finish_bytes(&bytes, a.output.as_deref(), a.force)
}
