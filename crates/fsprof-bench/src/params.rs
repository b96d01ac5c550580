//! Everything a benchmark run is parameterised by, and the checks that
//! refuse a run before it writes anything (a missing or read-only DIR, a
//! working set larger than the free space, options that contradict each
//! other). Each error is one line that names the option and the fix.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::machine::DirInfo;
use fsprof_measure::cache::CacheMode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Suite {
    /// Sprite LFS large-file benchmark, §4.6.5's version.
    Sprite,
    /// Bonnie++'s create/stat/unlink tests.
    Metadata,
    /// Replayfs/Buttress: threads reading a cached 1 KiB buffer.
    Pread,
    /// Sprite over file sizes across the CPU caches and memory.
    Sweep,
}

impl Suite {
    pub fn name(self) -> &'static str {
        match self {
            Suite::Sprite => "sprite",
            Suite::Metadata => "metadata",
            Suite::Pread => "pread",
            Suite::Sweep => "sweep",
        }
    }
}

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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Params {
    pub suite: Suite,
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
    // sprite and sweep
    pub files: usize,
    pub file_size: u64,
    pub io_size: u64,
    pub align: Align,
    pub pad_syscalls: bool,
    // metadata
    pub dirs: usize,
    pub files_per_dir: usize,
    // pread
    pub threads: usize,
    pub ops: usize,
    pub buffer_size: u64,
    // sweep
    pub min_size: u64,
    pub max_size: u64,
}

impl Params {
    /// The defaults of a suite: the paper's Sprite (11 files of 1 MiB,
    /// 4 KiB I/O, page-aligned), bonnie++'s `-n 16:0:0:1024`, 10 runs
    /// after one warm-up run.
    pub fn defaults(suite: Suite, dir: PathBuf) -> Params {
        Params {
            suite,
            dir,
            runs: 10,
            warmup: 1,
            cache: CacheMode::Asis,
            drop_caches: false,
            resolution: 1,
            seed: 1,
            raw_samples: false,
            files: 11,
            file_size: 1 << 20,
            io_size: 4096,
            align: Align::Page,
            pad_syscalls: false,
            dirs: 1024,
            files_per_dir: 16,
            threads: 1,
            ops: 100_000,
            buffer_size: 1024,
            min_size: 4096,
            max_size: 64 << 20,
        }
    }

    /// Bytes the benchmark keeps on DIR at once.
    pub fn working_set(&self) -> u64 {
        match self.suite {
            Suite::Sprite => self.files as u64 * self.file_size,
            Suite::Sweep => self.files as u64 * self.max_size,
            Suite::Pread => self.buffer_size,
            // Empty files: an inode and a directory entry each, no data.
            Suite::Metadata => 0,
        }
    }

    /// The sizes a sweep measures: powers of two from `min_size` to
    /// `max_size`.
    pub fn sweep_sizes(&self) -> Vec<u64> {
        let mut v = Vec::new();
        let mut s = self.min_size.max(1).next_power_of_two();
        while s <= self.max_size {
            v.push(s);
            s = match s.checked_mul(2) {
                Some(n) => n,
                None => break,
            };
        }
        v
    }

    /// Option checks that need no I/O.
    pub fn validate(&self) -> Result<(), ParamError> {
        use ParamError::*;
        if self.runs == 0 {
            return Err(Bad("--runs must be at least 1 (10 is the default)".into()));
        }
        if !fsprof_core::Resolution::ALLOWED.contains(&self.resolution) {
            return Err(Bad("--resolution must be 1, 2, 4, 8 or 16".into()));
        }
        if self.drop_caches && self.cache != CacheMode::Cold {
            return Err(Bad(
                "--drop-caches only applies to --cache cold; add --cache cold or drop it".into(),
            ));
        }
        match self.suite {
            Suite::Sprite | Suite::Sweep => {
                if self.files < 2 {
                    return Err(Bad("--files must be at least 2: the first file's figures are dropped as warm-up".into()));
                }
                if self.io_size == 0 {
                    return Err(Bad("--io-size must be at least 1 byte".into()));
                }
                let size = if self.suite == Suite::Sweep {
                    self.min_size
                } else {
                    self.file_size
                };
                if self.io_size > size {
                    return Err(Bad(format!(
                        "--io-size {} is larger than the file size {size}: use a smaller --io-size or larger files",
                        self.io_size
                    )));
                }
                if self.align == Align::None && (self.io_size < 2 || size < 2 * self.io_size) {
                    return Err(Bad("--align none needs --io-size of at least 2 bytes and files of at least two I/Os (an offset is shifted by less than one I/O)".into()));
                }
                if self.suite == Suite::Sweep && self.sweep_sizes().is_empty() {
                    return Err(Bad(
                        "--min-size is larger than --max-size: no size to sweep".into(),
                    ));
                }
            }
            Suite::Metadata => {
                if self.dirs == 0 || self.files_per_dir == 0 {
                    return Err(Bad("--dirs and --files-per-dir must be at least 1".into()));
                }
                if self.cache == CacheMode::Cold && !self.drop_caches {
                    return Err(Bad("--cache cold for metadata needs --drop-caches (root): dentries and inodes cannot be evicted per file".into()));
                }
            }
            Suite::Pread => {
                if self.cache == CacheMode::Cold {
                    return Err(Bad("the pread suite measures cached reads: --cache cold contradicts it (use warm or asis)".into()));
                }
                if self.threads == 0 || self.ops == 0 || self.buffer_size == 0 {
                    return Err(Bad(
                        "--threads, --ops and --buffer-size must be at least 1".into()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks against DIR itself: it exists, is a writable directory, and
    /// holds the working set with room to spare. Returns its description.
    pub fn check_dir(&self) -> Result<DirInfo, ParamError> {
        let d = &self.dir;
        let meta = std::fs::metadata(d).map_err(|e| {
            ParamError::Bad(format!(
                "--dir {}: {e} (pass an existing directory)",
                d.display()
            ))
        })?;
        if !meta.is_dir() {
            return Err(ParamError::Bad(format!(
                "--dir {} is not a directory",
                d.display()
            )));
        }
        let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(d.as_os_str()))
            .map_err(|_| ParamError::Bad("--dir contains a NUL byte".into()))?;
        // SAFETY: a NUL-terminated path.
        if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
            return Err(ParamError::Bad(format!(
                "--dir {} is not writable ({}): pass a directory you can write to",
                d.display(),
                std::io::Error::last_os_error()
            )));
        }
        let info =
            DirInfo::of(d).map_err(|e| ParamError::Bad(format!("--dir {}: {e}", d.display())))?;
        // Metadata blocks, journals and allocation slack: ask for a margin.
        let need = self.working_set().saturating_add(self.working_set() / 8) + (1 << 20);
        if need > info.free_bytes {
            return Err(ParamError::Bad(format!(
                "the working set ({}) does not fit in the free space of {} ({} free): use fewer --files or a smaller --file-size",
                human_bytes(self.working_set()),
                d.display(),
                human_bytes(info.free_bytes)
            )));
        }
        Ok(info)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ParamError {
    #[error("{0}")]
    Bad(String),
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
        let cases: [(Suite, Change, &str); 7] = [
            (Suite::Sprite, |q| q.files = 1, "--files"),
            (Suite::Sprite, |q| q.io_size = 2 << 20, "--io-size"),
            (Suite::Sprite, |q| q.runs = 0, "--runs"),
            (Suite::Pread, |q| q.cache = CacheMode::Cold, "cached reads"),
            (Suite::Sprite, |q| q.drop_caches = true, "--cache cold"),
            (
                Suite::Metadata,
                |q| q.cache = CacheMode::Cold,
                "--drop-caches",
            ),
            (Suite::Sweep, |q| q.min_size = 1 << 30, "--min-size"),
        ];
        for (suite, change, named) in cases {
            let mut q = p(suite);
            change(&mut q);
            let e = q.validate().unwrap_err().to_string();
            assert!(e.contains(named), "{e} should name {named}");
        }
        assert!(p(Suite::Sprite).validate().is_ok());
    }

    #[test]
    fn sweep_sizes_are_the_powers_of_two_in_range() {
        let p = Params {
            min_size: 3000,
            max_size: 40000,
            ..Params::defaults(Suite::Sweep, "/tmp".into())
        };
        assert_eq!(p.sweep_sizes(), vec![4096, 8192, 16384, 32768]);
    }

    #[test]
    fn a_missing_or_too_small_dir_is_refused_up_front() {
        let p = Params::defaults(Suite::Sprite, "/nonexistent/x".into());
        assert!(p
            .check_dir()
            .unwrap_err()
            .to_string()
            .contains("--dir /nonexistent/x"));
        let huge = Params {
            file_size: 1 << 50,
            ..Params::defaults(Suite::Sprite, "/dev/shm".into())
        };
        let e = huge.check_dir().unwrap_err().to_string();
        assert!(e.contains("does not fit"), "{e}");
    }
}
