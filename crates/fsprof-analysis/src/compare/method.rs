//! How phase 3 scores the difference between the two sides of an op.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How phase 3 scores the difference between the two sides of an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Earth Mover's Distance between the normalized histograms, in powers
    /// of two (buckets at resolution 1): 1.0 = the calls moved one power of
    /// two on average. Default threshold 0.5.
    Emd,
    /// Symmetric chi-square distance, `[0, 2]`. Default threshold 0.5.
    Chi2,
    /// Jeffrey divergence, `[0, 1.386]`. Default threshold 0.3.
    Jeffrey,
    /// Normalized difference in calls, `[0, 1]`. Default threshold 0.2.
    Count,
    /// Normalized difference in total latency, `[0, 1]`. Default 0.3.
    Latency,
}

impl Method {
    pub const ALL: [Method; 5] = [
        Method::Emd,
        Method::Chi2,
        Method::Jeffrey,
        Method::Count,
        Method::Latency,
    ];

    /// The threshold used when [`CompareOptions::threshold`] is `None`.
    /// Starting points checked against the labelled profile pairs of
    /// `bench/classify.py` (rates in docs/benchmarks.md); bin-by-bin
    /// measures (chi-square, Jeffrey) need high thresholds because any move
    /// across a bucket boundary counts as a full change for them.
    pub fn default_threshold(self) -> f64 {
        match self {
            Method::Emd => 0.5,
            Method::Chi2 => 0.5,
            Method::Jeffrey => 0.3,
            Method::Count => 0.2,
            Method::Latency => 0.3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Method::Emd => "emd",
            Method::Chi2 => "chi2",
            Method::Jeffrey => "jeffrey",
            Method::Count => "count",
            Method::Latency => "latency",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!("unknown method {s:?}: use emd, chi2, jeffrey, count or latency")
            })
    }
}
