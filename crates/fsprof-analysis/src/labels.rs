//! This machine's characteristic latencies, measured by `fsprof calibrate`
//! ([`crate::calibrate`]), and the labels they give peaks: a read peak at
//! ~1 µs "≈ page-cache hit", one at ~200 µs "≈ device read" (OSprof's
//! prior-knowledge-based analysis, automated).
//!
//! The file is JSON (`fsprof-calibration`, version 1) stored by default at
//! `$XDG_CONFIG_HOME/fsprof/calibration.json` (else
//! `~/.config/fsprof/calibration.json`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const FORMAT_NAME: &str = "fsprof-calibration";
pub const FORMAT_VERSION: u32 = 1;

/// A peak is labelled with a characteristic only when its typical latency
/// lies within this factor outside the characteristic's measured 10th–90th
/// percentile range: one power of two, the width of a default bucket (a
/// peak's typical latency is only known to a bucket).
pub const MAX_LABEL_RATIO: f64 = 2.0;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    pub format_version: u32,
    pub fsprof_version: String,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub kernel: String,
    /// When it was measured, RFC 3339 UTC.
    #[serde(default)]
    pub created: String,
    /// The directory whose device was measured for the cache-miss and fsync
    /// characteristics.
    #[serde(default)]
    pub dir: String,
    pub characteristics: Vec<Characteristic>,
}

/// One measured latency of this machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Characteristic {
    /// Stable identifier: `null_syscall`, `page_cache_hit`, `device_read`,
    /// `fsync`, `futex_handoff`, `sched_quantum`.
    pub name: String,
    /// What a peak near it is called in reports: "page-cache hit".
    pub label: String,
    /// Median latency, ns.
    pub median_ns: f64,
    /// 10th and 90th percentiles, ns: how spread the measurement was.
    pub p10_ns: f64,
    pub p90_ns: f64,
    pub samples: u64,
    /// How it was measured, one line.
    #[serde(default)]
    pub method: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    #[error("cannot read calibration {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not an fsprof calibration file: {detail}")]
    Parse { path: PathBuf, detail: String },
}

impl Calibration {
    /// `$XDG_CONFIG_HOME/fsprof/calibration.json`, else
    /// `$HOME/.config/fsprof/calibration.json`; `None` if neither variable
    /// is set.
    pub fn default_path() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".config"))
            })?;
        Some(base.join("fsprof").join("calibration.json"))
    }

    pub fn load(path: &Path) -> Result<Self, LabelError> {
        let text = std::fs::read_to_string(path).map_err(|source| LabelError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text).map_err(|detail| LabelError::Parse {
            path: path.to_path_buf(),
            detail,
        })
    }

    pub fn from_json(text: &str) -> Result<Self, String> {
        let c: Calibration = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if c.format != FORMAT_NAME {
            return Err(format!(
                "format is {:?}, expected {FORMAT_NAME:?}",
                c.format
            ));
        }
        if c.format_version > FORMAT_VERSION {
            return Err(format!(
                "format version {} is newer than this fsprof understands ({FORMAT_VERSION}); upgrade fsprof",
                c.format_version
            ));
        }
        Ok(c)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("calibration serializes") + "\n"
    }

    /// The explicitly given file, else the default location if a file is
    /// there, else `None`. An explicit file that can't be read is an error;
    /// a broken default file is one too (silently ignoring it would hide
    /// labels the user expects).
    pub fn find(explicit: Option<&Path>) -> Result<Option<Self>, LabelError> {
        if let Some(p) = explicit {
            return Self::load(p).map(Some);
        }
        match Self::default_path() {
            Some(p) if p.exists() => Self::load(&p).map(Some),
            _ => Ok(None),
        }
    }

    /// Among the characteristics whose `[p10 / MAX_LABEL_RATIO, p90 ×
    /// MAX_LABEL_RATIO]` range holds `ns`, the one whose median is nearest
    /// on a log scale.
    pub fn nearest(&self, ns: f64) -> Option<&Characteristic> {
        if ns.is_nan() || ns <= 0.0 {
            return None;
        }
        self.characteristics
            .iter()
            .filter(|c| c.median_ns > 0.0)
            .filter(|c| {
                let lo = c.p10_ns.min(c.median_ns) / MAX_LABEL_RATIO;
                let hi = c.p90_ns.max(c.median_ns) * MAX_LABEL_RATIO;
                (lo..=hi).contains(&ns)
            })
            .map(|c| (c, (ns / c.median_ns).log2().abs()))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, _)| c)
    }

    /// `≈ page-cache hit` for a latency near that characteristic.
    pub fn label(&self, ns: f64) -> Option<String> {
        self.nearest(ns).map(|c| format!("≈ {}", c.label))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal() -> Calibration {
        let ch = |name: &str, label: &str, ns: f64| Characteristic {
            name: name.into(),
            label: label.into(),
            median_ns: ns,
            p10_ns: ns * 0.9,
            p90_ns: ns * 1.2,
            samples: 100,
            method: String::new(),
        };
        Calibration {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION,
            fsprof_version: "test".into(),
            host: String::new(),
            kernel: String::new(),
            created: String::new(),
            dir: String::new(),
            characteristics: vec![
                ch("null_syscall", "null syscall", 80.0),
                ch("page_cache_hit", "page-cache hit", 900.0),
                ch("device_read", "device read", 150_000.0),
            ],
        }
    }

    #[test]
    fn labels_the_nearest_characteristic_within_a_factor_of_two() {
        let c = cal();
        // p90 of the hit is 1080 ns: up to 2160 ns is still a hit.
        assert_eq!(c.label(2100.0).as_deref(), Some("≈ page-cache hit"));
        assert_eq!(c.label(2300.0), None);
        assert_eq!(c.label(100_000.0).as_deref(), Some("≈ device read"));
        assert_eq!(c.label(60.0).as_deref(), Some("≈ null syscall"));
        assert_eq!(c.label(10_000.0), None);
        assert_eq!(c.label(0.0), None);
    }

    #[test]
    fn round_trips_and_rejects_other_json() {
        let c = cal();
        assert_eq!(Calibration::from_json(&c.to_json()).unwrap(), c);
        let e = Calibration::from_json(r#"{"format":"fsprof-profile"}"#).unwrap_err();
        assert!(e.contains("missing field") || e.contains("expected"), "{e}");
        let mut newer = c.clone();
        newer.format_version = 99;
        let e = Calibration::from_json(&newer.to_json()).unwrap_err();
        assert!(e.contains("upgrade"), "{e}");
    }
}
