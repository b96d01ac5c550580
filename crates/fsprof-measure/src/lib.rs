//! What fsprof's own measurements measure with — `fsprof bench`'s suites,
//! `fsprof discover`'s latency-against-offset scans, `fsprof calibrate`'s
//! workloads and `fsprof run --cold`: one crate under all of them, so that
//! none of those commands depends on another.
//!
//! - [`timing`]: [`timing::TimingLoop`] times an operation per iteration
//!   (one clock read per iteration, raw samples kept, the shared log2
//!   histogram built after the loop) and [`timing::Overhead`] measures
//!   what the loop adds per operation;
//! - [`cache`]: cold/warm/as-is page-cache states with verification
//!   (`cachestat(2)` or `mincore(2)`), for any set of files;
//! - [`cold_paths`]: the files a user names (`run --cold`) evicted and
//!   checked one descriptor at a time, with why any stayed cached;
//! - [`target`]: the directory a measurement runs in — its file system,
//!   the mount it is on, block size and free space.
//!
//! Statistics (quantiles, MAD outliers, Student-t intervals) live in
//! `fsprof_core::stats` so that every crate reports them the same way; OS
//! facts (the mount table, page-cache calls, host facts) in fsprof-sys.

pub mod cache;
pub mod cold_paths;
pub mod target;
pub mod timing;
