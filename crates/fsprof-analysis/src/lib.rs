//! fsprof's automated analysis (OSprof §3.1–3.2, FSprof §5.1.1).
//!
//! - [`distance`]: how different two latency histograms are (EMD, χ², Jeffrey
//!   divergence, normalized count and total-latency differences).
//! - [`peaks`]: the modes of one histogram, with their mass in calls and in
//!   latency — FSprof Table 3.
//! - [`compare`]: two whole profiles op by op in OSprof's three phases, with a
//!   ranked list of the ops whose behaviour changed and a one-line reason each.
//! - [`labels`]: this machine's characteristic latencies (measured by
//!   `fsprof calibrate`, whose workloads are in fsprof-bench) as a file.
//! - [`select`]: from one profile, the ops worth looking at first.
//! - [`correlation`]: per latency peak, the distribution of request size or
//!   seek distance recorded by the user-level shim.
//! - [`peak_labels`]: which peak gets which calibrated label.
//! - [`peak_table`]: the per-peak table (FSprof Table 3) of chosen ops.
//! - [`attribution`]: how much of an upper layer's latency a lower layer's
//!   histograms explain (OSprof's layered profiling).
//!
//! Everything here is pure computation on [`fsprof_core::Profile`] values
//! (and calibration files); the results are rendered by fsprof-report.

pub mod attribution;
pub mod compare;
pub mod correlation;
pub mod distance;
pub mod fmt;
pub mod labels;
pub mod peak_labels;
pub mod peak_table;
pub mod peaks;
pub mod refine;
pub mod select;

pub use compare::{compare_profiles, CompareOptions, Comparison, Method, OpComparison};
pub use labels::Calibration;
pub use peaks::{find_peaks, Peak, PeakOptions};
