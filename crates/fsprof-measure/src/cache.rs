//! Putting files into a known page-cache state before a phase, and proving
//! they are in it.
//!
//! - **cold**: the files' pages leave the page cache — `sync` and
//!   `/proc/sys/vm/drop_caches` when allowed (root, and the caller chose it:
//!   it empties the cache of the whole machine), else per file `fsync` and
//!   `posix_fadvise(DONTNEED)`. Then every file's residency is read back
//!   with `cachestat(2)` (or `mincore(2)` where the kernel lacks it) and
//!   the state counts as reached only if at most [`COLD_LIMIT`] of the
//!   pages are still cached. A tmpfs file, a mapped or busy file, or a
//!   kernel that ignored the advice fails the check — and the result says
//!   so instead of labelling a warm measurement cold.
//! - **warm**: a read pass over each file, then the same check the other
//!   way round (at least [`WARM_LIMIT`] cached).
//! - **asis**: nothing done, residency still recorded.
//!
//! The pieces ([`make_cold`], [`make_warm`], [`check`]) are separate so
//! that other measuring code (calibrate's device reads, discover's scans)
//! can use the same eviction and the same verification.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use fsprof_sys::pagecache::{self, DropCaches, Method, Residency};
use serde::{Deserialize, Serialize};

/// Most of a file that may stay cached for it to count as cold.
pub const COLD_LIMIT: f64 = 0.01;
/// Least of a file that must be cached for it to count as warm.
pub const WARM_LIMIT: f64 = 0.99;

/// The state asked for (`--cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    Cold,
    Warm,
    Asis,
}

impl CacheMode {
    pub fn name(self) -> &'static str {
        match self {
            CacheMode::Cold => "cold",
            CacheMode::Warm => "warm",
            CacheMode::Asis => "asis",
        }
    }
}

/// How the cache was emptied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Eviction {
    /// `sync; echo 1 > /proc/sys/vm/drop_caches` (machine-wide).
    DropCaches,
    /// `fsync` + `posix_fadvise(POSIX_FADV_DONTNEED)` per file.
    Fadvise,
}

impl Eviction {
    /// How a sentence names it.
    pub fn describe(self) -> &'static str {
        match self {
            Eviction::DropCaches => "drop_caches",
            Eviction::Fadvise => "posix_fadvise(DONTNEED)",
        }
    }
}

/// What a preparation did and what the check found, for one set of files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheCheck {
    pub mode: CacheMode,
    /// How cold was made (absent for warm/asis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction: Option<Eviction>,
    /// `cachestat` or `mincore`; absent when residency could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_by: Option<String>,
    pub cached_pages: u64,
    pub total_pages: u64,
    /// Whether the files are in the state asked for (always true for asis;
    /// false when residency could not be read).
    pub passed: bool,
}

impl CacheCheck {
    /// The state asked for, not (yet) verified.
    pub fn unverified(mode: CacheMode, eviction: Option<Eviction>) -> Self {
        CacheCheck {
            mode,
            eviction,
            verified_by: None,
            cached_pages: 0,
            total_pages: 0,
            passed: false,
        }
    }

    pub fn fraction(&self) -> f64 {
        if self.total_pages == 0 {
            0.0
        } else {
            self.cached_pages as f64 / self.total_pages as f64
        }
    }

    /// The check in words: `cold: verified, 0 of 2816 pages cached
    /// (cachestat)`, `cold: NOT reached, 131 of 8192 pages still cached
    /// (cachestat)`, or what could not be verified.
    pub fn describe(&self) -> String {
        let mode = self.mode.name();
        let Some(by) = &self.verified_by else {
            let how = self
                .eviction
                .map_or(String::new(), |e| format!(" by {}", e.describe()));
            return format!("{mode}{how}: not verified (no residency call for these files)");
        };
        let pages = format!("{} of {} pages", self.cached_pages, self.total_pages);
        match (self.mode, self.passed) {
            (CacheMode::Asis, _) => format!("{mode}: {pages} cached ({by})"),
            (CacheMode::Cold, true) => format!("{mode}: verified, {pages} cached ({by})"),
            (CacheMode::Warm, true) => format!("{mode}: verified, {pages} cached ({by})"),
            (CacheMode::Cold, false) => {
                format!("{mode}: NOT reached, {pages} still cached ({by})")
            }
            (CacheMode::Warm, false) => format!("{mode}: NOT reached, only {pages} cached ({by})"),
        }
    }
}

fn method_name(m: Method) -> &'static str {
    match m {
        Method::Cachestat => "cachestat",
        Method::Mincore => "mincore",
    }
}

/// Empties the page cache of `files`; machine-wide when `drop_all` (needs
/// root: the error says so).
pub fn make_cold(files: &[&File], drop_all: bool) -> io::Result<Eviction> {
    if drop_all {
        pagecache::drop_caches(DropCaches::PageCache)?;
        return Ok(Eviction::DropCaches);
    }
    for f in files {
        pagecache::evict(f)?;
    }
    Ok(Eviction::Fadvise)
}

/// Reads every file once from start to end, leaving the offsets at 0.
pub fn make_warm(files: &mut [&File]) -> io::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    for f in files.iter_mut() {
        f.seek(SeekFrom::Start(0))?;
        while f.read(&mut buf)? > 0 {}
        f.seek(SeekFrom::Start(0))?;
    }
    Ok(())
}

/// Residency of `files` added up, and whether it matches `mode`.
pub fn check(files: &[&File], mode: CacheMode, eviction: Option<Eviction>) -> CacheCheck {
    let mut out = CacheCheck::unverified(mode, eviction);
    let mut readable = true;
    for f in files {
        match pagecache::residency(f) {
            Ok(Residency {
                cached_pages,
                total_pages,
                method,
            }) => {
                out.cached_pages += cached_pages;
                out.total_pages += total_pages;
                out.verified_by = Some(method_name(method).into());
            }
            Err(_) => readable = false,
        }
    }
    out.passed = match mode {
        CacheMode::Asis => true,
        _ if !readable => false,
        CacheMode::Cold => out.fraction() <= COLD_LIMIT,
        CacheMode::Warm => out.total_pages == 0 || out.fraction() >= WARM_LIMIT,
    };
    out
}

/// Brings `files` into `mode` and checks it.
pub fn prepare(files: &mut [&File], mode: CacheMode, drop_all: bool) -> io::Result<CacheCheck> {
    let eviction = match mode {
        CacheMode::Cold => Some(make_cold(files, drop_all)?),
        CacheMode::Warm => {
            make_warm(files)?;
            None
        }
        CacheMode::Asis => None,
    };
    Ok(check(files, mode, eviction))
}

/// Waits before each further eviction while pages outlive one: a page a
/// read-ahead is still reading is locked and skipped, and a page still in
/// another CPU's LRU cache is held by it (drop_caches does not drain those
/// caches; `posix_fadvise(DONTNEED)` does). ms.
const SETTLE_MS: [u64; 3] = [20, 100, 500];

/// `first` if it passed; else the check after evicting again (fsync and
/// `posix_fadvise(DONTNEED)`) after each wait of [`SETTLE_MS`], and whether
/// that was needed.
pub fn settle(files: &[&File], first: CacheCheck) -> (CacheCheck, bool) {
    let mut c = first;
    let mut again = false;
    for ms in SETTLE_MS {
        if c.passed {
            break;
        }
        again = true;
        std::thread::sleep(std::time::Duration::from_millis(ms));
        for f in files {
            let _ = fsprof_sys::pagecache::evict(f);
        }
        c = check(files, CacheMode::Cold, Some(Eviction::Fadvise));
    }
    (c, again)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_in(dir: &std::path::Path, pages: usize) -> File {
        let mut f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join("f"))
            .unwrap();
        f.write_all(&vec![7u8; pages * 4096]).unwrap();
        f
    }

    /// /var/tmp is on a disk here; its pages can be evicted.
    #[test]
    fn cold_then_warm_on_a_disk_file_pass_their_checks() {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let f = file_in(d.path(), 256);
        let c = prepare(&mut [&f], CacheMode::Cold, false).unwrap();
        assert!(c.passed, "{c:?}");
        assert_eq!(c.eviction, Some(Eviction::Fadvise));
        assert_eq!(c.total_pages, 256);
        assert!(c.verified_by.is_some());
        let w = prepare(&mut [&f], CacheMode::Warm, false).unwrap();
        // Not all 256: another process's drop_caches or reclaim on this
        // shared machine may take a page between the read pass and the
        // check (seen: 255), which WARM_LIMIT allows.
        assert!(w.passed && w.cached_pages > c.cached_pages, "{w:?}");
        assert_eq!(w.total_pages, 256);
    }

    /// The check is what catches a file that stayed cached: tmpfs pages
    /// have nowhere to go, so "cold" must fail there.
    #[test]
    fn cold_on_tmpfs_is_caught_still_cached() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let f = file_in(d.path(), 64);
        let c = prepare(&mut [&f], CacheMode::Cold, false).unwrap();
        assert!(!c.passed, "{c:?}");
        assert_eq!(c.cached_pages, 64);
    }

    /// A cold state claimed without eviction (pages still there) fails.
    #[test]
    fn a_check_without_eviction_reports_the_cached_pages() {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let f = file_in(d.path(), 32);
        let c = check(&[&f], CacheMode::Cold, None);
        assert!(!c.passed && c.cached_pages == 32, "{c:?}");
        assert!(c
            .describe()
            .starts_with("cold: NOT reached, 32 of 32 pages still cached ("));
        let a = check(&[&f], CacheMode::Asis, None);
        assert!(a.passed && a.describe().starts_with("asis: 32 of 32 pages cached ("));
    }

    #[test]
    fn checks_say_what_they_found_in_words() {
        let mut c = CacheCheck::unverified(CacheMode::Cold, Some(Eviction::Fadvise));
        assert_eq!(
            c.describe(),
            "cold by posix_fadvise(DONTNEED): not verified (no residency call for these files)"
        );
        (c.verified_by, c.total_pages, c.passed) = (Some("cachestat".into()), 704, true);
        assert_eq!(
            c.describe(),
            "cold: verified, 0 of 704 pages cached (cachestat)"
        );
        c.mode = CacheMode::Warm;
        (c.cached_pages, c.passed) = (700, false);
        assert_eq!(
            c.describe(),
            "warm: NOT reached, only 700 of 704 pages cached (cachestat)"
        );
    }
}
