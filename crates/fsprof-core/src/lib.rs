//! The profile model every fsprof layer produces and every analysis reads.
//!
//! A profile is, per layer and per operation, a latency histogram whose bucket
//! `i` covers `(2^(i/r), 2^((i+1)/r)]` nanoseconds — the bucket layout of
//! OpenTelemetry exponential histograms at scale `log2(r)` — plus the counters
//! FSprof keeps beside it (entered/returned calls, errors, total, min, max).
//! See `docs/profile-format.md`.

pub mod buckets;
pub mod check;
pub mod format;
pub mod histogram;
pub mod layer;
pub mod merge;
pub mod name_table;
mod named;
pub mod ops;
pub mod output;
pub mod printable;
pub mod profile;
pub mod stats;
pub mod stdio;
pub mod units;
pub mod unnamed;

pub use buckets::{BucketLayout, Resolution};
pub use histogram::{Correlations, Histogram, JointHistogram, OpStats};
pub use profile::{ClockSource, Interval, Layer, Meta, Process, Profile, Tool};
