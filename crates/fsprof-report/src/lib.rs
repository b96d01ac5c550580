//! Renders profiles for people (text) and programs (JSON, CSV). Every format
//! is built from the same ranked [`summary::Summary`], so they agree.

mod csv;
mod json;
pub mod summary;
mod text;

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
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            format: Format::Text,
            selection: Selection::default(),
            top: 5,
            processes: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("no op named {name:?} in the profile (it has: {known})")]
    UnknownOp { name: String, known: String },
    #[error("no layer named {name:?} in the profile (it has: {known})")]
    UnknownLayer { name: String, known: String },
}

pub fn render(profile: &fsprof_core::Profile, opts: &ReportOptions) -> Result<String, ReportError> {
    let summary = Summary::build(profile, &opts.selection)?;
    Ok(match opts.format {
        Format::Text => text::render(profile, &summary, opts),
        Format::Json => json::render(profile, &summary),
        Format::Csv => csv::render(&summary),
    })
}
