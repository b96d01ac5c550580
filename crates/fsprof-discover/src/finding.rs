//! What a discovery found: one [`Finding`] per parameter, with the value
//! inferred from latency, what the kernel states next to it, how sure the
//! inference is, and the per-offset summaries it was drawn from.

use serde::{Deserialize, Serialize};

use crate::classify::Confidence;
use crate::exposed::Exposed;
use crate::series::{Series, Summary};

/// The parameters fsprof discovers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Parameter {
    BlockSize,
    Readahead,
    PageCache,
    DirectBlocks,
}

impl Parameter {
    pub const ALL: [Parameter; 4] = [
        Parameter::BlockSize,
        Parameter::Readahead,
        Parameter::PageCache,
        Parameter::DirectBlocks,
    ];

    /// The name on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            Parameter::BlockSize => "block-size",
            Parameter::Readahead => "readahead",
            Parameter::PageCache => "page-cache",
            Parameter::DirectBlocks => "direct-blocks",
        }
    }

    /// The name in prose.
    pub fn title(self) -> &'static str {
        match self {
            Parameter::BlockSize => "block size",
            Parameter::Readahead => "read-ahead",
            Parameter::PageCache => "page-cache capacity",
            Parameter::DirectBlocks => "direct block pointers",
        }
    }

    pub fn parse(s: &str) -> Option<Parameter> {
        Parameter::ALL.into_iter().find(|p| p.name() == s)
    }

    /// What the value counts.
    pub fn unit(self) -> Unit {
        match self {
            Parameter::DirectBlocks => Unit::Blocks,
            _ => Unit::Bytes,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    Bytes,
    Blocks,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// A value was inferred.
    Found,
    /// The method cannot work here (e.g. direct blocks on extents).
    NotApplicable,
    /// It ran, but the latencies did not show the effect clearly enough.
    Inconclusive,
    /// fsprof cannot say which value: the evidence points at several
    /// (`candidates`), or the measurement could not be made (the reason
    /// says why, e.g. a cache that would not go cold).
    Undetermined,
}

/// A second, independent way to the same parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    pub method: String,
    pub value: Option<u64>,
    pub agrees: bool,
    pub statement: String,
}

/// A value an undetermined finding could not rule out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub value: u64,
    /// What points at it (`12 of 20 iterations`, `sparse reads`).
    pub evidence: String,
}

/// A vertical mark on a plot: an inferred boundary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    pub at: f64,
    pub label: String,
}

/// Latency against offset, summarised per offset across iterations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    pub title: String,
    /// What the x values are (`file offset`, `block`, `initial read size`).
    pub x_label: String,
    /// Whether x is a byte count (axes then read KiB/MiB).
    pub x_bytes: bool,
    pub x: Vec<f64>,
    /// Per x: the minimum across iterations, ns (or the value plotted).
    pub min: Vec<f64>,
    /// Per x: the median across iterations, ns.
    pub median: Vec<f64>,
    /// The y values are latencies (ns); otherwise bytes.
    #[serde(default = "yes")]
    pub y_latency: bool,
    pub marks: Vec<Mark>,
    /// A horizontal line: the threshold between the two latency levels.
    pub threshold: Option<f64>,
}

fn yes() -> bool {
    true
}

impl Curve {
    /// A latency curve from a series' per-offset min and median.
    pub fn from_series(title: &str, x_label: &str, x_bytes: bool, s: &Series) -> Curve {
        Curve {
            title: title.into(),
            x_label: x_label.into(),
            x_bytes,
            x: s.offsets.iter().map(|&o| o as f64).collect(),
            min: s.summary(Summary::Min),
            median: s.summary(Summary::Median),
            y_latency: true,
            marks: Vec::new(),
            threshold: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub parameter: Parameter,
    pub status: Status,
    pub value: Option<u64>,
    pub unit: Unit,
    /// Why not applicable or inconclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How it was measured, in a sentence.
    pub method: String,
    pub iterations: u32,
    /// How iterations were summarised per offset for the inference.
    pub summary: Summary,
    /// What the kernel states (statfs, sysfs, cgroup, meminfo).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel: Vec<Exposed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Confidence>,
    /// When undetermined: the values the evidence points at, each with
    /// what points at it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<Candidate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross_checks: Vec<CrossCheck>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub curves: Vec<Curve>,
    pub run_time_ns: u64,
    /// The raw samples, per op, for the latency profile (not serialized:
    /// the profile carries them as histograms).
    #[serde(skip)]
    pub samples: Vec<(String, Series)>,
}

impl Finding {
    pub fn new(parameter: Parameter, method: impl Into<String>, summary: Summary) -> Finding {
        Finding {
            parameter,
            status: Status::Inconclusive,
            value: None,
            unit: parameter.unit(),
            reason: None,
            method: method.into(),
            iterations: 0,
            summary,
            kernel: Vec::new(),
            confidence: None,
            candidates: Vec::new(),
            cross_checks: Vec::new(),
            notes: Vec::new(),
            curves: Vec::new(),
            run_time_ns: 0,
            samples: Vec::new(),
        }
    }

    pub fn not_applicable(mut self, reason: impl Into<String>) -> Finding {
        self.status = Status::NotApplicable;
        self.reason = Some(reason.into());
        self.value = None;
        self
    }

    pub fn inconclusive(mut self, reason: impl Into<String>) -> Finding {
        self.status = Status::Inconclusive;
        self.reason = Some(reason.into());
        self.value = None;
        self
    }

    /// No value: `reason`, and the values that compete, if any.
    pub fn undetermined(
        mut self,
        reason: impl Into<String>,
        candidates: Vec<Candidate>,
    ) -> Finding {
        self.status = Status::Undetermined;
        self.reason = Some(reason.into());
        self.value = None;
        self.candidates = candidates;
        self
    }

    pub fn found(mut self, value: u64, confidence: Confidence) -> Finding {
        self.status = Status::Found;
        self.value = Some(value);
        self.confidence = Some(confidence);
        self
    }

    /// How a method ends: `value` found with `confidence`, else
    /// inconclusive for the reason the confidence states; the run time
    /// counted from `start` (CLOCK_MONOTONIC ns).
    pub fn concluded(self, value: Option<u64>, confidence: Confidence, start: u64) -> Finding {
        let mut f = match value {
            Some(v) => self.found(v, confidence),
            None => self.inconclusive(confidence.statement),
        };
        f.run_time_ns = fsprof_sys::clock::mono_ns() - start;
        f
    }
}
