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
//! `auto` takes the first that is allowed, and the report says which.

use std::ffi::CString;
use std::fs::File;
use std::path::{Path, PathBuf};

use fsprof_bench::cache::{self, CacheMode};
use serde::{Deserialize, Serialize};

use crate::target::{cpath, MountEntry, Target};
use crate::DiscoverError;

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
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The mount may be unmounted and mounted again: root, a `--device` that
/// is what is mounted there, and not the root file system.
fn remountable(t: &Target, device: Option<&Path>) -> Result<MountEntry, String> {
    if !is_root() {
        return Err("remounting needs root".into());
    }
    let Some(dev) = device else {
        return Err("remounting needs the device named with --device".into());
    };
    let Some(m) = t.mount.clone() else {
        return Err(format!("{} is in no mount fsprof can see", t.dir.display()));
    };
    let same = match (std::fs::canonicalize(dev), std::fs::canonicalize(&m.source)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same {
        return Err(format!(
            "--device {} is not what is mounted at {} ({})",
            dev.display(),
            m.mount_point.display(),
            m.source
        ));
    }
    if m.mount_point == Path::new("/") {
        return Err("the root file system cannot be unmounted".into());
    }
    Ok(m)
}

impl Cooler {
    pub fn choose(
        choice: ColdChoice,
        t: &Target,
        device: Option<&Path>,
    ) -> Result<Cooler, DiscoverError> {
        let remount = remountable(t, device);
        let pick = |method, why: String, mount| Cooler { method, why, mount };
        match choice {
            ColdChoice::Only(ColdMethod::Remount) => match remount {
                Ok(m) => Ok(pick(
                    ColdMethod::Remount,
                    format!("unmount and mount {} again (asked for)", m.source),
                    Some(m),
                )),
                Err(e) => Err(DiscoverError::Cold(format!("cannot remount: {e}"))),
            },
            ColdChoice::Only(ColdMethod::DropCaches) if !is_root() => Err(DiscoverError::Cold(
                "emptying the page cache with drop_caches needs root; use --cold fadvise".into(),
            )),
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
                Err(why) if is_root() => pick(
                    ColdMethod::DropCaches,
                    format!("drop_caches, machine-wide (not remounting: {why})"),
                    None,
                ),
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
    /// then proves it with fsprof-bench's residency check: a file that
    /// stays cached (a tmpfs file, a kernel that ignored the advice) would
    /// make a "cold" measurement warm, so that is an error. With remount,
    /// no file on the mount may be open.
    pub fn cool(&self, files: &[&Path]) -> Result<(), DiscoverError> {
        if self.method == ColdMethod::Remount {
            remount(self.mount.as_ref().expect("remount has a mount"))?;
        }
        let open: Vec<File> = files
            .iter()
            .map(|f| File::open(f).map_err(DiscoverError::io(format!("open {}", f.display()))))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&File> = open.iter().collect();
        let eviction = match self.method {
            ColdMethod::Remount => None,
            m => Some(
                cache::make_cold(&refs, m == ColdMethod::DropCaches)
                    .map_err(DiscoverError::io(format!("{} (cold cache)", m.name())))?,
            ),
        };
        let c = cache::check(&refs, CacheMode::Cold, eviction);
        if !c.passed {
            return Err(DiscoverError::Cold(format!(
                "{} of {} pages of the test files stayed cached after {} ({}); a cold measurement is not possible here",
                c.cached_pages,
                c.total_pages,
                self.method.name(),
                c.verified_by.as_deref().unwrap_or("residency unreadable")
            )));
        }
        Ok(())
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

fn remount(m: &MountEntry) -> Result<(), DiscoverError> {
    let err = |what: &str, e: std::io::Error| {
        DiscoverError::Cold(format!("{what} {}: {e}", m.mount_point.display()))
    };
    let target = cpath(&m.mount_point).map_err(|e| err("mount point", e))?;
    // SAFETY: sync takes no arguments.
    unsafe { libc::sync() };
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::umount2(target.as_ptr(), 0) } != 0 {
        return Err(err("cannot unmount", std::io::Error::last_os_error()));
    }
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
    mount(&data.join(",")).or_else(|_| mount("")).map_err(|e| {
        DiscoverError::Cold(format!(
            "unmounted {} but could not mount it again: {e}; mount it by hand: mount -t {} {} {}",
            m.mount_point.display(),
            m.fs_type,
            m.source,
            m.mount_point.display()
        ))
    })
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

    #[test]
    fn fadvise_cooling_evicts_the_file() {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, vec![7u8; 1 << 20]).unwrap();
        let c = Cooler::choose(
            ColdChoice::Only(ColdMethod::Fadvise),
            &Target::probe(d.path()).unwrap(),
            None,
        )
        .unwrap();
        c.cool(&[&p]).unwrap();
        let r = fsprof_sys::pagecache::residency(&File::open(&p).unwrap()).unwrap();
        assert!(r.fraction() < 0.1, "{r:?}");
    }
}
