//! `fsprof bench`: file-system microbenchmarks that say when their own
//! numbers cannot be trusted (the memory-rich microbenchmark methodology of
//! Wang et al., with hyperfine-grade statistics).
//!
//! Stable pieces other crates build on:
//!
//! - [`timing`]: [`timing::TimingLoop`] times an operation per iteration
//!   (one clock read per iteration, raw samples kept, the shared log2
//!   histogram built after the loop) and [`timing::Overhead`] measures what
//!   the loop adds per operation. `fsprof discover` uses it for latency-vs-
//!   offset scans; `fsprof calibrate`'s workloads are to move onto it.
//! - [`cache`]: cold/warm/as-is page-cache states with verification
//!   (`cachestat(2)` or `mincore(2)`), usable for any set of files.
//!
//! Statistics (quantiles, MAD outliers, Student-t intervals) live in
//! `fsprof_core::stats` so that every crate reports them the same way.

pub mod cache;
pub mod calibrate;
pub mod compare;
pub mod export;
pub mod figure;
pub mod machine;
pub mod params;
pub mod result;
pub mod runner;
pub mod suites;
pub mod timing;
pub mod warnings;

pub use params::{Align, Params, Suite};
pub use runner::{run, BenchError, Progress};
