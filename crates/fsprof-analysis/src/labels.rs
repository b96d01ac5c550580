//! This machine's characteristic latencies, measured by `fsprof calibrate`
//! (the workloads are in fsprof-bench), as a file: the format, where it is
//! stored, and whether a measurement can be trusted. Which peak gets which
//! label is decided in [`crate::peak_labels`].
//!
//! The file is JSON (`fsprof-calibration`, version 2) stored by default at
//! `$XDG_CONFIG_HOME/fsprof/calibration.json` (else
//! `~/.config/fsprof/calibration.json`). Version 1 files (one round, one
//! request size) still load, but none of their characteristics is used for
//! labels: nothing shows that a repeat would have agreed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const FORMAT_NAME: &str = "fsprof-calibration";
pub const FORMAT_VERSION: u32 = 2;

/// A characteristic labels peaks only if the medians of its repeated
/// rounds (all but the one farthest out, with three or more) lie within
/// this factor of each other: one power of two, the width of a default
/// bucket. A measurement that moves more than that between rounds taken
/// seconds apart (a thread hand-off under varying load) says more about
/// the load than about the machine.
pub const MAX_ROUND_SPREAD: f64 = 2.0;

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
    /// Characteristics that could not be measured, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// Under what conditions it was measured.
    #[serde(default)]
    pub conditions: Conditions,
}

/// The conditions a calibration was measured under, for the reader to
/// judge whether they match the profiles it labels.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Conditions {
    /// Rounds each characteristic was measured in (interleaved: every
    /// characteristic once per round).
    #[serde(default)]
    pub rounds: u32,
    /// 1-minute load average before and after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_before: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_after: Option<f64>,
    /// Online CPUs.
    #[serde(default)]
    pub cpus: u32,
    /// File system type under `dir` (`ext4`, `tmpfs`, ...).
    #[serde(default)]
    pub fs_type: String,
    /// How cold reads were made cold: `posix_fadvise(DONTNEED)` or
    /// `O_DIRECT`.
    #[serde(default)]
    pub eviction: String,
}

/// One measured latency of this machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Characteristic {
    /// Stable identifier: `null_syscall`, `page_cache_hit`, `device_read`,
    /// `buffered_write`, `fsync`, `futex_handoff`, `sched_quantum`. A name
    /// measured at several request sizes appears once per size.
    pub name: String,
    /// What a peak near it is called in reports: "page-cache hit".
    pub label: String,
    /// Bytes per request, for the characteristics measured per size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Median latency, ns.
    pub median_ns: f64,
    /// 10th and 90th percentiles, ns: how spread the measurement was.
    pub p10_ns: f64,
    pub p90_ns: f64,
    pub samples: u64,
    /// How it was measured, one line.
    #[serde(default)]
    pub method: String,
    /// The median of each round, ns (all samples together give the
    /// fields above).
    #[serde(default)]
    pub rounds: Vec<f64>,
}

impl Characteristic {
    /// Whether it may label peaks: measured in at least two rounds whose
    /// medians agree within [`MAX_ROUND_SPREAD`] — all of them, or with
    /// three rounds or more all but the one farthest out: one round during
    /// a burst of load says nothing about the machine when the others
    /// agree (the majority does).
    pub fn is_stable(&self) -> bool {
        self.agreeing_spread() <= MAX_ROUND_SPREAD
    }

    /// Largest over smallest round median (1 = perfect agreement).
    pub fn spread(&self) -> f64 {
        spread_of(&self.rounds)
    }

    /// [`Self::spread`] without the round farthest out, when there are
    /// three or more.
    pub fn agreeing_spread(&self) -> f64 {
        let mut r: Vec<f64> = self.rounds.clone();
        if r.len() < 2 {
            return f64::INFINITY;
        }
        r.sort_by(f64::total_cmp);
        if r.len() < 3 {
            return spread_of(&r);
        }
        spread_of(&r[1..]).min(spread_of(&r[..r.len() - 1]))
    }
}

fn spread_of(rounds: &[f64]) -> f64 {
    let lo = rounds.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = rounds.iter().copied().fold(0.0, f64::max);
    if lo > 0.0 && lo.is_finite() {
        hi / lo
    } else {
        f64::INFINITY
    }
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
    /// A calibration by this fsprof holding `characteristics`, with nothing
    /// known of where or how they were measured.
    pub fn new(characteristics: Vec<Characteristic>) -> Calibration {
        Calibration {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION,
            fsprof_version: env!("CARGO_PKG_VERSION").into(),
            host: String::new(),
            kernel: String::new(),
            created: String::new(),
            dir: String::new(),
            characteristics,
            skipped: Vec::new(),
            conditions: Conditions::default(),
        }
    }

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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal() -> Calibration {
        let ch = |name: &str, label: &str, ns: f64| Characteristic {
            name: name.into(),
            label: label.into(),
            size_bytes: None,
            median_ns: ns,
            p10_ns: ns * 0.9,
            p90_ns: ns * 1.2,
            samples: 100,
            method: String::new(),
            rounds: vec![ns, ns * 1.25],
        };
        Calibration::new(vec![
            ch("null_syscall", "null syscall", 80.0),
            ch("page_cache_hit", "page-cache hit", 900.0),
            ch("device_read", "device read", 150_000.0),
        ])
    }

    #[test]
    fn only_agreeing_repeats_are_stable() {
        let mut c = cal().characteristics[0].clone();
        c.rounds = vec![80.0, 95.0, 150.0];
        assert!(c.is_stable() && (c.spread() - 150.0 / 80.0).abs() < 1e-9);
        c.rounds = vec![2000.0, 30_000.0];
        assert!(!c.is_stable(), "a hand-off that moved 15x between rounds");
        // One round of three during a burst of load: the other two agree.
        c.rounds = vec![100e3, 110e3, 400e3];
        assert!(c.is_stable() && c.spread() > 3.9, "{c:?}");
        assert!((c.agreeing_spread() - 1.1).abs() < 1e-9);
        // No majority agrees.
        c.rounds = vec![50e3, 110e3, 400e3];
        assert!(!c.is_stable(), "{c:?}");
        c.rounds = vec![80.0];
        assert!(!c.is_stable(), "one round shows nothing about repeats");
        c.rounds.clear();
        assert!(!c.is_stable(), "a version 1 file has no rounds");
    }

    #[test]
    fn version_1_files_load_without_usable_characteristics() {
        let v1 = r#"{"format":"fsprof-calibration","format_version":1,"fsprof_version":"0.1.0",
            "characteristics":[{"name":"device_read","label":"device read","median_ns":58000,
            "p10_ns":54000,"p90_ns":62000,"samples":300}]}"#;
        let c = Calibration::from_json(v1).unwrap();
        assert_eq!(c.characteristics.len(), 1);
        assert!(!c.characteristics[0].is_stable());
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
