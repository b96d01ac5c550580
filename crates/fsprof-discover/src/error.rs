//! What stops a discovery as a whole. A method that cannot work on this
//! file system is not an error: it is a finding that says why
//! (`not applicable`, `inconclusive`), and the other methods still run.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error(transparent)]
    Target(#[from] fsprof_measure::target::TargetError),
    #[error("{} is not writable: {source} (fsprof discover creates its test files there)", dir.display())]
    NotWritable {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// Displays `what`; the cause is its source (fsprof prints the chain).
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cold cache: {0}")]
    Cold(#[from] crate::cold::ColdError),
    #[error("interrupted")]
    Interrupted,
}

impl DiscoverError {
    /// An I/O error with what was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DiscoverError {
        let what = what.into();
        move |source| DiscoverError::Io { what, source }
    }
}
