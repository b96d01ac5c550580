//! `fsprof bench`: file-system microbenchmarks that say when their own
//! numbers cannot be trusted (the memory-rich microbenchmark methodology of
//! Wang et al., with hyperfine-grade statistics).
//!
//! What it measures with — the timing loop, page-cache states with
//! verification, the target directory's facts — is fsprof-measure's,
//! shared with `fsprof discover`; statistics (quantiles, MAD outliers,
//! Student-t intervals) are `fsprof_core::stats`'s, so that every crate
//! reports them the same way. `fsprof calibrate`'s workloads
//! ([`calibrate`]) run on the same loop.

pub mod calibrate;
pub mod compare;
pub mod export;
pub mod figure;
pub mod machine;
pub mod params;
pub mod result;
pub mod runner;
pub mod suites;
pub mod warnings;

pub use params::{Align, Params};
pub use runner::{run, BenchError, Progress};
pub use suites::{Suite, SUITES};
