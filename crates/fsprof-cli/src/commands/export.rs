use anyhow::Result;
use fsprof_core::format::read_profile;

use crate::cli::{ExportArgs, ExportFormatArg};

pub fn export(a: ExportArgs) -> Result<i32> {
    let profile = read_profile(&a.file)?;
    let text = match a.format {
        ExportFormatArg::OtlpJson => fsprof_export::otlp::render(&profile),
        ExportFormatArg::Prometheus => fsprof_export::prometheus::render(&profile),
    };
    super::report::finish(&text, a.output.as_deref(), a.force)
}
