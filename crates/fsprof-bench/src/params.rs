//! Everything a benchmark run is parameterised by, and the checks that
//! refuse a run before it writes anything (a missing or read-only DIR, a
//! working set larger than the free space, options that contradict each
//! other). Each error is one line that names the option and the fix.
//!
//! [`Params`] holds what every suite takes (runs, warm-up, cache state,
//! seed, ...) and, in [`Params::options`], the suite's own options by
//! name, as the suite declares them ([`Opt`]) and reads them back typed
//! ([`Params::options_as`]). A result file stores them flat beside the
//! common ones, so a result written before suites declared their own
//! options reads the same.

use std::collections::BTreeMap;
use std::path::PathBuf;

use fsprof_measure::cache::CacheMode;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::machine::DirInfo;
use crate::suites::{self, Suite};

/// Where random offsets fall (`--align`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Align {
    /// Multiples of the I/O size (page-aligned for 4 KiB I/O).
    Page,
    /// Shifted by a random non-zero amount below the I/O size: the
    /// misaligned random accesses of the paper's §5.
    None,
}

/// What kind of value a suite option takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A whole number (`--files 11`).
    Count,
    /// A size with an optional unit (`--file-size 1M`).
    Size,
    /// Present or not (`--pad-syscalls`).
    Flag,
    /// One of these words (`--align page`).
    Choice(&'static [&'static str]),
}

impl Kind {
    /// The value of `text` as the result stores it.
    pub fn parse(self, text: &str) -> Result<Value, String> {
        match self {
            Kind::Count => text
                .parse::<u64>()
                .map(Value::from)
                .map_err(|_| format!("{text:?} is not a whole number")),
            Kind::Size => parse_size(text).map(Value::from),
            Kind::Flag => match text {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(format!("{text:?} is not true or false")),
            },
            Kind::Choice(words) => words
                .iter()
                .find(|w| **w == text)
                .map(|w| Value::from(*w))
                .ok_or_else(|| format!("{text:?} is not one of {}", words.join(", "))),
        }
    }
}

/// One option a suite takes besides the common ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opt {
    /// The long option without dashes (`file-size`); `-` is `_` in the
    /// result's key (`file_size`).
    pub name: &'static str,
    /// One line for `--help`.
    pub help: &'static str,
    /// `N`, `SIZE`, ... (unused for flags).
    pub value_name: &'static str,
    pub kind: Kind,
    /// The default, as it would be typed (`1M`; `false` for flags).
    pub default: &'static str,
}

impl Opt {
    /// The key in [`Params::options`] and in the result file.
    pub fn key(&self) -> String {
        self.name.replace('-', "_")
    }
}

/// A suite's own options by key (`files`, `io_size`, ...), as JSON values.
pub type Options = BTreeMap<String, Value>;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// The suite's name ([`crate::suites::SUITES`]).
    pub suite: String,
    pub dir: PathBuf,
    /// Measured runs.
    pub runs: usize,
    /// Runs done first and discarded.
    pub warmup: usize,
    pub cache: CacheMode,
    /// Cold by `drop_caches` (machine-wide, root) rather than per file.
    pub drop_caches: bool,
    /// Buckets per power of two of the latency histograms.
    pub resolution: u32,
    /// Seed of every random order and offset (same seed, same accesses).
    pub seed: u64,
    /// Keep every operation's latency in the result (`phases[].op_ns`),
    /// not only the histograms.
    #[serde(default)]
    pub raw_samples: bool,
    /// The suite's own options ([`Suite::options`]).
    #[serde(flatten)]
    pub options: Options,
}

impl Params {
    /// The defaults: 10 runs after one warm-up run, the cache as it is,
    /// and the suite's own defaults. An unknown suite gets no options (and
    /// is refused by [`Params::validate`]).
    pub fn defaults(suite: &str, dir: PathBuf) -> Params {
        let options = suites::find(suite)
            .map(|s| {
                s.options()
                    .iter()
                    .filter_map(|o| Some((o.key(), o.kind.parse(o.default).ok()?)))
                    .collect()
            })
            .unwrap_or_default();
        Params {
            suite: suite.to_string(),
            dir,
            runs: 10,
            warmup: 1,
            cache: CacheMode::Asis,
            drop_caches: false,
            resolution: 1,
            seed: 1,
            raw_samples: false,
            options,
        }
    }

    /// The suite these parameters run.
    pub fn suite(&self) -> Result<&'static dyn Suite, ParamError> {
        suites::find(&self.suite).ok_or_else(|| ParamError::UnknownSuite(self.suite.clone()))
    }

    /// Sets a suite option (tests and the command line; `key` as in the
    /// result, `files`, `io_size`).
    pub fn set(&mut self, key: &str, value: impl Into<Value>) -> &mut Params {
        self.options.insert(key.to_string(), value.into());
        self
    }

    /// The suite's options as its own typed struct.
    pub fn options_as<T: DeserializeOwned>(&self) -> Result<T, ParamError> {
        let map = serde_json::Map::from_iter(self.options.clone());
        serde_json::from_value(Value::Object(map)).map_err(|e| ParamError::Options {
            suite: self.suite.clone(),
            detail: e.to_string(),
        })
    }

    /// Bytes the benchmark keeps on DIR at once (0 for an unknown suite).
    pub fn working_set(&self) -> u64 {
        self.suite().map_or(0, |s| s.working_set(self))
    }

    /// Option checks that need no I/O: the common ones, then the suite's.
    pub fn validate(&self) -> Result<(), ParamError> {
        self.validate_common()?;
        self.suite()?.validate(self)
    }

    /// The checks of the options every suite takes.
    pub fn validate_common(&self) -> Result<(), ParamError> {
        let bad = |option, fix: &str| {
            Err(ParamError::Invalid {
                option,
                fix: fix.into(),
            })
        };
        if self.runs == 0 {
            return bad("--runs", "must be at least 1 (10 is the default)");
        }
        if !fsprof_core::Resolution::ALLOWED.contains(&self.resolution) {
            return bad("--resolution", "must be 1, 2, 4, 8 or 16");
        }
        if self.drop_caches && self.cache != CacheMode::Cold {
            return bad(
                "--drop-caches",
                "only applies to --cache cold; add --cache cold or drop it",
            );
        }
        Ok(())
    }

    /// Checks against DIR itself: it exists, is a writable directory, and
    /// holds the working set with room to spare. Returns its description.
    pub fn check_dir(&self) -> Result<DirInfo, ParamError> {
        self.check_dir_for(self.working_set())
    }

    /// [`Params::check_dir`] for a working set of `ws` bytes.
    pub fn check_dir_for(&self, ws: u64) -> Result<DirInfo, ParamError> {
        let d = &self.dir;
        let info = DirInfo::of(d)?;
        let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(d.as_os_str()))
            .map_err(|_| ParamError::Invalid {
                option: "--dir",
                fix: "contains a NUL byte".into(),
            })?;
        // SAFETY: a NUL-terminated path.
        if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
            return Err(ParamError::NotWritable {
                dir: d.clone(),
                source: std::io::Error::last_os_error(),
            });
        }
        // Metadata blocks, journals and allocation slack: ask for a margin.
        let need = ws.saturating_add(ws / 8) + (1 << 20);
        if need > info.free_bytes {
            return Err(ParamError::TooBig {
                working_set: ws,
                dir: d.clone(),
                free: info.free_bytes,
            });
        }
        Ok(info)
    }
}

/// Why a run is refused before it starts; each message names the fix.
#[derive(Debug, thiserror::Error)]
pub enum ParamError {
    #[error("{option} {fix}")]
    Invalid { option: &'static str, fix: String },
    #[error("no suite {0:?}: fsprof bench --help lists them")]
    UnknownSuite(String),
    #[error("--{option} is not an option of {suite} (it is {owners}'s): drop it")]
    NotItsOption {
        option: &'static str,
        suite: &'static str,
        owners: String,
    },
    #[error("the {suite} options of this result cannot be read: {detail}")]
    Options { suite: String, detail: String },
    #[error(transparent)]
    Dir(#[from] fsprof_measure::target::TargetError),
    #[error("{} is not writable ({source}): pass a directory you can write to", dir.display())]
    NotWritable {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the working set ({}) does not fit in the free space of {} ({} free): use fewer --files or a smaller --file-size",
        human_bytes(*working_set),
        dir.display(),
        human_bytes(*free)
    )]
    TooBig {
        working_set: u64,
        dir: PathBuf,
        free: u64,
    },
    #[error("--drop-caches needs root (it writes /proc/sys/vm/drop_caches); without it cold uses posix_fadvise per file")]
    DropCachesNeedsRoot,
}

/// Refuses a run: `option` and how to fix it ([`ParamError::Invalid`]).
pub fn invalid<T>(option: &'static str, fix: impl Into<String>) -> Result<T, ParamError> {
    Err(ParamError::Invalid {
        option,
        fix: fix.into(),
    })
}

/// `1 MiB`-style sizes: fsprof's one way of writing bytes.
pub fn human_bytes(b: u64) -> String {
    fsprof_core::units::format_bytes(b as f64)
}

pub use fsprof_core::units::parse_bytes as parse_size;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contradictions_are_refused_with_the_option_named() {
        let p = |s| Params::defaults(s, "/tmp".into());
        type Change = fn(&mut Params);
        let cases: [(&str, Change, &str); 7] = [
            ("sprite", |q| _ = q.set("files", 1), "--files"),
            ("sprite", |q| _ = q.set("io_size", 2 << 20), "--io-size"),
            ("sprite", |q| q.runs = 0, "--runs"),
            ("pread", |q| q.cache = CacheMode::Cold, "cached reads"),
            ("sprite", |q| q.drop_caches = true, "--cache cold"),
            ("metadata", |q| q.cache = CacheMode::Cold, "--drop-caches"),
            ("sweep", |q| _ = q.set("min_size", 1 << 30), "--min-size"),
        ];
        for (suite, change, named) in cases {
            let mut q = p(suite);
            change(&mut q);
            let e = q.validate().unwrap_err().to_string();
            assert!(e.contains(named), "{e} should name {named}");
        }
        assert!(p("sprite").validate().is_ok());
        let e = p("nosuch").validate().unwrap_err().to_string();
        assert!(e.contains("no suite \"nosuch\""), "{e}");
    }

    #[test]
    fn option_values_parse_by_kind() {
        assert_eq!(Kind::Size.parse("4k"), Ok(Value::from(4096u64)));
        assert_eq!(Kind::Count.parse("11"), Ok(Value::from(11u64)));
        assert!(Kind::Count.parse("-1").is_err());
        assert_eq!(Kind::Flag.parse("true"), Ok(Value::Bool(true)));
        let align = Kind::Choice(&["page", "none"]);
        assert_eq!(align.parse("none"), Ok(Value::from("none")));
        assert!(align.parse("odd").unwrap_err().contains("page, none"));
    }

    #[test]
    fn a_missing_or_too_small_dir_is_refused_up_front() {
        let p = Params::defaults("sprite", "/nonexistent/x".into());
        assert!(p
            .check_dir()
            .unwrap_err()
            .to_string()
            .contains("/nonexistent/x"));
        let mut huge = Params::defaults("sprite", "/dev/shm".into());
        huge.set("file_size", 1u64 << 50);
        let e = huge.check_dir().unwrap_err().to_string();
        assert!(e.contains("does not fit"), "{e}");
    }
}
