//! Emptying the caches between iterations, so that a read that should go
//! to the device does. Three ways, strongest first:
//!
//! - **remount**: unmount the file system and mount it again, as fsdisco
//!   did; drops its file pages *and* its metadata (inodes, bitmaps,
//!   indirect blocks). Only as root, and only when the user named the
//!   device with `--device` (the mount is then known, and unmounting it is
//!   what they asked for); a busy file system refuses.
//! - **drop-caches**: `echo 1 > /proc/sys/vm/drop_caches` (root): every
//!   file's pages, machine-wide, so other programs feel it.
//! - **fadvise**: `posix_fadvise(DONTNEED)` on each test file: only that
//!   file's clean pages; metadata stays cached. Needs nothing.
//!
//! `auto` takes the first that is allowed, and the report says which;
//! with `--device` given it never empties the whole machine's cache: a
//! device that cannot be remounted is cooled with fadvise.
//!
//! A remount drops the caches only if the unmount ends the file system's
//! life, and it may not: a process that entered a mount namespace of its
//! own (`unshare -m`, a container, a sandboxed service) while the file
//! system was mounted holds a copy of the mount that our unmount does not
//! reach, and the mount that follows gets the same live superblock back,
//! every cached page still in it. After each unmount the device is
//! therefore opened exclusively, which the kernel refuses while any
//! superblock still holds it; when it is held, that cooling empties the
//! test files with `posix_fadvise(DONTNEED)` instead (verified like every
//! other), and the report counts such coolings and says why.

use std::cell::RefCell;
use std::ffi::CString;
use std::fs::File;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use fsprof_measure::cache::{self, CacheMode};
use serde::{Deserialize, Serialize};

use crate::target::{cpath, MountEntry, Target};
use crate::{Ctx, DiscoverError};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ColdMethod {
    Remount,
    DropCaches,
    Fadvise,
}

impl ColdMethod {
    pub fn name(self) -> &'static str {
        match self {
            ColdMethod::Remount => "remount",
            ColdMethod::DropCaches => "drop-caches",
            ColdMethod::Fadvise => "fadvise",
        }
    }
}

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ColdChoice {
    #[default]
    Auto,
    Only(ColdMethod),
}

/// How caches are emptied in this discovery, and why that way.
#[derive(Clone, Debug)]
pub struct Cooler {
    pub method: ColdMethod,
    pub why: String,
    mount: Option<MountEntry>,
    tally: RefCell<Tally>,
    /// Said once, before the first cooling, when auto chose to empty the
    /// whole machine's cache ([`machine_wide_notice`]).
    notice: RefCell<Option<String>>,
    /// Why this mount cannot be remounted (`None`: it can).
    no_remount: Option<NoRemount>,
}

/// How the coolings went so far: how many, and how many of the remounts
/// could not end the file system's life and fell back to fadvise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub coolings: u32,
    pub fallbacks: u32,
    /// Coolings after which pages stayed until evicted again (`fsprof_measure::cache::settle`).
    pub settled: u32,
    /// Why the last fallback was needed.
    pub fallback_why: Option<String>,
}

impl Tally {
    /// What the coolings since `before` used, for a finding's notes:
    /// `None` when every one used the chosen method.
    pub fn since(&self, before: &Tally) -> Vec<String> {
        let n = self.coolings - before.coolings;
        let k = self.fallbacks - before.fallbacks;
        let s = self.settled - before.settled;
        let mut notes: Vec<String> = Vec::new();
        if k > 0 {
            notes.push(fallback_sentence(k, n, self.fallback_why.as_deref()));
        }
        if s > 0 {
            notes.push(settle_sentence(s, n));
        }
        notes
    }
}

fn settle_sentence(s: u32, n: u32) -> String {
    format!(
        "after {s} of {n} coolings some pages stayed cached (still being read ahead, or held in another CPU's LRU cache, which drop_caches does not drain) until evicted again with posix_fadvise(DONTNEED) after a short wait; every cooling was verified cold"
    )
}

fn fallback_sentence(k: u32, n: u32, why: Option<&str>) -> String {
    format!(
        "{k} of {n} remounts left the file system alive ({}), so those coolings dropped the test files' pages with posix_fadvise(DONTNEED) instead (verified with the residency check; metadata stayed cached)",
        why.unwrap_or("reason unknown")
    )
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Why the mount cannot be unmounted and mounted again.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoRemount {
    #[error("remounting needs root")]
    NotRoot,
    /// `mounted`: the block device mounted there, to name in the advice
    /// (none when it could not be remounted either).
    #[error("remounting needs the device named with --device")]
    NoDevice { mounted: Option<String> },
    #[error("{0} is in no mount fsprof can see")]
    NoMount(String),
    #[error("--device {device} is not what is mounted at {mount_point} ({mounted})")]
    OtherDevice {
        device: String,
        mount_point: String,
        mounted: String,
    },
    #[error("the root file system cannot be unmounted")]
    RootFs,
    #[error("{0} is a loop device that detaches itself when unmounted (autoclear, as `mount -o loop` makes it)")]
    Autoclear(String),
}

/// The mount may be unmounted and mounted again: root, a `--device` that
/// is what is mounted there, and not the root file system.
fn remountable(t: &Target, device: Option<&Path>) -> Result<MountEntry, NoRemount> {
    if !is_root() {
        return Err(NoRemount::NotRoot);
    }
    let Some(m) = t.mount.clone() else {
        return Err(NoRemount::NoMount(t.dir.display().to_string()));
    };
    if m.mount_point == Path::new("/") {
        return Err(NoRemount::RootFs);
    }
    let Some(dev) = device else {
        let block = std::fs::metadata(&m.source).is_ok_and(|md| md.file_type().is_block_device());
        let mounted = (block && !loop_autoclear(Path::new(&m.source))).then(|| m.source.clone());
        return Err(NoRemount::NoDevice { mounted });
    };
    let same = match (std::fs::canonicalize(dev), std::fs::canonicalize(&m.source)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same {
        return Err(NoRemount::OtherDevice {
            device: dev.display().to_string(),
            mount_point: m.mount_point.display().to_string(),
            mounted: m.source.clone(),
        });
    }
    if loop_autoclear(dev) {
        return Err(NoRemount::Autoclear(dev.display().to_string()));
    }
    Ok(m)
}

/// Why the caches could not be emptied (or shown to be); each message
/// says what would work.
#[derive(Debug, thiserror::Error)]
pub enum ColdError {
    #[error("cannot remount: {0}")]
    NoRemount(#[from] NoRemount),
    #[error("emptying the page cache with drop_caches needs root; use --cold fadvise")]
    DropCachesNeedsRoot,
    /// The residency check found the test files still cached.
    #[error("{cached} of {total} pages of the test files stayed cached after {how} ({verified_by}); a cold measurement needs another way: {instead}")]
    StayedCached {
        cached: u64,
        total: u64,
        how: String,
        verified_by: String,
        /// The ways that could still work here.
        instead: String,
    },
    #[error("cannot unmount {}: {source} (close what uses it, or pass --cold fadvise)", mount_point.display())]
    Unmount {
        mount_point: PathBuf,
        source: std::io::Error,
    },
    #[error("unmounted {} but could not mount it again: {source}; mount it by hand: mount -t {fs_type} {device} {}", mount_point.display(), mount_point.display())]
    MountAgain {
        mount_point: PathBuf,
        fs_type: String,
        device: String,
        source: std::io::Error,
    },
}

impl ColdError {
    /// Whether only the measurement that was cooling is lost (the file
    /// system is as it was): its finding says why, the others go on.
    pub fn method_only(&self) -> bool {
        matches!(
            self,
            ColdError::StayedCached { .. } | ColdError::Unmount { .. }
        )
    }
}

/// What auto says on standard error before it first empties the whole
/// machine's page cache: that it will, and the ways that touch only the
/// target (fadvise always; a remount where `--device` would allow one).
pub fn machine_wide_notice(why: &NoRemount) -> String {
    let remount = match why {
        NoRemount::NoDevice {
            mounted: Some(dev),
        } => format!(
            "; or name the file system's device (--device {dev}) and fsprof unmounts and mounts that file system alone"
        ),
        _ => String::new(),
    };
    format!(
        "fsprof: discover empties the page cache of the WHOLE MACHINE (drop_caches) before each cold measurement, so every program here loses its cached files (not remounting: {why}). To touch only the test files use --cold fadvise{remount}."
    )
}

/// Whether `dev` is a loop device with autoclear set.
fn loop_autoclear(dev: &Path) -> bool {
    let Ok(md) = std::fs::metadata(dev) else {
        return false;
    };
    if !md.file_type().is_block_device() {
        return false;
    }
    let (major, minor) = (libc::major(md.rdev()), libc::minor(md.rdev()));
    std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/loop/autoclear"))
        .is_ok_and(|s| s.trim() == "1")
}

impl Cooler {
    pub fn choose(
        choice: ColdChoice,
        t: &Target,
        device: Option<&Path>,
    ) -> Result<Cooler, DiscoverError> {
        let remount = remountable(t, device);
        let no_remount = remount.as_ref().err().cloned();
        let pick = |method, why: String, mount| Cooler {
            method,
            why,
            mount,
            tally: RefCell::default(),
            notice: RefCell::default(),
            no_remount: no_remount.clone(),
        };
        match choice {
            ColdChoice::Only(ColdMethod::Remount) => match remount {
                Ok(m) => Ok(pick(
                    ColdMethod::Remount,
                    format!("unmount and mount {} again (asked for)", m.source),
                    Some(m),
                )),
                Err(e) => Err(ColdError::NoRemount(e).into()),
            },
            ColdChoice::Only(ColdMethod::DropCaches) if !is_root() => {
                Err(ColdError::DropCachesNeedsRoot.into())
            }
            ColdChoice::Only(ColdMethod::DropCaches) => Ok(pick(
                ColdMethod::DropCaches,
                "drop_caches, machine-wide (asked for)".into(),
                None,
            )),
            ColdChoice::Only(ColdMethod::Fadvise) => Ok(pick(
                ColdMethod::Fadvise,
                "posix_fadvise(DONTNEED) on each test file (asked for); metadata stays cached"
                    .into(),
                None,
            )),
            ColdChoice::Auto => Ok(match remount {
                Ok(m) => pick(
                    ColdMethod::Remount,
                    format!("unmount and mount {} again (root, --device given)", m.source),
                    Some(m),
                ),
                // The user named one file system: emptying every other
                // one's cache too is not what they asked for.
                Err(why) if device.is_some() => pick(
                    ColdMethod::Fadvise,
                    format!(
                        "posix_fadvise(DONTNEED) on each test file; metadata stays cached (not remounting: {why}; not drop_caches, which would empty every file system's cache, not only --device's)"
                    ),
                    None,
                ),
                Err(why) if is_root() => {
                    let c = pick(
                        ColdMethod::DropCaches,
                        format!("drop_caches, machine-wide (not remounting: {why})"),
                        None,
                    );
                    c.notice.replace(Some(machine_wide_notice(&why)));
                    c
                }
                Err(why) => pick(
                    ColdMethod::Fadvise,
                    format!(
                        "posix_fadvise(DONTNEED) on each test file; metadata stays cached (not remounting: {why}; drop_caches needs root)"
                    ),
                    None,
                ),
            }),
        }
    }

    /// Empties the caches of `files` (and more, depending on the method),
    /// then proves it with fsprof-measure's residency check: a file that
    /// stays cached (a tmpfs file, a kernel that ignored the advice) would
    /// make a "cold" measurement warm, so that is an error. With remount,
    /// no file on the mount may be open; a remount that left the file
    /// system alive elsewhere is followed by fadvise (see the module doc).
    ///
    /// Before the first cooling that empties the whole machine's cache
    /// unasked (auto), says so through `ctx`'s progress, with the ways
    /// that touch only the target.
    pub fn cool(&self, files: &[&Path], ctx: &mut Ctx) -> Result<(), DiscoverError> {
        if let Some(notice) = self.notice.take() {
            ctx.progress.note(&notice);
        }
        let mut fallback = None;
        if let (ColdMethod::Remount, Some(m)) = (self.method, &self.mount) {
            if let Remounted::StillAlive(why) = remount(m)? {
                fallback = Some(why);
            }
        }
        let open: Vec<File> = files
            .iter()
            .map(|f| File::open(f).map_err(DiscoverError::io(format!("open {}", f.display()))))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&File> = open.iter().collect();
        let eviction = match self.method {
            ColdMethod::Remount if fallback.is_none() => None,
            m => Some(
                cache::make_cold(&refs, m == ColdMethod::DropCaches)
                    .map_err(DiscoverError::io(format!("{} (cold cache)", m.name())))?,
            ),
        };
        let (c, settled) = cache::settle(&refs, cache::check(&refs, CacheMode::Cold, eviction));
        {
            let mut t = self.tally.borrow_mut();
            t.coolings += 1;
            t.settled += u32::from(settled);
            if let Some(why) = &fallback {
                t.fallbacks += 1;
                t.fallback_why = Some(why.clone());
            }
        }
        if !c.passed {
            let how = match &fallback {
                Some(why) => format!("remount ({why}) and posix_fadvise(DONTNEED)"),
                None => self.method.name().to_string(),
            };
            return Err(ColdError::StayedCached {
                cached: c.cached_pages,
                total: c.total_pages,
                how,
                verified_by: c
                    .verified_by
                    .unwrap_or_else(|| "residency unreadable".into()),
                instead: self.instead(),
            }
            .into());
        }
        Ok(())
    }

    /// The ways of emptying the caches that could still work where this
    /// cooler's did not, as options to pass.
    pub fn instead(&self) -> String {
        let mut ways = Vec::new();
        if self.method != ColdMethod::Remount {
            match &self.no_remount {
                None => ways.push("--cold remount".to_string()),
                Some(NoRemount::NoDevice { mounted: Some(dev) }) => {
                    ways.push(format!("--cold remount --device {dev}"))
                }
                Some(NoRemount::NotRoot) => ways.push(
                    "--cold remount --device DEV as root (DEV: what is mounted there)".into(),
                ),
                Some(_) => {}
            }
        }
        if self.method == ColdMethod::Fadvise {
            ways.push(if is_root() {
                "--cold drop-caches (the whole machine's cache)".into()
            } else {
                "--cold drop-caches as root (the whole machine's cache)".into()
            });
        }
        if ways.is_empty() {
            let why = self
                .no_remount
                .as_ref()
                .map_or(String::new(), |w| format!(" ({w})"));
            return format!("none is left here{why}: something else keeps the file system's pages (another mount namespace, a program that has the files mapped); measure on an image of your own with --device");
        }
        ways.join(", or ")
    }

    /// The coolings so far; [`Tally::since`] tells a finding what its own
    /// coolings used.
    pub fn tally(&self) -> Tally {
        self.tally.borrow().clone()
    }

    /// For the report: how many coolings fell back from the chosen method,
    /// and why; `None` when none did.
    pub fn fallbacks(&self) -> Option<String> {
        let t = self.tally.borrow();
        (t.fallbacks > 0)
            .then(|| fallback_sentence(t.fallbacks, t.coolings, t.fallback_why.as_deref()))
    }
}

/// What a remount achieved.
#[derive(Debug, PartialEq, Eq)]
enum Remounted {
    /// The file system was gone between unmount and mount: nothing of it
    /// is cached any more.
    Fresh,
    /// The unmount left the file system alive (mounted elsewhere, or the
    /// device held by someone else): why.
    StillAlive(String),
}

/// After an unmount: whether anything still holds `source` (a block
/// device) — a superblock mounted in another mount namespace, or another
/// exclusive opener. An exclusive open of a block device fails with EBUSY
/// exactly then; closing it at once releases the claim. `None` when that
/// cannot be asked (not a block device).
fn still_held(source: &str) -> Option<bool> {
    let p = Path::new(source);
    if !std::fs::metadata(p).ok()?.file_type().is_block_device() {
        return None;
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL | libc::O_CLOEXEC)
        .open(p)
    {
        Ok(_) => Some(false),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Some(true),
        Err(_) => None,
    }
}

/// MS_* flags for a mount's per-mount options.
fn mount_flags(options: &str) -> libc::c_ulong {
    options
        .split(',')
        .map(|o| match o {
            "ro" => libc::MS_RDONLY,
            "nosuid" => libc::MS_NOSUID,
            "nodev" => libc::MS_NODEV,
            "noexec" => libc::MS_NOEXEC,
            "noatime" => libc::MS_NOATIME,
            "nodiratime" => libc::MS_NODIRATIME,
            "relatime" => libc::MS_RELATIME,
            "strictatime" => libc::MS_STRICTATIME,
            "sync" => libc::MS_SYNCHRONOUS,
            "dirsync" => libc::MS_DIRSYNC,
            _ => 0,
        })
        .fold(0, |a, b| a | b)
}

fn remount(m: &MountEntry) -> Result<Remounted, ColdError> {
    let unmount = |source| ColdError::Unmount {
        mount_point: m.mount_point.clone(),
        source,
    };
    let target = cpath(&m.mount_point).map_err(unmount)?;
    // SAFETY: sync takes no arguments.
    unsafe { libc::sync() };
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::umount2(target.as_ptr(), 0) } != 0 {
        return Err(unmount(std::io::Error::last_os_error()));
    }
    // Asked between unmount and mount: once mounted again it is held by
    // definition.
    let state = match still_held(&m.source) {
        Some(true) => Remounted::StillAlive(format!(
            "{} was still in use after the unmount: mounted in another mount namespace, or opened exclusively by another program",
            m.source
        )),
        _ => Remounted::Fresh,
    };
    let source = CString::new(m.source.as_bytes()).unwrap_or_default();
    let fstype = CString::new(m.fs_type.as_bytes()).unwrap_or_default();
    let data: Vec<&str> = m
        .super_options
        .split(',')
        .filter(|o| *o != "rw" && *o != "ro")
        .collect();
    let flags = mount_flags(&m.options);
    let mount = |data: &str| {
        let d = CString::new(data).unwrap_or_default();
        // SAFETY: NUL-terminated strings that outlive the call.
        let r = unsafe {
            libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                flags,
                d.as_ptr().cast(),
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    // The options the kernel lists are the ones it accepts back; if one is
    // refused, the defaults still bring the file system back.
    mount(&data.join(","))
        .or_else(|_| mount(""))
        .map_err(|source| ColdError::MountAgain {
            mount_point: m.mount_point.clone(),
            fs_type: m.fs_type.clone(),
            device: m.source.clone(),
            source,
        })
        .map(|()| state)
}

/// Paths of the files a measurement must cool, for [`Cooler::cool`].
pub fn paths(v: &[PathBuf]) -> Vec<&Path> {
    v.iter().map(|p| p.as_path()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_mount_options_become_mount_flags() {
        let f = mount_flags("ro,nosuid,nodev,relatime");
        assert_eq!(
            f,
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_RELATIME
        );
        assert_eq!(mount_flags("rw"), 0);
    }

    #[test]
    fn remounting_without_a_device_is_refused_and_auto_falls_back() {
        let t = Target::probe(Path::new("/")).unwrap();
        let e = Cooler::choose(ColdChoice::Only(ColdMethod::Remount), &t, None).unwrap_err();
        assert!(e.to_string().contains("cannot remount"), "{e}");
        let c = Cooler::choose(ColdChoice::Auto, &t, None).unwrap();
        assert_ne!(c.method, ColdMethod::Remount);
        assert!(c.why.contains("not remounting"), "{}", c.why);
        // The root file system is never unmounted, even when named.
        let src = t.mount.as_ref().unwrap().source.clone();
        if is_root() {
            let e = Cooler::choose(
                ColdChoice::Only(ColdMethod::Remount),
                &t,
                Some(Path::new(&src)),
            )
            .unwrap_err();
            assert!(e.to_string().contains("root file system"), "{e}");
        }
    }

    /// A file of `bytes` on a disk and a cooler that fadvises it.
    fn fadvised(bytes: usize) -> (tempfile::TempDir, std::path::PathBuf, Cooler) {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, vec![7u8; bytes]).unwrap();
        let t = Target::probe(d.path()).unwrap();
        let c = Cooler::choose(ColdChoice::Only(ColdMethod::Fadvise), &t, None).unwrap();
        (d, p, c)
    }

    #[test]
    fn fadvise_cooling_evicts_the_file() {
        let (_d, p, c) = fadvised(1 << 20);
        let mut notes = Notes::default();
        c.cool(&[&p], &mut notes.ctx()).unwrap();
        let r = fsprof_sys::pagecache::residency(&File::open(&p).unwrap()).unwrap();
        assert!(r.fraction() < 0.1, "{r:?}");
        assert!(
            notes.0.is_empty(),
            "fadvise touches only the file: {:?}",
            notes.0
        );
    }

    /// The progress of a test: keeps the notes.
    #[derive(Default)]
    struct Notes(Vec<String>);

    impl crate::Progress for Notes {
        fn note(&mut self, line: &str) {
            self.0.push(line.to_string());
        }
    }

    impl Notes {
        fn ctx(&mut self) -> Ctx<'_> {
            Ctx {
                progress: self,
                stop: &|| false,
            }
        }
    }

    /// The notice names the machine-wide drop and the ways that touch only
    /// the target: fadvise always, the device to remount when one would do.
    #[test]
    fn the_machine_wide_notice_offers_what_touches_only_the_target() {
        let n = machine_wide_notice(&NoRemount::NoDevice {
            mounted: Some("/dev/loop7".into()),
        });
        assert!(
            n.contains("WHOLE MACHINE") && n.contains("drop_caches"),
            "{n}"
        );
        assert!(n.contains("--cold fadvise"), "{n}");
        assert!(n.contains("--device /dev/loop7"), "{n}");
        for why in [
            NoRemount::RootFs,
            NoRemount::NoDevice { mounted: None },
            NoRemount::Autoclear("/dev/loop7".into()),
        ] {
            let n = machine_wide_notice(&why);
            assert!(
                n.contains("--cold fadvise") && !n.contains("--device /"),
                "{n}"
            );
            assert!(n.contains(&why.to_string()), "{n}");
        }
    }

    /// Pages held for a moment (here: mapped by another thread for 60 ms,
    /// as a read-ahead in flight or another CPU's LRU cache holds them)
    /// outlive the first eviction; the cooling waits, evicts again, is
    /// verified cold, and the tally says so.
    #[test]
    fn pages_held_for_a_moment_are_evicted_again_after_a_wait() {
        let (_d, p, c) = fadvised(1 << 20);
        // Mapped after a write-back and an eviction, so that the mapping
        // faults in clean pages read back from the device: pages still as
        // written (large folios, just written back) were seen to leave
        // with the first eviction, mapped or not.
        let f = File::open(&p).unwrap();
        fsprof_sys::pagecache::evict(&f).unwrap();
        let map = crate::testing::map_every_page(&f).unwrap();
        let cooling = std::thread::spawn(move || {
            let mut notes = Notes::default();
            let r = c.cool(&[&p], &mut notes.ctx()).map_err(|e| e.to_string());
            (r, c)
        });
        std::thread::sleep(std::time::Duration::from_millis(60));
        drop(map);
        let (r, c) = cooling.join().unwrap();
        r.expect("cold once the pages are let go");
        let t = c.tally();
        assert_eq!((t.coolings, t.settled), (1, 1), "{t:?}");
        let said = t.since(&Tally::default()).join(" ");
        assert!(said.contains("until evicted again"), "{said}");
    }

    /// A cooling that cannot go cold names the options that could:
    /// fadvise on a file in memory keeps every page, and the error offers
    /// drop-caches, and a remount of the device when one is mounted there.
    #[test]
    fn a_refused_cooling_names_the_options_that_work() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, vec![7u8; 64 << 10]).unwrap();
        let t = Target::probe(d.path()).unwrap();
        let mut c = Cooler::choose(ColdChoice::Only(ColdMethod::Fadvise), &t, None).unwrap();
        let e = c.cool(&[&p], &mut Notes::default().ctx()).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("16 of 16 pages of the test files stayed cached after fadvise"),
            "{s}"
        );
        assert!(s.contains("needs another way: --cold drop-caches"), "{s}");
        c.no_remount = Some(NoRemount::NoDevice {
            mounted: Some("/dev/loop7".into()),
        });
        assert!(
            c.instead()
                .starts_with("--cold remount --device /dev/loop7, or --cold drop-caches"),
            "{}",
            c.instead()
        );
    }

    /// Said once, before the first cooling, however many follow.
    #[test]
    fn the_notice_comes_before_the_first_cooling_and_only_once() {
        let (_d, p, c) = fadvised(64 << 10);
        // What auto sets when it picks drop_caches; fadvise keeps this test
        // from emptying the machine's cache.
        c.notice.replace(Some("said".into()));
        let mut notes = Notes::default();
        for _ in 0..3 {
            c.cool(&[&p], &mut notes.ctx()).unwrap();
        }
        assert_eq!(notes.0, ["said"]);
    }

    /// As root without --device, auto picks drop_caches and arms the notice.
    #[test]
    fn auto_without_a_device_arms_the_notice_as_root_only() {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let c = Cooler::choose(ColdChoice::Auto, &Target::probe(d.path()).unwrap(), None).unwrap();
        let armed = c.notice.borrow().clone();
        if is_root() {
            assert_eq!(c.method, ColdMethod::DropCaches);
            assert!(armed.is_some_and(|n| n.contains("--cold fadvise")));
        } else {
            assert_eq!(c.method, ColdMethod::Fadvise);
            assert!(armed.is_none());
        }
        for m in [ColdMethod::DropCaches, ColdMethod::Fadvise] {
            if let Ok(c) =
                Cooler::choose(ColdChoice::Only(m), &Target::probe(d.path()).unwrap(), None)
            {
                assert!(c.notice.borrow().is_none(), "{m:?} was asked for");
            }
        }
    }
}
