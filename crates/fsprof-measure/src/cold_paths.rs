//! `fsprof run --cold PATHS`: the files a user names emptied from the page
//! cache before a command starts, and shown to be.
//!
//! A directory stands for every regular file under it on the same file
//! system (as `find -xdev -type f`; symbolic links inside it are not
//! followed, so a link cannot lead the walk elsewhere). Each file is opened
//! once, without following a final link it did not name, evicted
//! ([`cache::make_cold`]: `fsync` + `posix_fadvise(DONTNEED)`), checked
//! with the same residency call as bench and discover (`cachestat(2)` or
//! `mincore(2)`) on the descriptor it was evicted through, and closed; a
//! file whose pages outlive the eviction is evicted again after a short
//! wait ([`cache::settle`]). One descriptor is held at a time, so no tree
//! is too large for the descriptor limit.
//!
//! The result is cold only if at most [`cache::COLD_LIMIT`] of all the
//! pages stayed cached; otherwise [`ColdPathsError::StayedCached`] says
//! which files kept pages, why where it can tell (a memory file system, a
//! process that has the file mapped), and what would work instead.
//! `posix_fadvise` reaches file data only: directories, inodes and
//! dentries stay cached unless `drop_all` also empties the machine's
//! dentry and inode caches (`drop_caches` 3, root).

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use fsprof_sys::pagecache::{self, DropCaches};

use crate::cache::{self, CacheCheck, CacheMode, Eviction};
use crate::target::magic;

/// Files that kept pages, named in an error (the rest are counted).
const NAMED: usize = 3;

/// What [`make_cold`] did and found.
#[derive(Clone, Debug, PartialEq)]
pub struct ColdPaths {
    /// Regular files evicted and checked.
    pub files: u64,
    /// All of them together, as bench's check reads.
    pub check: CacheCheck,
    /// The machine's dentry and inode caches were emptied too.
    pub dropped_all: bool,
    /// Files whose pages outlived the first eviction and were evicted
    /// again after a wait.
    pub settled: u64,
}

impl ColdPaths {
    /// `cold: verified, 0 of 2816 pages cached (cachestat) in 3 files
    /// (evicted with posix_fadvise(DONTNEED)); directories and inodes stay
    /// cached`.
    pub fn describe(&self) -> String {
        let files = if self.files == 1 { "file" } else { "files" };
        let meta = if self.dropped_all {
            "; dentries and inodes then dropped machine-wide (drop_caches)"
        } else {
            "; directories and inodes stay cached"
        };
        format!(
            "{} in {} {files} (evicted with {}){meta}",
            self.check.describe(),
            self.files,
            Eviction::Fadvise.describe()
        )
    }
}

/// A file that kept pages after its eviction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    pub path: PathBuf,
    pub cached: u64,
    pub total: u64,
    /// Why, where it can be told.
    pub why: Option<String>,
}

/// Why the named paths could not be made cold (or shown to be); each
/// message names the path and what would work.
#[derive(Debug, thiserror::Error)]
pub enum ColdPathsError {
    #[error("--cold {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("--cold {}: a {kind}, not a file or directory: only files have pages to evict", path.display())]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("--cold {}: no regular file under it to make cold", path.display())]
    Empty { path: PathBuf },
    #[error("--cold {}: evicting: {source}", path.display())]
    Evict { path: PathBuf, source: io::Error },
    #[error("--cold {}: cannot tell whether its pages are cached ({source}); nothing can verify a cold start here", path.display())]
    Unverifiable { path: PathBuf, source: io::Error },
    #[error("--drop-caches: {0} (run as root, or leave --drop-caches out: the files' data is evicted without it)")]
    DropCaches(io::Error),
    #[error("{}", stayed_cached(.check, .kept))]
    StayedCached { check: CacheCheck, kept: Vec<Kept> },
}

fn stayed_cached(check: &CacheCheck, kept: &[Kept]) -> String {
    let named = first_few(kept, |k| {
        let why = k.why.as_deref().map_or(String::new(), |w| format!(": {w}"));
        format!(
            "{} ({} of {} pages{why})",
            k.path.display(),
            k.cached,
            k.total
        )
    });
    format!(
        "{}; kept: {named}. What works: {}",
        check.describe(),
        instead(kept)
    )
}

/// The first [`NAMED`] of `all` in words, then how many more.
fn first_few<T>(all: &[T], say: impl Fn(&T) -> String) -> String {
    let named: Vec<String> = all.iter().take(NAMED).map(say).collect();
    match all.len().saturating_sub(NAMED) {
        0 => named.join(", "),
        more => format!("{} and {more} more", named.join(", ")),
    }
}

/// The ways out, for the reasons found.
fn instead(kept: &[Kept]) -> String {
    let said = |what: &str| {
        kept.iter()
            .any(|k| k.why.as_deref().is_some_and(|w| w.contains(what)))
    };
    let mut ways = Vec::new();
    if said("in memory") {
        ways.push(
            "copy the files to a disk-backed file system (a memory file system has no cold state)",
        );
    }
    if said("mapped by") {
        ways.push("end the processes that map them (mapped pages are never evicted)");
    }
    if ways.is_empty() || kept.iter().any(|k| k.why.is_none()) {
        ways.push("rerun when nothing reads or writes them; or unmount and mount their file system again before the run");
    }
    ways.push("or leave those files out of --cold");
    ways.join("; ")
}

/// Evicts every regular file named by or under `paths` and checks that
/// the page cache no longer holds them; with `drop_all`, then also empties
/// the machine's dentry and inode caches (root).
pub fn make_cold(paths: &[PathBuf], drop_all: bool) -> Result<ColdPaths, ColdPathsError> {
    let mut total = CacheCheck::unverified(CacheMode::Cold, Some(Eviction::Fadvise));
    let (mut files, mut settled) = (0u64, 0u64);
    let mut kept = Vec::new();
    for p in paths {
        let before = files;
        visit(p, &mut |path, f| {
            let c = cool_one(path, f)?;
            files += 1;
            settled += u64::from(c.1);
            total.cached_pages += c.0.cached_pages;
            total.total_pages += c.0.total_pages;
            total.verified_by = c.0.verified_by.clone();
            if c.0.cached_pages > 0 {
                kept.push(Kept {
                    path: path.to_path_buf(),
                    cached: c.0.cached_pages,
                    total: c.0.total_pages,
                    // Reading every process's maps is for the few an
                    // error names.
                    why: why_kept(f, kept.len() < NAMED),
                });
            }
            Ok(())
        })?;
        if files == before {
            return Err(ColdPathsError::Empty { path: p.clone() });
        }
    }
    total.passed = total.fraction() <= cache::COLD_LIMIT;
    if !total.passed {
        kept.sort_by_key(|k| std::cmp::Reverse(k.cached));
        return Err(ColdPathsError::StayedCached { check: total, kept });
    }
    if drop_all {
        pagecache::drop_caches(DropCaches::All).map_err(ColdPathsError::DropCaches)?;
    }
    Ok(ColdPaths {
        files,
        check: total,
        dropped_all: drop_all,
        settled,
    })
}

/// One file evicted and checked through one descriptor; whether it needed
/// evicting again.
fn cool_one(path: &Path, f: &File) -> Result<(CacheCheck, bool), ColdPathsError> {
    cache::make_cold(&[f], false).map_err(|source| ColdPathsError::Evict {
        path: path.to_path_buf(),
        source,
    })?;
    let first = cache::check(&[f], CacheMode::Cold, Some(Eviction::Fadvise));
    if first.verified_by.is_none() {
        let source = pagecache::residency(f)
            .err()
            .unwrap_or_else(|| io::Error::other("no residency call"));
        return Err(ColdPathsError::Unverifiable {
            path: path.to_path_buf(),
            source,
        });
    }
    Ok(cache::settle(&[f], first))
}

/// Calls `each` for every regular file `p` names or holds.
fn visit(
    p: &Path,
    each: &mut dyn FnMut(&Path, &File) -> Result<(), ColdPathsError>,
) -> Result<(), ColdPathsError> {
    let open_err = |source| ColdPathsError::Open {
        path: p.to_path_buf(),
        source,
    };
    // The named path may be a link (the user chose it); a FIFO must not
    // block the open, nor a terminal become ours.
    let f = open(p, false).map_err(open_err)?;
    let md = f.metadata().map_err(open_err)?;
    let ft = md.file_type();
    if ft.is_file() {
        return each(p, &f);
    }
    if !ft.is_dir() {
        return Err(ColdPathsError::NotAFile {
            path: p.to_path_buf(),
            kind: kind(&ft),
        });
    }
    walk(p, md.dev(), each)
}

/// Every regular file under `dir` on device `dev`, links not followed.
fn walk(
    dir: &Path,
    dev: u64,
    each: &mut dyn FnMut(&Path, &File) -> Result<(), ColdPathsError>,
) -> Result<(), ColdPathsError> {
    let open_err = |path: &Path, source| ColdPathsError::Open {
        path: path.to_path_buf(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| open_err(dir, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| open_err(dir, e))?;
    // A stable order, so that two runs evict alike.
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let ft = e.file_type().map_err(|err| open_err(&path, err))?;
        if ft.is_dir() {
            let md = std::fs::symlink_metadata(&path).map_err(|err| open_err(&path, err))?;
            if md.dev() == dev {
                walk(&path, dev, each)?;
            }
        } else if ft.is_file() {
            let f = match open(&path, true) {
                Ok(f) => f,
                // Swapped for a link or removed since it was listed.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOENT)) => continue,
                Err(e) => return Err(open_err(&path, e)),
            };
            // What was opened is what is checked: a name swapped for a
            // FIFO or a file elsewhere between listing and opening is left.
            let md = f.metadata().map_err(|err| open_err(&path, err))?;
            if md.file_type().is_file() && md.dev() == dev {
                each(&path, &f)?;
            }
        }
    }
    Ok(())
}

fn open(p: &Path, nofollow: bool) -> io::Result<File> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    if nofollow {
        flags |= libc::O_NOFOLLOW;
    }
    File::options().read(true).custom_flags(flags).open(p)
}

fn kind(ft: &std::fs::FileType) -> &'static str {
    if ft.is_block_device() {
        "block device"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// Why a file kept pages, where that can be told: a memory file system,
/// or processes that map it.
fn why_kept(f: &File, scan_maps: bool) -> Option<String> {
    if let Some(fs) = memory_fs(f) {
        return Some(format!("{fs} keeps files in memory"));
    }
    if !scan_maps {
        return None;
    }
    let md = f.metadata().ok()?;
    let mappers = mapped_by(md.dev(), md.ino());
    if mappers.is_empty() {
        return None;
    }
    let named = first_few(&mappers, |(pid, comm)| format!("{comm} (pid {pid})"));
    Some(format!("mapped by {named}"))
}

fn memory_fs(f: &File) -> Option<&'static str> {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed statfs is a valid out-buffer for fstatfs.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: our descriptor and a valid out-pointer.
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    match st.f_type as i64 {
        magic::TMPFS => Some("tmpfs"),
        magic::RAMFS => Some("ramfs"),
        _ => None,
    }
}

/// The processes (pid, command) with a mapping of the file `(dev, ino)`,
/// from `/proc/PID/maps`, this one included.
pub fn mapped_by(dev: u64, ino: u64) -> Vec<(u32, String)> {
    let want = format!("{:02x}:{:02x}", libc::major(dev), libc::minor(dev));
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        if maps.lines().any(|l| maps_line_is(l, &want, ino)) {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            out.push((pid, comm.trim().to_string()));
        }
    }
    out
}

/// Whether a `/proc/PID/maps` line maps inode `ino` of device `dev`
/// (`maj:min` in hex, as the kernel writes it).
fn maps_line_is(line: &str, dev: &str, ino: u64) -> bool {
    let mut w = line.split_whitespace();
    let (Some(d), Some(i)) = (w.nth(3), w.next()) else {
        return false;
    };
    d == dev && i.parse::<u64>().ok() == Some(ino)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(p: &Path, pages: usize) {
        let mut f = File::create(p).unwrap();
        f.write_all(&vec![7u8; pages * 4096]).unwrap();
    }

    /// /var/tmp is on a disk here. A directory stands for the files under
    /// it; a link inside it is not followed, and the files come back cold.
    #[test]
    fn files_and_trees_come_back_cold_and_links_are_not_followed() {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let other = tempfile::tempdir_in("/var/tmp").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        write(&d.path().join("a"), 16);
        write(&d.path().join("sub/b"), 32);
        write(&other.path().join("c"), 64);
        std::os::unix::fs::symlink(other.path().join("c"), d.path().join("link")).unwrap();
        let alone = other.path().join("c");
        let r = make_cold(&[d.path().to_path_buf(), alone.clone()], false).unwrap();
        assert_eq!((r.files, r.check.total_pages), (3, 112), "{r:?}");
        assert!(r.check.passed && r.check.cached_pages <= 1, "{r:?}");
        assert!(
            r.describe().starts_with("cold: verified, "),
            "{}",
            r.describe()
        );
        assert!(r.describe().contains("in 3 files"), "{}", r.describe());
        for p in [d.path().join("a"), d.path().join("sub/b"), alone] {
            let res = pagecache::residency(&File::open(&p).unwrap()).unwrap();
            assert!(res.cached_pages <= 1, "{p:?}: {res:?}");
        }
    }

    /// tmpfs pages have nowhere to go: refused, naming the file system
    /// and what works instead.
    #[test]
    fn a_file_in_memory_is_refused_with_the_reason() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = d.path().join("f");
        write(&p, 8);
        let e = make_cold(std::slice::from_ref(&p), false).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("NOT reached, 8 of 8 pages still cached"), "{s}");
        assert!(s.contains("tmpfs keeps files in memory"), "{s}");
        assert!(s.contains("disk-backed"), "{s}");
    }

    /// A mapping holds its pages; the error names who maps the file.
    #[test]
    fn a_mapped_file_is_refused_naming_the_mapper() {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = d.path().join("f");
        write(&p, 64);
        let f = File::open(&p).unwrap();
        let map = map_every_page(&f);
        let e = make_cold(std::slice::from_ref(&p), false).unwrap_err();
        let s = e.to_string();
        assert!(s.contains(&format!("pid {}", std::process::id())), "{s}");
        assert!(s.contains("end the processes that map them"), "{s}");
        drop(map);
    }

    fn map_every_page(f: &File) -> fsprof_sys::mmap::SharedMap {
        let len = f.metadata().unwrap().len() as usize;
        let map = fsprof_sys::mmap::SharedMap::new(f, len).unwrap();
        let sum = (0..len - 7)
            .step_by(4096)
            .fold(0u64, |s, o| s.wrapping_add(map.u64_at(o)));
        std::hint::black_box(sum);
        map
    }

    #[test]
    fn what_cannot_be_cold_is_refused_by_name() {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let missing = d.path().join("none");
        let e = make_cold(std::slice::from_ref(&missing), false).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("--cold {}: ", missing.display())),
            "{e}"
        );
        let e = make_cold(&[PathBuf::from("/dev/null")], false).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let e = make_cold(&[d.path().to_path_buf()], false).unwrap_err();
        assert!(e.to_string().contains("no regular file under it"), "{e}");
    }

    #[test]
    fn maps_lines_are_matched_by_device_and_inode() {
        let l = "7f00-7f10 r--p 00000000 fd:01 1234   /usr/lib/x.so";
        assert!(maps_line_is(l, "fd:01", 1234));
        assert!(!maps_line_is(l, "fd:01", 123));
        assert!(!maps_line_is(l, "07:00", 1234));
        assert!(!maps_line_is("7f00-7f10 rw-p 00000000 00:00 0", "00:00", 1));
    }
}
